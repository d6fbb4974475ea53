//! Token accounting end to end: runs through the daemon and `spillway truncate` record the
//! tokens of their output and of their preview, and `stats` sums them.

use std::collections::BTreeMap;
use std::process::Output;

use serde_json::Value;
use spillway::engine::tokens;

use crate::helper::daemon::{TestDaemon, wait_for};
use crate::helper::{numbered, run_with_input, spill_path, stderr, stdout};

fn json_of(out: &Output) -> Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// `spillway run --json <args>`: the exit event.
fn run(daemon: &TestDaemon, args: &[&str]) -> Value {
    let out = daemon.run(&[&["--json"], args].concat());
    serde_json::from_slice(&out.stdout).expect("exit event")
}

/// The recorded runs, by id.
fn history(daemon: &TestDaemon) -> BTreeMap<String, Value> {
    let out = daemon
        .spillway()
        .args(["history", "--json", "--limit", "100"])
        .output()
        .unwrap();
    json_of(&out)["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| (run["id"].as_str().unwrap().to_string(), run.clone()))
        .collect()
}

fn stats(daemon: &TestDaemon, extra: &[&str]) -> Value {
    let out = daemon
        .spillway()
        .args([&["stats", "--json"], extra].concat())
        .output()
        .unwrap();
    json_of(&out)["tokens"].clone()
}

fn number(value: &Value) -> u64 {
    value
        .as_u64()
        .unwrap_or_else(|| panic!("not a count: {value}"))
}

#[test]
fn runs_record_their_tokens_and_stats_sums_them() {
    let daemon = TestDaemon::start();
    let runs = [
        run(&daemon, &["--", "seq", "1", "10"]),
        run(&daemon, &["--", "printf", "hello world\\n"]),
        // Past the preview's 50 KiB and under the exact bound: read back from the spill.
        run(&daemon, &["--", "seq", "1", "30000"]),
        run(&daemon, &["-c", "seq 1 5; exit 3"]),
    ];
    let input = numbered(20_000);
    let mut truncate = daemon.spillway();
    truncate.args(["truncate", "--json"]);
    let truncated = run_with_input(truncate, input.as_bytes());
    let truncated = json_of(&truncated);
    // truncate leaves the count to a child of its own, which records it a moment later.
    let mut recorded = history(&daemon);
    wait_for(
        || {
            recorded = history(&daemon);
            recorded.values().all(|r| r["output_tokens"].is_u64())
        },
        "the truncate's tokens",
    );
    assert_eq!(recorded.len(), 5, "{recorded:?}");

    // Each run's output tokens are the exact count of its output (as spilled: normalised),
    // its preview tokens that of the preview the client was given.
    for exit in runs.iter().chain([&truncated]) {
        let output = std::fs::read_to_string(spill_path(exit)).unwrap();
        let row = match exit["id"].as_str() {
            Some(id) => &recorded[id],
            None => recorded
                .values()
                .find(|r| r["command"] == "spillway truncate")
                .unwrap(),
        };
        let preview = exit["content"].as_str().unwrap();
        assert_eq!(
            number(&row["output_tokens"]),
            tokens::count(&output) as u64,
            "{row}"
        );
        assert_eq!(
            number(&row["preview_tokens"]),
            tokens::count(preview) as u64,
            "{row}"
        );
        assert_eq!(row["output_tokens_estimated"], false, "{row}");
        assert!(number(&row["preview_tokens"]) > 0, "{row}");
    }
    assert_eq!(
        number(&recorded[runs[0]["id"].as_str().unwrap()]["output_tokens"]),
        tokens::count(&(1..=10).map(|i| format!("{i}\n")).collect::<String>()) as u64,
        "a small output: its text as the command printed it"
    );
    let long = &recorded[runs[2]["id"].as_str().unwrap()];
    assert!(
        number(&long["preview_tokens"]) * 2 < number(&long["output_tokens"]),
        "the preview of a long output saves tokens: {long}"
    );

    // stats: the totals are the sums over the runs, by command and by day alike.
    let tokens = stats(&daemon, &[]);
    let sum = |field: &str| recorded.values().map(|r| number(&r[field])).sum::<u64>();
    let saved: i64 = recorded
        .values()
        .map(|r| number(&r["output_tokens"]) as i64 - number(&r["preview_tokens"]) as i64)
        .sum();
    assert_eq!(number(&tokens["runs"]), 5, "{tokens}");
    assert_eq!(number(&tokens["runs_without_tokens"]), 0, "{tokens}");
    assert_eq!(number(&tokens["output_tokens"]), sum("output_tokens"));
    assert_eq!(number(&tokens["preview_tokens"]), sum("preview_tokens"));
    assert_eq!(tokens["saved_tokens"].as_i64().unwrap(), saved);
    assert_eq!(number(&tokens["estimated_runs"]), 0);
    let commands: BTreeMap<&str, u64> = tokens["by_command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["command"].as_str().unwrap(), number(&c["runs"])))
        .collect();
    assert_eq!(
        commands,
        BTreeMap::from([("printf", 1), ("seq", 3), ("spillway truncate", 1)])
    );
    let days = tokens["by_day"].as_array().unwrap();
    assert_eq!(days.len(), 1, "{tokens}");
    assert_eq!(
        days[0]["day"],
        chrono::Utc::now().format("%Y-%m-%d").to_string()
    );
    assert_eq!(days[0]["saved_tokens"].as_i64().unwrap(), saved);

    let top = stats(&daemon, &["--top", "1"]);
    assert_eq!(top["by_command"].as_array().unwrap().len(), 1);
    assert_eq!(
        top["saved_tokens"], tokens["saved_tokens"],
        "totals are not cut"
    );

    let text = stdout(&daemon.spillway().arg("stats").output().unwrap());
    assert!(text.contains(" saved ("), "{text}");
    assert!(
        text.contains("by command (top 10 by tokens saved):"),
        "{text}"
    );
    assert!(text.contains("spillway truncate"), "{text}");
    assert!(text.contains("by day (last 14 days):"), "{text}");
}

/// The tokens are counted after the `exit` is sent (1 MB takes tens of ms to count), and
/// `history` and `stats` wait for the counts of the runs ended before them: asked at once,
/// they have the run's exact count.
#[test]
fn a_run_s_tokens_are_there_as_soon_as_its_exit_is_given() {
    let daemon = TestDaemon::start();
    // Just under the exact bound, so counted exactly: the slowest count there is.
    let exit = run(&daemon, &["--", "seq", "1", "150000"]);
    let row = history(&daemon)[exit["id"].as_str().unwrap()].clone();
    let output = std::fs::read_to_string(spill_path(&exit)).unwrap();
    assert!(output.len() <= tokens::EXACT_MAX_BYTES, "{}", output.len());
    assert_eq!(row["output_tokens_estimated"], false, "{row}");
    assert_eq!(number(&row["output_tokens"]), tokens::count(&output) as u64);
    let exit = run(&daemon, &["--", "seq", "1", "140000"]);
    let tokens = stats(&daemon, &[]);
    assert_eq!(number(&tokens["runs"]), 2, "{tokens} after {}", exit["id"]);
}

#[test]
fn a_huge_output_records_an_estimate_close_to_the_real_count() {
    let daemon = TestDaemon::start();
    let exit = run(&daemon, &["--", "seq", "1", "3000000"]);
    let row = history(&daemon)[exit["id"].as_str().unwrap()].clone();
    assert_eq!(row["output_tokens_estimated"], true, "{row}");
    let output = std::fs::read_to_string(spill_path(&exit)).unwrap();
    assert!(output.len() > tokens::EXACT_MAX_BYTES, "{}", output.len());
    let real = tokens::count(&output) as f64;
    let estimate = number(&row["output_tokens"]) as f64;
    let error = (estimate - real).abs() / real;
    assert!(
        error < 0.10,
        "estimated {estimate}, really {real}: {error:.3}"
    );
    let tokens = stats(&daemon, &[]);
    assert_eq!(number(&tokens["estimated_runs"]), 1, "{tokens}");
    let text = stdout(&daemon.spillway().arg("stats").output().unwrap());
    assert!(text.contains("estimated from a sample"), "{text}");
}

/// The split of one command's saving in `stats --json`: (saved, folding, cutting).
fn split_of(tokens: &Value, command: &str) -> (i64, u64, i64) {
    let group = tokens["by_command"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["command"] == command)
        .unwrap_or_else(|| panic!("no {command} in {tokens}"));
    let by = &group["saved_by"];
    assert_eq!(by["runs"], group["runs"], "{group}");
    (
        group["saved_tokens"].as_i64().unwrap(),
        number(&by["folding"]),
        by["cutting"].as_i64().unwrap(),
    )
}

/// A test run of 300 passing tests as cargo prints them: over the folding threshold (about
/// 3,000 tokens), within the preview's line and byte limits.
const TEST_RUN: &str = "echo 'running 300 tests'; \
    for i in $(seq 1 300); do echo \"test ledger::tests::case_$i ... ok\"; done; \
    echo; echo 'test result: ok. 300 passed; 0 failed'";

#[test]
fn stats_tell_what_folding_saved_apart_from_what_cutting_saved() {
    let daemon = TestDaemon::start();
    let folded = run(&daemon, &["-c", TEST_RUN]);
    assert!(!folded["folds"].as_array().unwrap().is_empty(), "{folded}");
    assert!(folded["truncated_by"].is_null(), "nothing cut: {folded}");
    let cut = run(&daemon, &["--compact", "off", "--", "seq", "1", "30000"]);
    assert!(cut.get("folds").is_none(), "{cut}");
    assert_eq!(cut["truncated_by"], "lines", "{cut}");
    // truncate's child counts the same way: past the line limit, it spills, and its folds
    // bring it within the limits with nothing else left out.
    let mut truncate = daemon.spillway();
    truncate.args(["truncate", "--json"]);
    let input: String = (1..=3000)
        .map(|i| format!("test ledger::tests::case_{i} ... ok\n"))
        .collect();
    let truncated = json_of(&run_with_input(truncate, input.as_bytes()));
    assert!(
        !truncated["folds"].as_array().unwrap().is_empty(),
        "{truncated}"
    );
    wait_for(
        || {
            history(&daemon)
                .values()
                .all(|r| r["output_tokens"].is_u64())
        },
        "the truncate's tokens",
    );

    let tokens = stats(&daemon, &[]);
    // Folded, nothing cut: all its saving is folding's.
    let (saved, folding, cutting) = split_of(&tokens, "echo");
    assert!(saved > 2_000, "{tokens}");
    assert_eq!((folding as i64, cutting), (saved, 0), "{tokens}");
    let (saved, folding, cutting) = split_of(&tokens, "spillway truncate");
    assert!(saved > 2_000, "{tokens}");
    assert_eq!((folding as i64, cutting), (saved, 0), "{tokens}");
    // Cut with --compact off: all of it is the cut's.
    let (saved, folding, cutting) = split_of(&tokens, "seq");
    assert!(saved > 50_000, "{tokens}");
    assert_eq!((folding, cutting), (0, saved), "{tokens}");
    // The totals add up, and the total saved is as before.
    let by = &tokens["saved_by"];
    assert_eq!(number(&by["runs"]), 3);
    assert_eq!(
        number(&by["folding"]) as i64 + by["cutting"].as_i64().unwrap(),
        tokens["saved_tokens"].as_i64().unwrap()
    );

    let text = stdout(&daemon.spillway().arg("stats").output().unwrap());
    // Short figures as the rest of the report: 37.8k, not 37846.
    let folding = number(&by["folding"]);
    assert!((10_000..1_000_000).contains(&folding), "{tokens}");
    let line = format!(
        "saved by folding: {:.1}k, by cutting: ",
        folding as f64 / 1e3
    );
    assert!(text.contains(&line), "{text}");
    assert!(text.contains("FOLDED") && text.contains("CUT"), "{text}");
}
