//! The index and the operator's commands end to end: history, show, grep, stats, purge, crash
//! recovery, and ids that try to escape the spills directory.

use std::process::Output;

use serde_json::json;

use crate::helper::daemon::{TestDaemon, processes_in_group, wait_child, wait_for};
use crate::helper::{numbered, run_with_input, stderr, stdout};

fn json_of(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// Runs `args` through `spillway run --json` and returns the run's id.
fn run_id(daemon: &TestDaemon, args: &[&str]) -> String {
    let out = daemon.run(&[&["--json"], args].concat());
    let exit: serde_json::Value = serde_json::from_slice(&out.stdout).expect("exit event");
    exit["id"].as_str().unwrap().to_string()
}

fn ops(daemon: &TestDaemon, args: &[&str]) -> Output {
    daemon.spillway().args(args).output().unwrap()
}

fn history_ids(daemon: &TestDaemon, filters: &[&str]) -> Vec<String> {
    let event = json_of(&ops(daemon, &[&["history", "--json"], filters].concat()));
    event["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn history_lists_runs_newest_first_with_filters() {
    let daemon = TestDaemon::start();
    let ok = run_id(&daemon, &["--tag", "session=a", "--", "echo", "fine"]);
    let failed = run_id(
        &daemon,
        &["--tag", "session=b", "-c", "echo broken build; exit 2"],
    );
    let timed_out = run_id(&daemon, &["--timeout", "200ms", "--", "sleep", "5"]);

    assert_eq!(
        history_ids(&daemon, &[]),
        [timed_out.as_str(), failed.as_str(), ok.as_str()]
    );
    assert_eq!(
        history_ids(&daemon, &["--status", "failed"]),
        [timed_out.as_str(), failed.as_str()]
    );
    assert_eq!(
        history_ids(&daemon, &["--status", "timed_out"]),
        [timed_out.as_str()]
    );
    assert_eq!(
        history_ids(&daemon, &["--command", "broken"]),
        [failed.as_str()]
    );
    assert_eq!(history_ids(&daemon, &["--tag", "session=a"]), [ok.as_str()]);
    assert_eq!(
        history_ids(&daemon, &["--limit", "1"]),
        [timed_out.as_str()]
    );
    assert_eq!(history_ids(&daemon, &["--since", "1h"]).len(), 3);
    assert!(history_ids(&daemon, &["--until", "1h"]).is_empty());

    let event = json_of(&ops(&daemon, &["history", "--json", "--status", "failed"]));
    let row = &event["runs"][1];
    assert_eq!(row["status"], "exited");
    assert_eq!(row["exit_code"], 2);
    assert_eq!(row["tags"]["session"], "b");
    assert!(row["ended_at"].is_string());

    let table = ops(&daemon, &["history"]);
    let text = stdout(&table);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("ID") && lines[0].contains("COMMAND"),
        "{text}"
    );
    assert!(
        lines[1].starts_with(&timed_out) && lines[1].contains("timed out"),
        "{text}"
    );
    assert!(
        lines[2].contains("exit 2") && lines[2].contains("echo broken build"),
        "{text}"
    );

    let bad = ops(&daemon, &["history", "--status", "sideways"]);
    assert_eq!(bad.status.code(), Some(125));
    assert!(stderr(&bad).contains("unknown status"), "{}", stderr(&bad));
}

#[test]
fn show_reads_the_same_file_run_named() {
    let daemon = TestDaemon::start();
    let out = daemon.run(&["--json", "--max-lines", "10", "--", "seq", "1", "3000"]);
    let exit = json_of(&out);
    let id = exit["id"].as_str().unwrap();
    let spill = exit["spill_path"].as_str().unwrap();

    let page = ops(&daemon, &["show", id, "--offset", "2999"]);
    let text = stdout(&page);
    assert!(text.contains(&format!("run {id}")), "{text}");
    assert!(text.contains(&format!("spill: {spill}")), "{text}");
    assert!(text.ends_with("---\n2999\n3000\n"), "{text}");

    let raw = ops(
        &daemon,
        &["show", id, "--raw", "--offset", "5", "--limit", "3"],
    );
    assert_eq!(stdout(&raw), "5\n6\n7\n");

    let paged = ops(&daemon, &["show", id, "--limit", "2"]);
    assert!(stdout(&paged).ends_with("1\n2\n[lines 1-2 of 3000; continue with --offset 3]\n"));

    let event = json_of(&ops(&daemon, &["show", id, "--json", "--limit", "2"]));
    assert_eq!(event["run"]["spill_path"], spill);
    assert_eq!(event["next_offset"], 3);
}

#[test]
fn unknown_and_malformed_ids_are_clear_errors() {
    let daemon = TestDaemon::start();
    let unknown = ops(&daemon, &["show", "20200101-000000-aaaa"]);
    assert_eq!(unknown.status.code(), Some(125));
    assert!(stderr(&unknown).contains("no run with id 20200101-000000-aaaa"));

    for id in ["../../etc/passwd", "/etc/passwd", "20200101-000000-AAAA"] {
        let out = ops(&daemon, &["show", id]);
        assert_ne!(out.status.code(), Some(0));
        assert!(
            stderr(&out).contains("invalid run id"),
            "{id}: {}",
            stderr(&out)
        );
    }
    let mut client = daemon.client();
    for id in ["../../etc/passwd", "../index.sqlite3", ""] {
        let answer = client.ask(&json!({"v": 1, "op": "show", "id": id}));
        assert_eq!(answer["code"], "bad_request", "{id}: {answer}");
        let answer = client.ask(&json!({"v": 1, "op": "grep", "id": id, "pattern": "root"}));
        assert_eq!(answer["code"], "bad_request", "{id}: {answer}");
    }
}

#[test]
fn grep_finds_lines_with_numbers_context_and_limits() {
    let daemon = TestDaemon::start();
    let script = "for i in $(seq 1 300); do \
                  if [ $((i % 50)) -eq 0 ]; then echo \"error: case $i failed\"; else echo \"ok $i\"; fi; \
                  done; printf 'error: %0600d\\n' 7";
    let id = run_id(&daemon, &["--no-tty", "-c", script]);

    let found = ops(&daemon, &["grep", &id, "^error"]);
    let text = stdout(&found);
    assert!(
        text.starts_with("50:error: case 50 failed\n100:error: case 100 failed\n"),
        "{text}"
    );
    // The run of digits the cut would split is left out whole: it could be a secret.
    assert!(
        text.contains("301:error:  [… line cut at 500 characters: 607 bytes in all]"),
        "{text}"
    );

    let context = stdout(&ops(&daemon, &["grep", &id, "case 100 ", "-C", "1"]));
    assert_eq!(
        context,
        "99-ok 99\n100:error: case 100 failed\n101-ok 101\n"
    );

    let limited = stdout(&ops(
        &daemon,
        &["grep", &id, "-i", "ERROR", "--max-count", "2"],
    ));
    assert!(limited.contains("[match limit of 2 reached"), "{limited}");
    assert_eq!(limited.lines().filter(|l| l.contains(":error")).count(), 2);

    let none = ops(&daemon, &["grep", &id, "no such text"]);
    assert_eq!(none.status.code(), Some(1));

    let bad = ops(&daemon, &["grep", &id, "(unclosed"]);
    assert_eq!(bad.status.code(), Some(125));
    assert!(stderr(&bad).contains("bad pattern"), "{}", stderr(&bad));
}

#[test]
fn stats_counts_runs_and_disk_use() {
    let daemon = TestDaemon::start();
    run_id(&daemon, &["--", "seq", "1", "1000"]);
    run_id(&daemon, &["-c", "exit 4"]);
    let stats = json_of(&ops(&daemon, &["stats", "--json"]));
    assert_eq!(stats["runs_by_status"]["exited"], 2);
    assert_eq!(stats["spill_bytes"].as_u64().unwrap(), 3893);
    assert_eq!(stats["max_disk"].as_u64().unwrap(), 10 << 30);
    let text = stdout(&ops(&daemon, &["stats"]));
    assert!(text.contains("runs: 2"), "{text}");
    assert!(text.contains("quota"), "{text}");
}

#[test]
fn purge_dry_run_then_for_real() {
    let daemon = TestDaemon::start();
    let id = run_id(&daemon, &["--", "seq", "1", "10"]);
    let spill = json_of(&ops(&daemon, &["show", &id, "--json"]))["run"]["spill_path"]
        .as_str()
        .unwrap()
        .to_string();

    let dry = json_of(&ops(
        &daemon,
        &["purge", "--json", "--dry-run", "--older-than", "0s"],
    ));
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["expired"][0]["id"], id.as_str());
    assert!(std::path::Path::new(&spill).exists());

    let text = stdout(&ops(&daemon, &["purge", "--older-than", "0s"]));
    assert!(text.contains(&format!("deleted run {id}")), "{text}");
    assert!(!std::path::Path::new(&spill).exists());
    let gone = ops(&daemon, &["show", &id]);
    assert!(
        stderr(&gone).contains("no run with id"),
        "{}",
        stderr(&gone)
    );
}

#[test]
fn a_spill_deleted_behind_the_daemons_back_is_reported_as_gone() {
    let daemon = TestDaemon::start();
    let exit = json_of(&daemon.run(&["--json", "--", "echo", "hello"]));
    let id = exit["id"].as_str().unwrap();
    std::fs::remove_file(exit["spill_path"].as_str().unwrap()).unwrap();
    let show = ops(&daemon, &["show", id]);
    assert_eq!(show.status.code(), Some(125));
    assert!(stderr(&show).contains("is gone"), "{}", stderr(&show));
    let report = json_of(&ops(&daemon, &["purge", "--json"]));
    assert_eq!(report["marked_missing"][0], id);
    let row = &json_of(&ops(&daemon, &["history", "--json"]))["runs"][0];
    assert_eq!(row["spill_missing"], true);
}

#[test]
fn runs_of_a_killed_daemon_are_marked_interrupted_and_stay_readable() {
    let mut daemon = TestDaemon::start();
    let mut client = daemon.client();
    client.send(
        &json!({"v": 1, "op": "run", "cwd": "/", "shell": "echo before the crash; sleep 1000"}),
    );
    let started = client.event().unwrap();
    let id = started["id"].as_str().unwrap().to_string();
    let pgid = started["pid"].as_u64().unwrap() as u32;
    let spill = started["spill_path"].as_str().unwrap().to_string();
    wait_for(
        || std::fs::read_to_string(&spill).is_ok_and(|s| s.contains("before")),
        "the output to reach the spill",
    );
    daemon.kill9();
    // The command outlived its daemon; clean it up as an operator would.
    // Straight to killpg: `kill -KILL -PGID` without `--` is read by procps as `kill -1`,
    // which as root kills every process on the machine.
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pgid as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    wait_for(
        || processes_in_group(pgid).is_empty(),
        "the orphaned command to die",
    );

    daemon.restart();
    let row = &json_of(&ops(&daemon, &["history", "--json"]))["runs"][0];
    assert_eq!(row["id"], id.as_str());
    assert_eq!(row["status"], "interrupted");
    let page = stdout(&ops(&daemon, &["show", &id, "--raw"]));
    assert_eq!(page, "before the crash\n");
}

#[test]
fn truncate_spills_are_in_the_index() {
    let daemon = TestDaemon::start();
    let mut cmd = daemon.spillway();
    cmd.args(["truncate", "--json", "--max-lines", "5"]);
    let out = run_with_input(cmd, numbered(100).as_bytes());
    let spill = json_of(&out)["spill_path"].as_str().unwrap().to_string();
    let runs = json_of(&ops(
        &daemon,
        &["history", "--json", "--tag", "source=truncate"],
    ));
    assert_eq!(runs["runs"][0]["spill_path"], spill.as_str());
    assert_eq!(runs["runs"][0]["total_lines"], 100);
    let id = runs["runs"][0]["id"].as_str().unwrap();
    assert_eq!(stdout(&ops(&daemon, &["show", id, "--raw"])), numbered(100));
}

#[test]
fn a_daemon_refuses_an_index_from_a_newer_version() {
    let mut daemon = TestDaemon::start();
    daemon.terminate();
    let db = daemon.sandbox.data_dir().join("index.sqlite3");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.pragma_update(None, "user_version", 999).unwrap();
    drop(conn);
    let mut child = crate::helper::daemon::daemon_command(&daemon.sandbox, &daemon.socket)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_child(&mut child);
    assert!(!status.success());
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(err.contains("newer"), "{err}");
}
