//! Starting a server on purpose: a run that yields as soon as its command is ready (a line of
//! output matches `until`, or `until_port` accepts a connection on localhost), instead of
//! after a fixed time. The run goes on after it: it is listed by `ps`, stopped by `kill` and
//! by the daemon's shutdown, and its output keeps going to its spill.
//!
//! Lines are read from the run's spill file as the reader commits them (the same file
//! `follow` tails), so a match is always a whole line of the normalised text (a line longer
//! than one read is put together first; past [`MAX_MATCHED_LINE`] only its start is matched),
//! numbered as the spill numbers it. A port is tried on 127.0.0.1 and then ::1, every [`PORT_POLL`], and
//! counts only when a process of the run listens on it.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use regex::Regex;
use tokio::sync::watch;

use crate::protocol::Ready;
use crate::protocol::cut::cut_chars;
use crate::storage::follow::{Start, Tail};

/// How often a port is tried.
const PORT_POLL: Duration = Duration::from_millis(100);

/// How long one connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// How often the spill is read again when the reader's progress could not be watched.
const LINE_POLL: Duration = Duration::from_millis(100);

/// Longest matched line reported, in characters (cut never inside a piece that could be a
/// secret: `crate::protocol::cut`).
const MAX_LINE: usize = 500;

/// Most of a line `until` is matched against: a longer line is matched on its first 1 MiB.
const MAX_MATCHED_LINE: usize = 1 << 20;

/// What "ready" means for a run.
#[derive(Debug, Clone)]
pub struct Until {
    pattern: Option<Regex>,
    port: Option<u16>,
}

impl Until {
    /// The condition `pattern` and `port` give; `None` when neither is given. A bad pattern is
    /// an error naming it.
    pub fn new(pattern: Option<&str>, port: Option<u16>) -> Result<Option<Until>, String> {
        if port == Some(0) {
            return Err("until_port must be a port number from 1 to 65535".into());
        }
        let pattern = pattern
            .map(|p| Regex::new(p).map_err(|e| format!("bad until pattern {p:?}: {e}")))
            .transpose()?;
        Ok((pattern.is_some() || port.is_some()).then_some(Until { pattern, port }))
    }

    /// Resolves when the run is ready: the first line from `from_line` of the spill at
    /// `spill` that matches, or the port accepting a connection on a socket that `ours`
    /// (blocking) says the run listens on, whichever comes first. `committed` is the run's count of committed
    /// bytes, which grows as output arrives.
    pub async fn ready(
        &self,
        spill: Option<&Path>,
        from_line: u64,
        committed: watch::Receiver<u64>,
        ours: impl Fn(u16) -> bool + Send + Sync + 'static,
    ) -> Ready {
        let line = async {
            match (&self.pattern, spill) {
                (Some(pattern), Some(path)) => {
                    match matching_line(pattern, path.to_path_buf(), from_line, committed).await {
                        Ok(ready) => ready,
                        Err(e) => {
                            tracing::warn!("cannot read the spill for `until`: {e}");
                            std::future::pending().await
                        }
                    }
                }
                _ => std::future::pending().await,
            }
        };
        let port = async {
            match self.port {
                Some(port) => accepting(port, move || ours(port)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            ready = line => ready,
            ready = port => ready,
        }
    }
}

/// The first line from `from_line` of the growing spill at `path` that `pattern` matches.
async fn matching_line(
    pattern: &Regex,
    path: PathBuf,
    from_line: u64,
    mut committed: watch::Receiver<u64>,
) -> io::Result<Ready> {
    let mut tail = tokio::task::spawn_blocking(move || Tail::open(&path, Start::Line(from_line)))
        .await
        .map_err(io::Error::other)??;
    let mut watching = true;
    // The line being put together from pieces.
    let mut partial = String::new();
    loop {
        let (next, n, events) = tokio::task::spawn_blocking(move || {
            let n = tail.read_more()?;
            let events = tail.events(false);
            Ok::<_, io::Error>((tail, n, events))
        })
        .await
        .map_err(io::Error::other)??;
        tail = next;
        for event in events {
            for (i, piece) in event.text.split_inclusive('\n').enumerate() {
                // A line longer than an event comes in pieces: it is matched once whole.
                if partial.len() < MAX_MATCHED_LINE {
                    let room = MAX_MATCHED_LINE - partial.len();
                    let end = (0..=room.min(piece.len()))
                        .rev()
                        .find(|&at| piece.is_char_boundary(at))
                        .unwrap_or(0);
                    partial.push_str(&piece[..end]);
                }
                if !piece.ends_with('\n') {
                    continue;
                }
                let text = std::mem::take(&mut partial);
                let text = text.strip_suffix('\n').unwrap_or(&text);
                if pattern.is_match(text) {
                    return Ok(Ready::Line {
                        line: event.line + i as u64,
                        text: match cut_chars(text, MAX_LINE) {
                            Some(kept) => format!("{kept}..."),
                            None => text.to_string(),
                        },
                    });
                }
            }
        }
        if n > 0 {
            continue;
        }
        // At the file's end: wait for the reader to commit more (the spill writer follows
        // it within moments, so look again a little later too).
        if watching {
            tokio::select! {
                changed = committed.changed() => watching = changed.is_ok(),
                () = tokio::time::sleep(LINE_POLL) => {}
            }
        } else {
            tokio::time::sleep(LINE_POLL).await;
        }
    }
}

/// Resolves once `port` accepts a connection on 127.0.0.1 or ::1 and `ours` (blocking) says
/// the listener is the run's: another user's server, or one that was there before, on the
/// same port is not the run's being ready.
async fn accepting(port: u16, ours: impl Fn() -> bool + Send + Sync + 'static) -> Ready {
    let ours = std::sync::Arc::new(ours);
    loop {
        for host in ["127.0.0.1", "::1"] {
            let connect = tokio::net::TcpStream::connect((host, port));
            if let Ok(Ok(_stream)) = tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
                let ours = std::sync::Arc::clone(&ours);
                if tokio::task::spawn_blocking(move || ours())
                    .await
                    .unwrap_or(false)
                {
                    return Ready::Port { port };
                }
            }
        }
        tokio::time::sleep(PORT_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_are_checked() {
        assert!(Until::new(None, None).unwrap().is_none());
        assert!(Until::new(Some("("), None).is_err());
        assert!(Until::new(None, Some(0)).is_err());
        assert!(Until::new(Some("ready"), Some(80)).unwrap().is_some());
    }

    #[tokio::test]
    async fn a_line_that_arrives_later_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spill.log");
        std::fs::write(&path, "starting\n").unwrap();
        let until = Until::new(Some("^listening on (\\d+)$"), None)
            .unwrap()
            .unwrap();
        let (tx, rx) = watch::channel(0u64);
        let writer = {
            let path = path.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                std::fs::write(&path, "starting\nlistening on 80\n").unwrap();
                let _ = tx.send(1);
                tx
            })
        };
        let ready = until.ready(Some(&path), 1, rx, |_| true).await;
        assert_eq!(
            ready,
            Ready::Line {
                line: 2,
                text: "listening on 80".into()
            }
        );
        drop(writer.await);
    }

    #[tokio::test]
    async fn a_long_line_is_matched_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spill.log");
        // Over one read, with the pattern's two ends in different pieces.
        let long = format!("start {} end", "x".repeat(600 << 10));
        std::fs::write(&path, format!("{long}\nend\n")).unwrap();
        let until = Until::new(Some("^start x+ end$|^end$"), None)
            .unwrap()
            .unwrap();
        let (_tx, rx) = watch::channel(0u64);
        match until.ready(Some(&path), 1, rx, |_| true).await {
            Ready::Line { line, text } => {
                assert_eq!(line, 1);
                assert!(
                    text.starts_with("start ") && text.ends_with("..."),
                    "{text}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_listening_port_is_ready() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let until = Until::new(None, Some(port)).unwrap().unwrap();
        let (_tx, rx) = watch::channel(0u64);
        assert_eq!(
            until.ready(None, 1, rx, |_| true).await,
            Ready::Port { port }
        );
    }
}
