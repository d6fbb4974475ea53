//! spillway: run commands for AI agents and hand back a bounded preview of their output,
//! keeping every byte on disk ("lossy for the model, lossless on disk").
//!
//! The data flows through one module per stage:
//!
//! `client` (the CLI's side of the socket) -> `server` (socket, JSON Lines; `protocol` holds
//! the message types both sides share) -> `supervisor` (PTY or pipe via `pty`, timeouts,
//! process-group kills) -> `normalise` (terminal bytes -> clean text) -> `capture` (spill file
//! + bounded head/tail + counters) -> `preview` (limits, notice) -> the `exit` event.
//!
//! `daemon` owns the daemon's lifecycle (the data directory's lock, socket claim, signals, idle
//! exit), `recover` what it puts right after a daemon died, `space` the disk under the data
//! directory (the floor and the reserve that keep the index writable), `config` where the
//! socket is, `spill` the data directory and spill files, `read` paging through a spill, and
//! `cli` the command-line edge. `tokens` counts model tokens: previews' token budgets, and the
//! accounting `stats` reports of what each run's output and preview cost, grouped by
//! `command_key`.
//!
//! Runs in flight: `live` holds what a run's reader has made of its output so far (shared with
//! the daemon), `snapshot` previews it while it goes on, `follow` tails its spill file, `input`
//! types into its terminal, and `live_cli` is the command line for all of it.
//!
//! Containment: the `supervisor` tracks every process a run starts (a cgroup, else `/proc`),
//! stops what it leaves running and holds it to resource limits; `leftovers` words what was
//! stopped for the model; `readiness` returns a yielding run early once its server is ready.
//!
//! `mcp` serves the same as tools over the Model Context Protocol, as a client of the daemon.
//! `init` wires spillway into an agent host (its pre-tool hook and its MCP servers), and `hook`
//! is the program that hook runs.

pub mod allocator;
pub mod capture;
pub mod cli;
pub mod client;
pub mod command_key;
pub mod config;
pub mod daemon;
pub mod follow;
pub mod grep;
pub mod highlight;
pub mod hook;
pub mod index;
pub mod init;
pub mod input;
pub mod leftovers;
pub mod live;
pub mod live_cli;
pub mod mcp;
pub mod normalise;
pub mod ops;
pub mod outline;
pub mod preview;
pub mod protocol;
pub mod pty;
pub mod purge;
pub mod read;
pub mod readiness;
pub mod reaper;
pub mod recover;
pub mod redact;
pub mod scanner;
pub mod server;
pub mod snapshot;
pub mod space;
pub mod spill;
pub mod supervisor;
pub mod tokens;
