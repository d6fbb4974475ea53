//! Small formatting helpers that more than one audience's wording uses: the wire's (worded by
//! the daemon's layers) and the client's, for the command line and for the MCP server. Here,
//! below every layer, so that no layer borrows wording from another's internals.

use std::fmt::Write as _;

use crate::protocol::{LimitHit, Resource, StoppedProcess};

/// Bytes in binary units, as `--memory` takes them (`64.0 MiB`).
pub fn human_bytes(bytes: u64) -> String {
    bytesize::ByteSize::b(bytes).display().iec().to_string()
}

/// A JSON string literal, as a model would pass the value back.
pub fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| format!("\"{text}\""))
}

/// Most stopped processes named in a notice (the JSON lists all).
const NAMED: usize = 5;

/// The stopped processes, named: `python3 -m http.server 8000 (pid 123, listening on port
/// 8000); ...`.
pub fn stopped_processes(stopped: &[StoppedProcess]) -> String {
    let mut text = String::new();
    for (i, p) in stopped.iter().take(NAMED).enumerate() {
        if i > 0 {
            text.push_str("; ");
        }
        let _ = write!(text, "{} (pid {}", p.command, p.pid);
        match p.ports.as_slice() {
            [] => {}
            [port] => {
                let _ = write!(text, ", listening on port {port}");
            }
            ports => {
                let list: Vec<String> = ports.iter().map(u16::to_string).collect();
                let _ = write!(text, ", listening on ports {}", list.join(", "));
            }
        }
        text.push(')');
    }
    if stopped.len() > NAMED {
        let _ = write!(text, "; and {} more", stopped.len() - NAMED);
    }
    text
}

/// The server to suggest keeping: the first stopped process that listened on a port.
pub fn first_server(stopped: &[StoppedProcess]) -> Option<(&StoppedProcess, u16)> {
    stopped
        .iter()
        .find_map(|p| p.ports.first().map(|&port| (p, port)))
}

/// The line that says the run reached a limit, for a reader who raises it with `raise` (on
/// the command line `--memory SIZE`, through MCP `memory="SIZE"`).
pub fn limit_reached(hit: &LimitHit, raise: &str) -> String {
    match hit.resource {
        Resource::Memory => format!(
            "[spillway: the run reached its memory limit of {}: the kernel's OOM killer ended \
             {} (SIGKILL). Raise it with {raise}]",
            human_bytes(hit.limit),
            plural(hit.events, "process", "processes")
        ),
        Resource::Pids => format!(
            "[spillway: the run reached its limit of {} processes: {} refused \
             (fork failed with EAGAIN). Raise it with {raise}]",
            hit.limit,
            plural(hit.events, "fork was", "forks were")
        ),
        Resource::Cpu => format!(
            "[spillway: the run reached its cpu limit of {} ({} times)]",
            hit.limit, hit.events
        ),
    }
}

/// `n` things, in the singular or the plural.
fn plural(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}
