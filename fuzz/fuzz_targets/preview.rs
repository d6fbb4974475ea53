//! Fuzz target: terminal bytes through the whole engine (normalise, capture, preview) with the limits,
//! direction, token budget and chunking the input picks.
//! The checks are in `tests/invariants.rs`, shared with `cargo test`'s corpus replay.
#![no_main]

#[allow(dead_code)] // each target uses one of the checks
#[path = "../../tests/invariants.rs"]
mod invariants;

libfuzzer_sys::fuzz_target!(|data: &[u8]| invariants::preview_bytes(data));
