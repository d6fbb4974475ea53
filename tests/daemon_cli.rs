//! The daemon in view from the command line: `daemon status|stop|restart`, the daemon that
//! serves a data directory found whatever the client's `XDG_RUNTIME_DIR`, and queries that
//! never create a data directory or start a daemon for one that does not exist.

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
