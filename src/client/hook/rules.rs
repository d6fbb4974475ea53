//! The user's own command rules in the hosts whose permission check runs after the hook
//! (Codex's execpolicy, Gemini CLI's policies and `--allowed-tools`): those hosts judge the
//! command the hook hands back, so a rule about `rm` would never match `spillway run ... bash
//! -c 'rm ...'`. The hook therefore leaves alone every command that any such rule could be
//! about, and the host judges it exactly as without spillway.
//!
//! The test is deliberately wider than the hosts' own matching: every quoted word of a rule
//! file counts, and a command is left alone when any of its words (or a word's file name) is
//! one of them. Leaving a command alone costs only the preview; rewriting one a rule was about
//! would cost the rule. A rule given as a regular expression can be about anything, so it
//! leaves every command alone.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// What the user's rules may be about.
#[derive(Debug, Default)]
pub(crate) struct RuleWords {
    words: HashSet<String>,
    /// A rule matches by regular expression (or could not be read): no command is rewritten.
    everything: bool,
}

impl RuleWords {
    /// Whether a rule could be about `command`.
    pub fn may_match(&self, command: &str) -> bool {
        self.everything
            || command
                .split(|c: char| c.is_whitespace() || ";&|()<>`$'\"{}".contains(c))
                .filter(|word| !word.is_empty())
                .any(|word| {
                    let name = word.rsplit('/').next().unwrap_or(word);
                    self.words.contains(word) || self.words.contains(name)
                })
    }

    /// Codex: `prefix_rule(...)` in `$CODEX_HOME/rules/*.rules` and the project's
    /// `.codex/rules/*.rules`.
    pub fn codex(codex_home: &Path, cwd: &Path) -> RuleWords {
        let mut rules = RuleWords::default();
        for dir in [codex_home.join("rules"), cwd.join(".codex/rules")] {
            for file in files_in(&dir, "rules") {
                match std::fs::read_to_string(&file) {
                    Ok(text) => rules.add_quoted(&text),
                    Err(_) => rules.everything = true,
                }
            }
        }
        rules
    }

    /// Gemini CLI: the policy files (`~/.gemini/policies`, the project's `.gemini/policies`),
    /// the settings' tool lists, and the `gemini` process's own flags (`--allowed-tools`), read
    /// from the hook's parent.
    pub fn gemini(home: &Path, cwd: &Path, parent_cmdline: &str) -> RuleWords {
        let mut rules = RuleWords::default();
        for dir in [home.join(".gemini/policies"), cwd.join(".gemini/policies")] {
            for file in files_in(&dir, "toml") {
                match std::fs::read_to_string(&file) {
                    Ok(text) => {
                        if text.contains("commandRegex") || text.contains("argsPattern") {
                            rules.everything = true;
                        }
                        rules.add_quoted(&text);
                    }
                    Err(_) => rules.everything = true,
                }
            }
        }
        for settings in [
            home.join(".gemini/settings.json"),
            cwd.join(".gemini/settings.json"),
        ] {
            if let Ok(text) = std::fs::read_to_string(settings) {
                rules.add_tool_args(&text);
            }
        }
        rules.add_tool_args(parent_cmdline);
        rules
    }

    /// Every word inside quotes in `text`.
    fn add_quoted(&mut self, text: &str) {
        for quote in ['"', '\''] {
            let mut parts = text.split(quote);
            parts.next();
            while let Some(inside) = parts.next() {
                self.add_words(inside);
                parts.next();
            }
        }
    }

    /// The words of every `run_shell_command(...)` (`ShellTool(...)`) in `text`.
    fn add_tool_args(&mut self, text: &str) {
        for tool in ["run_shell_command(", "ShellTool("] {
            for (at, _) in text.match_indices(tool) {
                let rest = &text[at + tool.len()..];
                let inside = rest.split(')').next().unwrap_or("");
                self.add_words(inside);
            }
        }
    }

    fn add_words(&mut self, text: &str) {
        self.words.extend(
            text.split(|c: char| c.is_whitespace() || c == ',')
                .filter(|w| !w.is_empty() && w.len() < 256)
                .map(str::to_string),
        );
    }
}

/// The files of `dir` ending in `.ext`; none when it cannot be read.
fn files_in(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(rel: &str, text: &str) -> std::path::PathBuf {
        let root = std::env::temp_dir().join(format!(
            "spillway-rules-{}-{}",
            std::process::id(),
            rel.replace('/', "_")
        ));
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        root
    }

    #[test]
    fn codex_rules_leave_their_commands_alone() {
        let home = dir_with(
            "rules/default.rules",
            "prefix_rule(pattern = [\"rm\"], decision = \"forbidden\")\n",
        );
        let rules = RuleWords::codex(&home, Path::new("/nonexistent"));
        for command in ["rm -f x", "ls && rm x", "/bin/rm x", "echo $(rm x)", "x;rm"] {
            assert!(rules.may_match(command), "{command}");
        }
        for command in ["ls -l", "echo removed", "git status"] {
            assert!(!rules.may_match(command), "{command}");
        }
        let _ = std::fs::remove_dir_all(home);
    }

    #[test]
    fn gemini_reads_policies_settings_and_flags() {
        let home = dir_with(
            ".gemini/policies/deny.toml",
            "[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = \"rm\"\ndecision = \"deny\"\n",
        );
        let rules = RuleWords::gemini(
            &home,
            Path::new("/nonexistent"),
            "node gemini -p go --allowed-tools run_shell_command(git status)",
        );
        assert!(rules.may_match("rm -rf build"));
        assert!(rules.may_match("git status"));
        assert!(!rules.may_match("ls"));
        let regex = dir_with(
            ".gemini/policies/regex.toml",
            "[[rule]]\ncommandRegex = \"^curl\"\n",
        );
        assert!(RuleWords::gemini(&regex, Path::new("/nonexistent"), "").may_match("ls"));
        let _ = std::fs::remove_dir_all(home);
        let _ = std::fs::remove_dir_all(regex);
    }

    #[test]
    fn no_rules_no_matches() {
        let rules = RuleWords::codex(Path::new("/nonexistent"), Path::new("/nonexistent"));
        assert!(!rules.may_match("rm -rf /tmp/x"));
    }
}
