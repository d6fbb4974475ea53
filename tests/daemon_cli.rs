//! The daemon in view from the command line: `daemon status|stop|restart`, the daemon that
//! serves a data directory found whatever the client's `XDG_RUNTIME_DIR`, and queries that
//! never create a data directory or start a daemon for one that does not exist, and the version
//! handshake sent ahead of a request.

use std::path::Path;

use serde_json::{Value, json};

use crate::helper::daemon::TestDaemon;
use crate::helper::{Sandbox, stderr, stdout};

#[test]
fn daemon_status_names_the_daemon_and_stop_stops_it() {
    let mut daemon = TestDaemon::start();
    let out = daemon
        .spillway()
        .args(["daemon", "status", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["pid"], json!(daemon.pid()));
    assert_eq!(status["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(Path::new(status["socket"].as_str().unwrap()), daemon.socket);
    assert_eq!(status["runs"], 0);
    let text = daemon
        .spillway()
        .args(["daemon", "status"])
        .output()
        .unwrap();
    assert!(
        stdout(&text).contains("runs in flight: 0"),
        "{}",
        stdout(&text)
    );

    let out = daemon.spillway().args(["daemon", "stop"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(daemon.wait_exit().success());
    let out = daemon
        .spillway()
        .args(["daemon", "status"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stdout(&out));
    assert!(!daemon.socket.exists(), "the socket is removed");
}

#[test]
fn a_client_with_another_runtime_dir_uses_the_daemon_of_its_data_dir() {
    let daemon = TestDaemon::start();
    let elsewhere = tempfile::tempdir().unwrap();
    let client = || {
        let mut cmd = daemon.sandbox.spillway();
        cmd.env_remove("SPILLWAY_SOCKET")
            .env("XDG_RUNTIME_DIR", elsewhere.path());
        cmd
    };
    let out = client().args(["run", "--", "echo", "hi"]).output().unwrap();
    assert_eq!(stdout(&out), "hi\n", "{}", stderr(&out));
    let out = client()
        .args(["daemon", "status", "--json"])
        .output()
        .unwrap();
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["pid"], json!(daemon.pid()));
    assert!(
        !elsewhere.path().join("spillway").exists(),
        "no second daemon was started"
    );
}

#[test]
fn a_query_on_a_missing_data_dir_creates_nothing_and_starts_nothing() {
    let sandbox = Sandbox::new();
    let runtime = tempfile::tempdir().unwrap();
    let missing = sandbox.dir.path().join("no/such/dir");
    for query in [
        &["history"][..],
        &["stats"],
        &["ps"],
        &["purge", "--dry-run"],
    ] {
        let out = sandbox
            .spillway()
            .args(query)
            .arg("--data-dir")
            .arg(&missing)
            .env("XDG_RUNTIME_DIR", runtime.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125), "{query:?}");
        let err = stderr(&out);
        assert!(
            err.contains("no data directory") && err.contains("mistyped"),
            "{err}"
        );
        assert!(!missing.exists(), "{query:?} created {}", missing.display());
        assert!(
            !runtime.path().join("spillway").exists(),
            "{query:?} started a daemon"
        );
    }
    // A socket given where nobody listens starts nothing either.
    let socket = sandbox.dir.path().join("nobody.sock");
    let out = sandbox
        .spillway()
        .args(["history", "--data-dir"])
        .arg(&missing)
        .arg("--socket")
        .arg(&socket)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(!missing.exists() && !socket.exists());
}

/// The client sends its `ping` and its request together and reads the `pong` before the
/// request's events: a short run waits no round trip for the version handshake, and a daemon
/// of another version is still named. A proxy in front of a real daemon reads both lines
/// before it passes anything on (a client that waited for the `pong` first would never send
/// its request), and says the daemon is of another version.
#[test]
fn the_request_follows_the_version_ping_without_waiting_for_its_answer() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::{UnixListener, UnixStream};
    use std::time::Duration;

    let daemon = TestDaemon::start();
    let proxy_socket = daemon.sandbox.dir.path().join("proxy.sock");
    let listener = UnixListener::bind(&proxy_socket).unwrap();
    let upstream = daemon.socket.clone();
    let proxy = std::thread::spawn(move || {
        let (client, _) = listener.accept().unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut from_client = BufReader::new(client.try_clone().unwrap());
        let mut lines = Vec::new();
        for _ in 0..2 {
            let mut line = String::new();
            from_client
                .read_line(&mut line)
                .expect("the client sent its request without waiting for the pong");
            lines.push(line);
        }
        let mut to_daemon = UnixStream::connect(&upstream).unwrap();
        for line in &lines {
            to_daemon.write_all(line.as_bytes()).unwrap();
        }
        let mut from_daemon = BufReader::new(to_daemon);
        let mut to_client = client;
        loop {
            let mut line = String::new();
            if from_daemon.read_line(&mut line).unwrap() == 0 {
                break;
            }
            let mut event: Value = serde_json::from_str(&line).unwrap();
            if event["type"] == "pong" {
                event["version"] = json!("0.0.1-older");
            }
            let last = event["type"] == "exit";
            writeln!(to_client, "{event}").unwrap();
            if last {
                break;
            }
        }
        lines
    });
    let out = daemon
        .sandbox
        .spillway()
        .env("SPILLWAY_SOCKET", &proxy_socket)
        .args(["run", "--", "sh", "-c", "echo handshake-ok; exit 3"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let lines = proxy.join().unwrap();
    let ops: Vec<Value> = lines
        .iter()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["op"].clone())
        .collect();
    assert_eq!(ops, [json!("ping"), json!("run")]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stdout(&out).contains("handshake-ok"), "{}", stdout(&out));
    let warned = stderr(&out);
    assert!(
        warned.contains("is spillway 0.0.1-older") && warned.contains("daemon restart"),
        "{warned}"
    );
}
