//! Telling the client that started a daemon how its start-up went.
//!
//! A daemon started on demand (`crate::client::connection`) logs to `<data-dir>/daemon.log`. When it fails
//! to start the log may be empty (on a full disk, where the log cannot be written either), and
//! the client used to report only that no daemon answered in time. So a client starts it with
//! `--report-start` and its standard output a pipe: the daemon writes one line there, `ready`,
//! `busy: ` and why it will not start when another daemon serves (or is about to serve) its
//! socket ([`AnotherServes`]: the client waits for that one), or `error: ` and why it could not
//! start; then it points its standard output at `/dev/null`, which closes the pipe. A pipe
//! needs no disk. The client tells the three apart by that first word, never by the wording
//! of the reason.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;

/// A start-up refused because another daemon serves this daemon's socket, or holds its data
/// directory and is about to: the client that started this one waits for that one instead.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct AnotherServes(pub String);

/// The pipe to the starting client, when there is one.
pub struct StartReport(Option<File>);

impl StartReport {
    /// Takes standard output as the report pipe when `enabled`.
    pub fn new(enabled: bool) -> StartReport {
        let pipe = enabled
            .then(|| std::io::stdout().as_fd().try_clone_to_owned().ok())
            .flatten()
            .map(File::from);
        StartReport(pipe)
    }

    /// The daemon serves: tell the client and let the pipe go.
    pub fn ready(&mut self) {
        self.finish("ready");
    }

    /// The daemon cannot start, because of `error`.
    pub fn failed(&mut self, error: &anyhow::Error) {
        let word = if error.chain().any(|cause| cause.is::<AnotherServes>()) {
            "busy"
        } else {
            "error"
        };
        self.finish(&format!("{word}: {error:#}"));
    }

    fn finish(&mut self, line: &str) {
        let Some(mut pipe) = self.0.take() else {
            return;
        };
        let _ = writeln!(pipe, "{line}");
        drop(pipe);
        // Standard output still holds the pipe open: the client would wait for its end.
        if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
            let _ = nix::unistd::dup2_stdout(&null);
        }
    }
}
