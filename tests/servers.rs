//! Servers on purpose and ceilings: a real `python3 -m http.server` started with `--until-port`
//! and with `--until` returns once it is ready (exit code 75, well before its yield), answers,
//! is listed by `ps`, and `kill` frees its port; `wait --until` does the same for a run already
//! going; a `read -p` prompt is flagged as waiting for input and `sleep` is not; and the
//! memory, process and CPU limits hold while the daemon lives on.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use crate::helper::daemon::TestDaemon;
use crate::helper::{stderr, stdout};

/// A port nothing listens on now.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} / {}", stdout(out), stderr(out)))
}

/// An HTTP GET of `/` on the port: its status line.
fn get(port: u16) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer.lines().next().unwrap_or_default().to_string())
}

/// Starts the server with `ready` flags, checks it is ready, answers and is listed, kills it
/// and checks its port is free.
fn serve_until(daemon: &TestDaemon, ready: &[&str], port: u16) {
    let port_text = port.to_string();
    let mut args = vec!["--json", "--yield", "30s"];
    args.extend_from_slice(ready);
    args.extend_from_slice(&[
        "--",
        "python3",
        "-u",
        "-m",
        "http.server",
        "--bind",
        "127.0.0.1",
        &port_text,
    ]);
    let out = daemon.run(&args);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    let running = json(&out);
    assert_eq!(running["type"], "running", "{running}");
    assert!(running["ready"].is_object(), "ready says why: {running}");
    assert!(
        running["elapsed_ms"].as_u64().unwrap() < 30_000,
        "returned before the yield: {running}"
    );
    let id = running["id"].as_str().unwrap().to_string();
    let status = get(port).expect("the server answers");
    assert!(status.contains("200"), "{status}");

    let ps = daemon.spillway().args(["ps", "--json"]).output().unwrap();
    assert!(
        json(&ps)["runs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["id"] == id.as_str()),
        "ps lists the server: {}",
        stdout(&ps)
    );
    let kill = daemon.spillway().args(["kill", &id]).output().unwrap();
    assert!(kill.status.success(), "{}", stderr(&kill));
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "kill frees the port"
    );
}

#[test]
fn a_server_started_until_its_port_answers_is_ready_listed_and_killed() {
    let daemon = TestDaemon::start();
    let port = free_port();
    serve_until(&daemon, &["--until-port", &port.to_string()], port);
    let port = free_port();
    serve_until(&daemon, &["--until", "^Serving HTTP on"], port);
}

#[test]
fn the_ready_line_says_so_and_wait_until_returns_once_it_comes() {
    let daemon = TestDaemon::start();
    let out = daemon.run(&[
        "--yield",
        "30s",
        "--until",
        "listening on (\\d+)",
        "--",
        "sh",
        "-c",
        "echo starting; sleep 0.5; echo listening on 4242; sleep 1000",
    ]);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    let line = stderr(&out);
    assert!(
        line.contains("is ready after") && line.contains("line 2 matched: listening on 4242"),
        "{line}"
    );
    let id = line.split_whitespace().nth(2).unwrap().to_string();
    // A run already going: wait for a line it prints later.
    let later = daemon
        .spillway()
        .args(["run", "--yield", "100ms", "--json", "--", "sh", "-c"])
        .arg("sleep 1; echo compiled OK; sleep 1000")
        .output()
        .unwrap();
    assert_eq!(later.status.code(), Some(75), "{}", stderr(&later));
    let later_id = json(&later)["id"].as_str().unwrap().to_string();
    let waited = daemon
        .spillway()
        .args(["wait", &later_id, "--yield", "30s", "--new", "--json"])
        .args(["--until", "compiled OK"])
        .output()
        .unwrap();
    assert_eq!(waited.status.code(), Some(75), "{}", stderr(&waited));
    let waited = json(&waited);
    assert_eq!(waited["ready"]["text"], "compiled OK", "{waited}");
    for id in [id, later_id] {
        let kill = daemon.spillway().args(["kill", &id]).output().unwrap();
        assert!(kill.status.success(), "{}", stderr(&kill));
    }
}

#[test]
fn a_prompt_waits_for_input_and_a_quiet_command_does_not() {
    let daemon = TestDaemon::start();
    let prompt = daemon.run(&[
        "--yield",
        "2s",
        "--",
        "bash",
        "-c",
        "read -p 'name? ' x; echo got $x",
    ]);
    assert_eq!(prompt.status.code(), Some(75), "{}", stderr(&prompt));
    let line = stderr(&prompt);
    assert!(
        line.contains("is waiting for input on its terminal") && line.contains("spillway send"),
        "{line}"
    );
    let id = line.split_whitespace().nth(2).unwrap().to_string();
    let sent = daemon
        .spillway()
        .args(["send", &id, "bob"])
        .output()
        .unwrap();
    assert!(sent.status.success(), "{}", stderr(&sent));
    let done = daemon.spillway().args(["wait", &id]).output().unwrap();
    assert!(stdout(&done).contains("got bob"), "{}", stdout(&done));

    let quiet = daemon.run(&["--yield", "1s", "--json", "--", "sleep", "30"]);
    assert_eq!(quiet.status.code(), Some(75), "{}", stderr(&quiet));
    let quiet = json(&quiet);
    assert!(quiet.get("waiting_for_input").is_none(), "{quiet}");
    let id = quiet["id"].as_str().unwrap();
    assert!(
        daemon
            .spillway()
            .args(["kill", id])
            .output()
            .unwrap()
            .status
            .success()
    );
}

/// Whether the run's notice says a limit was not held for the whole run (no cgroup for it
/// on this machine).
fn not_held(exit: &Value, what: &str) -> bool {
    exit["content"].as_str().unwrap_or_default().contains(what)
}

#[test]
fn a_memory_limit_ends_a_runaway_allocation_and_says_so() {
    for no_cgroup in [false, true] {
        let daemon = TestDaemon::start_customised(|cmd, _| {
            if no_cgroup {
                cmd.env("SPILLWAY_NO_CGROUP", "1");
            }
        });
        let out = daemon.run(&[
            "--json",
            "--memory",
            "64MiB",
            "--",
            "python3",
            "-c",
            "b = bytearray(512 << 20); print('allocated', len(b))",
        ]);
        let exit = json(&out);
        let content = exit["content"].as_str().unwrap();
        assert!(!content.contains("allocated"), "{exit}");
        if not_held(&exit, "RLIMIT_AS") {
            // Per process: the allocation fails inside Python.
            assert!(content.contains("MemoryError"), "{exit}");
        } else {
            assert_eq!(exit["limits_hit"][0]["resource"], "memory", "{exit}");
            assert_eq!(exit["limits_hit"][0]["limit"], 64 << 20, "{exit}");
            assert!(
                content.contains("reached its memory limit of 64.0 MiB"),
                "{exit}"
            );
            let line = stderr(&out);
            assert!(line.contains("OOM killer"), "{line}");
        }
        let alive = daemon.run(&["--", "echo", "alive"]);
        assert_eq!(stdout(&alive), "alive\n", "the daemon lives on");
    }
}

#[test]
fn a_process_limit_holds_a_bounded_fork_storm() {
    let daemon = TestDaemon::start();
    let out = daemon.run(&[
        "--json",
        "--no-tty",
        "--pids",
        "64",
        "--",
        "sh",
        "-c",
        "n=0; for i in $(seq 200); do sleep 5 & n=$((n+1)); done 2>/dev/null; wait; echo done",
    ]);
    let exit = json(&out);
    if !not_held(&exit, "process limit is not enforced") {
        assert_eq!(exit["limits_hit"][0]["resource"], "pids", "{exit}");
        assert!(
            exit["limits_hit"][0]["events"].as_u64().unwrap() > 0,
            "{exit}"
        );
        let content = exit["content"].as_str().unwrap();
        assert!(
            content.contains("reached its limit of 64 processes"),
            "{content}"
        );
    }
    let alive = daemon.run(&["--", "echo", "alive"]);
    assert_eq!(stdout(&alive), "alive\n", "the daemon lives on");
}

#[test]
fn a_cpu_limit_slows_a_busy_loop() {
    let daemon = TestDaemon::start();
    // 1.5 s of wall time spinning: about 1.5 s of CPU without a limit, at most a quarter of
    // the wall time with one (plus a little for the start).
    let script = "import time\nend = time.time() + 1.5\nwhile time.time() < end: pass\n\
                  print(round(time.process_time(), 2))";
    let out = daemon.run(&["--json", "--cpu", "0.25", "--", "python3", "-c", script]);
    let exit = json(&out);
    if not_held(&exit, "CPU limit is not enforced") {
        return;
    }
    let cpu: f64 = exit["content"]
        .as_str()
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(cpu < 0.9, "{cpu}s of CPU in 1.5 s under --cpu 0.25");
}

/// The v1 directory of a limit (`pids:/spillway-KEY/ID` in `/proc/self/cgroup`) that its
/// run is in, when the limit is held by a v1 hierarchy here.
fn v1_parent(content: &str, controller: &str) -> Option<std::path::PathBuf> {
    let path = content
        .lines()
        .find_map(|l| l.split_once(&format!(":{controller}:")).map(|(_, p)| p))?;
    let (parent, _) = path.trim().rsplit_once('/')?;
    parent
        .contains("spillway-")
        .then(|| std::path::PathBuf::from(format!("/sys/fs/cgroup/{controller}{parent}")))
}

/// Another daemon's start or shutdown removes the empty v1 directory of this one's limits:
/// the next run makes it again, and its limit holds.
#[test]
fn a_v1_limit_holds_after_its_directory_was_removed() {
    let daemon = TestDaemon::start();
    let limited = |daemon: &TestDaemon| {
        let out = daemon.run(&["--json", "--pids", "50", "--", "cat", "/proc/self/cgroup"]);
        json(&out)["content"].as_str().unwrap().to_string()
    };
    let first = limited(&daemon);
    let Some(parent) = v1_parent(&first, "pids") else {
        eprintln!("no v1 pids hierarchy holds the limit here: nothing to remove");
        return;
    };
    std::fs::remove_dir(&parent).expect("the directory is empty between runs");
    let second = limited(&daemon);
    assert_eq!(v1_parent(&second, "pids"), Some(parent), "{second}");
    assert!(!second.contains("not enforced"), "{second}");
}

/// `--until-port` counts only a listener of the run: a port another process already listens
/// on does not make a run that never listens on it ready (it yields after its time instead).
#[test]
fn until_port_ignores_a_listener_that_is_not_the_runs() {
    let daemon = TestDaemon::start();
    let foreign = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = foreign.local_addr().unwrap().port().to_string();
    let out = daemon.run(&[
        "--json",
        "--yield",
        "1s",
        "--until-port",
        &port,
        "--",
        "sleep",
        "30",
    ]);
    let running = json(&out);
    assert_eq!(running["type"], "running", "{running}");
    assert!(running.get("ready").is_none(), "{running}");
    daemon
        .spillway()
        .args(["kill", running["id"].as_str().unwrap()])
        .output()
        .unwrap();
}
