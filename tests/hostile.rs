//! Hostile and clumsy clients: a thousand idle connections, more than the daemon takes, a
//! request sent half-way, a client that stops reading its events, and a peer of another uid.
//! Each costs the daemon a bounded amount and never keeps it from serving others. Run with
//! `--nocapture` to see the figures they measure.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::sys::resource::{Resource, getrlimit, setrlimit};
use serde_json::{Value, json};

use crate::helper::daemon::{PATIENCE, RawClient, TestDaemon, open_fds, rss_kib, wait_for};
use crate::helper::users::{
    NOBODY, as_nobody, cannot_act_as_nobody, chmod, public_spillway, python_for_nobody,
};
use crate::helper::{stderr, stdout};

fn ping() -> Value {
    json!({"v": 1, "op": "ping"})
}

/// Raises this test process's soft open-file limit to its hard one; false when even that is
/// short of `needed`.
fn afford_files(needed: u64) -> bool {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    }
    hard >= needed
}

/// A process's soft and hard open-file limits, from /proc/PID/limits.
fn file_limits(pid: u32) -> (u64, u64) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let numbers: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    (numbers[0], numbers[1])
}

/// The soft open-file limit many machines start processes with.
const USUAL_SOFT_LIMIT: u64 = 1024;
const IDLE: usize = 1000;

#[test]
fn a_thousand_idle_connections_do_not_keep_a_new_client_waiting() {
    if !afford_files(IDLE as u64 + 200) {
        println!(
            "hostile: skipped, the hard open-file limit is under {}",
            IDLE + 200
        );
        return;
    }
    // As on many machines, the daemon starts with a soft limit that 1000 clients exceed.
    let daemon = TestDaemon::start_customised(|cmd, _| {
        // SAFETY: setrlimit is async-signal-safe and allocates nothing.
        unsafe {
            cmd.pre_exec(|| {
                let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
                setrlimit(Resource::RLIMIT_NOFILE, USUAL_SOFT_LIMIT.min(hard), hard)?;
                Ok(())
            });
        }
    });
    let pid = daemon.pid();
    let (soft, hard) = file_limits(pid);
    assert_eq!(soft, hard, "the daemon raised its soft limit");
    // A request that sends no caller's limits: the command gets the one the daemon was given.
    let request = json!({"v": 1, "op": "run", "argv": ["sh", "-c", "ulimit -Sn"],
                                     "cwd": "/", "tty": false});
    let exit = daemon.client().run_to_exit(&request);
    assert_eq!(
        exit["content"],
        format!("{}\n", USUAL_SOFT_LIMIT.min(hard)),
        "commands get the limit the daemon was given"
    );
    // `spillway run` sends its own: the command gets the caller's.
    let ulimit = daemon.run(&["--", "sh", "-c", "ulimit -Sn"]);
    let (mine, _) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    assert_eq!(
        stdout(&ulimit),
        format!("{mine}\n"),
        "commands get the caller's"
    );
    let (rss_before, fds_before) = (rss_kib(pid), open_fds(pid));

    let idle: Vec<UnixStream> = (0..IDLE)
        .map(|_| UnixStream::connect(&daemon.socket).unwrap())
        .collect();
    // Accepted in order: the new client's answer comes once all 1000 are in.
    let began = Instant::now();
    let mut client = daemon.client();
    assert_eq!(client.ask(&ping())["type"], "pong");
    let answered = began.elapsed();
    let exit =
        client.run_to_exit(&json!({"v": 1, "op": "run", "argv": ["echo", "served"], "cwd": "/"}));
    assert_eq!(exit["content"], "served\n");
    let (rss_with, fds_with) = (rss_kib(pid), open_fds(pid));
    assert!(
        fds_with > IDLE,
        "every idle connection is held: {fds_with} fds"
    );
    println!(
        "hostile: {IDLE} idle connections: a new client answered in {answered:.2?}; daemon RSS \
         {rss_before} -> {rss_with} KiB, open fds {fds_before} -> {fds_with}"
    );
    assert!(answered < Duration::from_secs(1), "{answered:?}");
    assert!(rss_with < rss_before + 64 * 1024, "{rss_with} KiB");

    drop(idle);
    drop(client);
    wait_for(
        || open_fds(pid) <= fds_before + 2,
        "the daemon to close the connections",
    );
}

#[test]
fn connections_past_the_cap_get_an_error_and_the_rest_are_served() {
    let daemon = TestDaemon::start();
    let pid = daemon.pid();
    let cap = 4096.min(file_limits(pid).0 / 2) as usize;
    if !afford_files(cap as u64 + 200) {
        println!(
            "hostile: skipped, the hard open-file limit is under {}",
            cap + 200
        );
        return;
    }
    let rss_before = rss_kib(pid);
    let mut held: Vec<UnixStream> = (0..cap)
        .map(|_| UnixStream::connect(&daemon.socket).unwrap())
        .collect();
    let mut extra = daemon.client();
    let refusal = extra.event().expect("an error");
    assert_eq!(refusal["code"], "too_many_clients", "{refusal}");
    assert!(extra.event().is_none(), "and the connection is closed");
    let rss_full = rss_kib(pid);
    println!(
        "hostile: {cap} connections (the cap): daemon RSS {rss_before} -> {rss_full} KiB, {} fds",
        open_fds(pid)
    );

    // Those already in are served.
    let mut first = RawClient::from_stream(held.remove(0));
    assert_eq!(first.ask(&ping())["type"], "pong");
    drop(first);
    // One gone, one more comes in.
    wait_for(
        || RawClient::connect(&daemon.socket).ask(&ping())["type"] == "pong",
        "a place to free up",
    );
}

#[test]
fn a_half_sent_request_is_timed_out_and_an_idle_connection_is_not() {
    let daemon = TestDaemon::start_with(&["--client-timeout", "1s"]);
    let mut idle = daemon.client();
    let mut half = daemon.client();
    let began = Instant::now();
    half.send_raw(br#"{"v": 1, "op": "pi"#);
    let event = half.event().expect("an error");
    let dropped = began.elapsed();
    assert_eq!(event["code"], "request_timeout", "{event}");
    assert!(half.event().is_none(), "the connection is closed");
    println!("hostile: a half-sent request was dropped after {dropped:.2?} (timeout 1s)");
    assert!(
        dropped >= Duration::from_millis(900) && dropped < Duration::from_secs(5),
        "{dropped:?}"
    );
    // Idle for longer than the timeout, with nothing begun: still served.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(idle.ask(&ping())["type"], "pong");
}

#[test]
fn extreme_values_get_answers_and_the_daemon_lives_on() {
    let daemon = TestDaemon::start_logged();
    let mut client = daemon.client();
    let run = |fields: Value| {
        let mut request = json!({"v": 1, "op": "run", "argv": ["true"], "cwd": "/"});
        request
            .as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        request
    };
    let huge = u64::MAX;
    let refused = [
        (run(json!({"argv": ["echo", "a\u{0}b"]})), "bad_request"),
        (run(json!({"argv": []})), "bad_request"),
        (run(json!({"env": {"A=B": "c"}})), "bad_request"),
        (run(json!({"cols": 0, "rows": 0})), "bad_request"),
        (
            run(json!({"max_lines": huge, "max_bytes": huge})),
            "bad_request",
        ),
        (
            run(json!({"highlight": ["a{1000}{1000}{1000}"]})),
            "bad_pattern",
        ),
        (run(json!({"cwd": "/\u{0}"})), "bad_cwd"),
    ];
    for (request, code) in refused {
        let answer = client.ask(&request);
        assert_eq!(answer["code"], code, "{request}: {answer}");
    }
    let nested = format!("{}\n", "[".repeat(100_000));
    client.send_raw(nested.as_bytes());
    assert_eq!(client.event().unwrap()["code"], "malformed_json");
    // Limits past any clock or budget are as good as none.
    for fields in [
        json!({"timeout_ms": huge}),
        json!({"yield_ms": huge}),
        json!({"max_tokens": huge}),
    ] {
        let exit = client.run_to_exit(&run(fields.clone()));
        assert_eq!(exit["status"], "exited", "{fields}: {exit}");
    }
    let history = client.ask(&json!({"v": 1, "op": "history", "limit": huge}));
    assert_eq!(history["runs"].as_array().unwrap().len(), 3);
    assert_eq!(client.ask(&ping())["type"], "pong");
    daemon.assert_no_panic();
}

/// Waits until the daemon has closed its end of `stream` (POLLRDHUP: the client has not read
/// what was sent, so no EOF shows yet); returns how long that took.
fn closed_by_peer(stream: &UnixStream, bound: Duration) -> Option<Duration> {
    let began = Instant::now();
    while began.elapsed() < bound {
        let mut fd = libc::pollfd {
            fd: stream.as_raw_fd(),
            events: libc::POLLRDHUP,
            revents: 0,
        };
        // SAFETY: one valid pollfd, for the duration of the call.
        let ready = unsafe { libc::poll(&mut fd, 1, 20) };
        if ready > 0 && fd.revents & (libc::POLLRDHUP | libc::POLLHUP) != 0 {
            return Some(began.elapsed());
        }
    }
    None
}

/// Samples `pid`'s RSS until `stop`, keeping the highest.
fn watch_rss(pid: u32, stop: &AtomicBool, peak: &AtomicU64) {
    while !stop.load(Ordering::Relaxed) {
        peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sets its flag when dropped, so that a failing test still stops the threads watching it.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Follows run `id` to its end, reading every event; returns the text and the exit event.
fn follow_all(daemon: &TestDaemon, id: &str) -> (String, Value) {
    let mut client = daemon.client();
    client.send(&json!({"v": 1, "op": "follow", "id": id}));
    let mut text = String::new();
    loop {
        let event = client.event().expect("an event");
        match event["type"].as_str() {
            Some("output") => text.push_str(event["text"].as_str().unwrap()),
            _ => return (text, event),
        }
    }
}

const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);
const LINES: u64 = 1_000_000;

#[test]
fn a_client_that_stops_reading_is_dropped_without_slowing_the_run() {
    let daemon = TestDaemon::start_with(&["--client-timeout", "2s"]);
    let pid = daemon.pid();
    let request = json!({
        "v": 1, "op": "run", "cwd": "/", "tty": false, "shell": format!("seq 1 {LINES}"),
    });
    // The same run, followed by a client that reads everything.
    let mut quiet = daemon.client();
    let started = quiet.ask(&request);
    let (_, exit) = follow_all(&daemon, started["id"].as_str().unwrap());
    let baseline = exit["duration_ms"].as_u64().unwrap();
    let rss_before = rss_kib(pid);
    let (stop, peak) = (AtomicBool::new(false), AtomicU64::new(rss_before));
    let runner = UnixStream::connect(&daemon.socket).unwrap();
    let follower = UnixStream::connect(&daemon.socket).unwrap();

    std::thread::scope(|scope| {
        scope.spawn(|| watch_rss(pid, &stop, &peak));
        let stopper = StopOnDrop(&stop);
        // A client that starts the run streamed and reads nothing after `started`...
        let mut streamed = request.clone();
        streamed["stream"] = json!("text");
        let id = read_started(&runner, &streamed);
        // ...another that follows it and reads nothing at all...
        send_line(&follower, &json!({"v": 1, "op": "follow", "id": id}));
        let runner_dropped = scope.spawn(|| closed_by_peer(&runner, CLIENT_TIMEOUT * 10));
        let follower_dropped = scope.spawn(|| closed_by_peer(&follower, CLIENT_TIMEOUT * 10));
        // ...and one that follows it and reads everything.
        let (text, exit) = follow_all(&daemon, &id);
        assert_eq!(exit["type"], "exit", "{exit}");
        assert_eq!(text.len() as u64, exit["total_bytes"].as_u64().unwrap());
        assert!(text.ends_with(&format!("\n{LINES}\n")));
        assert_eq!(exit["total_lines"], LINES);

        let runner_dropped = runner_dropped
            .join()
            .unwrap()
            .expect("the runner is dropped");
        let follower_dropped = follower_dropped.join().unwrap();
        let follower_dropped = follower_dropped.expect("the follower is dropped");
        drop(stopper);
        let duration = exit["duration_ms"].as_u64().unwrap();
        let peak = peak.load(Ordering::Relaxed);
        println!(
            "hostile: seq 1 {LINES} (followed) took {baseline} ms, and {duration} ms with two \
             clients that stopped reading, which were dropped {runner_dropped:.2?} and \
             {follower_dropped:.2?} after asking (client timeout {CLIENT_TIMEOUT:?}); daemon \
             RSS {rss_before} KiB before, {peak} KiB at most"
        );
        assert!(duration <= baseline * 2 + 2000, "the run was slowed down");
        assert!(peak < rss_before + 64 * 1024, "RSS grew to {peak} KiB");
        // What the stalled ones got ends without the run's exit: they were cut off.
        for stalled in [&runner, &follower] {
            let last = last_line(stalled);
            assert!(!last.contains(r#""type":"exit""#), "{last}");
        }
    });
}

fn send_line(stream: &UnixStream, request: &Value) {
    std::io::Write::write_all(&mut &*stream, format!("{request}\n").as_bytes()).unwrap();
}

/// Sends `request` (a run) on `stream` and reads just its first line, the `started` event;
/// returns the run id.
fn read_started(stream: &UnixStream, request: &Value) -> String {
    send_line(stream, request);
    let mut line = Vec::new();
    let mut byte = [0u8];
    while line.last() != Some(&b'\n') {
        std::io::Read::read_exact(&mut &*stream, &mut byte).unwrap();
        line.push(byte[0]);
    }
    let started: Value = serde_json::from_slice(&line).unwrap();
    assert_eq!(started["type"], "started", "{started}");
    started["id"].as_str().unwrap().to_string()
}

/// Everything left in `stream` until EOF, last line only.
fn last_line(stream: &UnixStream) -> String {
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut all = Vec::new();
    std::io::Read::read_to_end(&mut &*stream, &mut all).unwrap();
    let text = String::from_utf8_lossy(&all);
    text.lines().last().unwrap_or_default().to_string()
}

/// `spillway ps` as uid and gid 65534 (nobody), against `socket`.
fn ps_as_nobody(exe: &Path, socket: &Path) -> Output {
    as_nobody(exe)
        .args(["ps", "--json", "--socket"])
        .arg(socket)
        .env("SPILLWAY_DATA_DIR", "/nonexistent")
        .output()
        .expect("setpriv")
}

/// What the daemon at `socket` answers a raw client running as nobody (a `ping`), read with
/// `python` run as nobody: the daemon's own check, with no spillway client in the way.
fn raw_ping_as_nobody(python: &Path, socket: &Path) -> String {
    let script = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(30)
s.connect(sys.argv[1])
try:
    s.sendall(b'{"v": 1, "op": "ping"}\n')
except OSError:
    pass
print(s.makefile("rb").readline().decode().strip())
"#;
    let out = as_nobody(python)
        .args(["-c", script])
        .arg(socket)
        .output()
        .expect("setpriv python3");
    stdout(&out)
}

#[test]
fn a_peer_of_another_uid_is_refused_for_real() {
    if let Some(why) = cannot_act_as_nobody() {
        println!("hostile: skipped, {why}");
        return;
    }
    let daemon = TestDaemon::start();
    let public = tempfile::tempdir().unwrap();
    let exe = public_spillway(public.path());
    // Let nobody walk to the socket's directory (not into the data directory).
    chmod(daemon.sandbox.dir.path(), 0o711);
    let run_dir = daemon.socket.parent().unwrap();

    let locked_out = ps_as_nobody(&exe, &daemon.socket);
    assert_eq!(locked_out.status.code(), Some(125));
    assert!(
        stderr(&locked_out).contains("Permission denied"),
        "the 0600 socket in its 0700 directory keeps nobody out: {}",
        stderr(&locked_out)
    );

    chmod(run_dir, 0o777);
    chmod(&daemon.socket, 0o666);
    // nobody's spillway client will not talk to root's daemon at all...
    let refused = ps_as_nobody(&exe, &daemon.socket);
    assert_eq!(refused.status.code(), Some(125), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains(&format!(
            "refusing the daemon at {}: it runs as uid 0, not as this user (uid {NOBODY})",
            daemon.socket.display()
        )),
        "{}",
        stderr(&refused)
    );
    // ...and the daemon will not serve a raw client of nobody's. Several times: the daemon
    // may hang up before or after the client has sent its request.
    match python_for_nobody() {
        None => println!("hostile: no python3 nobody can run; the daemon's own check is skipped"),
        Some(python) => {
            for _ in 0..5 {
                let answer = raw_ping_as_nobody(&python, &daemon.socket);
                assert!(
                    answer.contains(r#""code":"forbidden""#)
                        && answer.contains("serves uid 0 only; connection from uid 65534 refused"),
                    "{answer}"
                );
            }
        }
    }
    let mut own = daemon.client();
    assert_eq!(
        own.ask(&ping())["type"],
        "pong",
        "the daemon serves its own user"
    );
}

#[test]
fn sixty_four_hostile_greps_stay_bounded_and_the_memory_comes_back() {
    let daemon = TestDaemon::start();
    let mut client = daemon.client();
    let script = "seq 1 200000 | sed 's/$/ some words here to search through/'";
    let exit = client.run_to_exit(&json!({"v": 1, "op": "run", "shell": script, "cwd": "/",
                                          "tty": false}));
    let id = exit["id"].as_str().unwrap().to_string();
    let pid = daemon.pid();
    let before = rss_kib(pid);

    // Patterns that cost the most: the largest a grep may compile, one over that limit, and
    // one of a megabyte (refused for its length).
    let patterns = [
        r"\w{45}x".to_string(),
        r"\w{200}x".to_string(),
        "x".repeat(1_000_000),
    ];
    let peak = AtomicU64::new(before);
    let done = AtomicBool::new(false);
    let answers: Vec<(String, usize)> = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                peak.fetch_max(rss_kib(pid), Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let greps: Vec<_> = (0..64)
            .map(|i| {
                let (socket, id, pattern) = (&daemon.socket, &id, &patterns[i % 3]);
                scope.spawn(move || {
                    let stream = UnixStream::connect(socket).unwrap();
                    stream.set_read_timeout(Some(PATIENCE)).unwrap();
                    let request = json!({"v": 1, "op": "grep", "id": id, "pattern": pattern});
                    send_line(&stream, &request);
                    let mut line = String::new();
                    std::io::BufRead::read_line(&mut std::io::BufReader::new(&stream), &mut line)
                        .unwrap();
                    let event: Value = serde_json::from_str(&line).unwrap();
                    let kind = event["code"].as_str().unwrap_or("grep").to_string();
                    (kind, line.len())
                })
            })
            .collect();
        let answers = greps.into_iter().map(|g| g.join().unwrap()).collect();
        done.store(true, Ordering::SeqCst);
        answers
    });
    let peak = peak.into_inner();
    for (i, (kind, bytes)) in answers.iter().enumerate() {
        let expected = if i % 3 == 0 { "grep" } else { "bad_pattern" };
        assert_eq!(kind, expected, "grep {i}");
        assert!(*bytes < 4096, "grep {i}: a {bytes}-byte answer");
    }
    // The memory goes back once the greps are over (the daemon trims when quiet).
    let mut idle = rss_kib(pid);
    wait_for(
        || {
            idle = rss_kib(pid);
            idle < before + 24 * 1024
        },
        "the daemon's memory to come back down",
    );
    println!(
        "hostile: 64 greps: daemon RSS {:.1} MiB before, {:.1} MiB at the peak, {:.1} MiB idle \
         after",
        before as f64 / 1024.0,
        peak as f64 / 1024.0,
        idle as f64 / 1024.0
    );
    assert!(peak < before + 256 * 1024, "peak {peak} KiB");
    assert_eq!(daemon.client().ask(&ping())["type"], "pong");
}
