//! spillway: run commands for AI agents and hand back a bounded preview of their output,
//! keeping every byte on disk ("lossy for the model, lossless on disk").
//!
//! The folders follow the data's way, each layer knowing only those below it:
//!
//! - `client`: the command line, the MCP server and the agent hooks; each request goes over
//!   the socket as one typed call per verb (`client::calls`).
//! - `daemon`: the per-user daemon's lifecycle (lock, socket, signals, idle exit, recovery
//!   after a crash), its shared state, and the connection loop that reads requests and
//!   dispatches each to the handler of its verb (`daemon::verbs`).
//! - `supervisor`: one run's processes: the PTY or pipe, timeouts, limits, containment
//!   (cgroup or `/proc`), kills, the reaper, and the reader that feeds the engine.
//! - `engine`: one driver (`engine::driver`) through normalise -> capture -> highlight and
//!   outline -> preview, with redaction and token counts.
//! - `storage`: spill files, the SQLite run index, the purge, and reading spills back.
//! - `protocol`: the base layer: the messages client and daemon exchange, and the records
//!   they carry; it imports nothing of the crate.
//!
//! `config` says where the daemon listens, for client and daemon alike; `sync` holds the one
//! lock helper every layer uses, `read_buffer` the aligned buffer every large read goes into,
//! and `allocator` the C allocator's settings for this process.

pub(crate) mod allocator;
pub mod blocking;
pub mod client;
pub mod config;
pub mod daemon;
pub mod engine;
pub mod program;
pub mod protocol;
pub mod read_buffer;
pub mod storage;
pub mod supervisor;
pub mod sync;
pub mod words;
