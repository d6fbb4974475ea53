//! Integration tests, compiled as one binary.

mod daemon;
mod engine;
mod escapes;
mod examples;
mod faults;
mod full_disk;
mod fuzz_corpus;
mod hardening;
mod helper;
mod hostile;
mod hosts;
mod index_versions;
mod invariants;
mod live;
mod mcp;
mod ops;
mod protocol_v1;
mod read_cli;
mod redaction;
mod redaction_fields;
mod runaway;
mod screen;
mod servers;
mod supervisor;
mod tokens;
mod truncate_cli;
