//! The command-line edge: parses flags into validated settings, runs the engine, prints.
//!
//! Errors are reported here, once, with their context (`anyhow`); the library modules below
//! return typed errors. A closed stdout (`spillway truncate ... | head`) is not an error.

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

use crate::capture::{Capture, DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, Limits, SpillPolicy};
use crate::normalise::{NormaliseOptions, Normaliser};
use crate::preview::{CliSteps, Direction, Preview};
use crate::read::{self, ReadRequest};
use crate::spill::{DATA_DIR_ENV, DataDir};

/// Exit code for spillway's own failures (bad flags, unreadable input), as `timeout(1)` uses.
const EXIT_FAILURE: u8 = 125;

/// Size of each read from standard input.
const READ_CHUNK: usize = 256 * 1024;

#[derive(Debug, Parser)]
#[command(
    name = "spillway",
    version,
    about = "Bounded previews of command output for AI agents; every byte kept on disk."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Read standard input to its end and print a preview that fits a model's context.
    ///
    /// Terminal escapes are stripped and progress bars collapsed; when the output is over the
    /// limits, the whole of it is written to a spill file whose path the notice gives.
    Truncate(TruncateArgs),
    /// Print lines of a spill file, a page at a time.
    Read(ReadArgs),
}

#[derive(Debug, Args)]
struct TruncateArgs {
    #[command(flatten)]
    limits: LimitArgs,
    /// Which part of a long output to keep.
    #[arg(long, value_enum, default_value_t)]
    direction: Direction,
    /// Where spill files go [default: $XDG_STATE_HOME/spillway, else ~/.local/state/spillway].
    #[arg(long, env = DATA_DIR_ENV, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Keep escape sequences and carriage returns; only repair invalid UTF-8.
    #[arg(long)]
    raw: bool,
    /// Print the result object as JSON instead of the preview text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct LimitArgs {
    /// Most lines of output to show.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_LINES as u64)]
    max_lines: u64,
    /// Most bytes of output to show.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_BYTES as u64)]
    max_bytes: u64,
}

#[derive(Debug, Args)]
struct ReadArgs {
    /// The spill file.
    path: PathBuf,
    /// First line to print (1-based).
    #[arg(long, value_name = "N", default_value_t = 1)]
    offset: u64,
    /// Most lines to print.
    #[arg(long, value_name = "M", default_value_t = read::DEFAULT_READ_LIMIT)]
    limit: usize,
    /// Most bytes to print.
    #[arg(long, value_name = "N", default_value_t = read::DEFAULT_READ_MAX_BYTES)]
    max_bytes: usize,
}

/// Runs the command line and turns the outcome into an exit code.
pub fn main() -> ExitCode {
    ignore_sigxfsz();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(EXIT_FAILURE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let outcome = match cli.command {
        Command::Truncate(args) => truncate(args),
        Command::Read(args) => read_spill(args),
    };
    match outcome {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("spillway: error: {e:#}");
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

/// A file-size limit (`ulimit -f`) would otherwise kill us with SIGXFSZ mid-spill; ignored, the
/// write fails with EFBIG instead and the preview is still given.
fn ignore_sigxfsz() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    // SAFETY: installing SIG_IGN runs no code in signal context.
    let _ = unsafe { signal(Signal::SIGXFSZ, SigHandler::SigIgn) };
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

fn truncate(args: TruncateArgs) -> Result<ExitCode> {
    let limits = Limits::new(args.limits.max_lines, args.limits.max_bytes)?;
    let root = DataDir::locate(args.data_dir.as_deref())?;
    let mut normaliser = Normaliser::new(NormaliseOptions {
        raw: args.raw,
        ..NormaliseOptions::default()
    });
    let mut capture = Capture::new(limits, SpillPolicy::WhenTruncated(DataDir::at(&root)));
    let mut stdin = io::stdin().lock();
    let mut buf = vec![0u8; READ_CHUNK];
    let mut text = String::new();
    loop {
        let n = match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("reading standard input"),
        };
        normaliser.feed(&buf[..n], &mut text);
        capture.write_owned(&mut text);
    }
    normaliser.finish(&mut text);
    capture.write(&text);
    capture.finish();
    let preview = Preview::build(&capture.view(), args.direction, &CliSteps);
    let mut out = io::stdout().lock();
    if args.json {
        serde_json::to_writer(&mut out, &preview)?;
        out.write_all(b"\n")?;
    } else {
        out.write_all(preview.content.as_bytes())?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn read_spill(args: ReadArgs) -> Result<ExitCode> {
    let request = ReadRequest {
        offset: args.offset,
        limit: args.limit,
        max_bytes: args.max_bytes,
    };
    let page = read::read_page(&args.path, &request)?;
    let mut out = io::stdout().lock();
    if page.total_lines == 0 {
        writeln!(out, "[{} is empty: 0 lines]", args.path.display())?;
    }
    out.write_all(page.text.as_bytes())?;
    if let Some(notice) = page.notice(|next| format!("--offset {next}")) {
        writeln!(out, "{notice}")?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
