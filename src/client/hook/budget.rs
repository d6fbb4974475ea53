//! How much of one shell call each host hands its model before it cuts the result again or
//! saves it to a file, and the preview budget spillway keeps under it, so that the host never
//! cuts spillway's preview (losing its tail and its notice).
//!
//! Measured with the hosts' own CLIs (the versions tests/hosts/package.json pins):
//! - Claude Code saves a result over `BASH_MAX_OUTPUT_LENGTH` characters (30,000 unless the user
//!   sets it) to a file and shows the model its first 2 KB, and cuts the middle out of a failed
//!   command's output over 10,000 characters (the budget cannot wait for the exit code, so it
//!   keeps under both);
//! - Codex cuts to its output policy: 10,000 tokens for a model it knows, 10,000 bytes otherwise,
//!   and it puts a header (exit code, wall time) before the output;
//! - Gemini CLI keeps the first 8,000 and last 32,000 characters of a result over 40,000;
//! - opencode keeps the last 2,000 lines or 50 KiB;
//! - Copilot CLI keeps a result of up to 20,000 characters whole and saves a longer one to a
//!   file, showing the model its first 500 characters.

use super::Host;

/// Bytes kept free under a host's cap for what the byte budget does not count (the preview's
/// notice, up to 600 bytes, and its omission and fold markers) and for what the host adds
/// around the output (Codex's header, Claude Code's exit line).
const MARGIN: u64 = 2_500;

/// Claude Code's cap when `BASH_MAX_OUTPUT_LENGTH` is unset.
const CLAUDE_DEFAULT_CAP: u64 = 30_000;

/// Copilot CLI's cap: a longer result is saved to a file.
const COPILOT_CAP: u64 = 20_000;

/// Claude Code's cap on a failed command's output.
const CLAUDE_FAILED_CAP: u64 = 10_000;

/// The preview budget for one host: the whole text the model reads, notice included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Budget {
    pub max_lines: u64,
    pub max_bytes: u64,
}

impl Budget {
    /// This budget, no larger than `max_lines`/`max_bytes` (what the caller asked for).
    pub fn within(self, max_lines: u64, max_bytes: u64) -> Budget {
        Budget {
            max_lines: self.max_lines.min(max_lines),
            max_bytes: self.max_bytes.min(max_bytes),
        }
    }
}

/// The budget under `host`'s cap; `env` reads the host's environment (Claude Code's
/// `BASH_MAX_OUTPUT_LENGTH`, which the user may set lower or higher).
pub(crate) fn for_host(host: Host, env: impl Fn(&str) -> Option<String>) -> Budget {
    let unlimited_lines = 2_000;
    let (max_lines, cap) = match host {
        Host::ClaudeCode => {
            let cap = env("BASH_MAX_OUTPUT_LENGTH")
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|&n| n > 0)
                .unwrap_or(CLAUDE_DEFAULT_CAP);
            (unlimited_lines, cap.min(CLAUDE_FAILED_CAP))
        }
        Host::Codex => (unlimited_lines, 10_000),
        Host::Copilot => (unlimited_lines, COPILOT_CAP),
        Host::Gemini => (unlimited_lines, 40_000),
        // 2,000 lines: the notice and fold markers are lines too.
        Host::Opencode => (1_900, 50 * 1_024),
    };
    Budget {
        max_lines,
        // A character is at least one byte, so a byte budget holds a character cap; a cap
        // smaller than the margin still leaves room for the notice and a few lines.
        max_bytes: cap.saturating_sub(MARGIN).max(cap / 2).max(256),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_host_budget_is_under_its_cap() {
        let none = |_: &str| None;
        assert_eq!(for_host(Host::ClaudeCode, none).max_bytes, 7_500);
        assert_eq!(for_host(Host::Codex, none).max_bytes, 7_500);
        assert_eq!(for_host(Host::Gemini, none).max_bytes, 37_500);
        assert_eq!(for_host(Host::Copilot, none).max_bytes, 17_500);
        assert_eq!(for_host(Host::Opencode, none).max_lines, 1_900);
        let small = |name: &str| (name == "BASH_MAX_OUTPUT_LENGTH").then(|| "5000".to_string());
        assert_eq!(for_host(Host::ClaudeCode, small).max_bytes, 2_500);
        let junk = |_: &str| Some("lots".to_string());
        assert_eq!(for_host(Host::ClaudeCode, junk).max_bytes, 7_500);
        let tiny = |_: &str| Some("300".to_string());
        assert_eq!(for_host(Host::ClaudeCode, tiny).max_bytes, 256);
        let opencode = for_host(Host::Opencode, none);
        assert_eq!(opencode.max_bytes, 50 * 1_024 - 2_500);
    }

    #[test]
    fn a_smaller_request_wins() {
        let budget = for_host(Host::Codex, |_| None).within(10, 100_000);
        assert_eq!(
            budget,
            Budget {
                max_lines: 10,
                max_bytes: 7_500
            }
        );
    }
}
