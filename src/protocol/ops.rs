//! The ops a request may name, read from [`Request`] itself rather than listed by hand, so a
//! new request is named in errors, and its fields checked, the moment it exists.
//!
//! The names come from `Request`'s derived `Deserialize`: given an op it does not know, it
//! reports every variant's name through [`serde::de::Error::unknown_variant`], in the
//! declaration's order, and [`Names`] keeps that list. An op whose request carries nothing (a
//! unit variant) is one whose request parses with a field no request has.

use std::fmt;
use std::sync::LazyLock;

use serde::Deserialize;
use serde::de::value::MapDeserializer;

use super::Request;

/// Every op, in `Request`'s order.
pub(super) static OPS: LazyLock<&'static [&'static str]> = LazyLock::new(variant_names);

/// Ops whose request has no fields besides the envelope.
pub(super) static BARE_OPS: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    OPS.iter()
        .copied()
        .filter(|op| takes_any_field(op))
        .collect()
});

/// What deserializing a request for an unknown op reports: the names it expected.
#[derive(Debug)]
struct Names(Option<&'static [&'static str]>);

impl fmt::Display for Names {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not an unknown op")
    }
}

impl std::error::Error for Names {}

impl serde::de::Error for Names {
    fn custom<T: fmt::Display>(_: T) -> Names {
        Names(None)
    }

    fn unknown_variant(_: &str, expected: &'static [&'static str]) -> Names {
        Names(Some(expected))
    }
}

/// `Request`'s variants by their names on the wire.
fn variant_names() -> &'static [&'static str] {
    // No op is the empty name, so this asks for one that is not known.
    let fields = MapDeserializer::<_, Names>::new([("op", "")].into_iter());
    match Request::deserialize(fields) {
        Err(Names(Some(names))) => names,
        _ => &[],
    }
}

/// Whether `op`'s request takes a field it does not know: only a request that carries nothing
/// does (a unit variant ignores what comes with its tag; every request struct refuses it).
fn takes_any_field(op: &str) -> bool {
    let line = serde_json::json!({ "op": op, "\u{1}not a field": 0 });
    serde_json::from_value::<Request>(line).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ErrorCode, PROTOCOL_VERSION, parse_request};

    #[test]
    fn every_op_is_read_from_the_request_type() {
        assert_eq!(
            OPS.join(", "),
            "run, ping, history, show, grep, stats, purge, wait, send, follow, ps, kill, \
             resize, status, shutdown"
        );
        assert_eq!(*BARE_OPS, ["ping", "stats", "status", "shutdown"]);
    }

    /// Each op is known to the parser: a line naming it alone is either its request, which
    /// goes back on the wire under the same op, or refused for its fields, never as unknown.
    #[test]
    fn every_op_round_trips_or_asks_for_its_fields() {
        for op in OPS.iter() {
            let line = format!(r#"{{"v":{PROTOCOL_VERSION},"op":"{op}"}}"#);
            match parse_request(&line) {
                Ok(request) => {
                    let again = request.to_line();
                    assert!(again.contains(&format!(r#""op":"{op}""#)), "{again}");
                    assert_eq!(parse_request(&again).unwrap(), request);
                }
                Err(e) => assert_eq!(e.code, ErrorCode::BadRequest, "{op}: {}", e.message),
            }
        }
    }
}
