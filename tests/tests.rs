//! Integration tests, compiled as one binary.

mod engine;
mod helper;
mod read_cli;
mod truncate_cli;
