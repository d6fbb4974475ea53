//! The error events the daemon's verbs answer with when the daemon itself is at fault or a run
//! is not there, and how their messages quote what a client sent without growing with it.

use crate::protocol::{ErrorCode, ErrorEvent, RunId};

/// Bytes of a refused pattern quoted back in an error.
pub(super) const PATTERN_ECHO_BYTES: usize = 100;

pub(super) fn error(code: ErrorCode, message: String) -> ErrorEvent {
    ErrorEvent { code, message }
}

pub(super) fn internal(message: String) -> ErrorEvent {
    error(ErrorCode::Internal, message)
}

pub(super) fn bad_request(message: String) -> ErrorEvent {
    error(ErrorCode::BadRequest, message)
}

pub(super) fn unknown_run(id: &RunId) -> ErrorEvent {
    error(ErrorCode::UnknownRun, format!("no run with id {id}"))
}

/// `text` cut to about `max` bytes (at a character boundary), with `…` when cut: an error
/// message that quotes a client's input must not grow with it.
pub(super) fn cut_message(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let end = (0..=max)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    format!("{}…", &text[..end])
}
