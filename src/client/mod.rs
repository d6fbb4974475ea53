//! The client layer: the front ends a person or an agent uses. Most talk to the daemon over its
//! socket: `connection` finds (or starts) the daemon and checks it is our own user's; `cli` is the
//! command line (`live_cli` its live-run commands, `live_stream` the output of a followed run,
//! `ops` the operator's, `daemon_cli` the daemon's own); `mcp` serves the same as MCP tools; `hook`
//! is the program an agent host's pre-tool hook runs, and `init` installs it. Some work without a
//! daemon, in this process: `local` (`truncate`, `read`) runs the engine on its own input or files,
//! and `local_run` runs a host's command here when the daemon cannot. `words` words what the reader
//! is told, per audience.

mod args;
pub(crate) mod calls;
pub mod cli;
mod connection;
mod daemon_cli;
mod detached;
mod docs_cli;
mod doctor;
mod exit;
pub(crate) mod hook;
mod host_run;
pub(crate) mod init;
mod interrupt;
pub(crate) mod live_cli;
mod live_head;
mod live_stream;
mod local;
mod local_run;
pub(crate) mod mcp;
pub(crate) mod ops;
mod run_cli;
pub(crate) mod run_request;
mod stdin;
mod words;

pub use connection::{Connection, Endpoint};
