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

/// What `spillway truncate` (with `extra` arguments, its data in `dir`) prints for `input`.
fn truncate(dir: &Path, input: &str, extra: &[&str]) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_spillway"))
        .arg("truncate")
        .args(extra)
        .env("SPILLWAY_DATA_DIR", dir)
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
}

#[test]
fn truncate_redacts_its_preview_unless_asked_not_to() {
    let dir = tempfile::tempdir().unwrap();
    let token = format!("ghp_{}", "Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf9Ed8Cb7A");
    let input = format!("GITHUB_TOKEN={token}\nok\n");
    let redacted = truncate(dir.path(), &input, &[]);
    assert!(
        redacted.starts_with("GITHUB_TOKEN=[redacted: github-token]\nok\n"),
        "{redacted}"
    );
    assert!(!redacted.contains(&token));
    assert_eq!(truncate(dir.path(), &input, &["--no-redact"]), input);
}

/// Past its first 64 KiB, a truncate compiles ahead only the rules those bytes wake: a secret
/// of another kind that only the end of the output shows is still redacted.
#[test]
fn a_long_truncate_redacts_the_kinds_its_first_bytes_did_not_show() {
    let dir = tempfile::tempdir().unwrap();
    let github = format!("ghp_{}", "Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf9Ed8Cb7A");
    let aws = "AKIAZ7QW3ER5TY6UI8OP";
    let stripe = format!("sk_live_{}", "4eC39HqLyjWDarjtT1zdp7dcQ9");
    let routine: String = (0..4000)
        .map(|i| format!("compiled unit {i} of the build\n"))
        .collect();
    assert!(routine.len() > 64 << 10);
    let input = format!(
        "GITHUB_TOKEN={github}\n{routine}AWS_ACCESS_KEY_ID={aws}\nSTRIPE_KEY={stripe}\ndone\n"
    );
    let out = truncate(dir.path(), &input, &[]);
    for secret in [github.as_str(), aws, stripe.as_str()] {
        assert!(!out.contains(secret), "{secret} shown");
    }
    for kind in ["github-token", "aws-access-key-id", "stripe-key"] {
        assert!(
            out.contains(&format!("[redacted: {kind}]")),
            "{kind}: {out}"
        );
    }
}
