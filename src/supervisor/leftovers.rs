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
//! notice, saying where the stopped line stands (`stopped_at`); the MCP server, whose model
//! calls tools rather than commands, words the same facts (the exit event's `stopped` field)
//! for its `bash` tool and puts its line there instead.

use crate::protocol::{LimitHit, Preview, StoppedProcess};
use crate::supervisor::limits::hit_lines;
use crate::words::{first_server, stopped_processes};

/// The notice line for the command line, or `None` when nothing was stopped.
pub fn cli_notice(stopped: &[StoppedProcess]) -> Option<String> {
    if stopped.is_empty() {
        return None;
    }
    let sw = crate::program::program();
    let how = match first_server(stopped) {
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
        stopped_processes(stopped)
    ))
}

/// Appends the end's notice lines to a preview: what was stopped (and where that line
/// stands, in `stopped_at`), the limits reached (where, in `limits_at`), and a `note` on
/// limits that did not hold.
pub fn annotate(
    preview: &mut Preview,
    stopped: &[StoppedProcess],
    limits_hit: &[LimitHit],
    note: Option<&str>,
) {
    if let Some(line) = cli_notice(stopped) {
        let start = append(preview, &line);
        preview.stopped_at = Some([start, start + line.len()]);
    }
    if let Some(lines) = hit_lines(limits_hit) {
        let start = append(preview, &lines);
        preview.limits_at = Some([start, start + lines.len()]);
    }
    if let Some(note) = note {
        append(preview, note);
    }
}

/// Appends `line` on a line of its own; returns where it starts.
fn append(preview: &mut Preview, line: &str) -> usize {
    let content = &mut preview.content;
    if !content.is_empty() && !content.ends_with('\n') {
        content.push('\n');
    }
    let start = content.len();
    content.push_str(line);
    content.push('\n');
    start
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
    fn the_stopped_line_is_placed_by_its_facts() {
        let stopped = [server_at(8000)];
        let mut preview = Preview {
            shown: Vec::new(),
            ..Preview::whole("served".into(), 1)
        };
        let pids = LimitHit {
            resource: crate::protocol::Resource::Pids,
            limit: 4,
            events: 2,
        };
        annotate(
            &mut preview,
            &stopped,
            std::slice::from_ref(&pids),
            Some("[spillway: a note]"),
        );
        let [start, end] = preview.stopped_at.unwrap();
        assert_eq!(&preview.content[..start], "served\n");
        assert_eq!(preview.content[start..end], cli_notice(&stopped).unwrap());
        let [from, to] = preview.limits_at.unwrap();
        assert_eq!(from, end + 1, "the limits' lines follow the stopped line");
        assert_eq!(
            preview.content[from..to],
            crate::supervisor::limits::hit_lines(&[pids]).unwrap()
        );
        assert!(preview.content.ends_with("[spillway: a note]\n"));
        annotate(&mut preview, &[], &[], Some("[spillway: recorded late]"));
        assert_eq!(
            preview.stopped_at,
            Some([start, end]),
            "a later line moves nothing"
        );
    }
}
