//! `run --follow` and `follow` at the terminal: the output as it comes (text or the raw
//! terminal bytes), a status line on a terminal's stderr, then the run's summary.

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, bail};
use bytesize::ByteSize;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::client::exit::exit_code;
use crate::client::interrupt::RunEvents;
use crate::client::words::cli::{fell_behind, summary};
use crate::protocol::{Event, RunId};

/// `run --follow`: prints the output as it comes (raw or text), with a status line on a
/// terminal's stderr, then a summary.
pub(crate) fn stream(connection: &mut RunEvents, raw: bool, json: bool) -> Result<ExitCode> {
    let mut out = io::stdout().lock();
    let mut status = Status::new(!json && io::stderr().is_terminal());
    let (mut lines, mut bytes) = (0u64, 0u64);
    let mut at_line_start = true;
    let mut id = None;
    let mut lagged = false;
    loop {
        let event = connection.next_event()?;
        if json {
            echo_json(&mut out, &event)?;
        }
        let text = match &event {
            Event::Started(started) => {
                id = Some(started.id.clone());
                None
            }
            Event::Output(output) => Some(output.text.as_str()),
            Event::Raw(chunk) if raw => Some(chunk.data.as_str()),
            Event::Lagged(lagged_at) => {
                // From here on the text is the spill's: counted afresh, as the summary does.
                (lagged, lines, bytes) = (true, lagged_at.line.saturating_sub(1), 0);
                let note = format!("{}\n", fell_behind(lagged_at.line));
                let note = if at_line_start {
                    note
                } else {
                    format!("\n{note}")
                };
                status.print(&mut io::stderr(), &note)?;
                at_line_start = true;
                None
            }
            Event::Exit(exit) => {
                status.hide();
                if !json {
                    if !at_line_start {
                        out.write_all(b"\n")?;
                    }
                    out.flush()?;
                    eprintln!("{}", summary(exit));
                }
                return Ok(ExitCode::from(exit_code(exit)));
            }
            Event::Error(error) => {
                status.hide();
                bail!("{}", error.message);
            }
            _ => None,
        };
        let Some(text) = text.filter(|t| !t.is_empty() && !json) else {
            continue;
        };
        status.print(&mut out, text)?;
        lines += memchr::memchr_iter(b'\n', text.as_bytes()).count() as u64;
        bytes += text.len() as u64;
        at_line_start = text.ends_with('\n');
        if let Some(id) = &id {
            status.set_message(progress_message(id, raw && !lagged, lines, bytes));
        }
    }
}

/// What the status line says of the output so far. Raw bytes are the terminal's (escapes and
/// redrawn progress bars included), which the summary's normalised lines and bytes are not:
/// only the amount received is claimed for them.
fn progress_message(id: &RunId, raw: bool, lines: u64, bytes: u64) -> String {
    let size = ByteSize::b(bytes).display().si();
    if raw {
        format!("run {id} · {size} of terminal output")
    } else {
        format!("run {id} · {lines} lines · {size}")
    }
}
/// The status line on a terminal's stderr (elapsed time, lines and bytes so far), shown only
/// while the output is at the start of a line: a line still being written (a prompt, a
/// progress bar of the command's own) is never drawn over.
struct Status {
    enabled: bool,
    started: std::time::Instant,
    bar: Option<ProgressBar>,
    message: String,
}

impl Status {
    fn new(enabled: bool) -> Status {
        let mut status = Status {
            enabled,
            started: std::time::Instant::now(),
            bar: None,
            message: "starting".into(),
        };
        status.show();
        status
    }

    fn show(&mut self) {
        if !self.enabled || self.bar.is_some() {
            return;
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
            .with_elapsed(self.started.elapsed());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_message(self.message.clone());
        bar.enable_steady_tick(Duration::from_millis(250));
        self.bar = Some(bar);
    }

    /// Clears the status line, leaving the cursor where it was drawn.
    fn hide(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }

    fn set_message(&mut self, message: String) {
        if let Some(bar) = &self.bar {
            bar.set_message(message.clone());
        }
        self.message = message;
    }

    /// Writes `text` to `to` around the status line.
    fn print(&mut self, to: &mut impl Write, text: &str) -> io::Result<()> {
        let ends_line = text.ends_with('\n');
        if !ends_line {
            self.hide();
        }
        let mut write = || -> io::Result<()> {
            to.write_all(text.as_bytes())?;
            to.flush()
        };
        match &self.bar {
            Some(bar) => bar.suspend(write)?,
            None => write()?,
        }
        if ends_line {
            self.show();
        }
        Ok(())
    }
}

/// Prints `event` as its JSON line, at once: `--json` streams events as they come.
pub(crate) fn echo_json(out: &mut impl Write, event: &Event) -> io::Result<()> {
    out.write_all(event.to_line().as_bytes())?;
    out.flush()
}
