//! `spillway truncate`: the whole engine behind a pipe.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use crate::helper::{Sandbox, numbered, run_with_input, spill_path, stderr, stdout};

fn truncate_json(sandbox: &Sandbox, input: &[u8], flags: &[&str]) -> serde_json::Value {
    let mut cmd = sandbox.spillway();
    cmd.arg("truncate").arg("--json").args(flags);
    let out = run_with_input(cmd, input);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("JSON result")
}

#[test]
fn short_output_passes_through_without_a_spill() {
    let sandbox = Sandbox::new();
    let mut cmd = sandbox.spillway();
    cmd.arg("truncate");
    let out = run_with_input(cmd, b"hello\r\nworld\r\n");
    assert!(out.status.success());
    assert_eq!(stdout(&out), "hello\nworld\n");
    assert!(sandbox.spills().is_empty());
}

#[test]
fn long_output_is_previewed_and_spilled_byte_exact() {
    let sandbox = Sandbox::new();
    let input = numbered(100_000);
    let json = truncate_json(&sandbox, input.as_bytes(), &[]);
    assert_eq!(json["truncated"], true);
    assert_eq!(json["total_lines"], 100_000);
    assert_eq!(json["total_bytes"], input.len());
    let spill = spill_path(&json);
    assert!(spill.is_absolute());
    assert_eq!(std::fs::read_to_string(spill).unwrap(), input);
    let mode = std::fs::metadata(spill).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let dir_mode = std::fs::metadata(spill.parent().unwrap())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700);
    let content = json["content"].as_str().unwrap();
    assert!(content.starts_with("line 1\n"));
    assert!(content.contains("line 100000\n"));
    assert!(content.contains(&spill.display().to_string()));
}

#[test]
fn preview_text_respects_the_limits() {
    let sandbox = Sandbox::new();
    let input = numbered(5000);
    for direction in ["head", "tail", "both"] {
        let json = truncate_json(
            &sandbox,
            input.as_bytes(),
            &[
                "--max-lines",
                "100",
                "--max-bytes",
                "4096",
                "--direction",
                direction,
            ],
        );
        let mut lines = 0;
        let mut bytes = 0;
        for range in json["shown"].as_array().unwrap() {
            let (first, last) = (
                range["first"].as_u64().unwrap(),
                range["last"].as_u64().unwrap(),
            );
            lines += last - first + 1;
            bytes += (first..=last)
                .map(|i| format!("line {i}\n").len() as u64)
                .sum::<u64>();
        }
        assert!(
            lines <= 100 && bytes <= 4096,
            "{direction}: {lines} lines, {bytes} bytes"
        );
        assert!(lines > 0);
    }
}

#[test]
fn terminal_output_is_normalised_in_preview_and_spill() {
    let sandbox = Sandbox::new();
    let mut input = Vec::new();
    for i in 0..=100 {
        input.extend_from_slice(format!("\r\x1b[Kbuilding [{i:3}%]").as_bytes());
    }
    input.extend_from_slice(b"\r\n\x1b[1;31merror\x1b[0m: \xffbad\r\n");
    let mut cmd = sandbox.spillway();
    cmd.arg("truncate");
    let out = run_with_input(cmd, &input);
    assert_eq!(stdout(&out), "building [100%]\nerror: \u{FFFD}bad\n");
}

#[test]
fn raw_keeps_escapes_and_only_repairs_utf8() {
    let sandbox = Sandbox::new();
    let mut cmd = sandbox.spillway();
    cmd.args(["truncate", "--raw"]);
    let out = run_with_input(cmd, b"\x1b[31mred\x1b[0m\r\n\xfe");
    assert_eq!(stdout(&out), "\x1b[31mred\x1b[0m\r\n\u{FFFD}");
}

#[test]
fn bad_flags_are_clear_errors_not_panics() {
    let sandbox = Sandbox::new();
    for flags in [
        &["--max-lines", "0"][..],
        &["--max-bytes", "0"],
        &["--max-bytes", "99999999999999999999999"],
        &["--max-lines", "-3"],
        &["--direction", "sideways"],
        &["--no-such-flag"],
    ] {
        let mut cmd = sandbox.spillway();
        cmd.arg("truncate").args(flags);
        let out = run_with_input(cmd, b"x\n");
        assert!(!out.status.success(), "{flags:?} should fail");
        assert_eq!(out.status.code(), Some(125), "{flags:?}");
        let err = stderr(&out);
        assert!(err.contains("error"), "{flags:?}: {err}");
        assert!(!err.contains("panicked"), "{flags:?}: {err}");
    }
}

#[test]
fn a_spill_cut_short_by_a_file_size_limit_is_reported() {
    let sandbox = Sandbox::new();
    let input = numbered(200_000);
    // `ulimit -f 64`: at most 64 blocks (32 or 64 KiB, depending on the shell's block size).
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#"ulimit -f 64 && exec "$0" truncate --json"#)
        .arg(env!("CARGO_BIN_EXE_spillway"))
        .env("SPILLWAY_DATA_DIR", sandbox.data_dir());
    let out = run_with_input(cmd, input.as_bytes());
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["total_lines"], 200_000);
    let content = json["content"].as_str().unwrap();
    assert!(content.contains("INCOMPLETE"), "{content}");
    assert!(content.contains("line 200000\n"));
    let saved = std::fs::metadata(spill_path(&json)).unwrap().len();
    assert!(saved <= 64 * 1024, "{saved}");
    assert!(content.contains(&format!("only its first {saved} bytes were saved")));
}

#[test]
fn an_unwritable_data_dir_still_gives_the_preview() {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.data_dir(), "a file, not a directory").unwrap();
    let json = truncate_json(&sandbox, numbered(5000).as_bytes(), &[]);
    assert_eq!(json["truncated"], true);
    assert!(json["spill_path"].is_null());
    let content = json["content"].as_str().unwrap();
    assert!(content.contains("NOT saved"), "{content}");
    assert!(content.contains("line 5000\n"));
}

#[test]
fn a_spill_the_index_cannot_take_is_previewed_all_the_same_and_said() {
    let sandbox = Sandbox::new();
    let dir = sandbox.data_dir();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let index = dir.join("index.sqlite3");
    let garbage = vec![b'x'; 8192];
    std::fs::write(&index, &garbage).unwrap();
    let mut cmd = sandbox.spillway();
    cmd.arg("truncate");
    let out = run_with_input(cmd, numbered(5000).as_bytes());
    assert!(out.status.success(), "{}", stderr(&out));
    let [spill] = &sandbox.spills()[..] else {
        panic!("not one spill: {:?}", sandbox.spills());
    };
    assert!(stdout(&out).contains(&spill.display().to_string()));
    assert!(stdout(&out).contains("line 5000\n"));
    assert!(
        stderr(&out).contains("the spill is not in the index"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read(&index).unwrap(),
        garbage,
        "the file was written"
    );
}

#[test]
fn a_closed_stdout_is_not_an_error() {
    let sandbox = Sandbox::new();
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#"seq 1 200000 | "$0" truncate --max-bytes 10000000 --max-lines 1000000 | head -n 1"#)
        .arg(env!("CARGO_BIN_EXE_spillway"))
        .env("SPILLWAY_DATA_DIR", sandbox.data_dir());
    let out = cmd.output().unwrap();
    assert!(out.status.success());
    assert_eq!(stdout(&out), "1\n");
    assert!(!stderr(&out).contains("error"), "{}", stderr(&out));
}

/// 300 passing tests and one failure, as cargo prints them: over the compaction threshold,
/// within the limits.
fn test_run() -> String {
    let mut text = String::from("running 301 tests\n");
    for i in 0..301 {
        if i == 150 {
            text.push_str("test ledger::tests::balance ... FAILED\n");
        } else {
            text.push_str(&format!("test ledger::tests::case_{i} ... ok\n"));
        }
    }
    text.push_str("\ntest result: FAILED. 300 passed; 1 failed\n");
    text
}

#[test]
fn lines_alike_fold_unless_compact_is_off() {
    let sandbox = Sandbox::new();
    let input = test_run();
    // Within the limits: no spill, so nothing to read folded lines back from; shown whole.
    let whole = truncate_json(&sandbox, input.as_bytes(), &[]);
    assert_eq!(whole["content"], input.as_str());
    // Over them, the folds come first and the byte budget has room for all that is left.
    let json = truncate_json(&sandbox, input.as_bytes(), &["--max-lines", "100"]);
    let content = json["content"].as_str().unwrap();
    assert!(
        content.contains("[... 149 more lines like \"test <*> ... ok\", lines 3-151 ...]\n"),
        "{content}"
    );
    assert!(content.contains("\ntest ledger::tests::balance ... FAILED\n"));
    assert!(content.contains("\ntest result: FAILED. 300 passed; 1 failed\n"));
    assert_eq!(json["omitted_lines"], 298);
    assert!(content.contains(
        "output folded to fit the 100-line limit (runs of repeated, similar or alike lines; \
         nothing else left out)"
    ));
    assert_eq!(json["folds"][0]["templates"][0]["count"], 149);
    let spill = std::fs::read_to_string(spill_path(&json)).unwrap();
    assert_eq!(spill, input);
    // Off, by flag or by the environment a hook's command runs in: as before folds.
    let off = truncate_json(
        &sandbox,
        input.as_bytes(),
        &["--max-lines", "100", "--compact", "off"],
    );
    let mut cmd = sandbox.spillway();
    cmd.env("SPILLWAY_COMPACT", "off")
        .args(["truncate", "--json", "--max-lines", "100"]);
    let by_env: serde_json::Value =
        serde_json::from_slice(&run_with_input(cmd, input.as_bytes()).stdout).unwrap();
    for json in [&off, &by_env] {
        let content = json["content"].as_str().unwrap();
        assert!(!content.contains(" like \""), "{content}");
        assert!(content.contains(" similar lines, lines "), "{content}");
    }
}
