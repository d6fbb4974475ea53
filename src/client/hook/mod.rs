//! `spillway hook HOST`: the program an agent host runs before its shell tool, which answers
//! with the same call rewritten to run through `spillway run`.
//!
//! Every host hands the hook a JSON description of the tool call on stdin and reads an answer on
//! stdout; the shapes differ per host (see [`host`]). What they share lives here: when to leave a
//! command alone, and how to wrap it so that it keeps exactly its meaning.
//!
//! The hook must never get in the host's way: unknown or malformed input, a tool that is not
//! the shell, or any failure of its own means "no opinion" (no output, exit code 0), so the
//! host runs the original command as it would have without spillway.

pub(crate) mod budget;
mod host;
pub mod prefix;
mod rules;
mod saved_output;

use std::io::{self, Read, Write};
use std::process::ExitCode;

pub use host::answer;

/// The hosts spillway can plug into, as named on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Host {
    /// Anthropic's Claude Code: a `PreToolUse` hook on `Bash` in `settings.json`.
    ClaudeCode,
    /// OpenAI's Codex CLI: a `PreToolUse` hook on `Bash` in `hooks.json`.
    Codex,
    /// Google's Gemini CLI: a `BeforeTool` hook on `run_shell_command` in `settings.json`.
    Gemini,
    /// opencode: a plugin whose `tool.execute.before` asks `spillway hook opencode`.
    Opencode,
    /// GitHub Copilot CLI: a `postToolUse` hook in a `hooks/*.json` file.
    Copilot,
}

impl Host {
    /// The name used on the command line and in the hook commands `init` writes.
    pub fn name(self) -> &'static str {
        match self {
            Host::ClaudeCode => "claude-code",
            Host::Codex => "codex",
            Host::Gemini => "gemini",
            Host::Opencode => "opencode",
            Host::Copilot => "copilot",
        }
    }

    /// Every host, in the order `doctor` reports them.
    pub const ALL: [Host; 5] = [
        Host::ClaudeCode,
        Host::Codex,
        Host::Gemini,
        Host::Opencode,
        Host::Copilot,
    ];
}

/// The environment variable that, set to `off` (or `0`, `false`, `no`) in the host's
/// environment, makes the hook leave every command alone.
pub const HOOK_ENV: &str = "SPILLWAY_HOOK";
/// A command that starts with this assignment is left alone (and runs with it set, harmlessly).
pub const SKIP_PREFIX: &str = "SPILLWAY_SKIP=1";

/// What the hook needs to know besides the host's JSON: read once, so tests can set it.
#[derive(Debug, Clone)]
pub struct Context {
    /// The `spillway` program the rewritten command runs (this very binary, by absolute path,
    /// so the host's shell finds it whatever its `PATH`).
    pub program: String,
    /// `SPILLWAY_HOOK` is off: rewrite nothing.
    pub disabled: bool,
    /// The user's home directory (Gemini CLI's settings and policies).
    pub home: std::path::PathBuf,
    /// Codex's home (`$CODEX_HOME`, else `~/.codex`), where its rules live.
    pub codex_home: std::path::PathBuf,
    /// The command line of the process that ran the hook (the host: its own flags, such as
    /// Gemini CLI's `--allowed-tools`), NULs turned to spaces.
    pub parent_cmdline: String,
}

impl Context {
    pub fn from_env() -> Context {
        let program = std::env::current_exe()
            .ok()
            .and_then(|p| p.into_os_string().into_string().ok())
            .unwrap_or_else(|| "spillway".to_string());
        let disabled = std::env::var(HOOK_ENV).is_ok_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "off" | "0" | "false" | "no"
            )
        });
        let home = std::env::var_os("HOME")
            .map(std::path::PathBuf::from)
            .unwrap_or_default();
        let codex_home = std::env::var_os("CODEX_HOME")
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| home.join(".codex"));
        let parent = std::os::unix::process::parent_id();
        let parent_cmdline = std::fs::read(format!("/proc/{parent}/cmdline"))
            .map(|bytes| String::from_utf8_lossy(&bytes).replace('\0', " "))
            .unwrap_or_default();
        Context {
            program,
            disabled,
            home,
            codex_home,
            parent_cmdline,
        }
    }
}

/// Runs the hook: reads the host's JSON, prints the answer if there is one, always exits 0.
pub fn main(host: Host) -> ExitCode {
    let mut input = Vec::new();
    // A host that cannot even hand us its input gets no opinion, never an error: some hosts
    // (Copilot CLI) deny the tool call when a hook fails.
    if io::stdin().lock().read_to_end(&mut input).is_err() {
        return ExitCode::SUCCESS;
    }
    if let Some(answer) = answer(host, &input, &Context::from_env()) {
        let mut out = io::stdout().lock();
        let _ = out.write_all(answer.as_bytes());
        let _ = out.write_all(b"\n");
        let _ = out.flush();
    }
    ExitCode::SUCCESS
}

/// The command that runs `command` through spillway with exactly its meaning, or None when
/// `command` is to be left alone.
///
/// The hosts run their shell tool's command with `bash -c` (Claude Code, Gemini CLI, Copilot
/// CLI) or the user's shell (Codex, opencode), while `spillway run -c` would use `sh -c`: so the
/// original runs as `bash -c ORIGINAL`, its text passed as one argument, untouched. The outer
/// command is a single simple command that means the same to bash, zsh, sh and fish (see
/// [`quote`]). `--host` fits the preview under the host's cap, adds no exit line, and runs the
/// command in-process where the host's sandbox keeps the daemon out of reach. `--no-tty` gives the command what the host would have given it: no terminal,
/// and an empty stdin instead of one that never ends; `--kill-on-disconnect` stops it when the
/// host gives up on the tool call (its timeout, the user's interrupt), as the host expects. The
/// working directory and the exported environment are the outer shell's: `spillway run` passes
/// on its own.
pub fn rewrite(host: Host, command: &str, ctx: &Context) -> Option<String> {
    if ctx.disabled || !should_rewrite(command) {
        return None;
    }
    let rewritten = format!(
        "{} run --host {} --no-tty --kill-on-disconnect -- {} -c {}",
        quote(&ctx.program),
        host.name(),
        quote(&host_bash(host)),
        quote(command)
    );
    // The host hands the command to its shell as one argument, which the kernel caps at
    // 128 KiB ("Argument list too long"): a command whose rewrite would not fit is left alone.
    (rewritten.len() <= MAX_REWRITE).then_some(rewritten)
}

/// The bash the host itself runs its shell tool's command with, by the path it uses, so that
/// the shell's own messages read the same (`/bin/bash: line 1: x: command not found`): Codex
/// runs `/bin/bash`, the others the first `bash` on PATH.
fn host_bash(host: Host) -> String {
    let fixed = std::path::Path::new("/bin/bash");
    if host == Host::Codex && fixed.exists() {
        return fixed.display().to_string();
    }
    std::env::var_os("PATH")
        .and_then(|path| crate::program::first_on_path(&path, "bash"))
        .map_or_else(|| "bash".to_string(), |p| p.display().to_string())
}

/// The longest rewritten command: under the kernel's 128 KiB cap on one argument, with room
/// for what a host puts around it.
const MAX_REWRITE: usize = 120 * 1024;

/// False for the commands the hook leaves alone: empty ones, those that opt out with
/// `SPILLWAY_SKIP=1`, those already run through spillway, and those bash could not be given
/// as an argument (a NUL byte).
pub fn should_rewrite(command: &str) -> bool {
    let trimmed = command.trim_start();
    if trimmed.trim().is_empty() || command.contains('\0') {
        return false;
    }
    if let Some(rest) = trimmed.strip_prefix(SKIP_PREFIX)
        && (rest.is_empty() || rest.starts_with(char::is_whitespace))
    {
        return false;
    }
    !starts_with_spillway(trimmed)
}

/// Whether the first word of the command, after any `NAME=value` assignments, names a program
/// called `spillway` (bare, by path, or quoted).
fn starts_with_spillway(command: &str) -> bool {
    for word in command.split_whitespace() {
        let word = word.trim_matches(|c| c == '\'' || c == '"');
        let is_assignment = word.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        });
        if is_assignment {
            continue;
        }
        return word.rsplit('/').next() == Some("spillway");
    }
    false
}

/// Quotes `text` as one shell word that bash, zsh, dash and fish all read back as exactly
/// `text`: single quotes, with each `'` written `'\''` and each `\` written `'\\'` outside the
/// quotes (fish, unlike POSIX shells, treats `\\` and `\'` as escapes inside single quotes).
/// Words of only safe characters are left bare for readability.
pub fn quote(text: &str) -> String {
    let safe = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=@%+,".contains(&b));
    if safe {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        match c {
            '\'' => out.push_str("'\\''"),
            '\\' => out.push_str("'\\\\'"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Context {
        Context {
            program: "/opt/bin/spillway".into(),
            disabled: false,
            home: "/nonexistent".into(),
            codex_home: "/nonexistent".into(),
            parent_cmdline: String::new(),
        }
    }

    #[test]
    fn quoting_round_trips_through_bash() {
        for text in [
            "plain",
            "it's",
            "a\\b",
            "'\\''",
            "$HOME `id` \"q\"",
            "line1\nline2",
            "",
            "ünïcödé ✓",
        ] {
            let out = std::process::Command::new("bash")
                .arg("-c")
                .arg(format!("printf %s {}", quote(text)))
                .output()
                .unwrap();
            assert_eq!(String::from_utf8(out.stdout).unwrap(), text, "{text:?}");
        }
    }

    #[test]
    fn leaves_alone_what_it_must() {
        for command in [
            "",
            "   ",
            "SPILLWAY_SKIP=1 make",
            "  SPILLWAY_SKIP=1",
            "spillway run -- ls",
            "/usr/local/bin/spillway history",
            "FOO=1 spillway stats",
            "'/opt/bin/spillway' run -- ls",
            "a\0b",
        ] {
            assert!(!should_rewrite(command), "{command:?}");
        }
        for command in ["ls", "SPILLWAY_SKIP=10 make", "echo spillway", "spillwayx"] {
            assert!(should_rewrite(command), "{command:?}");
        }
    }

    #[test]
    fn rewrite_is_bash_c_of_the_original() {
        assert_eq!(
            rewrite(Host::Codex, "echo 'hi'", &ctx()).unwrap(),
            "/opt/bin/spillway run --host codex --no-tty --kill-on-disconnect -- /bin/bash -c 'echo '\\''hi'\\'''"
        );
        let off = Context {
            disabled: true,
            ..ctx()
        };
        assert_eq!(rewrite(Host::Codex, "ls", &off), None);
        // The rewritten command is itself left alone: running the hook twice changes nothing.
        assert!(!should_rewrite(
            &rewrite(Host::Codex, "ls", &ctx()).unwrap()
        ));
        // Too long for one argument once rewritten: left alone.
        let heredoc = format!("cat <<'EOF'\n{}\nEOF", "'\"".repeat(30_000));
        assert_eq!(rewrite(Host::Codex, &heredoc, &ctx()), None);
    }
}
