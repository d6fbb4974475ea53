//! Integration tests, compiled as one binary.

mod daemon;
mod engine;
mod examples;
mod fuzz_corpus;
mod helper;
mod invariants;
mod live;
mod mcp;
mod ops;
mod read_cli;
mod supervisor;
mod truncate_cli;
