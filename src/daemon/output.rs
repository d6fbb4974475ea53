//! A run's output streamed to a client: its normalised lines as `output` events, read from its
//! spill file (a finished run's to the end, a running one's live as it is written), or its
//! bytes as read as `raw` events (for the client that started it, or a follower from when it
//! joined), falling back to lines from where the client was when it falls behind.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;

use crate::protocol::cut::shown_end;
use crate::protocol::{Event, LaggedEvent, OutputEvent, RawEvent};
use crate::storage::follow::{Start, Tail};
use crate::supervisor::live::{RawChunk, TextBefore};

use super::client::{ClientWriter, send};
use super::runs::RunEntry;

/// How often a follower that is ahead of the spill file (the writer has not caught up yet)
/// looks again.
const FILE_LAG_POLL: Duration = Duration::from_millis(15);

/// Opens a tail of `path` off the runtime.
async fn open_tail(path: PathBuf, start: Start) -> io::Result<Tail> {
    tokio::task::spawn_blocking(move || Tail::open(&path, start))
        .await
        .map_err(io::Error::other)?
}

/// Reads what the file has next, off the runtime; returns the tail and the bytes read.
async fn read_tail(mut tail: Tail, last: bool) -> io::Result<(Tail, usize, Vec<OutputEvent>)> {
    tokio::task::spawn_blocking(move || {
        let n = tail.read_more()?;
        let events = tail.events(last && n == 0);
        Ok((tail, n, events))
    })
    .await
    .map_err(io::Error::other)?
}

/// Reads what the file has next up to byte `end`, off the runtime, with the events for it
/// (the last of them may be a piece of a line, which `end` cut).
async fn read_tail_within(mut tail: Tail, end: u64) -> io::Result<(Tail, usize, Vec<OutputEvent>)> {
    tokio::task::spawn_blocking(move || {
        let n = tail.read_within(end)?;
        let events = tail.events(tail.pos() >= end);
        Ok((tail, n, events))
    })
    .await
    .map_err(io::Error::other)?
}

/// Sends a finished spill file from line `from` to its end.
pub(super) async fn follow_finished(
    path: &Path,
    from: u64,
    write: &mut ClientWriter,
) -> io::Result<()> {
    let Ok(mut tail) = open_tail(path.to_path_buf(), Start::Line(from)).await else {
        return Ok(()); // The exit event's notice says what became of the output.
    };
    loop {
        let (next, n, events) = read_tail(tail, true).await?;
        tail = next;
        for event in events {
            send(write, &Event::Output(event)).await?;
        }
        if n == 0 {
            return Ok(());
        }
    }
}

/// Sends a run's output from `start` as it is written, until the run has ended and the spill
/// has been read to its end; returns the run's last event.
pub(super) async fn follow_live(
    entry: &RunEntry,
    start: Start,
    write: &mut ClientWriter,
) -> io::Result<Arc<Event>> {
    follow_live_upto(entry, start, u64::MAX, write).await
}

/// As [`follow_live`], but once `max_bytes` of text were sent, only waits for the run's end.
pub(super) async fn follow_live_upto(
    entry: &RunEntry,
    start: Start,
    max_bytes: u64,
    write: &mut ClientWriter,
) -> io::Result<Arc<Event>> {
    let Some(path) = entry.spill_path().map(Path::to_path_buf) else {
        // No spill file: there is nothing to follow, only the end to wait for.
        return Ok(entry.finished().await);
    };
    let mut committed = entry.live.committed();
    let mut done = entry.done.subscribe();
    let mut tail = match open_tail(path, start).await {
        Ok(tail) => tail,
        Err(_) => return Ok(entry.finished().await),
    };
    let mut sent = 0u64;
    loop {
        // Looked at before reading: once the run has ended the file is complete, so a read
        // that then finds its end has seen everything.
        let ended = done.borrow_and_update().clone();
        let (next, n, events) = read_tail(tail, ended.is_some()).await?;
        tail = next;
        for event in events {
            sent = sent.saturating_add(event.text.len() as u64);
            send(write, &Event::Output(event)).await?;
            if sent >= max_bytes {
                return Ok(entry.finished().await);
            }
        }
        if n > 0 {
            continue;
        }
        if let Some(last) = ended {
            return Ok(last);
        }
        let written = *committed.borrow_and_update();
        if tail.pos() < written {
            // The spill writer has the bytes and is about to write them.
            tokio::select! {
                () = tokio::time::sleep(FILE_LAG_POLL) => {}
                _ = done.changed() => {}
            }
        } else {
            tokio::select! {
                _ = committed.changed() => {}
                _ = done.changed() => {}
            }
        }
    }
}

/// Sends a run's raw output as it is read, for the client that started it; a client that falls
/// behind gets a `lagged` event and then the normalised text from the line where it was.
/// Returns the run's last event.
pub(super) async fn stream_raw(
    entry: &RunEntry,
    write: &mut ClientWriter,
) -> io::Result<Arc<Event>> {
    let Some(raw) = entry.live.take_raw() else {
        return follow_live(entry, Start::Line(1), write).await;
    };
    stream_chunks(entry, raw, 0, write).await
}

/// Sends a running command's output to a follower that joined it: the text its spill holds
/// from line `from` as `output` events (the bytes as written before it joined are gone), then
/// the bytes as they are read as `raw` events, as [`stream_raw`] does. Returns the run's last
/// event.
pub(super) async fn follow_raw(
    entry: &RunEntry,
    from: u64,
    write: &mut ClientWriter,
) -> io::Result<Arc<Event>> {
    let (raw, before) = entry.live.subscribe_raw();
    let mut delivered = 0;
    if let Some(path) = entry.spill_path().map(Path::to_path_buf) {
        delivered = send_text_before(entry, path, from, before, write).await?;
    }
    stream_chunks(entry, raw, delivered, write).await
}

/// Sends the spill's lines from `from` up to where a raw follower joined, waiting for the
/// writer to catch up with what it has been handed (until the run ends, should it fail);
/// returns the bytes read up to.
async fn send_text_before(
    entry: &RunEntry,
    path: PathBuf,
    from: u64,
    before: TextBefore,
    write: &mut ClientWriter,
) -> io::Result<u64> {
    let end = match before {
        TextBefore::Bytes(end) => end,
        TextBefore::WhatTheSpillHas => u64::MAX,
    };
    let Ok(mut tail) = open_tail(path, Start::Line(from)).await else {
        return Ok(0);
    };
    let done = entry.done.subscribe();
    while tail.pos() < end {
        let (next, n, events) = read_tail_within(tail, end).await?;
        tail = next;
        for event in events {
            send(write, &Event::Output(event)).await?;
        }
        if n == 0 {
            if end == u64::MAX || done.borrow().is_some() {
                break;
            }
            tokio::time::sleep(FILE_LAG_POLL).await;
        }
    }
    // A line the follower joined in the middle of: its start, before the raw bytes go on.
    for event in tail.events(true) {
        send(write, &Event::Output(event)).await?;
    }
    Ok(tail.pos())
}

/// Sends raw chunks from `raw` until the run ends; `delivered` is the text the client has so
/// far (where a lagging client's normalised text resumes).
async fn stream_chunks(
    entry: &RunEntry,
    mut raw: broadcast::Receiver<RawChunk>,
    mut delivered: u64,
    write: &mut ClientWriter,
) -> io::Result<Arc<Event>> {
    let mut done = entry.done.subscribe();
    // The run may have ended before this subscribed: its end is then the value already
    // there, which `changed` would never report.
    let ended = async {
        let _ = done.wait_for(Option::is_some).await;
    };
    tokio::pin!(ended);
    let mut carry = Vec::new();
    loop {
        let chunk = tokio::select! {
            biased;
            chunk = raw.recv() => chunk,
            () = &mut ended => {
                // The reader has finished: what is left in the channel is all there is.
                loop {
                    match raw.try_recv() {
                        Ok(chunk) => {
                            send_raw(write, &mut carry, &chunk.bytes, false).await?;
                        }
                        Err(broadcast::error::TryRecvError::Lagged(_)) => {
                            return lagged(entry, delivered, write).await;
                        }
                        Err(_) => break,
                    }
                }
                send_raw(write, &mut carry, &[], true).await?;
                return Ok(entry.finished().await);
            }
        };
        match chunk {
            Ok(chunk) => {
                delivered = chunk.committed;
                send_raw(write, &mut carry, &chunk.bytes, false).await?;
            }
            Err(broadcast::error::RecvError::Lagged(_)) => {
                return lagged(entry, delivered, write).await;
            }
            Err(broadcast::error::RecvError::Closed) => return Ok(entry.finished().await),
        }
    }
}

/// A raw client fell behind: from here on it gets the normalised text, from the start of the
/// line it had reached.
async fn lagged(
    entry: &RunEntry,
    delivered: u64,
    write: &mut ClientWriter,
) -> io::Result<Arc<Event>> {
    let Some(path) = entry.spill_path().map(Path::to_path_buf) else {
        return Ok(entry.finished().await);
    };
    let line = match open_tail(path, Start::Byte(delivered)).await {
        Ok(tail) => tail.next_line(),
        Err(_) => 1,
    };
    send(write, &Event::Lagged(LaggedEvent { line })).await?;
    follow_live(entry, Start::Line(line), write).await
}

/// Sends raw bytes as UTF-8, keeping a character cut at the end for the next chunk.
async fn send_raw(
    write: &mut ClientWriter,
    carry: &mut Vec<u8>,
    bytes: &[u8],
    last: bool,
) -> io::Result<()> {
    carry.extend_from_slice(bytes);
    let keep = match std::str::from_utf8(carry) {
        Ok(_) => 0,
        Err(e) if e.error_len().is_none() && !last => carry.len() - e.valid_up_to(),
        Err(_) => 0,
    };
    let mut cut = carry.len() - keep;
    if !last {
        cut = held_back(&carry[..cut]);
    }
    if cut == 0 {
        return Ok(());
    }
    let data = String::from_utf8_lossy(&carry[..cut]).into_owned();
    carry.drain(..cut);
    send(write, &Event::Raw(RawEvent { data })).await
}

/// Most bytes of a raw stream held back as a piece that could be a secret being written.
const MAX_RAW_HOLD: usize = 4096;

/// Where a raw chunk may end: before a trailing piece that could be a secret's start
/// (`crate::protocol::cut`), which goes out with the next chunk, so redaction sees it whole.
fn held_back(bytes: &[u8]) -> usize {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return bytes.len();
    };
    let end = shown_end(text);
    if bytes.len() - end > MAX_RAW_HOLD {
        bytes.len()
    } else {
        end
    }
}
