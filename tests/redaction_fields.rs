//! Secrets reach no field of any answer: command lines (`ps`, `history`, the `show` header,
//! `show`/`grep --json`'s `run`, `stats`' by-command key), what a run's end stopped (its
//! `stopped` list and the notice line, cut preview or not), the `until` line, what waits for
//! input, `kill` and `follow` answers, and text cut short (a `show` or `grep` cut, a page
//! inside a private key's body, a `grep` match without context). Planted values are looked for
//! in every answer, and detect-secrets judges them all together.

use std::path::Path;
use std::process::Command;

use crate::helper::daemon::{TestDaemon, wait_for};
use crate::helper::python::venv_python;
use crate::helper::stdout;

/// A password a `--password` flag gives.
const PW: &str = "Qm7Tz9xLp2KwVb4N";

fn token() -> String {
    format!("ghp_{}", "Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf9Ed8Cb7A")
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Runs `spillway ARGS` against `daemon`, returns its standard output.
fn ask(daemon: &TestDaemon, args: &[&str]) -> String {
    stdout(&daemon.spillway().args(args).output().unwrap())
}

fn assert_clean(what: &str, text: &str) {
    assert!(!text.contains(PW), "{what} shows the password:\n{text}");
    assert!(
        !text.contains(&token()[..12]),
        "{what} shows the token:\n{text}"
    );
}

#[test]
fn no_field_of_any_answer_carries_a_secret() {
    let daemon = TestDaemon::start();
    let mut seen = String::new();
    let mut look = |what: &str, text: String| {
        assert_clean(what, &text);
        seen.push_str(&text);
        seen.push('\n');
    };
    let tok = token();

    // A run left waiting for input, its ready line and its command line holding secrets.
    let script = "echo \"ready $0 $1\"; read x; echo done";
    let yielded = daemon.run(&[
        "--json",
        "--yield",
        "30s",
        "--until",
        "ready",
        "--",
        "sh",
        "-c",
        script,
        "--password",
        PW,
    ]);
    let yielded = json(&stdout(&yielded));
    let id = yielded["id"].as_str().unwrap().to_string();
    assert_eq!(yielded["type"], "running", "{yielded}");
    assert!(
        yielded["ready"]["text"]
            .as_str()
            .unwrap()
            .contains("[redacted: ")
    );
    look("run --yield --json", yielded.to_string());
    wait_for(
        || {
            let waited = ask(&daemon, &["wait", &id, "--yield", "1s", "--json"]);
            json(&waited).get("waiting_for_input").is_some()
        },
        "the run to wait for input",
    );
    look(
        "wait --json",
        ask(&daemon, &["wait", &id, "--yield", "1s", "--json"]),
    );
    look("ps", ask(&daemon, &["ps"]));
    look("ps --json", ask(&daemon, &["ps", "--json"]));
    look("history --json", ask(&daemon, &["history", "--json"]));
    look("kill", ask(&daemon, &["kill", &id]));
    look("kill --json", ask(&daemon, &["kill", "--json", &id]));

    // A run that leaves a process holding a secret in its command line, preview cut and not.
    let leaves = format!("seq 1 20; sh -c 'sleep 60; : --token {tok}' & sleep 0.5");
    for lines in ["3", "100"] {
        let out = daemon.run(&["--max-lines", lines, "--", "sh", "-c", &leaves]);
        let text = stdout(&out);
        assert!(
            text.contains("stopped what the command left running"),
            "{text}"
        );
        look("run (stopped notice)", text);
        let out = daemon.run(&["--json", "--max-lines", lines, "--", "sh", "-c", &leaves]);
        let exit = json(&stdout(&out));
        assert!(!exit["stopped"].as_array().unwrap().is_empty(), "{exit}");
        look("run --json (stopped)", exit.to_string());
    }

    // A command whose flag's value would have been taken for its subcommand.
    daemon.run(&["--", "git", "--password", PW, "status"]);
    let stats = ask(&daemon, &["stats", "--json"]);
    let by_command = json(&stats)["tokens"]["by_command"].to_string();
    assert!(by_command.contains("\"git status\""), "{by_command}");
    look("stats --json", stats);
    look("history", ask(&daemon, &["history"]));
    look("history --json", ask(&daemon, &["history", "--json"]));
    for run in json(&ask(&daemon, &["history", "--json"]))["runs"]
        .as_array()
        .unwrap()
    {
        let id = run["id"].as_str().unwrap();
        look("show", ask(&daemon, &["show", id]));
        look("show --json", ask(&daemon, &["show", "--json", id]));
        look("grep --json", ask(&daemon, &["grep", "--json", id, "."]));
        look("grep", ask(&daemon, &["grep", id, "."]));
        look("follow", ask(&daemon, &["follow", id]));
    }

    let python = venv_python(&root().join("tests/redact/requirements.txt"));
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw.txt");
    std::fs::write(
        &raw,
        format!("sh -c {script} --password {PW}\nsh -c sleep 60; : --token {tok}\n"),
    )
    .unwrap();
    let seen_path = dir.path().join("seen.txt");
    std::fs::write(&seen_path, &seen).unwrap();
    let out = Command::new(python)
        .arg(root().join("tests/redact/judge.py"))
        .arg(&raw)
        .arg(&seen_path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "detect-secrets disagrees:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn text_cut_short_never_shows_part_of_a_secret() {
    let daemon = TestDaemon::start();
    let tok = token();
    let dir = tempfile::tempdir().unwrap();
    // A token straddling grep's 500-character cut and show's 2000-character one, and a
    // private key whose body lines a short page or a grep without context lands in.
    let key_body: Vec<String> = (0..26)
        .map(|i| {
            let line: String = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"
                .chars()
                .cycle()
                .skip(i * 3)
                .take(64)
                .collect();
            line
        })
        .collect();
    let file = dir.path().join("out.txt");
    let text = format!(
        "{}GITHUB_TOKEN={tok}\n{}GITHUB_TOKEN={tok}\n-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\nend\n",
        "a ".repeat(240),
        "b ".repeat(990),
        key_body.join("\n")
    );
    std::fs::write(&file, &text).unwrap();
    let out = daemon.run(&["--json", "--", "cat", file.to_str().unwrap()]);
    let id = json(&stdout(&out))["id"].as_str().unwrap().to_string();
    let grep = ask(&daemon, &["grep", "--json", &id, "GITHUB"]);
    assert!(grep.contains("line cut"), "{grep}");
    assert_clean("grep cut at 500", &grep);
    let show = ask(&daemon, &["show", "--json", &id, "--limit", "2"]);
    assert!(show.contains("line cut"), "{show}");
    assert_clean("show cut at 2000", &show);
    // Pages of 3 lines inside the key's body, and a grep of body lines without context.
    for offset in [5, 10, 20] {
        let page = ask(
            &daemon,
            &["show", &id, "--offset", &offset.to_string(), "--limit", "3"],
        );
        for line in &key_body {
            assert!(!page.contains(line.as_str()), "page at {offset}:\n{page}");
        }
        assert!(page.contains("redacted"), "{page}");
    }
    let matches = ask(&daemon, &["grep", &id, "^MII"]);
    for line in &key_body {
        assert!(!matches.contains(line.as_str()), "{matches}");
    }
    // A yield while a line is being written: the token's first 38 characters are not shown.
    let partial = format!(
        "printf 'start\\nexport GITHUB_TOKEN={}'; sleep 30",
        &tok[..38]
    );
    let yielded = daemon.run(&["--json", "--yield", "1s", "--", "sh", "-c", &partial]);
    let yielded = json(&stdout(&yielded));
    assert_eq!(yielded["type"], "running", "{yielded}");
    let content = yielded["content"].as_str().unwrap();
    assert!(content.contains("start"), "{content}");
    assert!(!content.contains("ghp_"), "{content}");
    ask(&daemon, &["kill", yielded["id"].as_str().unwrap()]);
    let read = stdout(
        &daemon
            .spillway()
            .args(["read", json(&stdout(&out))["spill_path"].as_str().unwrap()])
            .args(["--offset", "8", "--limit", "3"])
            .output()
            .unwrap(),
    );
    for line in &key_body {
        assert!(!read.contains(line.as_str()), "{read}");
    }
}
