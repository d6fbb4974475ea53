//! `spillway mcp` driven by the official Python MCP SDK (`mcp` on PyPI, pinned in
//! `tests/mcp/requirements.txt`): the client lists the tools, runs a command that prints
//! 200,000 lines, follows the notice with `read_output`, greps the spill, sees a failing
//! command's exit code, tool errors, a live run answered, waited for and killed, and no secret in
//! any tool's text (output, what a run's end stopped, history's commands). The
//! checks are in `tests/mcp/client.py`.

use std::path::Path;
use std::process::Command;

use crate::helper::daemon::TestDaemon;
use crate::helper::python::venv_python;

#[test]
fn the_python_sdk_drives_the_mcp_server() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = venv_python(&root.join("tests/mcp/requirements.txt"));
    let daemon = TestDaemon::start();
    let out = Command::new(python)
        .arg(root.join("tests/mcp/client.py"))
        .arg(env!("CARGO_BIN_EXE_spillway"))
        .env("SPILLWAY_SOCKET", &daemon.socket)
        .env("SPILLWAY_DATA_DIR", daemon.sandbox.data_dir())
        .current_dir(daemon.sandbox.dir.path())
        .output()
        .expect("run the Python MCP client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("checks passed"),
        "the Python MCP client failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
}
