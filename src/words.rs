//! Small formatting helpers that more than one audience's wording uses: the wire's (worded by
//! the daemon's layers) and the client's, for the command line and for the MCP server. Here,
//! below every layer, so that no layer borrows wording from another's internals.

use std::fmt::Write as _;

use crate::protocol::StoppedProcess;

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
