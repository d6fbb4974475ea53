//! `spillway init --agent HOST`: wires spillway into an agent host with one command, the way
//! rtk and squeez do: the host's pre-tool hook (or plugin) routes its shell tool through
//! `spillway run`, and `spillway mcp` is registered for what a hook cannot give (reading,
//! searching, waiting on, typing into and killing runs, and their history).
//!
//! Editing someone's configuration is done with care:
//! - everything else in the file is kept: other keys in their order, other hooks, the file's
//!   indent; a file the edit leaves equal is not rewritten at all (so `init` twice changes
//!   nothing the second time);
//! - before the first edit of an existing file, its original is copied to
//!   `FILE.spillway-backup` (once: a later `init` keeps the first copy);
//! - `--uninstall` removes exactly what `init` added; when what is left equals the backup, the
//!   backup's bytes are put back, so the file is byte-identical to before. A file `init`
//!   created is deleted again, with the directories it had to create if they are left empty;
//! - `--dry-run` prints what would change and writes nothing.

mod entries;
mod files;
mod hosts;
mod json;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::Args;

use crate::client::hook::Host;
use files::{apply, editable_path, read_optional};
use json::{Json, detect_indent};

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The agent host to wire spillway into.
    #[arg(long, value_enum)]
    agent: Host,
    /// `user`: the host's configuration in your home directory; `project`: the current
    /// directory's project configuration (shareable: it runs `spillway` from PATH).
    #[arg(long, value_enum, default_value_t = Scope::User)]
    scope: Scope,
    /// Print what would change, write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Remove what `init` added (restoring the backup when nothing else changed).
    #[arg(long)]
    uninstall: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scope {
    User,
    Project,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Install,
    Uninstall,
}

/// Where things are, resolved once from the environment.
pub(crate) struct Setup {
    pub scope: Scope,
    /// The program the hooks and MCP entries run: this binary's absolute path at user scope
    /// (found whatever the host's PATH), `spillway` at project scope (a path in a shared
    /// repository would only work on one machine).
    pub program: String,
    pub home: PathBuf,
    pub project: PathBuf,
    /// `$XDG_CONFIG_HOME`, else `~/.config` (opencode).
    pub xdg_config: PathBuf,
    /// `$CODEX_HOME`, else `~/.codex`.
    pub codex_home: PathBuf,
}

impl Setup {
    fn from_env(scope: Scope) -> Result<Setup> {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .context("HOME is not set")?;
        let env_dir = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let program = match scope {
            Scope::Project => "spillway".to_string(),
            Scope::User => std::env::current_exe()
                .context("cannot find the spillway binary's path")?
                .into_os_string()
                .into_string()
                .map_err(|_| anyhow::anyhow!("the spillway binary's path is not UTF-8"))?,
        };
        Ok(Setup {
            scope,
            program,
            project: std::env::current_dir().context("cannot read the current directory")?,
            xdg_config: env_dir("XDG_CONFIG_HOME").unwrap_or_else(|| home.join(".config")),
            codex_home: env_dir("CODEX_HOME").unwrap_or_else(|| home.join(".codex")),
            home,
        })
    }
}

/// How a file is compared and judged empty.
pub(crate) enum Format {
    Json,
    Toml,
    /// A file spillway writes whole (a plugin, a hooks file of its own).
    Owned,
}

type Change = Box<dyn Fn(Option<&str>, Mode) -> Result<Option<String>>>;

/// One file to change: its new text from its current one (None: it should not exist).
pub(crate) struct Edit {
    pub path: PathBuf,
    pub format: Format,
    pub change: Change,
}

impl Edit {
    /// An edit of a JSON object file by `f`. When `f` leaves the value as it was, the text is
    /// kept byte for byte; otherwise it is printed with the file's own indent.
    pub(crate) fn json(path: PathBuf, f: impl Fn(&mut Json, Mode) -> Result<()> + 'static) -> Edit {
        Edit {
            path,
            format: Format::Json,
            change: Box::new(move |old, mode| {
                let text = old.unwrap_or("");
                let before = if text.trim().is_empty() {
                    Json::Object(vec![])
                } else {
                    Json::parse(text).context(
                        "cannot parse it as JSON (comments and trailing commas are not supported: make the change by hand)",
                    )?
                };
                if !matches!(before, Json::Object(_)) {
                    bail!("it does not hold a JSON object");
                }
                let mut after = before.clone();
                f(&mut after, mode)?;
                if after == before {
                    return Ok(old.map(str::to_string));
                }
                let mut out = after.render(&detect_indent(text));
                if old.is_none() || text.ends_with('\n') {
                    out.push('\n');
                }
                Ok(Some(out))
            }),
        }
    }

    /// A file that is spillway's own, recognised by `mark` in its text: written whole, deleted
    /// on uninstall; a file of that name that is not spillway's is never touched.
    pub(crate) fn owned(path: PathBuf, content: String, mark: &'static str) -> Edit {
        let display = path.display().to_string();
        Edit {
            path,
            format: Format::Owned,
            change: Box::new(move |old, mode| match (old, mode) {
                (Some(text), _) if !text.contains(mark) => {
                    bail!("{display} exists and was not written by spillway: move it away first")
                }
                (_, Mode::Install) => Ok(Some(content.clone())),
                (_, Mode::Uninstall) => Ok(None),
            }),
        }
    }

    /// Whether `text` holds nothing (what is left of a file `init` created, after uninstall).
    fn is_empty(&self, text: &str) -> bool {
        match self.format {
            Format::Json => Json::parse(text).is_ok_and(|j| j.is_empty_container()),
            Format::Toml => text.trim().is_empty(),
            Format::Owned => false,
        }
    }

    /// Whether `a` and `b` hold the same configuration, whatever their layout.
    fn same(&self, a: &str, b: &str) -> bool {
        match self.format {
            Format::Json => {
                let parse = |t: &str| match t.trim() {
                    "" => Ok(Json::Object(vec![])),
                    t => Json::parse(t),
                };
                match (parse(a), parse(b)) {
                    (Ok(a), Ok(b)) => a == b,
                    _ => a == b,
                }
            }
            Format::Toml | Format::Owned => a.trim_end() == b.trim_end(),
        }
    }
}

/// How far `host` is wired in at `scope`, judged by what `init` would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wiring {
    /// Every file is as `init` (of this binary) would leave it.
    Installed,
    /// Some of it is there, or it is there for another spillway binary or an earlier version:
    /// these files would change.
    Partly(Vec<PathBuf>),
    /// Nothing of spillway's is there.
    Absent,
}

/// Whether `host` is wired in at `scope` (nothing is written).
pub(crate) fn wiring(host: Host, scope: Scope) -> Result<Wiring> {
    let setup = Setup::from_env(scope)?;
    let mut pending = Vec::new();
    let mut present = false;
    for edit in hosts::edits(host, &setup) {
        let old = read_optional(&edit.path)?;
        let installed = (edit.change)(old.as_deref(), Mode::Install)
            .with_context(|| format!("cannot read {}", edit.path.display()))?;
        let removed = (edit.change)(old.as_deref(), Mode::Uninstall)
            .with_context(|| format!("cannot read {}", edit.path.display()))?;
        // A file that would be created empty is a file that is not there.
        let text = |t: Option<String>| t.filter(|t| !t.trim().is_empty());
        let old = text(old);
        if text(installed) != old {
            pending.push(edit.path.clone());
        }
        if text(removed) != old {
            present = true;
        }
    }
    Ok(match (pending.is_empty(), present) {
        (true, _) => Wiring::Installed,
        (false, true) => Wiring::Partly(pending),
        (false, false) => Wiring::Absent,
    })
}

/// The backup of `path`: a copy of its original, taken before spillway first changed it.
pub fn backup_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".spillway-backup");
    PathBuf::from(name)
}

pub fn run(args: InitArgs) -> Result<ExitCode> {
    let setup = Setup::from_env(args.scope)?;
    let mode = if args.uninstall {
        Mode::Uninstall
    } else {
        Mode::Install
    };
    let mut edits = hosts::edits(args.agent, &setup);
    for edit in &mut edits {
        edit.path = editable_path(&edit.path, args.scope)?;
    }
    // Every file is worked out before any is written, so a file that cannot be parsed stops
    // the whole change instead of leaving the host half wired.
    let mut planned = Vec::new();
    for edit in &edits {
        let old = read_optional(&edit.path)?;
        let new = (edit.change)(old.as_deref(), mode)
            .with_context(|| format!("cannot change {}", edit.path.display()))?;
        planned.push((edit, old, new));
    }
    let mut out = io::stdout().lock();
    for (edit, old, new) in planned {
        apply(edit, old, new, mode, args.dry_run, &setup, &mut out)?;
    }
    if !args.dry_run {
        notes(args.agent, args.scope, mode, &mut out)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What the user still has to do, per host, once the files are written.
fn notes(host: Host, scope: Scope, mode: Mode, out: &mut impl Write) -> Result<()> {
    if mode == Mode::Uninstall {
        return Ok(());
    }
    let note = match (host, scope) {
        (Host::Codex, Scope::User) => {
            "not active yet: Codex runs a new hook only once you trust it (open /hooks in Codex \
             and trust spillway's); until then commands run without spillway."
        }
        (Host::Codex, Scope::Project) => {
            "not active yet: Codex loads a project's hooks only in a trusted project and runs a \
             new hook only once you trust it (open /hooks in Codex and trust spillway's); until \
             then commands run without spillway."
        }
        (Host::Gemini, Scope::Project) => {
            "Gemini CLI loads a project's settings only in a trusted folder."
        }
        (Host::Copilot, Scope::Project) => {
            "Copilot CLI loads the project's .mcp.json once the folder is trusted."
        }
        _ => return Ok(()),
    };
    writeln!(out, "note: {note}")?;
    Ok(())
}
