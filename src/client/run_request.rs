//! The one place a run request is begun, for the command line and the MCP server alike: the
//! command, where it runs, and the caller's environment, so that it runs as if the caller had
//! run it itself. Each front end then sets only the options it offers.

use std::collections::BTreeMap;
use std::path::Path;

use crate::protocol::{CallerContext, RLIMIT_NAMES, Rlimit, RunRequest};
use crate::supervisor::caller::RESOURCES;

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
        caller: Some(caller_context()),
        ..RunRequest::default()
    })
}

/// This process's umask and resource limits: the command gets them as it would from the
/// caller's shell.
fn caller_context() -> CallerContext {
    use nix::sys::stat::{Mode, umask};
    // umask can only be read by setting it: set it back at once.
    let mask = umask(Mode::empty());
    umask(mask);
    let rlimits = RLIMIT_NAMES
        .iter()
        .zip(RESOURCES)
        .filter_map(|(name, resource)| {
            let (soft, hard) = nix::sys::resource::getrlimit(resource).ok()?;
            let finite = |v: u64| (v != nix::sys::resource::RLIM_INFINITY).then_some(v);
            Some((
                (*name).to_string(),
                Rlimit {
                    soft: finite(soft),
                    hard: finite(hard),
                },
            ))
        })
        .collect();
    CallerContext {
        umask: Some(mask.bits()),
        rlimits,
    }
}

/// This process's environment, but for variables that are not UTF-8 (the protocol carries
/// text).
fn caller_env() -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}
