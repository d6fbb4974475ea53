//! `spillway completions SHELL` and `spillway man`: shell completions and manual pages made
//! from the same definitions as the command line itself (`clap_complete`, `clap_mangen`), so
//! they never drift from it.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, CommandFactory, ValueEnum};

/// The shells completions are made for.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: Shell,
}

#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// Write every page (spillway.1, spillway-run.1, ...) into this directory instead of
    /// printing spillway.1.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Prints the completion script for `args.shell` (see the README for where it goes).
pub(crate) fn completions<C: CommandFactory>(args: &CompletionsArgs) -> Result<ExitCode> {
    let shell = match args.shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    // Made in memory first: `generate` panics when its writer fails (`| head`).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut C::command(), "spillway", &mut script);
    let mut out = io::stdout().lock();
    out.write_all(&script)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Prints the manual page, or writes all of them into a directory.
pub(crate) fn man<C: CommandFactory>(args: &ManArgs) -> Result<ExitCode> {
    let cmd = C::command();
    match &args.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(cmd, dir)
                .with_context(|| format!("cannot write the pages into {}", dir.display()))?;
        }
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(cmd).render(&mut page)?;
            let mut out = io::stdout().lock();
            out.write_all(&page)?;
            out.flush()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
