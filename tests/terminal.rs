//! `spillway run` as a person at a terminal and a shell script use it: Ctrl-C stops the
//! command, piped stdin reaches it, a mistyped flag is refused, output shows live at a
//! terminal with the terminal's own size. The client runs on a real PTY the test holds
//! ([`Terminal`]).

use std::process::Stdio;

use serde_json::{Value, json};

use crate::helper::daemon::{TestDaemon, processes_in_group, wait_for};
use crate::helper::terminal::Terminal;
use crate::helper::{run_with_input, stderr, stdout};

/// The runs `ps` lists.
fn running(daemon: &TestDaemon) -> Vec<Value> {
    let out = daemon.spillway().args(["ps", "--json"]).output().unwrap();
    let ps: Value = serde_json::from_slice(&out.stdout).expect("ps --json");
    ps["runs"].as_array().unwrap().clone()
}

/// Waits for the one run in flight and returns its command's pid (its process group).
fn the_run_pid(daemon: &TestDaemon) -> u32 {
    let mut pid = 0;
    wait_for(
        || match running(daemon).as_slice() {
            [run] => {
                pid = run["pid"].as_u64().unwrap() as u32;
                true
            }
            _ => false,
        },
        "the run to be listed by ps",
    );
    pid
}

/// Types Ctrl-C at a `spillway run` of `script` and checks the run and all it started are gone.
fn ctrl_c_stops(flags: &[&str], script: &str, code: i32) {
    let daemon = TestDaemon::start();
    let mut cmd = daemon.spillway();
    cmd.arg("run")
        .args(flags)
        .args(["--", "bash", "-c", script]);
    let mut terminal = Terminal::spawn(cmd, 100, 30);
    let pgid = the_run_pid(&daemon);
    wait_for(
        || processes_in_group(pgid).len() >= 2,
        "the command's sleep to start",
    );
    terminal.type_keys(b"\x03");
    let status = terminal.wait();
    assert_eq!(status.code(), Some(code), "{}", terminal.text());
    assert!(running(&daemon).is_empty(), "ps still lists the run");
    assert_eq!(processes_in_group(pgid), Vec::<u32>::new(), "left running");
}

#[test]
fn ctrl_c_stops_a_run_and_everything_it_started() {
    ctrl_c_stops(&["--no-follow"], "sleep 60 & sleep 60; wait", 130);
}

#[test]
fn ctrl_c_stops_a_followed_run() {
    ctrl_c_stops(&["--follow"], "echo started; sleep 60; echo after", 130);
}

#[test]
fn a_command_deaf_to_ctrl_c_is_killed_after_the_grace() {
    // The test daemon's kill grace is 1s; SIGKILL then ends it (128 + 9).
    ctrl_c_stops(
        &["--no-follow"],
        "trap '' INT; sleep 60 & sleep 60; wait",
        137,
    );
}

#[test]
fn piped_stdin_reaches_the_command_with_its_end_of_file() {
    let daemon = TestDaemon::start();
    let input: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
    for tty in [&[][..], &["--no-tty"][..]] {
        let mut cmd = daemon.spillway();
        cmd.arg("run").args(tty).args([
            "--",
            "sh",
            "-c",
            "test -t 0 || echo not-a-terminal; od -An -v -tx1 | wc -l; echo done",
        ]);
        let out = run_with_input(cmd, &input);
        assert!(out.status.success(), "{}", stderr(&out));
        // 300000 bytes, 16 to a line of od.
        assert_eq!(stdout(&out), "not-a-terminal\n18750\ndone\n", "{tty:?}");
    }
}

#[test]
fn piped_stdin_at_a_terminal_keeps_the_terminal_for_the_output() {
    let daemon = TestDaemon::start();
    let mut cmd = daemon.spillway();
    cmd.args([
        "run",
        "--",
        "sh",
        "-c",
        "read line; test -t 1 && echo \"got $line on a terminal\"",
    ]);
    let (read, mut write) = std::io::pipe().unwrap();
    let mut terminal = Terminal::spawn_with_stdin(cmd, 100, 30, Some(Stdio::from(read)));
    std::io::Write::write_all(&mut write, b"hello\n").unwrap();
    drop(write);
    assert!(terminal.wait().success(), "{}", terminal.text());
    terminal.wait_for_text("got hello on a terminal");
}

#[test]
fn stdin_from_dev_null_or_a_terminal_is_as_before() {
    let daemon = TestDaemon::start();
    let out = daemon
        .spillway()
        .args(["run", "--no-tty", "--", "sh", "-c", "cat; echo end"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "end\n", "{}", stderr(&out));
    let mut cmd = daemon.spillway();
    cmd.args([
        "run",
        "--",
        "sh",
        "-c",
        "test -t 0 && echo stdin-is-its-terminal",
    ]);
    let mut terminal = Terminal::spawn(cmd, 100, 30);
    assert!(terminal.wait().success(), "{}", terminal.text());
    terminal.wait_for_text("stdin-is-its-terminal");
}

#[test]
fn a_loop_reading_stdin_keeps_its_lines_for_itself() {
    let daemon = TestDaemon::start();
    let script = "printf 'a\\nb\\nc\\n' | while read l; do \"$SPILLWAY\" run --no-tty -- true; echo \"$l\"; done";
    let out = daemon
        .spillway()
        .env("SPILLWAY", env!("CARGO_BIN_EXE_spillway"))
        .env("SPILLWAY_SOCKET", &daemon.socket)
        .args(["run", "--no-tty", "--", "sh", "-c", script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "a\nb\nc\n", "{}", stderr(&out));
}

#[test]
fn a_mistyped_flag_is_an_unknown_option_not_the_command() {
    let daemon = TestDaemon::start();
    let out = daemon.run(&["--timout", "10m", "--", "echo", "hi"]);
    assert_eq!(out.status.code(), Some(125));
    let err = stderr(&out);
    assert!(err.contains("unexpected argument '--timout'"), "{err}");
    assert!(err.contains("--timeout"), "{err}");
    // Flags of the command after it are still its own.
    let out = daemon.run(&["sh", "-c", "echo $0 $1", "-x", "--y"]);
    assert_eq!(stdout(&out), "-x --y\n", "{}", stderr(&out));
}

/// `spillway run` at a `size` terminal of a command that runs `before`, waits until the
/// returned file exists, then runs `after`.
fn gated_run(
    daemon: &TestDaemon,
    before: &str,
    after: &str,
    (cols, rows): (u16, u16),
) -> (Terminal, std::path::PathBuf) {
    let go = daemon.sandbox.dir.path().join("go");
    let script = format!(
        "{before}; while [ ! -e {} ]; do sleep 0.05; done; {after}",
        go.display()
    );
    let mut cmd = daemon.spillway();
    cmd.args(["run", "--", "sh", "-c", &script]);
    (Terminal::spawn(cmd, cols, rows), go)
}

#[test]
fn output_shows_live_at_a_terminal_and_ends_with_the_summary() {
    let daemon = TestDaemon::start();
    let (mut terminal, go) = gated_run(&daemon, "echo one", "echo two", (100, 30));
    terminal.wait_for_text("one");
    assert_eq!(running(&daemon).len(), 1, "the run is still going");
    assert!(!terminal.text().contains("two"));
    std::fs::write(&go, "").unwrap();
    assert!(terminal.wait().success(), "{}", terminal.text());
    let text = terminal.wait_for_text("exited with code 0");
    assert!(text.contains("two"), "{text}");
    assert!(text.contains("full output: "), "{text}");
}

#[test]
fn output_to_a_pipe_is_the_preview_as_before() {
    let daemon = TestDaemon::start();
    let out = daemon.run(&["sh", "-c", "echo hi"]);
    assert_eq!(stdout(&out), "hi\n");
    assert_eq!(stderr(&out), "");
}

#[test]
fn the_command_gets_the_terminal_size_and_its_changes() {
    let daemon = TestDaemon::start();
    let before = "trap 'stty size' WINCH; stty size; echo ready";
    let (mut terminal, go) = gated_run(&daemon, before, "true", (123, 37));
    terminal.wait_for_text("37 123");
    terminal.wait_for_text("ready");
    terminal.resize(101, 29);
    terminal.wait_for_text("29 101");
    std::fs::write(&go, "").unwrap();
    assert!(terminal.wait().success(), "{}", terminal.text());
}

#[test]
fn a_resize_of_a_run_without_a_terminal_is_refused_and_the_daemon_lives_on() {
    let daemon = TestDaemon::start();
    let mut client = daemon.client();
    let started = client.ask(&json!({"v": 1, "op": "run", "shell": "sleep 30", "tty": false}));
    let id = started["id"].as_str().unwrap();
    let answer = daemon
        .client()
        .ask(&json!({"v": 1, "op": "resize", "id": id, "cols": 80, "rows": 24}));
    assert_eq!(answer["code"], "no_input", "{answer}");
    let answer = daemon
        .client()
        .ask(&json!({"v": 1, "op": "resize", "id": id, "cols": 0, "rows": 24}));
    assert_eq!(answer["code"], "bad_request", "{answer}");
    let killed = daemon
        .client()
        .ask(&json!({"v": 1, "op": "kill", "id": id, "signal": "KILL"}));
    assert_eq!(killed["type"], "exit", "{killed}");
}

#[test]
fn history_fits_an_80_column_terminal_and_names_its_time_zone() {
    let daemon = TestDaemon::start();
    let long = "x".repeat(200);
    let out = daemon.run(&["--", "echo", &long]);
    assert!(out.status.success());
    for (tz, zone) in [("UTC", "STARTED UTC"), ("UTC-2", "STARTED +02:00")] {
        let mut cmd = daemon.spillway();
        cmd.env("TZ", tz).arg("history");
        let mut terminal = Terminal::spawn(cmd, 80, 24);
        assert!(terminal.wait().success());
        let text = terminal.wait_for_text("echo xxx");
        assert!(text.contains(zone), "{text}");
        for line in text.lines() {
            let line = line.trim_end_matches('\r');
            assert!(
                line.chars().count() <= 80,
                "{} columns: {line}",
                line.chars().count()
            );
        }
    }
}

#[test]
fn sigterm_to_the_client_stops_the_run_as_ctrl_c_does() {
    // An agent host that kills its tool call sends SIGTERM to `spillway run`, no terminal.
    let daemon = TestDaemon::start();
    let mut client = daemon
        .spillway()
        .args(["run", "--", "bash", "-c", "sleep 60 & sleep 60; wait"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pgid = the_run_pid(&daemon);
    wait_for(
        || processes_in_group(pgid).len() >= 3,
        "the command's sleeps to start",
    );
    crate::helper::daemon::signal(client.id(), "TERM");
    let status = crate::helper::daemon::wait_child(&mut client);
    assert_eq!(status.code(), Some(128 + 15));
    assert!(running(&daemon).is_empty(), "ps still lists the run");
    assert_eq!(processes_in_group(pgid), Vec::<u32>::new(), "left running");
}

#[test]
fn follow_at_a_terminal_shows_the_colours_from_a_second_terminal() {
    let daemon = TestDaemon::start();
    let go = daemon.sandbox.dir.path().join("go");
    let script = format!(
        "echo one; while [ ! -e {} ]; do sleep 0.05; done; printf '\\033[31mred\\033[0m\\n'",
        go.display()
    );
    let mut cmd = daemon.spillway();
    cmd.args(["run", "--yield", "0s", "--", "sh", "-c", &script]);
    let started = cmd.output().unwrap();
    assert!(
        stderr(&started).contains("still running"),
        "{}",
        stderr(&started)
    );
    the_run_pid(&daemon);
    let id = running(&daemon)[0]["id"].as_str().unwrap().to_string();
    let mut follow = daemon.spillway();
    follow.args(["follow", &id]);
    let mut terminal = Terminal::spawn(follow, 100, 30);
    terminal.wait_for_text("one");
    std::fs::write(&go, "").unwrap();
    assert!(terminal.wait().success(), "{}", terminal.text());
    let text = terminal.wait_for_text("exited with code 0");
    assert!(text.contains("\u{1b}[31mred\u{1b}[0m"), "{text:?}");
}
