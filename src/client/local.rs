//! The commands that work without the daemon, on this process's own input or files:
//! `spillway truncate` (the engine over standard input, the spill registered in the index),
//! `spillway read` (a page of a spill file), and the hidden `count-tokens` that truncate
//! leaves a run's token count to.

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::client::args::{CompactArg, HighlightArgs, LimitArgs, RedactFlag, parse_spill_cap};
use crate::client::detached;
use crate::engine::capture::{Capture, Limits, Outcome, SpillPolicy};
use crate::engine::driver::Engine;
use crate::engine::normalise::{NormaliseOptions, Normaliser};
use crate::engine::redact::{self, Redactor, Warm};
use crate::engine::savings::{run_tokens, spilled_output};
use crate::engine::tokens::OutputText;
use crate::program::CliSteps;
use crate::protocol::{Direction, Preview, RunId, RunStatus};
use crate::read_buffer::ReadBuffer;
use crate::storage::index::{Ending, INDEX_FILE, Index, NewRun, RunEnd};
use crate::storage::read::{self, ReadRequest};
use crate::storage::spill::{DATA_DIR_ENV, DataDir};

/// Size of each read from standard input (and from an in-process run's pipe). What a read
/// returns becomes one piece of output, and some of the capture's work is done once a piece,
/// whatever its length: the outline walks a long piece's last lines (1.5 times what a preview
/// shows), the capture copies its last `max_bytes`. With 256 KiB reads that was a third of
/// the text again; with 384 KiB, 64 MiB of a log took 394 M instructions instead of 417 M.
/// Larger still costs memory, each batch buffer in flight that much bigger: 512 KiB reads
/// took `truncate`'s peak RSS past the 16 MiB it keeps under.
pub(crate) const READ_CHUNK: usize = 384 * 1024;

#[derive(Debug, Args)]
pub(crate) struct TruncateArgs {
    #[command(flatten)]
    redact: RedactFlag,
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
    /// Cap on the spill file: past it the file stops growing (the preview goes on).
    #[arg(long, env = "SPILLWAY_MAX_SPILL", value_name = "SIZE", value_parser = parse_spill_cap, default_value = "1GiB")]
    max_spill: u64,
    /// Print the result object as JSON instead of the preview text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    highlights: HighlightArgs,
    #[command(flatten)]
    compact: CompactArg,
    /// Also hold the preview to this many model tokens (o200k tokenizer).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_tokens: Option<u64>,
}

#[derive(Debug, Args)]
pub(crate) struct ReadArgs {
    #[command(flatten)]
    redact: RedactFlag,
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

#[derive(Debug, Args)]
pub(crate) struct CountTokensArgs {
    /// The data directory whose index holds the run.
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,
    /// The run.
    id: RunId,
}

/// Once this much input has come, `truncate` compiles, beside the rest of the stream, the
/// redaction rules these first bytes wake. The preview of a longer output folds its lines into
/// templates, and redacting it wakes the rules its alike lines wake, which its first bytes
/// wake too: compiled only at the end, they would hold up the preview. All 42 would cost 40 M
/// instructions, on a third thread beside a stream that keeps two cores busy (the truncate
/// bench's log wakes 3). A short output's preview wakes few or none, each compiled when woken.
const WARM_SAMPLE: usize = 64 << 10;

/// Keeps the input's first [`WARM_SAMPLE`] bytes in `sample` (`None`: not wanted, or taken) and,
/// once it holds that many, compiles the redaction rules they wake on a thread of their own;
/// short of that, the rules' prefilter from the first bytes on. Not before: a command that
/// printed nothing has nothing to redact, and a `truncate` of no input took 2.9-3.0 ms with
/// the prefilter compiling beside it against 1.7-1.8 ms without (means of 100 runs).
fn sample_for_rules(sample: &mut Option<Vec<u8>>, input: &[u8]) {
    let Some(kept) = sample else {
        return;
    };
    let first = kept.is_empty();
    let take = (WARM_SAMPLE - kept.len()).min(input.len());
    kept.extend_from_slice(&input[..take]);
    if kept.len() == WARM_SAMPLE {
        let text = String::from_utf8_lossy(kept).into_owned();
        redact::warm_up(Warm::WokenBy(text));
        *sample = None;
    } else if first && take > 0 {
        redact::warm_up(Warm::Prefilter);
    }
}

pub(crate) fn truncate(args: TruncateArgs) -> Result<ExitCode> {
    let started_at = Utc::now();
    let limits = Limits::new(args.limits.max_lines, args.limits.max_bytes)?;
    let root = DataDir::locate(args.data_dir.as_deref())?;
    // The preview is redacted once the input ends: the prefilter compiles while it streams,
    // and the rules its start wakes once `WARM_SAMPLE` bytes have come.
    let mut sample = (!args.redact.no_redact).then(Vec::new);
    let normaliser = Normaliser::new(NormaliseOptions {
        raw: args.raw,
        ..NormaliseOptions::default()
    });
    let capture = Capture::with_patterns(
        limits,
        SpillPolicy::WhenTruncated(DataDir::at(&root)),
        args.highlights.patterns()?,
    )
    .with_spill_cap(args.max_spill);
    let mut engine = Engine::new(normaliser, capture).with_compact(args.compact.on());
    let mut stdin = io::stdin().lock();
    let mut buf = ReadBuffer::new(READ_CHUNK);
    loop {
        match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                sample_for_rules(&mut sample, &buf[..n]);
                engine.feed(&buf[..n]);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("reading standard input"),
        }
    }
    engine.finish();
    let max_tokens = args
        .max_tokens
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    let spill = engine.capture().spill_path().map(|p| p.to_string_lossy());
    let (preview, registered) = std::thread::scope(|scope| {
        // The run's row goes into the index while the preview is made: opening the index
        // (which reads the log the last process left) took 1.0-1.3 ms of each `truncate`
        // that spills, on its path to the preview's printing.
        let row = spill
            .as_deref()
            .map(|spill| scope.spawn(|| insert_truncated(&root, spill, started_at)));
        // Standard input's writer is not known, nor how it ended.
        let mut preview = engine.preview(args.direction, &CliSteps, max_tokens, Outcome::Unknown);
        if !args.redact.no_redact {
            preview.redact(Redactor::builtin());
        }
        let registered = row.and_then(|row| registered(row, &preview));
        (preview, registered)
    });
    let mut out = io::stdout().lock();
    if args.json {
        serde_json::to_writer(&mut out, &preview)?;
        out.write_all(b"\n")?;
    } else {
        out.write_all(preview.content.as_bytes())?;
    }
    out.flush()?;
    if let Some(id) = registered {
        let job = TokenJob {
            output: output_to_count(engine),
            preview,
        };
        if let Err(e) = count_tokens_later(&root, &id, &job) {
            eprintln!("spillway: warning: this run's tokens will not be counted ({e:#})");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Where the token count finds the output `engine` took, the engine given up on the way (its
/// writer thread joined, its buffers freed) so that the count starts only once this process
/// has nothing left to do but exit: started first, it took a core from the engine's teardown,
/// which then lasted 0.3-4.8 ms instead of 0.3-0.5 (256 MiB of the truncate bench's log).
fn output_to_count(mut engine: Engine) -> JobOutput {
    if engine.capture().spill_holds_output() {
        JobOutput::InSpill
    } else {
        JobOutput::Given(engine.capture_mut().take_output_text())
    }
}

/// What the hidden `count-tokens` command counts for a `spillway truncate` run.
#[derive(Debug, PartialEq, Eq)]
struct TokenJob {
    /// The preview as printed (its content), with its folds and what it left out.
    preview: Preview,
    output: JobOutput,
}

/// Where the count finds the output.
#[derive(Debug, PartialEq, Eq)]
enum JobOutput {
    /// In the spill file the preview names, which holds every byte of it: the count reads it
    /// there. Read back by `truncate` and handed over in the job, 1 MiB of output cost it some
    /// 2 ms (a read of the file, a copy into the job, a write of the job).
    InSpill,
    /// In the job: the samples, or the whole text when the spill cannot give it back.
    Given(OutputText),
}

/// A [`TokenJob`]'s first line, in JSON; the whole output's text, when the job has it, follows
/// that line as it is. JSON's escaping of 1 MiB of output took 10 M instructions of
/// `truncate`'s, some 3 ms, and nothing needs the text escaped: the first newline ends the
/// line, since JSON escapes those inside its strings.
#[derive(Serialize, Deserialize)]
struct JobLine<P, O> {
    preview: P,
    /// The output's samples, or `None` when its whole text follows (or is in the spill).
    sampled: Option<O>,
    /// Whether the output is to be read from the spill file the preview names.
    #[serde(default)]
    in_spill: bool,
}

impl TokenJob {
    fn write_to(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        let (sampled, whole) = match &self.output {
            JobOutput::Given(OutputText::Whole(text)) => (None, text.as_str()),
            JobOutput::Given(sampled) => (Some(sampled), ""),
            JobOutput::InSpill => (None, ""),
        };
        let line = JobLine {
            preview: &self.preview,
            sampled,
            in_spill: matches!(self.output, JobOutput::InSpill),
        };
        serde_json::to_writer(&mut *out, &line)?;
        out.push(b'\n');
        out.extend_from_slice(whole.as_bytes());
        Ok(())
    }

    fn read_from(mut input: impl Read) -> Result<TokenJob> {
        let mut bytes = Vec::new();
        input.read_to_end(&mut bytes)?;
        let end = memchr::memchr(b'\n', &bytes).context("the job has no first line")?;
        let line: JobLine<Preview, OutputText> = serde_json::from_slice(&bytes[..end])?;
        let output = match (line.in_spill, line.sampled) {
            (true, _) => JobOutput::InSpill,
            (false, Some(sampled)) => JobOutput::Given(sampled),
            (false, None) => JobOutput::Given(OutputText::Whole(String::from_utf8(
                bytes.split_off(end + 1),
            )?)),
        };
        Ok(TokenJob {
            preview: line.preview,
            output,
        })
    }

    /// The output to count: read from the spill when it is there.
    fn output(self) -> Result<(Preview, OutputText)> {
        let output = match self.output {
            JobOutput::Given(output) => output,
            JobOutput::InSpill => OutputText::Whole(
                spilled_output(&self.preview).context("reading the output from its spill")?,
            ),
        };
        Ok((self.preview, output))
    }
}

/// Leaves the counting of run `id`'s tokens to a child process (the hidden `count-tokens`,
/// given `job` on its standard input), and returns without waiting for it.
///
/// Counting takes the tokenizer, whose build alone costs 0.2-0.5 s and tens of MiB, and then
/// up to a tenth of a second of BPE: counted in `truncate` itself (with `tiktoken-rs`'s
/// tokenizer, built beside the stream), 256 MiB of log text took 0.70 / 1.00 s (fastest /
/// median) against 0.60 / 0.66 s, and its peak RSS was 60 MiB against 17. The child
/// has no terminal and no pipe of the caller's (so whoever reads this process's output or
/// waits for it is not kept waiting), and its own process group (so a Ctrl-C after this
/// process is gone does not stop it); it reads its job from a file in memory ([`job_file`]).
/// It is started without waiting for its `exec` ([`detached::spawn`]).
/// Until it has written them, or if it never does, the run is one without token counts.
fn count_tokens_later(root: &std::path::Path, id: &RunId, job: &TokenJob) -> Result<()> {
    let mut bytes = Vec::new();
    job.write_to(&mut bytes)?;
    let job = job_file(&bytes).context("handing the output to the token count")?;
    let args = [
        "count-tokens".as_ref(),
        "--data-dir".as_ref(),
        root.as_os_str(),
        id.as_str().as_ref(),
    ];
    detached::spawn(&std::env::current_exe()?, &args, job.into())
        .context("starting the token count")
}

/// The token count's job in a file in memory, to be read from its start. The count reads it
/// once it has started, and this process does not wait for that: through a pipe, which takes
/// 64 KiB at once, a `truncate` of 1 MiB waited some 10 ms for the child to start and read the
/// rest.
fn job_file(job: &[u8]) -> io::Result<std::fs::File> {
    use nix::sys::memfd::{MFdFlags, memfd_create};
    use std::io::{Seek, SeekFrom};
    let mut file = std::fs::File::from(memfd_create(c"spillway-token-job", MFdFlags::MFD_CLOEXEC)?);
    file.write_all(job)?;
    file.seek(SeekFrom::Start(0))?;
    Ok(file)
}

/// `count-tokens`: counts a `spillway truncate` run's tokens from the job on standard input
/// and records them in the index.
pub(crate) fn count_tokens(args: CountTokensArgs) -> Result<ExitCode> {
    let job = TokenJob::read_from(io::stdin().lock()).context("reading the token job")?;
    let (preview, text) = job.output()?;
    let tokens = run_tokens(&preview, text);
    let mut index = Index::open(&args.data_dir.join(INDEX_FILE))?;
    index.keep_log_on_close()?;
    index.record_tokens(&args.id, &tokens)?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn read_spill(args: ReadArgs) -> Result<ExitCode> {
    let request = ReadRequest {
        offset: args.offset,
        limit: args.limit,
        max_bytes: args.max_bytes,
    };
    let (mut page, around) = read::read_page(&args.path, &request)?;
    let mut redactions = crate::engine::redact::Counts::new();
    if !args.redact.no_redact {
        page.text = Redactor::builtin().redact_window(
            &around.before,
            &page.text,
            &around.after,
            &mut redactions,
        );
    }
    let mut out = io::stdout().lock();
    if page.total_lines == 0 {
        writeln!(out, "[{} is empty: 0 lines]", args.path.display())?;
    }
    out.write_all(page.text.as_bytes())?;
    if let Some(notice) = page.notice(|next| format!("--offset {next}")) {
        writeln!(out, "{notice}")?;
    }
    if let Some(line) = crate::engine::redact::notice_line(&redactions) {
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Records a `truncate` spill in the index, so history lists it and the purge keeps it for the
/// retention period instead of sweeping it up as an orphan: its row, inserted as the run
/// starts. Returns the index, open for [`finish_truncated`], and the run's id.
fn insert_truncated(
    root: &std::path::Path,
    spill: &str,
    started_at: DateTime<Utc>,
) -> Result<(Index, RunId)> {
    let mut index = Index::open(&root.join(INDEX_FILE))?;
    index.keep_log_on_close()?;
    loop {
        let id = RunId::generate();
        let run = NewRun {
            id: id.clone(),
            argv: None,
            shell: Some("spillway truncate".into()),
            cwd: std::env::current_dir()
                .map(|d| d.to_string_lossy().into_owned())
                .unwrap_or_default(),
            tags: [("source".to_string(), "truncate".to_string())].into(),
            started_at,
            spill_path: Some(spill.to_string()),
            pid: None,
            owner_pid: std::process::id(),
        };
        if index.insert_run(&run)? {
            return Ok((index, id));
        }
    }
}

/// The id of the run whose row `row` is inserting, once its end is recorded with `preview`; a
/// warning, and `None`, when either failed (the preview is printed all the same).
fn registered(
    row: std::thread::ScopedJoinHandle<'_, Result<(Index, RunId)>>,
    preview: &Preview,
) -> Option<RunId> {
    let inserted = row
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("recording the run panicked")));
    finish_truncated(inserted, preview)
        .inspect_err(|e| {
            eprintln!(
                "spillway: warning: the spill is not in the index ({e:#}); a purge may remove it"
            );
        })
        .ok()
}

/// Records the end of the run [`insert_truncated`] inserted, with its `preview`. Returns the
/// run's id; its tokens are counted later ([`count_tokens_later`]).
fn finish_truncated(inserted: Result<(Index, RunId)>, preview: &Preview) -> Result<RunId> {
    let (mut index, id) = inserted?;
    let ending = Ending {
        ended_at: Utc::now(),
        status: RunStatus::Exited,
        exit_code: None,
        signal: None,
    };
    index.finish_run(&id, &RunEnd::new(ending, preview, None))?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_job_reads_back_as_it_was_written() {
        let preview = Preview::whole("a\n\"b\"\n".to_string(), 2);
        let whole = OutputText::Whole("line one\n{\"json\": 1}\n\u{e9}\tend".to_string());
        let mut sampler = crate::engine::tokens::Sampler::new();
        sampler.feed(b"sampled text\n");
        let sampled = OutputText::Sampled {
            samples: sampler.take_samples(),
            total_bytes: 1 << 30,
        };
        let outputs = [
            JobOutput::Given(whole),
            JobOutput::Given(sampled),
            JobOutput::Given(OutputText::Whole(String::new())),
            JobOutput::InSpill,
        ];
        for output in outputs {
            let job = TokenJob {
                preview: preview.clone(),
                output,
            };
            let mut bytes = Vec::new();
            job.write_to(&mut bytes).unwrap();
            assert_eq!(TokenJob::read_from(&bytes[..]).unwrap(), job);
        }
        assert!(TokenJob::read_from(&b"no line"[..]).is_err());
    }
}
