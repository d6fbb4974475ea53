//! Storage: the data directory and what is kept in it. `spill` owns the spill files (every
//! byte of every output), `index` the SQLite run index, `purge` their retention and quota,
//! `space` the disk under them; `read`, `grep` and `follow` read a spill back a page, a match
//! or a new line at a time. Storage is the lowest layer but the protocol: it imports neither
//! the engine nor anything above it.

pub mod command_key;
pub(crate) mod follow;
pub(crate) mod grep;
pub mod index;
pub mod purge;
pub(crate) mod read;
pub(crate) mod space;
pub mod spill;
