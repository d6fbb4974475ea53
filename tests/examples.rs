//! The drop-in socket-protocol clients in `examples/`, each run by its own test file against a
//! live daemon: Python's with the standard library's `unittest`, TypeScript's compiled by
//! the pinned `tsc` and run by Node's test runner.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::helper::daemon::TestDaemon;
use crate::helper::node::node_modules_for;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

/// `command` pointed at `daemon`, run to its end.
fn against(daemon: &TestDaemon, command: &mut Command) -> Output {
    command
        .env("SPILLWAY_SOCKET", &daemon.socket)
        .env("SPILLWAY_DATA_DIR", daemon.sandbox.data_dir())
        .current_dir(daemon.sandbox.dir.path())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"))
}

fn assert_ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_python_client_runs_reads_and_greps() {
    let daemon = TestDaemon::start();
    let out = against(
        &daemon,
        Command::new("python3").arg(examples().join("python/test_spillway_client.py")),
    );
    assert_ok(&out, "the Python client's tests");
    assert!(String::from_utf8_lossy(&out.stderr).contains("Ran 4 tests"));
}

#[test]
fn the_typescript_client_runs_reads_and_greps() {
    let dir = examples().join("typescript");
    let tools = node_modules_for(&dir.join("package.json"));
    let built = tempfile::tempdir().expect("temp dir");
    let compiled = Command::new(tools.join("node_modules/.bin/tsc"))
        .arg("-p")
        .arg(dir.join("tsconfig.json"))
        .arg("--outDir")
        .arg(built.path())
        .arg("--typeRoots")
        .arg(tools.join("node_modules/@types"))
        .output()
        .expect("run tsc");
    assert_ok(&compiled, "compiling the TypeScript client");
    let daemon = TestDaemon::start();
    let out = against(
        &daemon,
        Command::new("node")
            .arg("--test")
            .arg(built.path().join("spillway.test.js")),
    );
    assert_ok(&out, "the TypeScript client's tests");
    assert!(String::from_utf8_lossy(&out.stdout).contains("# pass 4"));
}
