//! Resource ceilings for a run: memory, processes and CPU, so one runaway command cannot take
//! the host's memory or fork without bound.
//!
//! Each is enforced by a cgroup controller when the daemon has one ([`super::cgroup`]): the
//! whole run together is held to it, whatever its processes do. Without one, only memory has
//! a per-process stand-in, `RLIMIT_AS` (each process's address space, which is not the same
//! thing: a program that reserves much more than it uses fails early); `RLIMIT_NPROC` counts
//! every process of the user, not of the run, and there is nothing like a CPU quota, so those
//! limits are then not enforced, and the run's notice says so rather than pretend.

use crate::protocol::{LimitHit, Resource};
use crate::words::{human_bytes, limit_reached};

/// A run's ceilings; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Resources {
    /// Bytes of memory for the whole run.
    pub memory: Option<u64>,
    /// Processes (and threads) at once in the whole run.
    pub pids: Option<u64>,
    /// CPU time as a number of cores (0.5: half of one).
    pub cpu: Option<f64>,
}

impl Resources {
    /// The resources with a limit.
    pub fn asked(&self) -> Vec<Resource> {
        let mut asked = Vec::new();
        if self.memory.is_some() {
            asked.push(Resource::Memory);
        }
        if self.pids.is_some() {
            asked.push(Resource::Pids);
        }
        if self.cpu.is_some() {
            asked.push(Resource::Cpu);
        }
        asked
    }

    /// These limits, each replaced by `over`'s where it has one.
    pub fn or(self, defaults: Resources) -> Resources {
        Resources {
            memory: self.memory.or(defaults.memory),
            pids: self.pids.or(defaults.pids),
            cpu: self.cpu.or(defaults.cpu),
        }
    }

    /// Takes `from`'s limit of `resource`.
    pub fn copy(&mut self, resource: Resource, from: &Resources) {
        match resource {
            Resource::Memory => self.memory = from.memory,
            Resource::Pids => self.pids = from.pids,
            Resource::Cpu => self.cpu = from.cpu,
        }
    }

    /// A report of `events` of `resource` against its limit, if there were any.
    pub fn hit(&self, resource: Resource, events: u64) -> Option<LimitHit> {
        let limit = match resource {
            Resource::Memory => self.memory?,
            Resource::Pids => self.pids?,
            Resource::Cpu => return None,
        };
        (events > 0).then_some(LimitHit {
            resource,
            limit,
            events,
        })
    }

    /// Checks the values a request gave.
    pub fn check(&self) -> Result<(), String> {
        if self.memory == Some(0) {
            return Err("memory must be at least 1 byte".into());
        }
        if self.pids == Some(0) {
            return Err("pids must be at least 1".into());
        }
        if self.cpu.is_some_and(|c| !c.is_finite() || c <= 0.0) {
            return Err("cpu must be a positive number of cores".into());
        }
        Ok(())
    }
}

/// What a run's limits are enforced by.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Enforcement {
    /// Held by cgroups, for the whole run.
    pub cgroup: Resources,
    /// Memory held per process by `RLIMIT_AS` instead.
    pub address_space: Option<u64>,
    /// Asked for but not enforced anywhere here.
    pub missing: Vec<Resource>,
}

impl Enforcement {
    /// How `asked` is enforced when cgroups hold `by_cgroup`.
    pub fn plan(asked: &Resources, by_cgroup: &Resources) -> Enforcement {
        let mut plan = Enforcement {
            cgroup: *by_cgroup,
            ..Enforcement::default()
        };
        for resource in asked.asked() {
            if by_cgroup.asked().contains(&resource) {
                continue;
            }
            match resource {
                Resource::Memory => plan.address_space = asked.memory,
                other => plan.missing.push(other),
            }
        }
        plan
    }

    /// One notice line saying which limits are not held for the whole run, if any.
    pub fn notice(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(bytes) = self.address_space {
            parts.push(format!(
                "the memory limit ({}) holds each process's address space (RLIMIT_AS), not the \
                 whole run: no memory cgroup here",
                human_bytes(bytes)
            ));
        }
        for resource in &self.missing {
            let why = match resource {
                Resource::Pids => {
                    "the process limit is not enforced: no pids cgroup here (RLIMIT_NPROC \
                     would count all the user's processes)"
                }
                _ => "the CPU limit is not enforced: no cpu cgroup here",
            };
            parts.push(why.to_string());
        }
        (!parts.is_empty()).then(|| format!("[spillway: {}]", parts.join("; ")))
    }
}

/// The lines that say which limits stopped or held back the run, worded for the command line,
/// or `None` when none was reached.
pub fn hit_lines(hits: &[LimitHit]) -> Option<String> {
    let lines: Vec<String> = hits
        .iter()
        .map(|hit| limit_reached(hit, cli_flag(hit.resource)))
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// The command line's flag for a resource's limit.
fn cli_flag(resource: Resource) -> &'static str {
    match resource {
        Resource::Memory => "--memory SIZE",
        Resource::Pids => "--pids N",
        Resource::Cpu => "--cpu CORES",
    }
}

/// Sets `RLIMIT_AS` to `bytes` in a child between fork and exec (async-signal-safe: one
/// system call).
pub fn set_address_space(bytes: u64) -> std::io::Result<()> {
    let limit = nix::libc::rlimit {
        rlim_cur: bytes,
        rlim_max: bytes,
    };
    // SAFETY: setrlimit reads the struct we pass and touches nothing else of ours.
    if unsafe { nix::libc::setrlimit(nix::libc::RLIMIT_AS, &limit) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_puts_each_limit_where_it_holds() {
        let asked = Resources {
            memory: Some(64 << 20),
            pids: Some(64),
            cpu: Some(0.5),
        };
        let all = Enforcement::plan(&asked, &asked);
        assert_eq!(all.notice(), None);
        let none = Enforcement::plan(&asked, &Resources::default());
        assert_eq!(none.address_space, Some(64 << 20));
        assert_eq!(none.missing, [Resource::Pids, Resource::Cpu]);
        let notice = none.notice().unwrap();
        assert!(
            notice.contains("RLIMIT_AS") && notice.contains("64.0 MiB"),
            "{notice}"
        );
        assert!(
            notice.contains("RLIMIT_NPROC") && notice.contains("CPU"),
            "{notice}"
        );
    }

    #[test]
    fn hits_are_reported_only_with_events() {
        let limits = Resources {
            memory: Some(1 << 26),
            ..Resources::default()
        };
        assert_eq!(limits.hit(Resource::Memory, 0), None);
        let hit = limits.hit(Resource::Memory, 1).unwrap();
        let line = hit_lines(&[hit]).unwrap();
        assert!(line.contains("memory limit of 64.0 MiB"), "{line}");
        assert!(line.ends_with("Raise it with --memory SIZE]"), "{line}");
        assert_eq!(hit_lines(&[]), None);
        assert_eq!(limits.hit(Resource::Pids, 3), None, "no pids limit was set");
        assert!(
            Resources {
                cpu: Some(f64::NAN),
                ..Resources::default()
            }
            .check()
            .is_err()
        );
    }
}
