//! `spillway run` as agent hosts' hooks write it (`--host H --no-tty --kill-on-disconnect --
//! CMD...`) and as people type a plain one (`-- CMD...`, `-c TEXT`, perhaps with `--json`,
//! `--socket`, `--data-dir`), read without clap.
//!
//! Every command an agent runs starts spillway once, and building clap's parser for `run`'s
//! forty-odd flags, then parsing with it, took 0.39 ms of a short run's client (most of it the
//! first touch of clap's code: page faults). This reads the few lines above by hand, as clap
//! reads them; any other line, or anything unusual in one (a flag twice, a value that starts
//! with `-`, bytes that are not UTF-8, `SPILLWAY_COMPACT` set), is left to clap, so the fast
//! way never has to give an error of its own. The tests hold both readings to one another.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::ValueEnum;

use super::RunArgs;
use crate::client::args::{CompactArg, UntilArgs};
use crate::client::args::{EndpointArgs, HighlightArgs, LimitArgs, RedactFlag, ResourceArgs};
use crate::client::hook::Host;
use crate::client::live_cli::LiveRunArgs;
use crate::protocol::Direction;

/// The environment variables `run`'s flags are read from besides their own: the first two
/// are read here as clap reads them ([`EndpointArgs::from_env`]); with the others set, clap
/// reads the line.
pub(super) const FLAG_ENVS: [&str; 3] = [
    crate::config::SOCKET_ENV,
    crate::storage::spill::DATA_DIR_ENV,
    COMPACT_ENV,
];
const COMPACT_ENV: &str = "SPILLWAY_COMPACT";

/// `run`'s arguments (those after `run`) read by hand, or `None` for clap to read.
pub(crate) fn read(args: &[OsString]) -> Option<RunArgs> {
    if !environment_as_read_here() {
        return None;
    }
    let mut args = args.iter().map(|arg| arg.to_str());
    let mut run = defaults();
    let mut seen: Vec<&str> = Vec::new();
    while let Some(arg) = args.next() {
        let arg = arg?;
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") && flag.len() > 2 => (flag, Some(value)),
            _ => (arg, None),
        };
        if seen.contains(&flag) {
            return None;
        }
        seen.push(flag);
        match (flag, inline) {
            ("--", None) => {
                run.command = args
                    .map(|arg| arg.map(str::to_string))
                    .collect::<Option<_>>()?;
                return (!run.command.is_empty()).then_some(run).filter(no_conflict);
            }
            ("-c" | "--shell", _) => {
                run.shell = Some(value(inline, &mut args)?.to_string());
                return args.next().is_none().then_some(run).filter(no_conflict);
            }
            ("--host", _) => {
                run.host = Some(Host::from_str(value(inline, &mut args)?, false).ok()?)
            }
            ("--socket", _) => run.endpoint.set_socket(path(value(inline, &mut args)?)?),
            ("--data-dir", _) => run.endpoint.set_data_dir(path(value(inline, &mut args)?)?),
            ("--no-tty", None) => run.no_tty = true,
            ("--json", None) => run.json = true,
            ("--kill-on-disconnect", None) => run.live.kill_on_disconnect = true,
            _ => return None,
        }
    }
    None
}

/// A flag's value: after its `=`, or the next argument unless that looks like a flag.
fn value<'a>(
    inline: Option<&'a str>,
    args: &mut impl Iterator<Item = Option<&'a str>>,
) -> Option<&'a str> {
    match inline {
        Some(value) => Some(value),
        None => args.next()?.filter(|value| !value.starts_with('-')),
    }
}

/// A path flag's value (clap refuses an empty one).
fn path(value: &str) -> Option<PathBuf> {
    (!value.is_empty()).then(|| PathBuf::from(value))
}

/// Whether the environment holds nothing clap would read otherwise than
/// [`EndpointArgs::from_env`] does: no `SPILLWAY_COMPACT`, no empty endpoint variable.
fn environment_as_read_here() -> bool {
    FLAG_ENVS.iter().all(|name| match std::env::var_os(name) {
        None => true,
        Some(value) => *name != COMPACT_ENV && !value.is_empty(),
    })
}

/// What clap refuses among the lines read here: `--host` with `--json`.
fn no_conflict(run: &RunArgs) -> bool {
    !(run.host.is_some() && run.json)
}

/// `run`'s flags as clap gives them when none is on the line.
fn defaults() -> RunArgs {
    RunArgs {
        redact: RedactFlag::default(),
        limits: LimitArgs::default(),
        max_spill: None,
        highlights: HighlightArgs::default(),
        compact: CompactArg::default(),
        max_tokens: None,
        direction: Direction::default(),
        timeout: None,
        cwd: None,
        env: Vec::new(),
        tags: Vec::new(),
        no_tty: false,
        cols: None,
        rows: None,
        term: None,
        raw: false,
        json: false,
        live: LiveRunArgs::default(),
        until: UntilArgs::default(),
        resources: ResourceArgs::default(),
        shell: None,
        endpoint: EndpointArgs::from_env(),
        host: None,
        command: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use clap::{Args, FromArgMatches};
    use proptest::prelude::*;

    use super::*;

    /// `run`'s arguments as clap reads them, or `None` where it refuses them.
    fn by_clap(args: &[&str]) -> Option<RunArgs> {
        let command = RunArgs::augment_args(clap::Command::new("run").no_binary_name(true));
        let matches = command.try_get_matches_from(args).ok()?;
        RunArgs::from_arg_matches(&matches).ok()
    }

    fn by_hand(args: &[&str]) -> Option<RunArgs> {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        read(&args)
    }

    /// Both readings of `args`: the same, where the fast one reads them at all.
    fn check(args: &[&str]) -> Result<(), TestCaseError> {
        if let Some(fast) = by_hand(args) {
            let clap = by_clap(args);
            prop_assert!(clap.is_some(), "clap refuses {args:?}, read as {fast:?}");
            prop_assert_eq!(
                format!("{fast:?}"),
                format!("{:?}", clap.unwrap()),
                "{:?}",
                args
            );
        }
        Ok(())
    }

    #[test]
    fn hooks_and_plain_runs_are_read_as_clap_reads_them() {
        // What a hook writes, as the host's shell splits it (after the program and `run`).
        let context = crate::client::hook::Context {
            program: "/opt/bin/spillway".into(),
            ..crate::client::hook::Context::from_env()
        };
        let line = crate::client::hook::rewrite(Host::Codex, "ls -l 'a b'", &context).unwrap();
        let words = shlex::split(&line).unwrap();
        let hook: Vec<&str> = words[2..].iter().map(String::as_str).collect();
        for args in [
            &["--", "true"][..],
            &["--", "sh", "-c", "echo hi; exit 3"],
            &["--", ""],
            &["--", "ls", "--", "-x"],
            &["-c", "echo hi"],
            &["--shell", "echo hi"],
            &["--shell=echo hi"],
            &["--no-tty", "--json", "--", "true"],
            &[
                "--host",
                "gemini",
                "--no-tty",
                "--kill-on-disconnect",
                "--",
                "bash",
                "-c",
                "x",
            ],
            &["--host=claude-code", "-c", "x"],
            &["--socket", "/tmp/s", "--data-dir", "/tmp/d", "--", "true"],
            &["--socket=/tmp/s", "--data-dir=/tmp/d", "-c", "true"],
            &hook,
        ] {
            assert!(by_hand(args).is_some(), "{args:?} is read by hand");
            check(args).unwrap();
        }
    }

    #[test]
    fn anything_else_is_left_to_clap() {
        for args in [
            &[][..],
            &["--"],
            &["true"],
            &["--max-lines", "5", "--", "true"],
            &["--no-tty", "--no-tty", "--", "true"],
            &["--no-tty=yes", "--", "true"],
            &["--host", "codex", "--json", "--", "true"],
            &["--host", "nowhere", "--", "true"],
            &["--host", "--no-tty", "--", "true"],
            &["--socket", "-s", "--", "true"],
            &["-c", "-x"],
            &["-c", "x", "y"],
            &["-c", "x", "--", "y"],
            &["-cx"],
            &["--follow", "--", "true"],
        ] {
            assert!(by_hand(args).is_none(), "{args:?} is left to clap");
        }
    }

    #[test]
    fn every_flag_read_from_the_environment_is_known_here() {
        let command = RunArgs::augment_args(clap::Command::new("run"));
        let mut envs: Vec<String> = command
            .get_arguments()
            .filter_map(|arg| arg.get_env())
            .map(|env| env.to_string_lossy().into_owned())
            .collect();
        envs.sort();
        let mut known = FLAG_ENVS.map(str::to_string).to_vec();
        known.sort();
        assert_eq!(envs, known);
    }

    proptest! {
        /// Whatever line of `run`'s flags and words, the hand reading, where it reads one at
        /// all, is clap's.
        #[test]
        fn a_line_read_by_hand_is_read_as_clap_reads_it(
            picks in proptest::collection::vec(0usize..TOKENS.len(), 0..9),
        ) {
            let args: Vec<&str> = picks.iter().map(|&i| TOKENS[i]).collect();
            check(&args)?;
        }
    }

    const TOKENS: [&str; 22] = [
        "--",
        "-c",
        "--shell",
        "--shell=x",
        "--host",
        "codex",
        "opencode",
        "--host=copilot",
        "--no-tty",
        "--json",
        "--kill-on-disconnect",
        "--socket",
        "/s",
        "--data-dir=/d",
        "--data-dir",
        "true",
        "echo hi",
        "-x",
        "--max-lines",
        "7",
        "--follow",
        "",
    ];
}
