//! The engine: what becomes of a command's output on its way to the model, in bounded memory
//! and one pass: `normalise` (terminal bytes -> clean text) -> `capture` (every byte to the
//! spill, a bounded head and tail kept) -> `scanner` (beside the spill writer: `highlight`
//! finds lines like errors, `outline` folds repeats) -> `preview` (what the model sees, within
//! its limits, and the notice) with `redact` (credentials out of text bound for a model) and
//! `tokens` (the model's own count, and `savings`: what a preview saved by folding and by
//! cutting). `driver` runs normalise and capture as one for every
//! way output comes in, and `snapshot` previews a run that is still going with the same
//! rules. `template` learns which lines share a template, which the preview folds
//! (`--compact`). The preview's notice is worded here, but the commands it names come from the
//! caller. The engine writes through `crate::storage` and knows nothing of processes or
//! sockets.

pub mod capture;
pub mod driver;
pub mod highlight;
pub mod normalise;
mod o200k;
pub(crate) mod outline;
pub mod preview;
pub mod redact;
pub mod savings;
pub(crate) mod scanner;
pub(crate) mod snapshot;
pub mod template;
#[cfg(test)]
pub(crate) mod test_text;
pub mod tokens;
