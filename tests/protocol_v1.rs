//! Protocol v1 must not move: `fixtures/protocol-v1.jsonl` holds a message of every request
//! and every event (the examples of `docs/protocol.md`, whole), and this replays it through
//! today's types. A request must still parse and survive our own encoding; an event must come
//! back from its types byte for byte as the same JSON, so no field is renamed, retyped or
//! dropped without this test failing.

use std::collections::BTreeSet;

use serde_json::Value;
use spillway::protocol::{Event, parse_request};

const TRANSCRIPT: &str = include_str!("fixtures/protocol-v1.jsonl");

const OPS: [&str; 15] = [
    "run", "ping", "history", "show", "grep", "stats", "purge", "wait", "send", "follow", "ps",
    "kill", "resize", "status", "shutdown",
];

const EVENTS: [&str; 18] = [
    "started", "exit", "error", "pong", "history", "show", "grep", "stats", "purge", "running",
    "output", "raw", "lagged", "sent", "ps", "resized", "status", "stopping",
];

fn messages() -> Vec<(String, Value)> {
    TRANSCRIPT
        .lines()
        .map(|line| (line.to_string(), serde_json::from_str(line).unwrap()))
        .collect()
}

#[test]
fn every_request_of_v1_still_parses_and_round_trips() {
    let mut seen = BTreeSet::new();
    for (line, value) in messages().iter().filter(|(_, v)| v.get("op").is_some()) {
        seen.insert(value["op"].as_str().unwrap().to_string());
        let request = parse_request(line).unwrap_or_else(|e| panic!("{line}: {}", e.message));
        let again = parse_request(&request.to_line()).unwrap();
        assert_eq!(again, request, "{line}");
    }
    let all: BTreeSet<String> = OPS.iter().map(|op| op.to_string()).collect();
    assert_eq!(seen, all, "the transcript holds every op");
}

#[test]
fn every_event_of_v1_keeps_its_exact_shape() {
    let mut seen = BTreeSet::new();
    for (line, value) in messages().iter().filter(|(_, v)| v.get("type").is_some()) {
        seen.insert(value["type"].as_str().unwrap().to_string());
        let event: Event = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(&serde_json::to_value(&event).unwrap(), value, "{line}");
        let written: Value = serde_json::from_str(&event.to_line()).unwrap();
        assert_eq!(&written, value, "{line}");
    }
    let all: BTreeSet<String> = EVENTS.iter().map(|t| t.to_string()).collect();
    assert_eq!(seen, all, "the transcript holds every event");
}
