//! Credentials out of every text the daemon sends a client: previews (final, yielded, `wait`),
//! pages (`show`), matches (`grep`), followed text and the commands `history` lists. The one
//! place every event passes (`send`) calls [`redacted`], so no answer can forget it; the spill
//! files keep every byte. A request's `no_redact` or the daemon's `--no-redact` turns it off.

use crate::engine::redact::Redactor;
use crate::protocol::{Counts, Event, GrepLine};

/// `event` with the credentials in its text replaced, when it carries any text.
pub(super) fn redacted(event: &Event, redactor: &Redactor) -> Option<Event> {
    // Only events that carry text are copied.
    if !matches!(
        event,
        Event::Exit(_)
            | Event::Running(_)
            | Event::Show(_)
            | Event::Grep(_)
            | Event::Output(_)
            | Event::History(_)
    ) {
        return None;
    }
    let mut event = event.clone();
    match &mut event {
        Event::Exit(exit) => exit.preview.redact(redactor),
        Event::Running(running) => running.preview.redact(redactor),
        Event::Show(page) => redactor.redact_into(&mut page.text, &mut page.redactions),
        Event::Grep(found) => {
            redact_lines(&mut found.result.lines, redactor, &mut found.redactions)
        }
        Event::Output(output) => {
            let mut counts = Counts::new();
            redactor.redact_into(&mut output.text, &mut counts);
        }
        Event::History(history) => {
            let mut counts = Counts::new();
            for run in &mut history.runs {
                redactor.redact_into(&mut run.command, &mut counts);
            }
        }
        _ => {}
    }
    Some(event)
}

/// Redacts grep's lines a block of consecutive lines at a time (a key's body lines around a
/// match are seen together), keeping each line's number.
fn redact_lines(lines: &mut [GrepLine], redactor: &Redactor, counts: &mut Counts) {
    let mut start = 0;
    while start < lines.len() {
        let mut end = start + 1;
        while end < lines.len() && lines[end].line == lines[end - 1].line + 1 {
            end += 1;
        }
        let mut block: String = lines[start..end]
            .iter()
            .map(|l| format!("{}\n", l.text))
            .collect();
        redactor.redact_into(&mut block, counts);
        for (line, text) in lines[start..end].iter_mut().zip(block.split('\n')) {
            if line.text != text {
                line.text = text.to_string();
            }
        }
        start = end;
    }
}
