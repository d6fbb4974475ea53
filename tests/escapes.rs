//! Nothing a run started outlives it: for each way a process can get away from its command
//! (`&`, `nohup`, `setsid`, a double fork, a program that daemonises itself, a `setsid` child
//! deaf to SIGTERM and SIGHUP) and each way a run ends (its command exits, a timeout, a
//! `kill`, the daemon's SIGTERM, the daemon's crash), with cgroups, with cgroups stopped by
//! freezing instead of `cgroup.kill`, with cgroups joined by writing `cgroup.procs` instead
//! of starting inside them, and with the `/proc` fallback: within 10 s no process
//! of it is left, and the result names what was stopped.
//!
//! Every test process carries a unique token in its argv (a `sleep` duration), so the `/proc`
//! checks find exactly them; a guard kills any that is left when a test fails.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helper::daemon::{RawClient, TestDaemon, wait_for};

/// How long the leftovers of a run may take to be gone.
const GONE_WITHIN: Duration = Duration::from_secs(10);

/// How the daemon tracks runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Cgroup,
    /// Cgroups, stopped by freezing and killing each process (as without `cgroup.kill`).
    CgroupFreeze,
    /// Cgroups the command joins by writing `cgroup.procs` (as where it cannot be started
    /// inside one).
    CgroupWritten,
    /// `/proc` only (`SPILLWAY_NO_CGROUP=1`).
    Proc,
}

fn daemon(mode: Mode) -> TestDaemon {
    TestDaemon::start_customised(|cmd, _| match mode {
        Mode::Cgroup => {}
        Mode::CgroupFreeze => {
            cmd.env("SPILLWAY_NO_CGROUP_KILL", "1");
        }
        Mode::CgroupWritten => {
            cmd.env("SPILLWAY_NO_CLONE_INTO_CGROUP", "1");
        }
        Mode::Proc => {
            cmd.env("SPILLWAY_NO_CGROUP", "1");
        }
    })
}

/// A token no other process has: a `sleep` of a unique, harmless duration.
fn token(n: u32) -> String {
    format!("86400.{}{n:03}", std::process::id())
}

/// Ways to get away from the command, each printing `PID=` and the pid of what it leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Background,
    Nohup,
    Setsid,
    DoubleFork,
    Daemonise,
    Deaf,
}

const KINDS: [Kind; 6] = [
    Kind::Background,
    Kind::Nohup,
    Kind::Setsid,
    Kind::DoubleFork,
    Kind::Daemonise,
    Kind::Deaf,
];

impl Kind {
    /// The script that leaves a process carrying `token` behind, and gives it a moment to
    /// get away (to call setsid) before the shell goes on.
    fn script(self, token: &str) -> String {
        match self {
            Kind::Background => format!("sleep {token} & echo PID=$!"),
            Kind::Nohup => format!("nohup sleep {token} >/dev/null 2>&1 & echo PID=$!"),
            Kind::Setsid => format!("setsid sleep {token} & echo PID=$!; sleep 0.3"),
            Kind::DoubleFork => {
                format!("(setsid sh -c 'echo PID=$$; exec sleep {token}' &); sleep 0.3")
            }
            Kind::Daemonise => format!(
                "python3 -c '{}' {token}; sleep 0.3",
                "import os,sys\n\
                 if os.fork(): os._exit(0)\n\
                 os.setsid()\n\
                 if os.fork(): os._exit(0)\n\
                 print(\"PID=%d\" % os.getpid(), flush=True)\n\
                 os.closerange(0, 1024)\n\
                 os.execvp(\"sleep\", [\"sleep\", sys.argv[1]])"
            ),
            Kind::Deaf => format!(
                "setsid sh -c 'trap \"\" TERM HUP; echo PID=$$; sleep {token}; :' & sleep 0.3"
            ),
        }
    }

    /// Whether it leaves its command's process group, and so outlives a signal to the group.
    fn leaves_the_group(self) -> bool {
        !matches!(self, Kind::Background | Kind::Nohup)
    }
}

/// How a run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Exit,
    Timeout,
    Kill,
}

/// Processes other than this test whose command line holds `token`.
fn holding(token: &str) -> Vec<u32> {
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            !zombie
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(token))
        })
        .collect()
}

/// Kills whatever still holds its tokens when dropped, so a failing test leaves nothing.
#[derive(Default)]
struct Leftovers(Vec<String>);

impl Drop for Leftovers {
    fn drop(&mut self) {
        for token in &self.0 {
            for pid in holding(token) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

/// Waits until no process holds `token`; fails (naming them) after [`GONE_WITHIN`].
fn assert_gone(token: &str, what: &str) {
    let deadline = Instant::now() + GONE_WITHIN;
    loop {
        let left = holding(token);
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: processes {left:?} still hold {token} after {GONE_WITHIN:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The pids a run's output announced with `PID=`, once it has printed `count` of them.
fn announced(spill: &str, count: usize) -> Vec<u32> {
    let mut pids = Vec::new();
    wait_for(
        || {
            let text = std::fs::read_to_string(spill).unwrap_or_default();
            pids = text
                .lines()
                .filter_map(|l| l.trim().strip_prefix("PID=")?.parse().ok())
                .collect();
            pids.len() >= count
        },
        "the escapee's pid in the output",
    );
    pids
}

/// The pids in an exit event's `stopped`.
fn stopped_pids(exit: &Value) -> BTreeSet<u32> {
    exit["stopped"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(|p| p["pid"].as_u64().map(|p| p as u32))
                .collect()
        })
        .unwrap_or_default()
}

/// Checks an ended run: the escapee is gone within 10 s, and the result names it when it
/// must (it outlived what ended the command).
fn check(exit: &Value, escapee: u32, kind: Kind, named: bool, token: &str, what: &str) {
    assert_eq!(exit["type"], "exit", "{what}: {exit}");
    assert_gone(token, what);
    let stopped = stopped_pids(exit);
    if named {
        assert!(
            stopped.contains(&escapee),
            "{what}: {kind:?} escapee {escapee} is not in stopped: {exit}"
        );
        let content = exit["content"].as_str().unwrap();
        assert!(
            content.contains("[spillway: stopped what the command left running:"),
            "{what}: {content}"
        );
    }
}

/// One end in one mode, every kind at once (a run each, in parallel).
fn every_kind(mode: Mode, end: End, base: u32) {
    let daemon = daemon(mode);
    let mut guard = Leftovers::default();
    let mut runs = Vec::new();
    for (i, kind) in KINDS.into_iter().enumerate() {
        let token = token(base + i as u32);
        guard.0.push(token.clone());
        let mut script = kind.script(&token);
        if end != End::Exit {
            script.push_str("; sleep 1000");
        }
        let mut request = json!({"v": 1, "op": "run", "shell": script, "cwd": "/"});
        if end == End::Timeout {
            request["timeout_ms"] = json!(1500);
        }
        let mut client = daemon.client();
        client.send(&request);
        let started = client.event().unwrap();
        assert_eq!(started["type"], "started", "{started}");
        runs.push((kind, token, client, started));
    }
    let mut ended = Vec::new();
    for (kind, token, client, started) in runs {
        let spill = started["spill_path"].as_str().unwrap();
        let escapee = announced(spill, 1)[0];
        if end == End::Kill {
            let id = started["id"].as_str().unwrap();
            let killed = daemon
                .client()
                .ask(&json!({"v": 1, "op": "kill", "id": id}));
            assert_eq!(killed["status"], "killed", "{killed}");
        }
        ended.push((kind, token, client, escapee));
    }
    for (kind, token, mut client, escapee) in ended {
        let exit = client.event().expect("the exit event");
        let what = format!("{mode:?} {end:?} {kind:?}");
        // A group's signal stops what stayed in the group with the command; what left it is
        // the command's leftovers. A command that exits leaves all of it.
        let named = end == End::Exit || kind.leaves_the_group();
        check(&exit, escapee, kind, named, &token, &what);
        let expected = match end {
            End::Exit => "exited",
            End::Timeout => "timed_out",
            End::Kill => "killed",
        };
        assert_eq!(exit["status"], expected, "{what}: {exit}");
    }
}

/// The daemon's SIGTERM ends every run, each kind at once.
fn shutdown(mode: Mode, base: u32) {
    let mut daemon = daemon(mode);
    let mut guard = Leftovers::default();
    let mut runs = Vec::new();
    for (i, kind) in KINDS.into_iter().enumerate() {
        let token = token(base + i as u32);
        guard.0.push(token.clone());
        let script = format!("{}; sleep 1000", kind.script(&token));
        let mut client = daemon.client();
        client.send(&json!({"v": 1, "op": "run", "shell": script, "cwd": "/"}));
        let started = client.event().unwrap();
        let escapee = announced(started["spill_path"].as_str().unwrap(), 1)[0];
        runs.push((kind, token, client, escapee));
    }
    assert!(daemon.terminate().success());
    for (kind, token, mut client, escapee) in runs {
        let exit = client.event().expect("the exit event");
        let what = format!("{mode:?} shutdown {kind:?}");
        assert_eq!(exit["status"], "killed", "{what}: {exit}");
        check(&exit, escapee, kind, kind.leaves_the_group(), &token, &what);
    }
}

#[test]
fn leftovers_of_a_command_that_exits_are_stopped_and_named() {
    every_kind(Mode::Cgroup, End::Exit, 0);
    every_kind(Mode::CgroupFreeze, End::Exit, 10);
    every_kind(Mode::CgroupWritten, End::Exit, 160);
    every_kind(Mode::Proc, End::Exit, 20);
}

#[test]
fn leftovers_of_a_timeout_are_stopped_and_named() {
    every_kind(Mode::Cgroup, End::Timeout, 30);
    every_kind(Mode::Proc, End::Timeout, 40);
}

#[test]
fn leftovers_of_a_kill_are_stopped_and_named() {
    every_kind(Mode::Cgroup, End::Kill, 50);
    every_kind(Mode::CgroupFreeze, End::Kill, 60);
    every_kind(Mode::Proc, End::Kill, 70);
}

#[test]
fn leftovers_of_a_daemon_shutdown_are_stopped_and_named() {
    shutdown(Mode::Cgroup, 80);
    shutdown(Mode::Proc, 90);
}

#[test]
fn leftovers_without_a_terminal_are_stopped_and_named() {
    for (mode, base) in [(Mode::Cgroup, 100), (Mode::Proc, 110)] {
        let daemon = daemon(mode);
        let mut guard = Leftovers::default();
        for (i, kind) in [Kind::Background, Kind::Nohup, Kind::Deaf]
            .into_iter()
            .enumerate()
        {
            let token = token(base + i as u32);
            guard.0.push(token.clone());
            let request = json!({"v": 1, "op": "run", "shell": kind.script(&token),
                                 "cwd": "/", "tty": false});
            let exit = daemon.client().run_to_exit(&request);
            let escapee = announced(exit["spill_path"].as_str().unwrap(), 1)[0];
            let what = format!("{mode:?} no-tty {kind:?}");
            check(&exit, escapee, kind, true, &token, &what);
        }
    }
}

/// After a crash (`kill -9`), the next daemon stops what the dead one's runs left: commands
/// without a terminal, deaf to the hangup, and escaped from the group.
#[test]
fn a_new_daemon_stops_what_a_crashed_one_left() {
    for (mode, base) in [(Mode::Cgroup, 120), (Mode::Proc, 130)] {
        let mut daemon = daemon(mode);
        let mut guard = Leftovers::default();
        let mut clients: Vec<RawClient> = Vec::new();
        let scripts = [
            (false, format!("sleep {}", token(base))),
            (true, format!("trap '' HUP; sleep {}", token(base + 1))),
            (true, Kind::Deaf.script(&token(base + 2))),
            (false, Kind::Daemonise.script(&token(base + 3))),
        ];
        for (i, (tty, script)) in scripts.iter().enumerate() {
            let token = token(base + i as u32);
            guard.0.push(token.clone());
            let mut client = daemon.client();
            let request = json!({"v": 1, "op": "run", "shell": format!("{script}; sleep 1000"),
                                 "cwd": "/", "tty": tty});
            client.send(&request);
            assert_eq!(client.event().unwrap()["type"], "started");
            wait_for(|| !holding(&token).is_empty(), "the command to start");
            clients.push(client);
        }
        // Give the daemonising one its moment to get away.
        std::thread::sleep(Duration::from_millis(500));
        daemon.kill9();
        drop(clients);
        for (i, _) in scripts.iter().enumerate() {
            assert!(
                !holding(&token(base + i as u32)).is_empty(),
                "{mode:?}: script {i} did not outlive the crash, so this proves nothing"
            );
        }
        daemon.restart();
        for (i, _) in scripts.iter().enumerate() {
            assert_gone(
                &token(base + i as u32),
                &format!("{mode:?} crash script {i}"),
            );
        }
    }
}

/// A process that cuts every tie to its run (with `--no-cgroup`: a session of its own and an
/// empty environment, so no marker; with cgroups: a session of its own and its pid written
/// into the root cgroup, where it may) is stopped at its run's end all the same, and named: it is a child of the
/// daemon that belongs to no live run.
#[test]
fn a_process_that_leaves_its_run_is_stopped_at_the_run_end() {
    let escapes = [
        (
            Mode::Proc,
            140,
            "setsid -f env -i sh -c 'echo PID=$$; exec sleep TOKEN'; sleep 0.5".to_string(),
        ),
        (
            Mode::Cgroup,
            141,
            "setsid sh -c 'for f in /sys/fs/cgroup/unified/cgroup.procs \
             /sys/fs/cgroup/cgroup.procs; do echo $$ > $f 2>/dev/null && break; done; \
             echo PID=$$; exec sleep TOKEN' & sleep 0.5"
                .to_string(),
        ),
    ];
    for (mode, n, script) in escapes {
        let daemon = daemon(mode);
        let mut guard = Leftovers::default();
        let token = token(n);
        guard.0.push(token.clone());
        let request = json!({"v": 1, "op": "run", "shell": script.replace("TOKEN", &token),
                             "cwd": "/", "tty": true});
        let exit = daemon.client().run_to_exit(&request);
        let escapee = announced(exit["spill_path"].as_str().unwrap(), 1)[0];
        check(
            &exit,
            escapee,
            Kind::Setsid,
            true,
            &token,
            &format!("{mode:?} escapee"),
        );
    }
}

/// A background child that the terminal's hangup ends as its command exits is named by its
/// command line, read while it lived, never by its zombie's name (`[sleep]`). The command
/// lasts a second, in which the daemon looks at the run's processes every 25 ms.
#[test]
#[ignore = "open defect: in the full suite on a loaded machine the daemon's looks sometimes \
            miss the child and it is named by its zombie ([sleep]); passes alone"]
fn a_child_the_hangup_ends_is_named_by_its_command_line() {
    let daemon = daemon(Mode::Cgroup);
    let mut guard = Leftovers::default();
    let token = token(150);
    guard.0.push(token.clone());
    let request = json!({"v": 1, "op": "run",
                         "shell": format!("sleep {token} & echo PID=$!; sleep 1"),
                         "cwd": "/", "tty": true});
    let exit = daemon.client().run_to_exit(&request);
    let escapee = announced(exit["spill_path"].as_str().unwrap(), 1)[0];
    assert_gone(&token, "the hung-up child");
    let named = exit["stopped"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == escapee)
        .unwrap_or_else(|| panic!("{escapee} is not in stopped: {exit}"));
    assert_eq!(named["command"], format!("sleep {token}"), "{exit}");
}
