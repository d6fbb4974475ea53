//! Fuzz target: one request line (or several), as the daemon decodes them from its socket.
//! The checks are in `tests/invariants.rs`, shared with `cargo test`'s corpus replay.
#![no_main]

#[allow(dead_code)] // each target uses one of the checks
#[path = "../../tests/invariants.rs"]
mod invariants;

libfuzzer_sys::fuzz_target!(|data: &[u8]| invariants::request_bytes(data));
