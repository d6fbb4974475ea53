//! `spillway read`: paging through a spill with the notice's offsets.

use crate::helper::{Sandbox, numbered, run_with_input, spill_path, stderr, stdout};

fn spill_of(sandbox: &Sandbox, input: &str) -> std::path::PathBuf {
    let mut cmd = sandbox.spillway();
    cmd.args(["truncate", "--json", "--max-lines", "10"]);
    let out = run_with_input(cmd, input.as_bytes());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    spill_path(&json).to_path_buf()
}

fn read(sandbox: &Sandbox, path: &std::path::Path, flags: &[&str]) -> std::process::Output {
    let mut cmd = sandbox.spillway();
    cmd.arg("read").arg(path).args(flags);
    cmd.output().unwrap()
}

#[test]
fn the_notice_offset_continues_where_the_preview_stopped() {
    let sandbox = Sandbox::new();
    let path = spill_of(&sandbox, &numbered(50));
    let out = read(&sandbox, &path, &["--offset", "6", "--limit", "3"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "line 6\nline 7\nline 8\n[lines 6-8 of 50; continue with --offset 9]\n"
    );
}

#[test]
fn the_last_page_has_no_continuation() {
    let sandbox = Sandbox::new();
    let path = spill_of(&sandbox, &numbered(50));
    let out = read(&sandbox, &path, &["--offset", "49"]);
    assert_eq!(stdout(&out), "line 49\nline 50\n");
}

#[test]
fn bad_offsets_and_missing_files_are_clear_errors() {
    let sandbox = Sandbox::new();
    let path = spill_of(&sandbox, &numbered(50));
    for (args, expect) in [
        (vec![path.to_str().unwrap(), "--offset", "51"], "50 lines"),
        (vec![path.to_str().unwrap(), "--offset", "0"], "offset"),
        (vec!["/nonexistent/spill.log"], "/nonexistent/spill.log"),
    ] {
        let out = sandbox.spillway().arg("read").args(&args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = stderr(&out);
        assert!(err.contains(expect), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
