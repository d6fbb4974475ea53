//! Integration tests, compiled as one binary.

mod daemon;
mod engine;
mod escapes;
mod examples;
mod faults;
mod fuzz_corpus;
mod helper;
mod hostile;
mod invariants;
mod live;
mod mcp;
mod ops;
mod read_cli;
mod runaway;
mod servers;
mod supervisor;
mod truncate_cli;
