//! The limits' files: a run's memory, process and CPU limits written into its cgroup, in the
//! v2 controllers' files or the v1 ones'.

use std::fs;
use std::io;
use std::path::Path;

use crate::protocol::Resource;
use crate::supervisor::limits::Resources;

/// Writes `resource`'s limit (none: the most the file takes) into v2 cgroup `dir`.
pub(super) fn write_v2_limit(dir: &Path, resource: Resource, limits: &Resources) -> io::Result<()> {
    match resource {
        Resource::Memory => {
            let bytes = limits.memory.unwrap_or(u64::MAX);
            fs::write(dir.join("memory.max"), bytes.to_string())?;
            // Swap would let the run go on far past its limit, only slower.
            let _ = fs::write(dir.join("memory.swap.max"), "0");
            Ok(())
        }
        Resource::Pids => write_pids(dir, limits),
        Resource::Cpu => {
            let (quota, period) = cpu_quota(limits.cpu.unwrap_or(0.0));
            fs::write(dir.join("cpu.max"), format!("{quota} {period}"))
        }
    }
}

/// Writes `resource`'s limit into the v1 cgroup `dir` of its controller.
pub(super) fn write_v1_limit(dir: &Path, resource: Resource, limits: &Resources) -> io::Result<()> {
    match resource {
        Resource::Memory => {
            let bytes = limits.memory.unwrap_or(u64::MAX).to_string();
            fs::write(dir.join("memory.limit_in_bytes"), &bytes)?;
            // memory+swap, where swap accounting is on: no running on in swap.
            let memsw = dir.join("memory.memsw.limit_in_bytes");
            if memsw.exists() {
                let _ = fs::write(memsw, &bytes);
            }
            Ok(())
        }
        Resource::Pids => write_pids(dir, limits),
        Resource::Cpu => {
            let (quota, period) = cpu_quota(limits.cpu.unwrap_or(0.0));
            fs::write(dir.join("cpu.cfs_period_us"), period.to_string())?;
            fs::write(dir.join("cpu.cfs_quota_us"), quota.to_string())
        }
    }
}

/// Writes the process limit: `pids.max`, the same file in v1 and v2.
fn write_pids(dir: &Path, limits: &Resources) -> io::Result<()> {
    fs::write(
        dir.join("pids.max"),
        limits.pids.unwrap_or(u64::MAX).to_string(),
    )
}

/// A quota of `cores` over a 100 ms period, in microseconds (at least the kernel's 1 ms).
fn cpu_quota(cores: f64) -> (u64, u64) {
    const PERIOD: u64 = 100_000;
    let quota = (cores * PERIOD as f64).round();
    let quota = if quota.is_finite() && quota >= 1000.0 {
        quota.min(u64::MAX as f64 / 2.0) as u64
    } else {
        1000
    };
    (quota, PERIOD)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_quotas_are_in_microseconds_per_100ms() {
        assert_eq!(cpu_quota(1.0), (100_000, 100_000));
        assert_eq!(cpu_quota(0.5), (50_000, 100_000));
        assert_eq!(cpu_quota(0.0), (1000, 100_000));
        assert_eq!(cpu_quota(f64::NAN), (1000, 100_000));
    }
}
