//! The first lines of a host run, printed as they come: Claude Code moves a call that outlives
//! its timeout to the background and shows the model what the command has printed so far, and
//! a preview printed only at the end would leave that empty.
//!
//! A share of the budget ([`HEAD_SHARE`]) goes to the live head: whole lines are printed as
//! they arrive until the next one would not fit, and nothing after that. The run's own preview
//! is asked for with the rest of the budget, so the two together stay under the host's cap. At
//! the end, the preview's first lines are the ones already printed (its head is at least as
//! long whenever the output went past the live head), and only the rest of it is printed; if
//! they differ (a preview whose head was crowded out by highlights), the whole preview follows
//! after a line that says so.

use std::io::{self, Write};

/// The part of the byte and line budgets the live head may use, in tenths.
const HEAD_SHARE: u64 = 3;

/// Splits a budget into the live head's part and the preview's.
pub(crate) fn split(max_lines: u64, max_bytes: u64) -> (LiveHead, u64, u64) {
    let head_lines = max_lines * HEAD_SHARE / 10;
    let head_bytes = max_bytes * HEAD_SHARE / 10;
    (
        LiveHead {
            max_lines: head_lines,
            max_bytes: head_bytes,
            printed: String::new(),
            lines: 0,
            pending: String::new(),
            closed: false,
        },
        max_lines - head_lines,
        max_bytes - head_bytes,
    )
}

/// What has been printed live, and whether more may be.
pub(crate) struct LiveHead {
    max_lines: u64,
    max_bytes: u64,
    printed: String,
    lines: u64,
    /// A line not yet ended.
    pending: String,
    /// A line did not fit: nothing more is printed live, so the head stays the output's start.
    closed: bool,
}

impl LiveHead {
    /// The most bytes it prints.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Takes output text (whole lines, or a piece of one), printing the lines that fit.
    pub fn take(&mut self, text: &str, out: &mut impl Write) -> io::Result<()> {
        if self.closed {
            return Ok(());
        }
        self.pending.push_str(text);
        while let Some(end) = self.pending.find('\n') {
            let line: String = self.pending.drain(..=end).collect();
            let fits = self.lines < self.max_lines
                && (self.printed.len() + line.len()) as u64 <= self.max_bytes;
            if !fits {
                self.closed = true;
                self.pending.clear();
                return Ok(());
            }
            out.write_all(line.as_bytes())?;
            out.flush()?;
            self.printed.push_str(&line);
            self.lines += 1;
        }
        if self.pending.len() as u64 > self.max_bytes {
            self.closed = true;
            self.pending.clear();
        }
        Ok(())
    }

    /// What is left to print of `preview` once the live head has been printed.
    pub fn rest_of<'a>(&self, preview: &'a str) -> std::borrow::Cow<'a, str> {
        match preview.strip_prefix(self.printed.as_str()) {
            Some(rest) => rest.into(),
            None => format!(
                "[spillway: the lines above were printed as they came; the preview of the whole output follows]\n{preview}"
            )
            .into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fed(head: &mut LiveHead, pieces: &[&str]) -> String {
        let mut out = Vec::new();
        for piece in pieces {
            head.take(piece, &mut out).unwrap();
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn whole_lines_are_printed_until_one_does_not_fit() {
        let (mut head, lines, bytes) = split(10, 100);
        assert_eq!((lines, bytes), (7, 70));
        let printed = fed(
            &mut head,
            &[
                "one\ntw",
                "o\n",
                "three is long enough to overflow\n",
                "4\n",
            ],
        );
        assert_eq!(printed, "one\ntwo\n");
        assert_eq!(head.rest_of("one\ntwo\n[...]\n"), "[...]\n");
    }

    #[test]
    fn a_preview_that_starts_elsewhere_follows_whole() {
        let (mut head, _, _) = split(10, 100);
        fed(&mut head, &["a\n"]);
        let rest = head.rest_of("b\n");
        assert!(
            rest.ends_with("\nb\n") && rest.starts_with("[spillway: "),
            "{rest}"
        );
        let (empty, _, _) = split(10, 100);
        assert_eq!(empty.rest_of("all\n"), "all\n");
    }

    #[test]
    fn the_line_budget_holds_too() {
        let (mut head, _, _) = split(10, 10_000);
        let printed = fed(&mut head, &["1\n2\n3\n4\n5\n"]);
        assert_eq!(printed, "1\n2\n3\n");
    }
}
