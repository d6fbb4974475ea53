//! The one place a run request is begun, for the command line and the MCP server alike: the
//! command, where it runs, and the caller's environment, so that it runs as if the caller had
//! run it itself. Each front end then sets only the options it offers.

use std::collections::BTreeMap;
use std::path::Path;

use crate::protocol::RunRequest;

/// What to run.
#[derive(Debug, Clone)]
pub enum ToRun {
    /// A program and its arguments, run as they are.
    Argv(Vec<String>),
    /// A command line for `sh -c`.
    Shell(String),
}

/// A request to run `command` in `cwd` (made absolute; this process's working directory when
/// `None`) with this process's environment; every other option at the daemon's default.
pub fn here(command: ToRun, cwd: Option<&Path>) -> std::io::Result<RunRequest> {
    let cwd = match cwd {
        Some(dir) => std::path::absolute(dir)?,
        None => std::env::current_dir()?,
    };
    let (argv, shell) = match command {
        ToRun::Argv(argv) => (Some(argv), None),
        ToRun::Shell(line) => (None, Some(line)),
    };
    Ok(RunRequest {
        argv,
        shell,
        cwd: Some(cwd.to_string_lossy().into_owned()),
        base_env: Some(caller_env()),
        ..RunRequest::default()
    })
}

/// This process's environment, but for variables that are not UTF-8 (the protocol carries
/// text).
fn caller_env() -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}
