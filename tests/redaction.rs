//! Secrets never reach the model: a file with one fake credential of every kind the redactor
//! knows (written by `tests/redact/make_planted.py`) is printed by a run, and everything a
//! model could be given of it (the preview whole and cut, `read` pages, `show` pages, `grep`
//! matches) is judged by a scanner nobody here wrote, Yelp's detect-secrets (pinned in
//! `tests/redact/requirements.txt`, installed by the test): it must find the secrets in the
//! spill and none in what a model receives. `--no-redact` gives the original back.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::helper::daemon::TestDaemon;
use crate::helper::python::venv_python;
use crate::helper::stdout;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Writes the planted output into `dir`.
fn planted(dir: &Path) -> PathBuf {
    let out = Command::new("python3")
        .arg(root().join("tests/redact/make_planted.py"))
        .output()
        .expect("run make_planted.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = dir.join("planted.txt");
    std::fs::write(&path, &out.stdout).unwrap();
    path
}

/// detect-secrets finds secrets in `raw` and none in `seen`.
fn judge(python: &Path, raw: &Path, seen: &str, what: &str) {
    let dir = tempfile::tempdir().unwrap();
    let seen_path = dir.path().join("seen.txt");
    std::fs::write(&seen_path, seen).unwrap();
    let out = Command::new(python)
        .arg(root().join("tests/redact/judge.py"))
        .arg(raw)
        .arg(&seen_path)
        .output()
        .expect("run the judge");
    assert!(
        out.status.success(),
        "{what}: detect-secrets disagrees:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).expect("a JSON answer")
}

#[test]
fn detect_secrets_finds_the_planted_secrets_in_the_spill_and_none_in_what_a_model_reads() {
    let python = venv_python(&root().join("tests/redact/requirements.txt"));
    let daemon = TestDaemon::start();
    let dir = tempfile::tempdir().unwrap();
    let planted = planted(dir.path());
    let file = planted.to_str().unwrap();

    // The whole output fits the default limits: the preview is the output, redacted.
    let whole = json(&daemon.run(&["--json", "--", "cat", file]));
    let spill = PathBuf::from(whole["spill_path"].as_str().unwrap());
    assert_eq!(
        std::fs::read(&spill).unwrap(),
        std::fs::read(&planted).unwrap(),
        "the spill keeps every byte"
    );
    let content = whole["content"].as_str().unwrap();
    assert!(content.contains("[redacted: github-token]"), "{content}");
    assert!(
        content.contains("the spill file holds the original]"),
        "{content}"
    );
    assert!(
        whole["redactions"]["private-key"].as_u64().unwrap() >= 5,
        "{whole}"
    );
    judge(&python, &spill, content, "the whole preview");

    // Cut: blocks split by the head/tail boundary and by highlights, each direction.
    for (lines, direction) in [
        ("40", "both"),
        ("25", "head"),
        ("33", "tail"),
        ("61", "both"),
    ] {
        let cut = daemon.run(&[
            "--max-lines",
            lines,
            "--direction",
            direction,
            "--",
            "cat",
            file,
        ]);
        judge(
            &python,
            &spill,
            &stdout(&cut),
            &format!("a {direction} preview of {lines} lines"),
        );
    }

    // `read` pages of the spill (a key block cut between two pages), and `show` pages.
    let id = whole["id"].as_str().unwrap();
    let mut pages = String::new();
    let mut shown = String::new();
    for offset in (1..230).step_by(23) {
        let offset = offset.to_string();
        let page = daemon
            .spillway()
            .args([
                "read",
                spill.to_str().unwrap(),
                "--offset",
                &offset,
                "--limit",
                "23",
            ])
            .output()
            .unwrap();
        pages.push_str(&stdout(&page));
        let page = daemon
            .spillway()
            .args(["show", id, "--offset", &offset, "--limit", "23"])
            .output()
            .unwrap();
        shown.push_str(&stdout(&page));
    }
    judge(&python, &spill, &pages, "read pages");
    judge(&python, &spill, &shown, "show pages");

    // Every line as a grep match, and the matches with context.
    let all = daemon.spillway().args(["grep", id, "."]).output().unwrap();
    judge(&python, &spill, &stdout(&all), "grep matches");
    let around = daemon
        .spillway()
        .args(["grep", id, "-C", "2", "token|key|pass"])
        .output()
        .unwrap();
    judge(&python, &spill, &stdout(&around), "grep with context");

    // `--no-redact` gives the original: detect-secrets then finds what it found in the spill.
    let raw = daemon.run(&["--no-redact", "--", "cat", file]);
    assert!(!stdout(&raw).contains("[redacted: "));
    assert_eq!(
        stdout(&raw).lines().count(),
        std::fs::read_to_string(&planted).unwrap().lines().count()
    );
}

#[test]
fn truncate_redacts_its_preview_unless_asked_not_to() {
    let dir = tempfile::tempdir().unwrap();
    let token = format!("ghp_{}", "Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf9Ed8Cb7A");
    let input = format!("GITHUB_TOKEN={token}\nok\n");
    let truncate = |extra: &[&str]| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_spillway"))
            .arg("truncate")
            .args(extra)
            .env("SPILLWAY_DATA_DIR", dir.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap()
    };
    let redacted = truncate(&[]);
    assert!(
        redacted.starts_with("GITHUB_TOKEN=[redacted: github-token]\nok\n"),
        "{redacted}"
    );
    assert!(!redacted.contains(&token));
    assert_eq!(truncate(&["--no-redact"]), input);
}
