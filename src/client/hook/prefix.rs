//! Claude Code's shell prefix: `CLAUDE_CODE_SHELL_PREFIX=/path/to/spillway`.
//!
//! Claude Code reads `CLAUDE_CODE_SHELL_PREFIX` (from its environment or the `env` of its
//! settings) and applies it at execution, after its permission rules, its permission mode and
//! its sandbox have judged the command the model wrote: so every allow, ask and deny rule holds
//! as without spillway, and the model's history shows its own command. The prefix program gets
//! one argument, the whole shell text Claude Code built (its shell snapshot, `eval` of the
//! command, and `pwd -P >| FILE`, which carries the working directory to the next call), and
//! must run it with a shell. The prefix is the bare program path: Claude Code splits a prefix
//! with ` -` in it for the Bash tool but starts MCP servers with the whole prefix as the
//! program's name, so no flag can tell spillway it is a prefix. What does is the call itself:
//! one argument with white space in it (no subcommand has any), from a process of Claude Code
//! (`CLAUDECODE=1`, which Claude Code sets for everything it starts).
//!
//! Claude Code also runs its hooks, MCP servers and status line through the prefix. Only a
//! Bash tool command (the one that ends with Claude Code's `pwd -P >| FILE`) goes through
//! spillway; anything else is handed to the shell as it is, with this process replaced, so it
//! keeps its standard input and output.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

use super::Host;
use crate::client::args::EndpointArgs;
use crate::client::host_run;
use crate::client::run_request::{self, ToRun};

/// What Claude Code sets in the environment of everything it starts.
const CLAUDE_CODE_ENV: &str = "CLAUDECODE";

/// What Claude Code puts at the end of each Bash tool command: it saves the working directory
/// the command ended in, to start the next one there.
const CWD_TAIL: &str = " && pwd -P >| ";

/// Runs `spillway TEXT` as Claude Code's shell prefix, or None when `args` (without the
/// program name) are not such a call.
pub fn main(args: &[OsString]) -> Option<ExitCode> {
    let in_claude_code = std::env::var_os(CLAUDE_CODE_ENV).is_some_and(|v| v == "1");
    Some(run(Host::ClaudeCode, prefix_text(args, in_claude_code)?))
}

/// The shell text of a prefix call: the one argument, when it has white space in it and the
/// caller is Claude Code.
fn prefix_text(args: &[OsString], in_claude_code: bool) -> Option<&str> {
    let [text] = args else {
        return None;
    };
    let text = text.to_str()?;
    (in_claude_code && text.contains(char::is_whitespace)).then_some(text)
}

fn run(host: Host, text: &str) -> ExitCode {
    let shell = shell_for(text);
    if !is_tool_command(text) || super::Context::from_env().disabled {
        let error = Command::new(&shell).arg("-c").arg(text).exec();
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            format!("spillway: cannot run {shell}: {error}\n").as_bytes(),
        );
        return ExitCode::from(127);
    }
    let argv = vec![shell, "-c".to_string(), text.to_string()];
    let request = match run_request::here(ToRun::Argv(argv), None) {
        Ok(request) => crate::protocol::RunRequest {
            tty: Some(false),
            kill_on_disconnect: Some(true),
            tags: [("host".to_string(), host.name().to_string())].into(),
            ..request
        },
        Err(e) => return fail(&format!("cannot determine the working directory: {e}")),
    };
    let endpoint = match EndpointArgs::from_env().resolve() {
        Ok(endpoint) => endpoint,
        Err(e) => return fail(&format!("{e:#}")),
    };
    host_run::run(host, request, &endpoint).unwrap_or_else(|e| fail(&format!("{e:#}")))
}

fn fail(message: &str) -> ExitCode {
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!("spillway: error: {message}\n").as_bytes(),
    );
    ExitCode::from(crate::client::exit::EXIT_FAILURE)
}

/// Whether `text` is a Bash tool command (as opposed to a hook, an MCP server or the status
/// line, which Claude Code also runs through the prefix).
fn is_tool_command(text: &str) -> bool {
    text.rfind(CWD_TAIL).is_some_and(|at| {
        let file = &text[at + CWD_TAIL.len()..];
        !file.is_empty() && !file.contains(['\n', ';', '&', '|'])
    })
}

/// The shell Claude Code built `text` for: its snapshot is named after it (`snapshot-zsh-...`);
/// bash otherwise. By absolute path, as the host runs it, so that its error messages read the
/// same (`/bin/bash: line 1: ...`).
fn shell_for(text: &str) -> String {
    let name = if text.contains("/snapshot-zsh-") {
        "zsh"
    } else {
        "bash"
    };
    ["/bin", "/usr/bin", "/usr/local/bin"]
        .iter()
        .map(|dir| format!("{dir}/{name}"))
        .find(|path| std::path::Path::new(path).exists())
        .unwrap_or_else(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bash_tool_commands_are_captured() {
        let tool = "source /h/.claude/shell-snapshots/snapshot-bash-1.sh 2>/dev/null || true \
                    && eval 'ls' < /dev/null && pwd -P >| /tmp/claude-f333-cwd";
        assert!(is_tool_command(tool));
        assert!(is_tool_command(
            "eval 'x' && pwd -P >| '/tmp/with space/claude-1-cwd'"
        ));
        for other in [
            "'/usr/bin/spillway' 'mcp'",
            "node hook.js",
            "echo && pwd -P >| ",
            "pwd -P >| /tmp/x; rm -rf /",
        ] {
            assert!(!is_tool_command(other), "{other:?}");
        }
    }

    #[test]
    fn the_shell_follows_the_snapshot() {
        assert!(shell_for("source /x/snapshot-zsh-1.sh && eval 'ls'").ends_with("zsh"));
        assert!(shell_for("eval 'ls'").ends_with("bash"));
    }

    #[test]
    fn only_one_spaced_argument_from_claude_code_is_a_prefix_call() {
        let args = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(prefix_text(&args(&["eval 'ls'"]), true), Some("eval 'ls'"));
        assert_eq!(prefix_text(&args(&["eval 'ls'"]), false), None);
        assert_eq!(prefix_text(&args(&["history"]), true), None);
        assert_eq!(prefix_text(&args(&["run", "--", "ls"]), true), None);
        assert_eq!(prefix_text(&args(&[]), true), None);
    }
}
