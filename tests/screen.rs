//! Programs that draw with cursor addressing, scroll regions or the alternate screen, run under
//! the daemon's PTY: the spill holds what the screen showed.

use crate::helper::daemon::TestDaemon;
use crate::helper::stderr;

/// Runs `script` with `sh -c` under the daemon's PTY; returns the spill and the exit event.
fn spill_of(daemon: &TestDaemon, script: &str) -> (String, serde_json::Value) {
    let out = daemon.run(&["--json", "--", "sh", "-c", script]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let exit: serde_json::Value = serde_json::from_slice(&out.stdout).expect("an exit event");
    let path = exit["spill_path"].as_str().expect("a spill path");
    let spill = std::fs::read_to_string(path).expect("the spill file");
    (spill, exit)
}

#[test]
fn text_drawn_with_cursor_addressing_reaches_the_spill() {
    let daemon = TestDaemon::start();
    let dashboard = r"printf 'build starts\n'
        for i in 1 2 3; do
            printf '\033[2J\033[1;1Hcluster status\033[4;1Hnode-07 FAILED\033[5;1Hnode-08 ok'
        done";
    let (spill, exit) = spill_of(&daemon, dashboard);
    assert_eq!(
        spill,
        "build starts\ncluster status\n\n\nnode-07 FAILED\nnode-08 ok\n"
    );
    assert_eq!(exit["total_lines"], 6, "{exit}");

    let progress = r"printf 'job a 0\njob b 0\n'
        for i in 1 2 3 4 5; do printf '\033[2A\rjob a %s\033[K\njob b %s\033[K\n' $i $i; done
        echo done";
    let (spill, _) = spill_of(&daemon, progress);
    assert_eq!(spill, "job a 0\njob b 0\njob a 5\njob b 5\ndone\n");
}

#[test]
fn the_alternate_screen_drawn_with_tput_reaches_the_spill() {
    let daemon = TestDaemon::start();
    let script = "echo before
        tput smcup; tput clear
        tput cup 2 0; echo 'inside the alternate screen'
        tput cup 0 0; printf 'top row'
        tput rmcup
        echo after";
    let (spill, _) = spill_of(&daemon, script);
    assert_eq!(
        spill,
        "before\ntop row\n\ninside the alternate screen\nafter\n"
    );
}
