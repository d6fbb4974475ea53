//! The caller's process context a `run` carries: what a command started by the caller itself
//! would inherit besides its environment and directory, its file mode creation mask and its
//! resource limits. Without it a command gets the daemon's: with `umask 027` a file made
//! through spillway would be 0644, and `ulimit -n`, `-c` or `-s` would be ignored.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The resource limits a caller may send, by the names `ulimit` and `prlimit` use.
pub const RLIMIT_NAMES: [&str; 16] = [
    "as",
    "core",
    "cpu",
    "data",
    "fsize",
    "locks",
    "memlock",
    "msgqueue",
    "nice",
    "nofile",
    "nproc",
    "rss",
    "rtprio",
    "rttime",
    "sigpending",
    "stack",
];

/// `{"umask": 23, "rlimits": {"nofile": {"soft": 1024, "hard": 4096}, "core": {"soft": 0,
/// "hard": null}}}`: applied to the command before `exec`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallerContext {
    /// The caller's umask (0 to 0o777; `027` is 23).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub umask: Option<u32>,
    /// The caller's resource limits, by name ([`RLIMIT_NAMES`]). A limit above what the daemon
    /// may grant (a hard limit over its own, unprivileged) is lowered to that.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rlimits: BTreeMap<String, Rlimit>,
}

/// One resource limit: `null` is unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rlimit {
    pub soft: Option<u64>,
    pub hard: Option<u64>,
}

impl CallerContext {
    /// Checks what serde cannot: the umask's range, known limit names, soft within hard.
    pub(super) fn check(&self) -> Result<(), String> {
        if self.umask.is_some_and(|m| m > 0o777) {
            return Err("caller.umask must be from 0 to 511 (0o777)".into());
        }
        for (name, limit) in &self.rlimits {
            if !RLIMIT_NAMES.contains(&name.as_str()) {
                return Err(format!(
                    "caller.rlimits: unknown limit {name:?} (known: {})",
                    RLIMIT_NAMES.join(", ")
                ));
            }
            let over = match (limit.soft, limit.hard) {
                (Some(soft), Some(hard)) => soft > hard,
                (None, Some(_)) => true,
                _ => false,
            };
            if over {
                return Err(format!("caller.rlimits.{name}: soft is over hard"));
            }
        }
        Ok(())
    }
}
