//! A capture's limits: the lines and bytes a preview may show (which size the head and tail it
//! keeps), checked once where they come in, and the spill file's default cap.

/// Default preview line limit.
pub const DEFAULT_MAX_LINES: usize = 2000;
/// Default preview byte limit (50 KiB).
pub const DEFAULT_MAX_BYTES: usize = 51200;
/// Largest accepted line limit.
pub const MAX_MAX_LINES: usize = 1_000_000;
/// Largest accepted byte limit (64 MiB): capture holds about twice this in memory.
pub const MAX_MAX_BYTES: usize = 64 << 20;
/// Default cap on one spill file (1 GiB): `yes` left running must not fill the disk.
pub const DEFAULT_MAX_SPILL: u64 = 1 << 30;

/// Preview limits: whichever is hit first truncates the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub(super) max_lines: usize,
    pub(super) max_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_lines: DEFAULT_MAX_LINES,
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

/// A limit outside its accepted range.
#[derive(Debug, thiserror::Error)]
#[error("{name} must be between 1 and {max}, got {value}")]
pub struct BadLimit {
    name: &'static str,
    max: usize,
    value: u64,
}

impl Limits {
    /// Checks both limits: zero would show nothing, and past the caps memory would balloon.
    pub fn new(max_lines: u64, max_bytes: u64) -> Result<Limits, BadLimit> {
        Ok(Limits {
            max_lines: check("max_lines", max_lines, MAX_MAX_LINES)?,
            max_bytes: check("max_bytes", max_bytes, MAX_MAX_BYTES)?,
        })
    }

    /// Most lines a preview shows.
    pub fn max_lines(&self) -> usize {
        self.max_lines
    }

    /// Most bytes of output a preview shows (its notice and marker excluded).
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }
}

fn check(name: &'static str, value: u64, max: usize) -> Result<usize, BadLimit> {
    match usize::try_from(value) {
        Ok(v) if (1..=max).contains(&v) => Ok(v),
        _ => Err(BadLimit { name, max, value }),
    }
}
