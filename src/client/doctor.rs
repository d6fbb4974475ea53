//! `spillway doctor`: what a user needs to know when something does not work as expected, in
//! one screen: which program runs (and whether `spillway` on PATH is it), the data directory
//! and its disk, the daemon that answers (its version against this client's), cgroup support,
//! and for each agent host whether spillway is wired in at user and project scope, whether it
//! is active, and what it would do with a sample command. Nothing is written and no daemon is
//! started.

use std::fmt::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde_json::json;

use crate::client::args::EndpointArgs;
use crate::client::daemon_cli::ask_status;
use crate::client::hook::{self, Context, Host};
use crate::client::init::{Scope, Wiring, wiring};

/// The command a doctor shows each host's integration acting on.
const SAMPLE: &str = "cargo test --workspace";

#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    #[command(flatten)]
    endpoint: EndpointArgs,
}

pub(crate) fn run(args: DoctorArgs) -> Result<ExitCode> {
    let mut out = String::new();
    let mut problems = 0;
    program(&mut out);
    let endpoint = args.endpoint.resolve()?;
    problems += data_dir(&endpoint.data_dir, &mut out);
    problems += daemon(&endpoint, &mut out);
    cgroups(&mut out);
    for host in Host::ALL {
        problems += host_report(host, &mut out);
    }
    if problems > 0 {
        let _ = writeln!(
            out,
            "\n{problems} problem(s) found: see the lines marked '!'."
        );
    }
    print!("{out}");
    Ok(if problems == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn program(out: &mut String) {
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "?".into());
    let _ = writeln!(
        out,
        "program: {exe} (version {})",
        env!("CARGO_PKG_VERSION")
    );
    let named = crate::program::program();
    if named == "spillway" {
        let _ = writeln!(out, "  'spillway' on PATH is this program");
    } else {
        let _ = writeln!(
            out,
            "  'spillway' on PATH is not this program: hints name it by path ({named})"
        );
    }
}

/// The data directory: whether it is there, private, and has room. Returns the problems.
fn data_dir(dir: &Path, out: &mut String) -> usize {
    let _ = write!(out, "data directory: {}", dir.display());
    let Ok(meta) = std::fs::metadata(dir) else {
        let _ = writeln!(out, " (not made yet: the first run makes it)");
        return 0;
    };
    let mode = meta.mode() & 0o777;
    let mine = meta.uid() == nix::unistd::getuid().as_raw();
    let free = crate::storage::space::free_bytes(dir).ok();
    let _ = writeln!(
        out,
        " (mode {mode:o}{}, {} free)",
        if mine { "" } else { ", owned by another user" },
        free.map_or("?".into(), |b| bytesize::ByteSize(b).to_string())
    );
    if mode & 0o077 != 0 || !mine {
        let _ = writeln!(out, "  ! it should be yours alone (mode 700)");
        return 1;
    }
    0
}

fn daemon(endpoint: &crate::client::Endpoint, out: &mut String) -> usize {
    match ask_status(endpoint) {
        Ok(Some(status)) => {
            let _ = writeln!(
                out,
                "daemon: pid {}, version {}, socket {}, {} run(s) in flight",
                status.pid, status.version, status.socket, status.runs
            );
            if status.version != env!("CARGO_PKG_VERSION") {
                let _ = writeln!(
                    out,
                    "  ! another version than this client's: `spillway daemon restart`"
                );
                return 1;
            }
            0
        }
        Ok(None) => {
            let _ = writeln!(
                out,
                "daemon: none on {} (any run starts one)",
                endpoint.socket.display()
            );
            0
        }
        Err(e) => {
            let _ = writeln!(out, "daemon: ! {e:#}");
            1
        }
    }
}

fn cgroups(out: &mut String) {
    let root = Path::new("/sys/fs/cgroup");
    let text = match std::fs::read_to_string(root.join("cgroup.controllers")) {
        Ok(controllers) => format!("v2 (controllers: {})", controllers.trim()),
        Err(_) if root.join("memory").is_dir() => "v1".to_string(),
        Err(_) => "none found: runs are tracked through /proc, limits not held".to_string(),
    };
    let _ = writeln!(out, "cgroups: {text}");
}

/// One host's integration at both scopes, and what it does with [`SAMPLE`].
fn host_report(host: Host, out: &mut String) -> usize {
    let mut problems = 0;
    let mut installed = false;
    let _ = writeln!(out, "{}:", host.name());
    for scope in [Scope::User, Scope::Project] {
        let name = match scope {
            Scope::User => "user scope",
            Scope::Project => "project scope",
        };
        match wiring(host, scope) {
            Ok(Wiring::Installed) => {
                installed = true;
                let _ = writeln!(out, "  {name}: installed");
            }
            Ok(Wiring::Absent) => {
                let _ = writeln!(out, "  {name}: not installed");
            }
            Ok(Wiring::Partly(files)) => {
                problems += 1;
                let files: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
                let _ = writeln!(
                    out,
                    "  {name}: ! installed in part, by an earlier version or for another spillway ({}): run `spillway init --agent {}{}`",
                    files.join(", "),
                    host.name(),
                    if scope == Scope::Project {
                        " --scope project"
                    } else {
                        ""
                    }
                );
            }
            Err(e) => {
                problems += 1;
                let _ = writeln!(out, "  {name}: ! {e:#}");
            }
        }
    }
    if installed {
        let _ = writeln!(out, "  active: {}", activity(host));
        let _ = writeln!(out, "  `{SAMPLE}`: {}", sample(host));
    }
    problems
}

/// Whether an installed integration acts, and what it may still need.
fn activity(host: Host) -> &'static str {
    match host {
        Host::ClaudeCode => {
            "yes: Claude Code runs each Bash command through spillway after its own checks"
        }
        Host::Codex => {
            "once trusted: Codex runs a new hook only after you trust it (/hooks in Codex)"
        }
        Host::Gemini => "yes (a project's settings: in a trusted folder)",
        Host::Opencode => "yes: output opencode cuts is replaced by spillway's preview",
        Host::Copilot => {
            "yes: output Copilot CLI saves to a file is replaced by spillway's preview"
        }
    }
}

/// What the integration does with [`SAMPLE`].
fn sample(host: Host) -> String {
    match host {
        Host::ClaudeCode => "runs it as the model wrote it, through the shell prefix".into(),
        Host::Opencode => "runs as opencode runs it; only a cut output is replaced".into(),
        Host::Copilot => "runs as Copilot CLI runs it; only an output it saves is replaced".into(),
        _ => {
            let cwd = std::env::current_dir().unwrap_or_default();
            let input = match host {
                Host::Gemini => json!({"tool_name": "run_shell_command", "cwd": cwd,
                                       "tool_input": {"command": SAMPLE}}),
                _ => json!({"tool_name": "Bash", "cwd": cwd, "tool_input": {"command": SAMPLE}}),
            };
            match hook::answer(host, input.to_string().as_bytes(), &Context::from_env()) {
                Some(_) => format!(
                    "rewritten to `spillway run --host {} ... -- bash -c '{SAMPLE}'`",
                    host.name()
                ),
                None => "left alone (a rule of yours may be about it, or SPILLWAY_HOOK=off)".into(),
            }
        }
    }
}
