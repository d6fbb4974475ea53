//! The socket protocol shared by client and daemon: JSON Lines over a Unix socket.
//!
//! Each request is one JSON object on one line, `{"v": 1, "op": "...", ...}`; the daemon
//! answers with a stream of events, one JSON object per line, each tagged by `"type"`. A `run`
//! is answered by `started` and then exactly one `exit`; anything wrong with a request is
//! answered by one `error` event and the connection stays usable (but for a line over
//! [`MAX_REQUEST_BYTES`], after which the connection is closed). `docs/protocol.md` shows an
//! example of every message, and `tests/fixtures/protocol-v1.jsonl` pins them.
//!
//! This is the crate's base layer: it imports nothing else of the crate, so every other layer
//! may use its types and none of theirs leaks onto the wire. What the daemon answers with is
//! the protocol's own ([`RunRecord`], [`IndexStats`], [`PurgeReport`], [`GrepResult`],
//! [`Preview`]): the index maps its rows to a `RunRecord`, so a schema change never silently
//! changes the protocol. Fields with a type of their own (signals, statuses, times) are
//! parsed here, once, at the edge.

mod caller;
pub mod cut;
mod event;
mod ops;
mod preview;
mod record;
mod request;
mod run_id;
#[cfg(test)]
mod tests;
pub mod time;
mod without_field;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

pub use caller::*;
pub use event::*;
pub use preview::*;
pub use record::*;
pub use request::*;
pub use run_id::{BadRunId, RunId};

use self::ops::{BARE_OPS, OPS};
use self::without_field::{FieldName, WithoutField};

/// The protocol version this build speaks; requests must carry it as `"v"`.
pub const PROTOCOL_VERSION: u32 = 1;

/// Longest request line accepted, newline excluded (1 MiB).
pub const MAX_REQUEST_BYTES: usize = 1 << 20;

/// A request, one struct per verb, tagged on the wire by `"op"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Run a command and stream its events.
    Run(Box<RunRequest>),
    /// Liveness and version check, answered by `pong`.
    Ping,
    /// Past and running runs, newest first, answered by `history`.
    History(HistoryRequest),
    /// A page of one run's spill with its record, answered by `show`.
    Show(ShowRequest),
    /// A regex search in one run's spill, answered by `grep`.
    Grep(GrepRequest),
    /// Counts and disk use, answered by `stats`.
    Stats,
    /// Run the retention, quota and orphan purge now, answered by `purge`.
    Purge(PurgeRequest),
    /// The next preview of a running command, or its `exit`; answered by `running` or `exit`.
    Wait(WaitRequest),
    /// Type into a running command's terminal, answered by `sent`.
    Send(SendRequest),
    /// A run's output from the start (or a line) and then live, as `output` events, then its
    /// `exit`.
    Follow(FollowRequest),
    /// The running commands, answered by `ps`.
    Ps(PsRequest),
    /// Signal a run's process group, answered by its `exit` once it has ended.
    Kill(KillRequest),
    /// Give a running command's terminal a new size (SIGWINCH), answered by `resized`.
    Resize(ResizeRequest),
    /// Who this daemon is and what it is doing, answered by `status`.
    Status,
    /// Stop the daemon as SIGTERM does (its runs are stopped), answered by `stopping`.
    Shutdown,
}

impl Request {
    /// Whether this request asks for its answer's text unredacted.
    pub fn no_redact(&self) -> bool {
        match self {
            Request::Run(r) => r.no_redact,
            Request::Wait(r) => r.no_redact,
            Request::Follow(r) => r.no_redact,
            Request::Kill(r) => r.no_redact,
            Request::History(r) => r.no_redact,
            Request::Show(r) => r.no_redact,
            Request::Grep(r) => r.no_redact,
            // Answers with no text a run wrote, or no way to ask for it unredacted.
            Request::Ping
            | Request::Stats
            | Request::Purge(_)
            | Request::Send(_)
            | Request::Ps(_)
            | Request::Resize(_)
            | Request::Status
            | Request::Shutdown => false,
        }
    }

    /// The line a client sends: the request with its envelope, newline-terminated.
    pub fn to_line(&self) -> String {
        let wire = Wire {
            v: PROTOCOL_VERSION,
            request: self.clone(),
        };
        // Every request type serialises (string keys, no non-finite floats but a `cpu` a
        // client chose, which `serde_json` writes as null and the daemon then refuses).
        let mut line = serde_json::to_string(&wire).unwrap_or_default();
        line.push('\n');
        line
    }
}

/// A request line as it travels: the version beside the request's own fields (read by
/// [`request_of`]).
#[derive(Serialize)]
struct Wire {
    v: u32,
    #[serde(flatten)]
    request: Request,
}

/// What is read of a line before its request: enough to name precisely what is wrong with it.
///
/// Read by hand: a derived struct that kept its other fields (`#[serde(flatten)]`) buffered
/// every value of the request, the whole environment of a `run` among them, before looking at
/// any, which was a tenth of what the daemon did for a short run.
struct Envelope {
    v: Option<Loose>,
    op: Option<Loose>,
    /// How many fields besides `v` and `op` the request has.
    others: usize,
}

impl<'de> Deserialize<'de> for Envelope {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Envelope, D::Error> {
        deserializer.deserialize_map(EnvelopeVisitor)
    }
}

struct EnvelopeVisitor;

impl<'de> serde::de::Visitor<'de> for EnvelopeVisitor {
    type Value = Envelope;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a request object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Envelope, A::Error> {
        use serde::de::Error;
        let mut envelope = Envelope {
            v: None,
            op: None,
            others: 0,
        };
        while let Some(key) = map.next_key::<FieldName>()? {
            let (slot, name) = match key.as_str() {
                "v" => (&mut envelope.v, "v"),
                "op" => (&mut envelope.op, "op"),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    envelope.others += 1;
                    continue;
                }
            };
            if slot.is_some() {
                return Err(A::Error::duplicate_field(name));
            }
            *slot = Some(map.next_value()?);
        }
        Ok(envelope)
    }
}

/// A field read without knowing its type yet, kept only for an error message.
#[derive(Deserialize)]
#[serde(untagged)]
enum Loose {
    Number(serde_json::Number),
    Text(String),
    Other(IgnoredAny),
}

impl std::fmt::Display for Loose {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Loose::Number(n) => write!(f, "{n}"),
            Loose::Text(t) => write!(f, "{t:?}"),
            Loose::Other(_) => f.write_str("(not a number)"),
        }
    }
}

/// Parses one request line, naming what is wrong with it precisely.
pub fn parse_request(line: &str) -> Result<Request, ErrorEvent> {
    let op = check_envelope(line)?;
    let request = request_of(line)
        .map_err(|e| bad_request(format!("bad {op} request: {}", without_position(&e))))?;
    if let Request::Run(run) = &request {
        run.check().map_err(bad_request)?;
    }
    Ok(request)
}

/// The request a line carries: its fields but the envelope's `v`, as [`Request`] (its `op`
/// the tag).
fn request_of(line: &str) -> serde_json::Result<Request> {
    let mut deserializer = serde_json::Deserializer::from_str(line);
    let request = Request::deserialize(WithoutField {
        inner: &mut deserializer,
        hidden: "v",
    })?;
    deserializer.end()?;
    Ok(request)
}

/// Checks that `line` is a JSON object of this protocol's version naming a known op, and
/// returns the op.
fn check_envelope(line: &str) -> Result<&'static str, ErrorEvent> {
    let bad = |code, message: String| ErrorEvent { code, message };
    let envelope: Envelope = match serde_json::from_str(line) {
        Err(e) if e.is_syntax() || e.is_eof() => {
            return Err(bad(
                ErrorCode::MalformedJson,
                format!("request is not valid JSON: {e}"),
            ));
        }
        _ if !line.trim_start().starts_with('{') => {
            return Err(bad(
                ErrorCode::MalformedJson,
                "request must be a JSON object".into(),
            ));
        }
        Err(e) => return Err(bad(ErrorCode::BadRequest, format!("bad request: {e}"))),
        Ok(envelope) => envelope,
    };
    match envelope.v {
        Some(Loose::Number(v)) if v.as_u64() == Some(u64::from(PROTOCOL_VERSION)) => {}
        Some(v) => {
            return Err(bad(
                ErrorCode::UnsupportedVersion,
                format!(
                    "protocol version {v} is not supported; this daemon speaks v={PROTOCOL_VERSION}"
                ),
            ));
        }
        None => {
            return Err(bad(
                ErrorCode::UnsupportedVersion,
                format!("missing protocol version: add \"v\": {PROTOCOL_VERSION}"),
            ));
        }
    }
    let expected = OPS.join(", ");
    let op = match envelope.op {
        Some(Loose::Text(op)) => op,
        _ => {
            return Err(bad(
                ErrorCode::UnknownOp,
                format!("missing \"op\": expected one of {expected}"),
            ));
        }
    };
    let Some(known) = OPS.iter().find(|known| **known == op) else {
        return Err(bad(
            ErrorCode::UnknownOp,
            format!("unknown op {op:?}: expected one of {expected}"),
        ));
    };
    // A unit variant takes any fields; these ops still refuse unknown ones, like the others.
    if BARE_OPS.contains(known) && envelope.others > 0 {
        return Err(bad_request(format!(
            "{op} takes no fields besides v and op"
        )));
    }
    Ok(known)
}

/// `serde_json`'s message without its "at line 1 column N" (always line 1 here).
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let position = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&position) {
        Some(message) => message.to_string(),
        None => text,
    }
}

/// An error event for a request that names a known op but is wrong in its fields.
pub fn bad_request(message: impl Into<String>) -> ErrorEvent {
    ErrorEvent {
        code: ErrorCode::BadRequest,
        message: message.into(),
    }
}
