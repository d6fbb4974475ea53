//! Run ids: short enough for a person or a model to type, and validated before use (an id
//! names a spill file, so an id from a request must never be a path).

use std::fmt;

use serde::{Deserialize, Serialize};

/// A run's identifier: `YYYYMMDD-HHMMSS-xxxx` (UTC start time and four random base-32
/// characters), short enough for a person or a model to type, and validated before use.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RunId(String);

/// An id that is not of the `YYYYMMDD-HHMMSS-xxxx` form.
#[derive(Debug, thiserror::Error)]
#[error("invalid run id {0:?}: expected the form YYYYMMDD-HHMMSS-xxxx, e.g. 20261121-101502-k3f7")]
pub struct BadRunId(String);

const ID_ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

impl RunId {
    /// A fresh id for a run starting now.
    pub fn generate() -> RunId {
        RunId::starting_at(chrono::Utc::now())
    }

    /// A fresh id for a run that started at `time` (a run recovered after a crash).
    pub fn starting_at(time: chrono::DateTime<chrono::Utc>) -> RunId {
        let mut random = [0u8; 4];
        // Without the OS's randomness, the clock's nanoseconds still make a collision unlikely,
        // and the daemon checks ids for uniqueness anyway.
        if getrandom::fill(&mut random).is_err() {
            let nanos = chrono::Utc::now().timestamp_subsec_nanos();
            random = nanos.to_le_bytes();
        }
        let suffix: String = random
            .iter()
            .map(|b| char::from(ID_ALPHABET[usize::from(b % 32)]))
            .collect();
        let start = time.format("%Y%m%d-%H%M%S");
        RunId(format!("{start}-{suffix}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for RunId {
    type Error = BadRunId;

    fn try_from(s: String) -> Result<RunId, BadRunId> {
        let b = s.as_bytes();
        let ok = b.len() == 20
            && b[..8].iter().all(u8::is_ascii_digit)
            && b[8] == b'-'
            && b[9..15].iter().all(u8::is_ascii_digit)
            && b[15] == b'-'
            && b[16..].iter().all(|c| ID_ALPHABET.contains(c));
        if ok { Ok(RunId(s)) } else { Err(BadRunId(s)) }
    }
}

impl std::str::FromStr for RunId {
    type Err = BadRunId;

    fn from_str(s: &str) -> Result<RunId, BadRunId> {
        RunId::try_from(s.to_string())
    }
}

impl From<RunId> for String {
    fn from(id: RunId) -> String {
        id.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
