//! spillway's own preview of an output, as a daemon run makes it: the engine with a spill file
//! from the first byte, the default limits, both ends, credentials redacted; with template
//! folds (`--compact on`, the default) or without (`--compact off`). No PTY: the workload's
//! output is fed as the reader thread would feed it.

use std::path::Path;

use spillway::engine::capture::{Capture, Limits, Outcome, SpillPolicy};
use spillway::engine::driver::Engine;
use spillway::engine::normalise::{NormaliseOptions, Normaliser};
use spillway::engine::redact::Redactor;
use spillway::program::CliSteps;
use spillway::protocol::Direction;
use spillway::storage::spill::DataDir;

use crate::BenchResult;

/// The preview text of `plain` as a daemon run shows it, its spill under `data_dir`.
pub fn run_preview(plain: &str, data_dir: &Path, compact: bool) -> BenchResult<String> {
    let dir = DataDir::open(data_dir)?;
    let capture = Capture::new(Limits::default(), SpillPolicy::Always(dir));
    let mut engine =
        Engine::new(Normaliser::new(NormaliseOptions::default()), capture).with_compact(compact);
    engine.feed(plain.as_bytes());
    engine.finish();
    let mut preview = engine.preview(Direction::Both, &CliSteps, None, Outcome::Unknown);
    preview.redact(Redactor::builtin());
    Ok(preview.content)
}
