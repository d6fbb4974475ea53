//! spillway: run commands for AI agents and hand back a bounded preview of their output,
//! keeping every byte on disk ("lossy for the model, lossless on disk").
//!
//! The data flows through one module per stage:
//! `normalise` (terminal bytes -> clean text) -> `capture` (spill file + bounded head/tail +
//! counters) -> `preview` (limits, notice). `spill` owns the data directory and spill files;
//! `read` pages through a spill file; `cli` is the command-line edge.

pub mod capture;
pub mod cli;
pub mod normalise;
pub mod preview;
pub mod read;
pub mod spill;
