//! Telling the client that started a daemon how its start-up went.
//!
//! A daemon started on demand (`crate::client::connection`) logs to `<data-dir>/daemon.log`. When it fails
//! to start the log may be empty (on a full disk, where the log cannot be written either), and
//! the client used to report only that no daemon answered in time. So a client starts it with
//! `--report-start` and its standard output a pipe: the daemon writes one line there, `ready`,
//! or `error: ` and why it could not start, and then points its standard output at
//! `/dev/null`, which closes the pipe. A pipe needs no disk.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;

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
        self.finish(&format!("error: {error:#}"));
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
