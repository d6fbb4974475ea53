//! Runaway output: a spill file stops at its cap while the preview goes on, and a line of
//! hundreds of megabytes keeps the daemon's memory flat.

use crate::helper::daemon::{TestDaemon, rss_kib, status_kib};
use crate::helper::stderr;

fn exit_json(daemon: &TestDaemon, args: &[&str]) -> serde_json::Value {
    let out = daemon.run(&[&["--json"], args].concat());
    serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", stderr(&out)))
}

#[test]
fn a_spill_stops_at_its_cap_and_the_preview_goes_on() {
    let daemon = TestDaemon::start_with(&["--max-spill", "1MiB"]);
    // 20 MB of "y\n" and then a needle well past the cap.
    let script = "yes | head -c 20000000; echo 'error: past the cap'; yes | head -c 2000";
    let exit = exit_json(&daemon, &["--no-tty", "--", "sh", "-c", script]);
    assert_eq!(exit["status"], "exited", "{exit}");
    assert_eq!(exit["total_bytes"], 20_000_000 + 20 + 2000);
    let cap = 1 << 20;
    assert_eq!(
        exit["spill_capped"],
        serde_json::json!({"bytes": cap, "line": cap / 2 + 1})
    );
    let content = exit["content"].as_str().unwrap();
    assert!(content.contains("CAPPED"), "{content}");
    assert!(
        content.contains("error: past the cap"),
        "highlights go on: {content}"
    );
    let spill = std::fs::read(exit["spill_path"].as_str().unwrap()).unwrap();
    assert_eq!(spill.len(), cap as usize);
    assert!(spill.chunks(2).all(|pair| pair == b"y\n"));

    let id = exit["id"].as_str().unwrap();
    let show = daemon.spillway().args(["show", id]).output().unwrap();
    assert!(
        String::from_utf8_lossy(&show.stdout).contains("capped: stops in line 524289"),
        "{}",
        String::from_utf8_lossy(&show.stdout)
    );

    // A run may ask for less than the daemon's cap, never more.
    let small = exit_json(
        &daemon,
        &["--no-tty", "--max-spill", "1KiB", "--", "seq", "100000"],
    );
    assert_eq!(small["spill_capped"]["bytes"], 1024);
    let greedy = daemon.run(&["--max-spill", "2MiB", "--", "true"]);
    assert_ne!(greedy.status.code(), Some(0));
    assert!(
        stderr(&greedy).contains("over this daemon's cap"),
        "{}",
        stderr(&greedy)
    );
}

#[test]
fn a_line_of_hundreds_of_megabytes_keeps_memory_flat() {
    let daemon = TestDaemon::start();
    // A first run's end waits for the tokenizer, built once at start: its build's peak (the
    // vocabulary decoded, then kept compact) is not this line's. Writing 5 to clear_refs
    // resets VmHWM to the current RSS (Linux 4.0+).
    exit_json(&daemon, &["--", "true"]);
    std::fs::write(format!("/proc/{}/clear_refs", daemon.pid()), "5").unwrap();
    let before = rss_kib(daemon.pid());
    let script = "head -c 300000000 /dev/zero | tr '\\0' x";
    let exit = exit_json(&daemon, &["--no-tty", "--", "sh", "-c", script]);
    assert_eq!(exit["total_lines"], 1, "{exit}");
    assert_eq!(exit["total_bytes"], 300_000_000);
    let partial = &exit["partial_line"];
    assert_eq!(partial["line"], 1, "{exit}");
    assert_eq!(partial["line_bytes"], 300_000_000);
    let shown = partial["shown_bytes"].as_u64().unwrap();
    assert!(shown > 0 && shown <= 51200, "{exit}");
    // Its start and its end, the middle's size between them (issue 27 rule 6).
    let ends = &partial["ends"];
    let start = ends["start_bytes"].as_u64().unwrap();
    let end = ends["end_bytes"].as_u64().unwrap();
    assert_eq!(start + end, shown, "{exit}");
    let content = exit["content"].as_str().unwrap();
    assert!(
        content.starts_with(&format!(
            "{}\n[... line 1 goes on: {} bytes omitted; its last {end} follow ...]\n{}\n",
            "x".repeat(start as usize),
            300_000_000 - shown,
            "x".repeat(end as usize)
        )),
        "{content:.200}"
    );
    assert_eq!(
        std::fs::metadata(exit["spill_path"].as_str().unwrap())
            .unwrap()
            .len(),
        300_000_000
    );
    let peak = status_kib(daemon.pid(), "VmHWM:");
    assert!(
        peak < before + 64 * 1024,
        "the daemon's peak RSS grew from {before} kB to {peak} kB for a 300 MB line"
    );
}
