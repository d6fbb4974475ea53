//! The engine driven as one: terminal bytes in, a capture and its preview out. Every way
//! output enters spillway goes through this (`spillway truncate`'s standard input, a run's
//! reader thread, the benches and the fuzz targets), so they cannot drift apart in how the
//! normaliser hands text to the capture or how the end of the output is taken.

use crate::engine::capture::{Capture, CaptureView, Outcome};
use crate::engine::normalise::Normaliser;
use crate::protocol::{Direction, NextStep, Preview};

/// A normaliser feeding a capture, with the buffer between them reused.
pub struct Engine {
    normaliser: Normaliser,
    capture: Capture,
    /// The normaliser's output, handed to the capture and cleared after each chunk.
    text: String,
    /// Whether previews fold lines alike (`--compact`, on by default).
    compact: bool,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("capture", &self.capture)
            .finish_non_exhaustive()
    }
}

impl Engine {
    pub fn new(normaliser: Normaliser, capture: Capture) -> Engine {
        Engine {
            normaliser,
            capture,
            text: String::new(),
            compact: true,
        }
    }

    /// Previews that fold lines alike into template markers (the default), or not.
    pub fn with_compact(mut self, compact: bool) -> Engine {
        self.compact = compact;
        self
    }

    /// One chunk of output as the program wrote it.
    pub fn feed(&mut self, chunk: &[u8]) {
        let newlines = self.normaliser.feed(chunk, &mut self.text);
        self.capture.write_owned(&mut self.text, newlines);
    }

    /// The end of the output: the line still pending, what a screen-drawing program left on
    /// the screen, and the spill flushed and closed.
    pub fn finish(&mut self) {
        let newlines = self.normaliser.finish(&mut self.text);
        self.capture.write_owned(&mut self.text, newlines);
        self.capture.finish();
    }

    /// The preview of the output so far (of all of it after [`Engine::finish`]), its notice's
    /// next steps named by `steps`, within `max_tokens` when given, its needles ranked knowing
    /// how the command ended (`outcome`).
    pub fn preview(
        &self,
        direction: Direction,
        steps: &dyn NextStep,
        max_tokens: Option<usize>,
        outcome: Outcome,
    ) -> Preview {
        let view = CaptureView {
            outcome,
            ..self.capture.view()
        };
        let offset = crate::engine::preview::Offset::default();
        Preview::build_compacting(&view, direction, steps, max_tokens, offset, self.compact)
    }

    pub fn capture(&self) -> &Capture {
        &self.capture
    }

    pub fn capture_mut(&mut self) -> &mut Capture {
        &mut self.capture
    }

    pub fn normaliser(&self) -> &Normaliser {
        &self.normaliser
    }
}
