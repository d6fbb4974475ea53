//! The command line's small promises: `--timeout 0` is no timeout, bad values are refused by
//! the client with the flag's name and the limit, `purge ID` deletes one run, and the wording
//! of what a person reads says what is true.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::helper::daemon::TestDaemon;
use crate::helper::{Sandbox, run_with_input, stderr, stdout};

fn json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(out)))
}

#[test]
fn a_timeout_of_0_is_none_even_over_the_daemons_default() {
    let daemon = TestDaemon::start_with(&["--default-timeout", "100ms"]);
    let timed = daemon.run(&["--", "sleep", "3"]);
    assert_eq!(timed.status.code(), Some(124), "the default applies");
    let out = daemon.run(&["--timeout", "0", "--", "sh", "-c", "sleep 1; echo done"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "done\n");
}

#[test]
fn bad_values_are_refused_by_the_client_naming_the_flag_and_its_range() {
    let sandbox = Sandbox::new();
    for (args, says) in [
        (
            &["run", "--max-bytes", "0", "--", "true"][..],
            "'--max-bytes <N>': 0 is not in 1..=67108864",
        ),
        (
            &["run", "--max-lines", "2000000", "--", "true"],
            "'--max-lines <N>'",
        ),
        (
            &["run", "--cols", "0", "--", "true"],
            "'--cols <N>': 0 is not in 1..=65535",
        ),
        (
            &["purge", "--older-than", "-1d"],
            "a duration cannot be negative",
        ),
    ] {
        let out = sandbox.spillway().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(125), "{args:?}");
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
        assert!(!sandbox.data_dir().exists(), "{args:?} reached a daemon");
    }
    let help = sandbox.spillway().args(["run", "--help"]).output().unwrap();
    let help = stdout(&help);
    assert!(help.contains("1 to 67108864 (64 MiB)"), "{help}");
    let help = sandbox
        .spillway()
        .args(["history", "--help"])
        .output()
        .unwrap();
    assert!(!stdout(&help).contains("Where spill files go"));
}

#[test]
fn purge_id_deletes_that_run_its_spill_and_its_record() {
    let daemon = TestDaemon::start();
    let kept = json(&daemon.run(&["--json", "--", "echo", "kept"]));
    let secret = json(&daemon.run(&["--json", "--", "echo", "secret"]));
    let id = secret["id"].as_str().unwrap();
    let spill = PathBuf::from(secret["spill_path"].as_str().unwrap());
    assert!(spill.exists());

    let out = daemon
        .spillway()
        .args(["purge", id, "--dry-run"])
        .output()
        .unwrap();
    assert!(
        stdout(&out).contains(&format!("would delete run {id}")),
        "{}",
        stdout(&out)
    );
    assert!(spill.exists(), "a dry run deletes nothing");

    let out = daemon.spillway().args(["purge", id]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("purged: 1 runs"), "{}", stdout(&out));
    assert!(!spill.exists(), "the spill is gone");
    let show = daemon.spillway().args(["show", id]).output().unwrap();
    assert!(
        stderr(&show).contains("no run with id"),
        "{}",
        stderr(&show)
    );
    let other = kept["id"].as_str().unwrap();
    let show = daemon
        .spillway()
        .args(["show", other, "--raw"])
        .output()
        .unwrap();
    assert_eq!(stdout(&show), "kept\n", "the other run stays");
}

#[test]
fn purge_id_of_a_running_run_is_refused_and_it_goes_on() {
    let daemon = TestDaemon::start();
    let running = json(&daemon.run(&["--json", "--yield", "10ms", "--", "sleep", "30"]));
    let id = running["id"].as_str().unwrap();
    let out = daemon.spillway().args(["purge", id]).output().unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains("is running: stop it first"),
        "{}",
        stderr(&out)
    );
    let kill = daemon
        .spillway()
        .args(["kill", id, "--signal", "KILL"])
        .output()
        .unwrap();
    assert!(
        kill.status.success(),
        "the run was still there: {}",
        stderr(&kill)
    );
}

#[test]
fn a_redacted_truncate_without_a_spill_does_not_claim_one() {
    let sandbox = Sandbox::new();
    let token = format!("ghp_{}", &"a1B2c3D4e5".repeat(4)[..36]);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_spillway"));
    cmd.env("SPILLWAY_DATA_DIR", sandbox.data_dir())
        .args(["truncate", "--json"]);
    let out = run_with_input(cmd, format!("token {token}\n").as_bytes());
    let result = json(&out);
    assert!(result["spill_path"].is_null(), "{result}");
    let content = result["content"].as_str().unwrap();
    assert!(content.contains("[redacted: github-token]"), "{content}");
    assert!(
        !content.contains("spill file holds the original"),
        "{content}"
    );
    assert!(content.contains("the original was not kept"), "{content}");
}

#[test]
fn stats_says_the_retention_in_words() {
    let daemon = TestDaemon::start_with(&["--retention", "36h"]);
    let out = daemon.spillway().arg("stats").output().unwrap();
    assert!(
        stdout(&out).contains("retention: 1 day 12 hours\n"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn hints_name_a_program_that_runs() {
    let daemon = TestDaemon::start();
    let exe = env!("CARGO_BIN_EXE_spillway");
    // The daemon's binary is not on its PATH: the notice names it by its path.
    let out = daemon.run(&["--max-lines", "5", "--", "seq", "100"]);
    assert!(
        stdout(&out).contains(&format!("{exe} read ")),
        "{}",
        stdout(&out)
    );
    let bin = std::path::Path::new(exe).parent().unwrap();
    let path = std::env::join_paths(std::iter::once(bin.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    for (on_path, named) in [
        (false, format!("{exe} wait ")),
        (true, " spillway wait ".into()),
    ] {
        let mut cmd = daemon.spillway();
        if on_path {
            cmd.env("PATH", &path);
        }
        let out = cmd
            .args(["run", "--yield", "10ms", "--", "sleep", "30"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(75));
        assert!(stderr(&out).contains(&named), "{on_path}: {}", stderr(&out));
    }
}

#[test]
fn completions_and_man_pages_come_from_the_command_line_itself() {
    let sandbox = Sandbox::new();
    let exe = env!("CARGO_BIN_EXE_spillway");
    let script = format!(
        "source <('{exe}' completions bash) && \
         COMP_WORDS=(spillway daemon ''); COMP_CWORD=2; _spillway spillway '' daemon; \
         echo \"${{COMPREPLY[@]}}\"; \
         COMP_WORDS=(spillway run --no-f); COMP_CWORD=2; _spillway spillway --no-f run; \
         echo \"${{COMPREPLY[@]}}\""
    );
    let out = Command::new("bash").args(["-c", &script]).output().unwrap();
    let said = stdout(&out);
    assert!(
        ["status", "stop", "restart", "--no-follow"]
            .iter()
            .all(|word| said.contains(word)),
        "{said}{}",
        stderr(&out)
    );
    for shell in ["zsh", "fish"] {
        let out = sandbox
            .spillway()
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success());
        assert!(stdout(&out).contains("daemon"), "{shell}");
    }
    let page = sandbox.spillway().arg("man").output().unwrap();
    assert!(stdout(&page).starts_with(".ie"), "{}", stdout(&page));
    assert!(stdout(&page).contains(".TH spillway 1"));
    let dir = sandbox.dir.path().join("man1");
    let out = sandbox
        .spillway()
        .args(["man", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let run = std::fs::read_to_string(dir.join("spillway-run.1")).unwrap();
    assert!(run.contains("no\\-follow"), "{run}");
    assert!(dir.join("spillway-daemon-status.1").exists());
}

#[test]
fn wait_takes_its_own_preview_limits() {
    let daemon = TestDaemon::start();
    let done = json(&daemon.run(&["--json", "--", "seq", "100"]));
    let id = done["id"].as_str().unwrap();
    let out = daemon
        .spillway()
        .args(["wait", id, "--max-lines", "10", "--json"])
        .output()
        .unwrap();
    let exit = json(&out);
    assert_eq!(exit["type"], "exit", "{exit}");
    assert_eq!(exit["total_lines"], 100);
    assert_eq!(exit["truncated"], true, "{exit}");
    assert!(
        exit["content"].as_str().unwrap().lines().count() < 20,
        "{exit}"
    );

    let started = json(&daemon.run(&[
        "--json",
        "--yield",
        "10ms",
        "--",
        "sh",
        "-c",
        "seq 100; sleep 30",
    ]));
    let id = started["id"].as_str().unwrap();
    let mut running = Value::Null;
    crate::helper::daemon::wait_for(
        || {
            let out = daemon
                .spillway()
                .args(["wait", id, "--yield", "50ms", "--max-lines", "10", "--json"])
                .output()
                .unwrap();
            running = json(&out);
            running["total_lines"].as_u64() >= Some(100)
        },
        "the run's 100 lines",
    );
    assert_eq!(running["type"], "running", "{running}");
    assert_eq!(running["truncated"], true, "{running}");
    let out = daemon
        .spillway()
        .args(["wait", id, "--max-lines", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let kill = daemon
        .spillway()
        .args(["kill", id, "--signal", "KILL"])
        .output()
        .unwrap();
    assert!(kill.status.success());
}

#[test]
fn a_run_folds_lines_alike_within_its_limits_unless_compact_is_off() {
    let daemon = TestDaemon::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out.txt");
    let mut text: String = (0..400)
        .map(|i| format!("GET /api/items/{i} 200 {}ms\n", i % 37))
        .collect();
    text.push_str("done: 400 requests\n");
    std::fs::write(&file, &text).unwrap();
    let cat = format!("cat {}", file.display());
    let folded = json(&daemon.run(&["--json", "-c", &cat]));
    let content = folded["content"].as_str().unwrap();
    assert!(
        content.starts_with(
            "GET /api/items/0 200 0ms\nGET /api/items/1 200 1ms\n\
             [... 398 more lines like \"GET <*> <*> <*>\", lines 3-400 ...]\n\
             done: 400 requests\n\n[spillway: output compacted"
        ),
        "{content}"
    );
    assert_eq!(folded["truncated_by"], Value::Null);
    let off = json(&daemon.run(&["--json", "--compact", "off", "-c", &cat]));
    assert_eq!(off["content"], text.as_str());
}
