//! The caller's umask and resource limits (`crate::protocol::CallerContext`), applied to a
//! command between fork and exec, so it runs as if the caller's shell had started it.

use std::io;

use nix::sys::resource::{Resource, getrlimit, setrlimit};
use nix::sys::stat::{Mode, umask};

use crate::protocol::{CallerContext, RLIMIT_NAMES};

/// The resources of [`RLIMIT_NAMES`], in the same order.
pub const RESOURCES: [Resource; 16] = [
    Resource::RLIMIT_AS,
    Resource::RLIMIT_CORE,
    Resource::RLIMIT_CPU,
    Resource::RLIMIT_DATA,
    Resource::RLIMIT_FSIZE,
    Resource::RLIMIT_LOCKS,
    Resource::RLIMIT_MEMLOCK,
    Resource::RLIMIT_MSGQUEUE,
    Resource::RLIMIT_NICE,
    Resource::RLIMIT_NOFILE,
    Resource::RLIMIT_NPROC,
    Resource::RLIMIT_RSS,
    Resource::RLIMIT_RTPRIO,
    Resource::RLIMIT_RTTIME,
    Resource::RLIMIT_SIGPENDING,
    Resource::RLIMIT_STACK,
];

/// The caller's context made ready before the fork (the child may not allocate): each limit
/// with the daemon's own hard limit as a ceiling, unless the daemon may raise it (root).
#[derive(Debug, Clone, Default)]
pub struct Prepared {
    umask: Option<Mode>,
    limits: Vec<(Resource, u64, u64)>,
}

impl Prepared {
    /// Prepares `caller`; `keep_as` leaves the address space to the run's own memory limit
    /// (set where no memory cgroup holds it), which the caller's must not lift.
    pub fn new(caller: Option<&CallerContext>, keep_as: bool) -> Prepared {
        let Some(caller) = caller else {
            return Prepared::default();
        };
        let root = nix::unistd::geteuid().is_root();
        let limits = RLIMIT_NAMES
            .iter()
            .zip(RESOURCES)
            .filter(|(name, _)| !(keep_as && **name == "as"))
            .filter_map(|(name, resource)| {
                let limit = caller.rlimits.get(*name)?;
                let infinite = nix::sys::resource::RLIM_INFINITY;
                let (_, ceiling) = getrlimit(resource).ok()?;
                let ceiling = if root { infinite } else { ceiling };
                let hard = limit.hard.unwrap_or(infinite).min(ceiling);
                let soft = limit.soft.unwrap_or(infinite).min(hard);
                Some((resource, soft, hard))
            })
            .collect();
        Prepared {
            umask: caller
                .umask
                .map(|m| Mode::from_bits_truncate(m as nix::libc::mode_t)),
            limits,
        }
    }

    /// Applies the context in the child, before exec: only system calls (async-signal-safe),
    /// and no memory written but the stack's (a child that shares the daemon's memory runs
    /// it). A limit the kernel refuses is left as the daemon's. `true` when the caller's
    /// open-file limit was set: the terminal's set-up must then keep it, not give the daemon's.
    pub fn apply(&self) -> io::Result<bool> {
        if let Some(mask) = self.umask {
            umask(mask);
        }
        let mut file_limit_set = false;
        for &(resource, soft, hard) in &self.limits {
            if setrlimit(resource, soft, hard).is_ok() && resource == Resource::RLIMIT_NOFILE {
                file_limit_set = true;
            }
        }
        Ok(file_limit_set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Rlimit;

    #[test]
    fn limits_are_capped_by_what_the_daemon_may_grant() {
        let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        let caller = CallerContext {
            umask: Some(0o027),
            rlimits: [
                (
                    "nofile".to_string(),
                    Rlimit {
                        soft: Some(64),
                        hard: None,
                    },
                ),
                (
                    "as".to_string(),
                    Rlimit {
                        soft: None,
                        hard: None,
                    },
                ),
            ]
            .into(),
        };
        let prepared = Prepared::new(Some(&caller), true);
        assert_eq!(prepared.umask, Some(Mode::from_bits_truncate(0o027)));
        let ceiling = if nix::unistd::geteuid().is_root() {
            nix::sys::resource::RLIM_INFINITY
        } else {
            hard
        };
        assert_eq!(
            prepared.limits,
            vec![(Resource::RLIMIT_NOFILE, 64, ceiling)],
            "the address space is the run's own"
        );
        assert!(Prepared::new(None, false).limits.is_empty());
    }
}
