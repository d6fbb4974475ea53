//! Fuzz target: terminal bytes through the normaliser, whole and in chunks the input picks.
//! The checks are in `tests/invariants.rs`, shared with `cargo test`'s corpus replay.
#![no_main]

#[allow(dead_code)] // each target uses one of the checks
#[path = "../../tests/invariants.rs"]
mod invariants;

libfuzzer_sys::fuzz_target!(|data: &[u8]| invariants::normalise_bytes(data));
