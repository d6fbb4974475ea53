//! The short name `spillway stats` groups runs by: `cargo test`, `git log`, `pytest`, `make`.
//!
//! A run's whole command line is too fine a key (every `cargo test some_filter` apart) and its
//! program alone too coarse (`cargo build` and `cargo test` together). The key is the program's
//! base name, plus its first non-option argument when the program is one known to take a
//! subcommand ([`SUBCOMMANDS`]) and that argument is a plain word. For other programs the first
//! argument is a file, a pattern or a target (`grep error`, `ls src`, `pytest tests/`), which
//! would split one tool into as many keys as it has arguments.
//!
//! A shell string is read as its first simple command that does something (`cd dir && cargo
//! test` is `cargo test`): split at `|`, `;`, `&`, newlines and parentheses without regard to
//! quoting, which is only ever wrong when a quoted argument before the subcommand holds one of
//! them. Leading `NAME=value` assignments are skipped, and so are wrappers (`env`, `sudo`,
//! `time`, ...) directly followed by the command they run.
//!
//! The key is computed once, when a run is recorded, and stored with it (`runs.command_key`),
//! so that `stats` groups in SQL and a later change of these rules leaves past keys as they
//! were.

/// Programs whose first non-option argument names what they do.
const SUBCOMMANDS: &[&str] = &[
    "apt",
    "apt-get",
    "bazel",
    "brew",
    "buck2",
    "bun",
    "bundle",
    "bunx",
    "cabal",
    "cargo",
    "composer",
    "conda",
    "dart",
    "deno",
    "docker",
    "dotnet",
    "flutter",
    "gh",
    "git",
    "go",
    "gradle",
    "gradlew",
    "helm",
    "just",
    "kubectl",
    "lein",
    "mix",
    "mvn",
    "mvnw",
    "nix",
    "npm",
    "npx",
    "nx",
    "pdm",
    "pip",
    "pip3",
    "pnpm",
    "pnpx",
    "podman",
    "poetry",
    "rails",
    "ruff",
    "rustup",
    "sbt",
    "spillway",
    "stack",
    "swift",
    "systemctl",
    "terraform",
    "tofu",
    "turbo",
    "uv",
    "vitest",
    "yarn",
    "zig",
];

/// Options that take the next word as their value when they come before the subcommand
/// (`git -C dir log`, `kubectl -n ns get`).
const VALUE_OPTIONS: &[&str] = &[
    "-C",
    "-c",
    "-n",
    "--namespace",
    "--context",
    "-H",
    "--host",
    "-f",
    "--file",
    "--manifest-path",
];

/// Commands that only set up the shell for the next one (`cd dir && ...`).
const SETUP: &[&str] = &[
    "cd", "pushd", "popd", "export", "set", "unset", "source", ".", "ulimit", "umask", "alias",
];

/// Shells: `bash -c 'SCRIPT'` (how agent hosts' hooks and MCP runs arrive) is keyed by the
/// script, as a `shell` string is.
const SHELLS: &[&str] = &["bash", "sh", "dash", "zsh", "ksh", "mksh", "ash"];

/// Programs that run the command after them.
const WRAPPERS: &[&str] = &["env", "sudo", "time", "nohup", "nice", "command", "exec"];

/// Longest subcommand taken: longer words are arguments, not subcommands.
const MAX_SUBCOMMAND_CHARS: usize = 32;

/// The key of a run given as `argv` or as a `shell` string; `None` when there is no command.
pub fn command_key(argv: Option<&[String]>, shell: Option<&str>) -> Option<String> {
    match (argv, shell) {
        (Some(argv), _) => key_of(argv),
        (None, Some(shell)) => {
            // Only setup (`cd dir`): the first setup command stands for the run.
            let mut setup = None;
            for segment in shell.split(['|', ';', '&', '\n', '(', ')']) {
                let words = shlex::split(segment)
                    .unwrap_or_else(|| segment.split_whitespace().map(String::from).collect());
                match key_of(&words) {
                    Some(key) if SETUP.contains(&key.as_str()) => setup = setup.or(Some(key)),
                    Some(key) => return Some(key),
                    None => {}
                }
            }
            setup
        }
        (None, None) => None,
    }
}

/// The key of one simple command's words.
fn key_of(words: &[String]) -> Option<String> {
    let mut rest = words
        .iter()
        .map(String::as_str)
        .skip_while(|w| is_assignment(w));
    let mut program = rest.next()?;
    let mut rest: Vec<&str> = rest.collect();
    while WRAPPERS.contains(&base_name(program)) {
        // `env A=1 cmd`: the wrapper's assignments go with it.
        let assignments = rest.iter().take_while(|w| is_assignment(w)).count();
        match rest.get(assignments) {
            Some(next) if !next.starts_with('-') => {
                program = next;
                rest.drain(..=assignments);
            }
            _ => break,
        }
    }
    let program = base_name(program);
    if program.is_empty() {
        return None;
    }
    if SHELLS.contains(&program)
        && let Some(script) = shell_script(&rest)
    {
        // Each level is a strictly shorter string: nested `bash -c` ends.
        return command_key(None, Some(script)).or_else(|| Some(program.to_string()));
    }
    if program.starts_with("python")
        && rest.first() == Some(&"-m")
        && let Some(module) = rest.get(1).filter(|m| is_word(m))
    {
        return Some(format!("{program} -m {module}"));
    }
    if !SUBCOMMANDS.contains(&program) {
        return Some(program.to_string());
    }
    let mut args = rest.into_iter();
    while let Some(arg) = args.next() {
        if VALUE_OPTIONS.contains(&arg) || names_secret(arg) {
            // Its value is no subcommand (`helm --password S3cret repo list` is `helm repo`).
            args.next();
        } else if arg.starts_with('-') || arg.starts_with('+') {
            // An option, or cargo's `+toolchain`.
        } else if is_word(arg) {
            return Some(format!("{program} {arg}"));
        } else {
            break;
        }
    }
    Some(program.to_string())
}

/// The script of a shell's `-c` (`-c`, or an option cluster with `c` such as `-lc` or `-ec`),
/// past its other options (`-o pipefail` takes a value); `None` when it runs a file or reads
/// standard input.
fn shell_script<'a>(args: &[&'a str]) -> Option<&'a str> {
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match *arg {
            "-o" | "+o" | "-O" | "+O" => {
                args.next();
            }
            "--" => return None,
            option if option.starts_with("--") => {}
            option if option.starts_with(['-', '+']) => {
                if option[1..].chars().all(|c| c.is_ascii_alphabetic()) && option.contains('c') {
                    return args.next().copied();
                }
            }
            _ => return None,
        }
    }
    None
}

/// Words in an option's name that say its value is a credential.
const SECRET_OPTION_WORDS: &[&str] = &["pass", "token", "secret", "key", "auth", "cred"];

/// An option that takes a credential as its next word (`--password`, `--api-key`, `--token`).
fn names_secret(arg: &str) -> bool {
    arg.starts_with('-')
        && !arg.contains('=')
        && SECRET_OPTION_WORDS
            .iter()
            .any(|w| arg.to_ascii_lowercase().contains(w))
}

/// The part of a path after its last `/`.
fn base_name(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// `NAME=value`, as a shell reads it before a command.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// A plain word a subcommand could be: a letter, then letters, digits, `-`, `_`, `:` or `.`;
/// not both cases and digits together, as a token has them (`Qm7Tz9xLp2Kw`).
fn is_word(arg: &str) -> bool {
    let has = |f: fn(&char) -> bool| arg.chars().any(|c| f(&c));
    let token_like =
        has(char::is_ascii_uppercase) && has(char::is_ascii_lowercase) && has(char::is_ascii_digit);
    !token_like
        && arg.chars().count() <= MAX_SUBCOMMAND_CHARS
        && arg.starts_with(|c: char| c.is_ascii_alphabetic())
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Option<String> {
        let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        command_key(Some(&words), None)
    }

    fn shell(line: &str) -> Option<String> {
        command_key(None, Some(line))
    }

    #[test]
    fn a_shell_running_a_script_is_keyed_by_the_script() {
        assert_eq!(
            argv(&["bash", "-c", "cargo test -p x"]).unwrap(),
            "cargo test"
        );
        assert_eq!(
            argv(&["/bin/bash", "-lc", "cd app && npm run build"]).unwrap(),
            "npm run"
        );
        assert_eq!(
            argv(&["bash", "-o", "pipefail", "-ec", "pytest -q | tail"]).unwrap(),
            "pytest"
        );
        assert_eq!(argv(&["sh", "-c", "bash -c 'make all'"]).unwrap(), "make");
        assert_eq!(shell("FOO=1 bash -c 'git status'").unwrap(), "git status");
        assert_eq!(argv(&["bash", "script.sh"]).unwrap(), "bash");
        assert_eq!(argv(&["bash", "-c", ""]).unwrap(), "bash");
        assert_eq!(argv(&["bash"]).unwrap(), "bash");
    }

    #[test]
    fn programs_with_subcommands_keep_them() {
        assert_eq!(argv(&["cargo", "test", "-p", "x"]).unwrap(), "cargo test");
        assert_eq!(
            argv(&["cargo", "+nightly", "build"]).unwrap(),
            "cargo build"
        );
        assert_eq!(
            argv(&["git", "-C", "repo", "log", "-5"]).unwrap(),
            "git log"
        );
        assert_eq!(argv(&["/usr/bin/git", "status"]).unwrap(), "git status");
        assert_eq!(argv(&["npm", "run", "build"]).unwrap(), "npm run");
        assert_eq!(
            argv(&["kubectl", "-n", "prod", "get", "pods"]).unwrap(),
            "kubectl get"
        );
        assert_eq!(argv(&["cargo"]).unwrap(), "cargo");
        assert_eq!(argv(&["cargo", "--version"]).unwrap(), "cargo");
        assert_eq!(argv(&["go", "./..."]).unwrap(), "go", "not a word");
    }

    #[test]
    fn a_credential_is_never_a_subcommand() {
        let key = argv(&["helm", "--password", "Qm7Tz9xLp2Kw", "repo", "list"]);
        assert_eq!(key.unwrap(), "helm repo");
        let key = argv(&["gh", "--token", "hunter", "pr", "list"]);
        assert_eq!(key.unwrap(), "gh pr");
        assert_eq!(argv(&["helm", "Qm7Tz9xLp2Kw"]).unwrap(), "helm");
        assert_eq!(
            shell("docker --api-key=x login").unwrap(),
            "docker login",
            "a value given with = is the option's own"
        );
    }

    #[test]
    fn other_programs_are_their_name() {
        assert_eq!(argv(&["pytest", "-x", "tests/"]).unwrap(), "pytest");
        assert_eq!(argv(&["make", "all"]).unwrap(), "make");
        assert_eq!(argv(&["grep", "-rn", "error", "src"]).unwrap(), "grep");
        assert_eq!(argv(&["seq", "1", "10"]).unwrap(), "seq");
        assert_eq!(argv(&["./run-tests.sh"]).unwrap(), "run-tests.sh");
        assert_eq!(
            argv(&["python3", "-m", "pytest", "-q"]).unwrap(),
            "python3 -m pytest"
        );
        assert_eq!(argv(&["python", "script.py"]).unwrap(), "python");
    }

    #[test]
    fn assignments_wrappers_and_setup_are_looked_past() {
        assert_eq!(
            argv(&["RUST_LOG=debug", "cargo", "run"]).unwrap(),
            "cargo run"
        );
        assert_eq!(argv(&["env", "A=1", "npm", "test"]).unwrap(), "npm test");
        assert_eq!(
            argv(&["sudo", "apt-get", "install", "x"]).unwrap(),
            "apt-get install"
        );
        assert_eq!(
            argv(&["time", "-p", "make"]).unwrap(),
            "time",
            "an option: kept"
        );
        assert_eq!(
            shell("cd /src && cargo test 2>&1 | tail -5").unwrap(),
            "cargo test"
        );
        assert_eq!(shell("export A=1; FOO=bar pytest -q").unwrap(), "pytest");
        assert_eq!(shell("(cd x; git log --oneline)").unwrap(), "git log");
        assert_eq!(shell("cd /tmp").unwrap(), "cd");
        assert_eq!(shell("printf 'a|b\\n'").unwrap(), "printf");
        assert_eq!(shell("echo 'unbalanced").unwrap(), "echo");
    }

    #[test]
    fn no_command_has_no_key() {
        assert_eq!(command_key(None, None), None);
        assert_eq!(shell(""), None);
        assert_eq!(shell(" | ; && "), None);
        assert_eq!(argv(&["A=1"]), None);
        assert_eq!(argv(&["/"]), None);
        assert_eq!(command_key(Some(&[]), None), None);
    }
}
