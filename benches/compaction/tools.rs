//! The tools compared, each run on a workload: the command itself (plain), spillway's preview of
//! its output, and the peers that cut output for agents (rtk, squeez), each run as its users
//! run it. Every tool's standard error is merged into its standard output, as an agent's shell
//! tool reads both.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::BenchResult;
use crate::workloads::{Workload, path_with};

/// One tool's text for a workload.
pub struct Output {
    pub text: String,
    /// Set when the tool could not run the command as itself and its text is the plain output
    /// (what its hook would have let through), with why.
    pub passthrough: Option<String>,
}

/// The tools of one benchmark run.
pub struct Tools {
    pub spillway: PathBuf,
    pub rtk: Option<PathBuf>,
    pub squeez: Option<PathBuf>,
    /// Home and state directories for the peers, so they record nothing in the user's.
    pub home: PathBuf,
    pub data_dir: PathBuf,
    pub path: String,
    /// The toolchain's homes, kept while `HOME` moves, so `cargo` still finds its toolchain.
    pub toolchain_homes: Vec<(&'static str, PathBuf)>,
}

impl Tools {
    pub fn new(spillway: &str, peers: &Path, work: &Path) -> BenchResult<Tools> {
        let found = |name: &str| Some(peers.join("bin").join(name)).filter(|p| p.exists());
        let home = work.join("home");
        let data_dir = work.join("spillway-data");
        std::fs::create_dir_all(&home)?;
        Ok(Tools {
            spillway: PathBuf::from(spillway),
            rtk: found("rtk"),
            squeez: found("squeez"),
            home,
            data_dir,
            path: path_with(peers),
            toolchain_homes: toolchain_homes(),
        })
    }

    /// The command's own output.
    pub fn plain(&self, workload: &Workload) -> BenchResult<String> {
        self.shell(workload, &workload.command)
    }

    /// `spillway truncate`'s preview of `plain`, at its defaults.
    pub fn spillway(&self, plain: &str) -> BenchResult<String> {
        let mut child = Command::new(&self.spillway)
            .arg("truncate")
            .arg("--data-dir")
            .arg(&self.data_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        child
            .stdin
            .take()
            .ok_or("no stdin")?
            .write_all(plain.as_bytes())?;
        let out = child.wait_with_output()?;
        if !out.status.success() {
            return Err(format!(
                "spillway truncate failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// What rtk's hook makes of the command (`rtk rewrite COMMAND`, which its hooks call): the
    /// rewritten command's output, or the plain output when the hook leaves the command alone.
    pub fn rtk(&self, workload: &Workload, plain: &str) -> BenchResult<Option<Output>> {
        let Some(rtk) = &self.rtk else {
            return Ok(None);
        };
        let quoted = shlex::try_quote(&workload.command)?;
        let rewritten = self.shell(workload, &format!("{} rewrite {quoted}", rtk.display()))?;
        let rewritten = rewritten.trim();
        if !rewritten.starts_with("rtk ") {
            return Ok(Some(Output {
                text: plain.to_owned(),
                passthrough: Some("not rewritten by its hook".into()),
            }));
        }
        let command = format!("{}{}", rtk.display(), &rewritten["rtk".len()..]);
        Ok(Some(passthrough_if_refused(
            self.shell(workload, &command)?,
            plain,
        )))
    }

    /// `squeez wrap 'COMMAND'`, as its hooks rewrite a shell tool's command.
    pub fn squeez(&self, workload: &Workload, plain: &str) -> BenchResult<Option<Output>> {
        let Some(squeez) = &self.squeez else {
            return Ok(None);
        };
        let quoted = shlex::try_quote(&workload.command)?;
        let text = self.shell(workload, &format!("{} wrap {quoted}", squeez.display()))?;
        Ok(Some(passthrough_if_refused(text, plain)))
    }

    /// Runs `script` with `sh -c` in the workload's directory, standard error merged in order.
    fn shell(&self, workload: &Workload, script: &str) -> BenchResult<String> {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("exec 2>&1; {script}"))
            .current_dir(&workload.dir)
            .env("PATH", &self.path)
            .env("HOME", &self.home)
            .env("SQUEEZ_DIR", self.home.join("squeez"))
            .env("NO_COLOR", "1")
            .env("LC_ALL", "C")
            .envs(self.toolchain_homes.iter().map(|(k, v)| (*k, v)))
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("RUST_BACKTRACE")
            .stdin(Stdio::null())
            .output()?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// `RUSTUP_HOME` and `CARGO_HOME` as the bench's own environment has them, or where they are
/// under the real `HOME`.
fn toolchain_homes() -> Vec<(&'static str, PathBuf)> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    [("RUSTUP_HOME", ".rustup"), ("CARGO_HOME", ".cargo")]
        .into_iter()
        .filter_map(|(name, dir)| {
            let path = std::env::var_os(name)
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(dir)))?;
            Some((name, path))
        })
        .collect()
}

/// A peer that refuses a command it has no filter for (a usage error) stands for the plain
/// output: its hook would not have rewritten the command.
fn passthrough_if_refused(text: String, plain: &str) -> Output {
    let refused = text.len() < 2000
        && (text.contains("unrecognized subcommand")
            || text.contains("Usage:") && !plain.contains("Usage:"));
    if refused {
        let why = text
            .lines()
            .next()
            .unwrap_or_default()
            .chars()
            .take(80)
            .collect();
        Output {
            text: plain.to_owned(),
            passthrough: Some(why),
        }
    } else {
        Output {
            text,
            passthrough: None,
        }
    }
}
