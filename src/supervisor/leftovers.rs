//! Telling the model what a run's end stopped, and what its limits did.
//!
//! The commonest way an agent loses a server is `python3 -m http.server 8000 &` (or
//! `npm run dev &`) in one call and a test against it in the next: the first run ends, what
//! it left running is stopped, and the test finds the port closed with no idea why. So the
//! end of a run says what was stopped, by name and pid, and how to keep a server on purpose:
//! as the command of a run that yields once the server is ready, which goes on until it is
//! killed.
//!
//! The daemon words these lines for the command line and appends them to the preview's
//! notice; the MCP server, whose model calls tools rather than commands, finds the same line
//! (made by the same function from the exit event's `stopped` field) and words it for its
//! `bash` tool ([`reword_for_mcp`]).

use std::fmt::Write as _;

use crate::protocol::{LimitHit, Preview, StoppedProcess};
use crate::supervisor::limits::hit_notice;

/// Most stopped processes named in the notice (the JSON lists all).
const NAMED: usize = 5;

/// The stopped processes, named: `python3 -m http.server 8000 (pid 123, port 8000); ...`.
fn named(stopped: &[StoppedProcess]) -> String {
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
fn server(stopped: &[StoppedProcess]) -> Option<(&StoppedProcess, u16)> {
    stopped
        .iter()
        .find_map(|p| p.ports.first().map(|&port| (p, port)))
}

/// The notice line for the command line, or `None` when nothing was stopped.
pub fn cli_notice(stopped: &[StoppedProcess]) -> Option<String> {
    if stopped.is_empty() {
        return None;
    }
    let sw = crate::program::program();
    let how = match server(stopped) {
        Some((p, port)) if !p.command.starts_with('[') => {
            format!("{sw} run --yield 30s --until-port {port} -- {}", p.command)
        }
        Some((_, port)) => format!("{sw} run --yield 30s --until-port {port} -- COMMAND"),
        None => format!(
            "{sw} run --yield 30s --until-port PORT -- COMMAND (or --until REGEX for its ready \
             line)"
        ),
    };
    Some(format!(
        "[spillway: stopped what the command left running: {}. To keep a server, start it \
         as the command itself, not with &: {how}]",
        named(stopped)
    ))
}

/// The same notice for the MCP server's `bash` tool.
pub fn mcp_notice(stopped: &[StoppedProcess]) -> Option<String> {
    if stopped.is_empty() {
        return None;
    }
    let how = match server(stopped) {
        Some((p, port)) if !p.command.starts_with('[') => format!(
            "call bash with command={}, yield_seconds=30 and until_port={port}",
            json_string(&p.command)
        ),
        Some((_, port)) => {
            format!(
                "call bash with the server as the command, yield_seconds=30 and until_port={port}"
            )
        }
        None => "call bash with the server as the command, yield_seconds=30 and until_port=PORT \
                 (or until=REGEX for its ready line)"
            .to_string(),
    };
    Some(format!(
        "[spillway: stopped what the command left running: {}. To keep a server, start it \
         as the command itself, not with &: {how}; it runs until you call kill]",
        named(stopped)
    ))
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| format!("\"{text}\""))
}

/// Appends the end's notice lines to a preview: what was stopped, the limits reached, and
/// a `note` on limits that did not hold.
pub fn annotate(
    preview: &mut Preview,
    stopped: &[StoppedProcess],
    limits_hit: &[LimitHit],
    note: Option<&str>,
) {
    let lines = cli_notice(stopped)
        .into_iter()
        .chain(limits_hit.iter().map(hit_notice))
        .chain(note.map(str::to_string));
    for line in lines {
        let content = &mut preview.content;
        if !content.is_empty() && !content.ends_with('\n') {
            content.push('\n');
        }
        content.push_str(&line);
        content.push('\n');
    }
}

/// Rewords the stopped line of `content` (made by [`annotate`]) for the MCP server's tools.
pub fn reword_for_mcp(content: &mut String, stopped: &[StoppedProcess]) {
    if let (Some(cli), Some(mcp)) = (cli_notice(stopped), mcp_notice(stopped))
        && let Some(at) = content.rfind(&cli)
    {
        content.replace_range(at..at + cli.len(), &mcp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_at(port: u16) -> StoppedProcess {
        StoppedProcess {
            pid: 123,
            command: "python3 -m http.server 8000".into(),
            ports: vec![port],
        }
    }

    #[test]
    fn a_stopped_server_is_named_with_how_to_keep_it() {
        let line = cli_notice(&[server_at(8000)]).unwrap();
        assert_eq!(
            line,
            "[spillway: stopped what the command left running: python3 -m http.server 8000 \
             (pid 123, listening on port 8000). To keep a server, start it as the command \
             itself, not with &: spillway run --yield 30s --until-port 8000 -- python3 -m \
             http.server 8000]"
        );
        assert_eq!(cli_notice(&[]), None);
        let many: Vec<StoppedProcess> = (0..7)
            .map(|i| StoppedProcess {
                pid: i,
                command: format!("sleep {i}"),
                ports: Vec::new(),
            })
            .collect();
        let line = cli_notice(&many).unwrap();
        assert!(line.contains("sleep 4 (pid 4); and 2 more"), "{line}");
        assert!(line.contains("--until-port PORT"), "{line}");
    }

    #[test]
    fn the_mcp_wording_replaces_the_cli_line() {
        let stopped = [server_at(8000)];
        let mut preview = Preview {
            shown: Vec::new(),
            ..Preview::whole("served\n".into(), 1)
        };
        annotate(&mut preview, &stopped, &[], None);
        assert!(preview.content.starts_with("served\n[spillway: stopped"));
        let mut content = preview.content.clone();
        reword_for_mcp(&mut content, &stopped);
        assert!(
            content.contains(
                "call bash with command=\"python3 -m http.server 8000\", yield_seconds=30 and \
                 until_port=8000"
            ),
            "{content}"
        );
        assert!(!content.contains("spillway run"), "{content}");
    }
}
