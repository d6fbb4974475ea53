//! Live runs end to end: yield and wait, send, follow, ps, kill and kill_on_disconnect,
//! against a real daemon in a temp dir.

use std::io::Read;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helper::daemon::{PATIENCE, RawClient, TestDaemon, processes_in_group, wait_for};
use crate::helper::{stderr, stdout};

fn shell(script: &str) -> Value {
    json!({"v": 1, "op": "run", "shell": script, "cwd": "/"})
}

/// Sends a run request and returns its `started` event.
fn start(client: &mut RawClient, request: &Value) -> Value {
    let started = client.ask(request);
    assert_eq!(started["type"], "started", "{started}");
    started
}

fn id_of(event: &Value) -> String {
    event["id"].as_str().expect("an id").to_string()
}

/// `wait` on a fresh connection.
fn wait_event(daemon: &TestDaemon, request: Value) -> Value {
    let mut client = daemon.client();
    let mut request = request;
    request["v"] = json!(1);
    request["op"] = json!("wait");
    client.ask(&request)
}

fn ps(daemon: &TestDaemon) -> Vec<Value> {
    let answer = daemon.client().ask(&json!({"v": 1, "op": "ps"}));
    assert_eq!(answer["type"], "ps", "{answer}");
    answer["runs"].as_array().unwrap().clone()
}

/// Polls `wait` with a short yield until the run's preview satisfies `ready`.
fn wait_until_preview(daemon: &TestDaemon, id: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let event = wait_event(daemon, json!({"id": id, "yield_ms": 50}));
        if ready(&event) {
            return event;
        }
        assert!(
            Instant::now() < deadline,
            "preview never got there: {event}"
        );
    }
}

#[test]
fn a_prompt_is_seen_while_idle_and_answered_with_send() {
    let daemon = TestDaemon::start();
    let mut client = daemon.client();
    let mut request = shell("read -p 'continue? ' x; echo got $x");
    request["yield_ms"] = json!(300);
    let started = start(&mut client, &request);
    let id = id_of(&started);
    let running = client.event().unwrap();
    assert_eq!(running["type"], "running", "{running}");
    let waiting = wait_until_preview(&daemon, &id, |e| {
        e["type"] == "running" && e["idle_ms"].as_u64().unwrap() >= 200
    });
    assert_eq!(waiting["content"], "continue? ", "{waiting}");
    assert_eq!(waiting["pid"], started["pid"]);

    let sent = daemon
        .spillway()
        .args(["send", &id, "yes"])
        .output()
        .unwrap();
    assert!(sent.status.success(), "{}", stderr(&sent));
    let out = daemon.spillway().args(["wait", &id]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "continue? yes\ngot yes\n");
}

#[test]
fn yield_returns_a_partial_preview_and_wait_the_final_one() {
    let daemon = TestDaemon::start();
    let begun = Instant::now();
    let out = daemon.run(&[
        "--yield",
        "1s",
        "-c",
        "for i in 1 2 3 4 5; do echo step $i; sleep 2; done",
    ]);
    let took = begun.elapsed();
    // Exit 75 and no "step 4" (written 6 s in) say the yield came before the end; no upper
    // bound on the time, which a loaded machine would stretch.
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    assert!(took >= Duration::from_millis(900), "{took:?}");
    assert!(stdout(&out).starts_with("step 1\n"), "{}", stdout(&out));
    assert!(!stdout(&out).contains("step 4"), "{}", stdout(&out));
    let note = stderr(&out);
    assert!(note.contains("is still running after"), "{note}");
    let id = note
        .split_whitespace()
        .nth(2)
        .expect("the run id in the status line")
        .to_string();

    let json = daemon
        .spillway()
        .args(["wait", &id, "--yield", "100ms", "--json"])
        .output()
        .unwrap();
    let running: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(running["type"], "running");
    assert_eq!(running["id"], id.as_str());
    assert_eq!(running["first_line"], 1);
    assert!(running["elapsed_ms"].as_u64().unwrap() >= 1000);
    let partial_lines = running["total_lines"].as_u64().unwrap();
    assert!((1..5).contains(&partial_lines), "{running}");
    let spill = running["spill_path"].as_str().unwrap().to_string();

    let done = daemon.spillway().args(["wait", &id]).output().unwrap();
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    assert_eq!(stdout(&done), "step 1\nstep 2\nstep 3\nstep 4\nstep 5\n");
    assert_eq!(std::fs::read_to_string(spill).unwrap(), stdout(&done));
    // A late wait gets the same end.
    let again = daemon.spillway().args(["wait", &id]).output().unwrap();
    assert_eq!(stdout(&again), stdout(&done));
}

#[test]
fn new_previews_never_repeat_a_line_and_miss_none() {
    let daemon = TestDaemon::start();
    let mut client = daemon.client();
    let mut request =
        shell("i=0; while [ $i -lt 120 ]; do i=$((i+1)); echo line $i; sleep 0.02; done");
    request["yield_ms"] = json!(200);
    let id = id_of(&start(&mut client, &request));
    let mut previews = vec![client.event().unwrap()];
    let mut seen = String::new();
    loop {
        let last = previews.last().unwrap();
        let content = last["content"].as_str().unwrap();
        assert_eq!(last["truncated"], false, "{last}");
        // A line still being written is not counted as seen: keep whole lines only.
        let whole = match last["type"].as_str() {
            Some("exit") => content,
            _ => &content[..content.rfind('\n').map_or(0, |i| i + 1)],
        };
        seen.push_str(whole);
        if last["type"] == "exit" {
            break;
        }
        let next = wait_event(&daemon, json!({"id": id, "yield_ms": 150, "new": true}));
        assert!(
            next["type"] == "running" || next["type"] == "exit",
            "{next}"
        );
        previews.push(next);
    }
    let expected: String = (1..=120).map(|i| format!("line {i}\n")).collect();
    assert_eq!(seen, expected, "every line once, in order");
    assert!(previews.len() >= 4, "{} previews", previews.len());
    let lines_of = |e: &Value| e["first_line"].as_u64();
    for pair in previews.windows(2) {
        if let (Some(a), Some(b)) = (lines_of(&pair[0]), lines_of(&pair[1])) {
            assert!(b >= a, "first_line goes forward");
        }
    }
    // Another caller has seen nothing yet: it gets everything.
    let other = wait_event(&daemon, json!({"id": id, "new": true, "caller": "other"}));
    assert_eq!(other["type"], "exit");
    assert_eq!(other["content"], expected);
}

#[test]
fn three_followers_of_a_big_output_get_all_of_it_even_a_slow_one() {
    // The slow follower takes nothing while the run lasts, and a client that takes no event
    // for the client timeout is dropped: on a loaded machine (the whole suite at once) the
    // run can outlast the default 30 s.
    let daemon = TestDaemon::start_with(&["--client-timeout", "300s"]);
    let mut runner = daemon.client();
    let mut request = shell("seq 1 7000000; echo done");
    request["tty"] = json!(false);
    let started = start(&mut runner, &request);
    let id = id_of(&started);
    let spill = started["spill_path"].as_str().unwrap().to_string();
    let run_over = Arc::new(AtomicBool::new(false));
    let follow = |delay: Duration, stall: bool| {
        let mut client = daemon.client();
        let id = id.clone();
        let run_over = Arc::clone(&run_over);
        std::thread::spawn(move || {
            client.send(&json!({"v": 1, "op": "follow", "id": id}));
            // The slow one reads nothing until the run is over, then takes its time.
            while stall && !run_over.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(10));
            }
            let mut text = String::new();
            let mut next_line = 1;
            loop {
                let event = client.event().expect("an event");
                match event["type"].as_str().unwrap() {
                    "output" => {
                        assert_eq!(event["line"], next_line, "events follow each other");
                        let piece = event["text"].as_str().unwrap();
                        next_line += piece.matches('\n').count() as u64;
                        text.push_str(piece);
                        std::thread::sleep(delay);
                    }
                    "exit" => return (text, event),
                    other => panic!("unexpected {other}: {event}"),
                }
            }
        })
    };
    let fast = follow(Duration::ZERO, false);
    let also_fast = follow(Duration::ZERO, false);
    let slow = follow(Duration::from_millis(2), true);
    // The run ends while the slow follower has read nothing: it held nothing back.
    let exit = runner.event().unwrap();
    run_over.store(true, Ordering::SeqCst);
    assert_eq!(exit["status"], "exited", "{exit}");
    let expected = std::fs::read_to_string(&spill).unwrap();
    assert!(expected.len() > 50_000_000, "{}", expected.len());
    assert!(expected.ends_with("6999999\n7000000\ndone\n"));
    for (name, handle) in [("fast", fast), ("also fast", also_fast), ("slow", slow)] {
        let (text, end) = handle.join().unwrap();
        assert_eq!(end["id"], id.as_str(), "{name}");
        assert_eq!(end["status"], "exited", "{name}");
        assert!(
            text == expected,
            "{name}: {} of {} bytes",
            text.len(),
            expected.len()
        );
    }
}

#[test]
fn follow_prints_live_then_the_status_and_passes_on_the_code() {
    let daemon = TestDaemon::start();
    let mut client = daemon.client();
    let started = start(
        &mut client,
        &shell("echo one; sleep 0.5; echo two; printf 'no newline'; exit 3"),
    );
    let id = id_of(&started);
    let out = daemon.spillway().args(["follow", &id]).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(stdout(&out), "one\ntwo\nno newline");
    assert!(
        stderr(&out).contains("exited with code 3"),
        "{}",
        stderr(&out)
    );
    assert_eq!(client.event().unwrap()["type"], "exit");

    // A finished run: printed from a line, and the same end.
    let from = daemon
        .spillway()
        .args(["follow", &id, "--from-line", "2"])
        .output()
        .unwrap();
    assert_eq!(from.status.code(), Some(3));
    assert_eq!(stdout(&from), "two\nno newline");
    let past = daemon
        .spillway()
        .args(["follow", &id, "--from-line", "9"])
        .output()
        .unwrap();
    assert_eq!(past.status.code(), Some(125));
    assert!(
        stderr(&past).contains("it has 3 lines"),
        "{}",
        stderr(&past)
    );
}

#[test]
fn a_raw_follower_gets_the_text_so_far_then_the_bytes_as_written_once() {
    let daemon = TestDaemon::start();
    let mut runner = daemon.client();
    // Colours and a redrawn bar after the follower joined: only the raw stream keeps them.
    let script = "echo one; echo two; read go; printf '\\033[31mred\\033[0m\\n'; \
                  printf '10%%\\r90%%\\r'; echo done";
    let started = start(&mut runner, &shell(script));
    let (id, spill) = (id_of(&started), started["spill_path"].clone());
    wait_until_preview(&daemon, &id, |e| e["total_lines"] == 2);
    let mut follower = daemon.client();
    follower.send(&json!({"v": 1, "op": "follow", "id": id, "raw": true}));
    let first = follower.event().expect("the text so far");
    assert_eq!(first["type"], "output", "{first}");
    assert_eq!(first["text"], "one\ntwo\n", "{first}");
    let sent = daemon
        .client()
        .ask(&json!({"v": 1, "op": "send", "id": id, "text": "go\n"}));
    assert_eq!(sent["type"], "sent", "{sent}");
    let mut raw = String::new();
    let exit = loop {
        let event = follower.event().expect("an event");
        match event["type"].as_str().unwrap() {
            "raw" => raw.push_str(event["data"].as_str().unwrap()),
            "exit" => break event,
            other => panic!("unexpected {other}: {event}"),
        }
    };
    assert_eq!(exit["status"], "exited", "{exit}");
    assert!(raw.contains("\u{1b}[31mred\u{1b}[0m"), "{raw:?}");
    assert!(raw.contains("10%\r90%\r"), "{raw:?}");
    assert!(raw.ends_with("done\r\n"), "{raw:?}");
    assert!(!raw.contains("two"), "the text so far came once: {raw:?}");
    assert_eq!(runner.event().unwrap()["type"], "exit");

    // A finished run has no bytes as written left: its text, as without `raw`.
    let out = daemon
        .spillway()
        .args(["follow", "--raw", &id])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let spill = std::fs::read_to_string(spill.as_str().unwrap()).unwrap();
    assert!(spill.starts_with("one\ntwo\ngo\n"), "{spill:?}");
    assert_eq!(stdout(&out), spill);
}

#[test]
fn a_text_stream_stops_at_its_byte_limit_and_the_exit_still_comes() {
    let daemon = TestDaemon::start();
    let mut client = daemon.client();
    let mut request = shell("seq 1 200000");
    request["stream"] = json!("text");
    request["stream_max_bytes"] = json!(1000);
    start(&mut client, &request);
    let mut streamed = String::new();
    let exit = loop {
        let event = client.event().expect("an event");
        match event["type"].as_str().unwrap() {
            "output" => streamed.push_str(event["text"].as_str().unwrap()),
            "exit" => break event,
            other => panic!("unexpected {other}: {event}"),
        }
    };
    assert_eq!(exit["total_lines"], 200000, "{}", exit["status"]);
    assert!(streamed.len() >= 1000, "{}", streamed.len());
    // The event that reaches the limit comes whole: at most one event (256 KiB) past it, far
    // short of the 1.3 MB output.
    assert!(streamed.len() < 1000 + 256 * 1024, "{}", streamed.len());
    let expected: String = (1..=200000).map(|n| format!("{n}\n")).collect();
    assert!(
        expected.starts_with(&streamed),
        "the head of the output, in order"
    );

    // Only with a text stream.
    let mut request = shell("true");
    request["stream_max_bytes"] = json!(10);
    let answer = daemon.client().ask(&request);
    assert_eq!(answer["code"], "bad_request", "{answer}");
    assert_eq!(
        daemon.client().ask(&json!({"v": 1, "op": "ping"}))["type"],
        "pong"
    );
}

#[test]
fn run_follow_streams_the_text_then_a_summary() {
    let daemon = TestDaemon::start();
    let out = daemon.run(&["--follow", "-c", "echo a; sleep 0.2; echo b; exit 2"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(stdout(&out), "a\nb\n");
    let summary = stderr(&out);
    assert!(
        summary.contains("exited with code 2") && summary.contains("2 lines"),
        "{summary}"
    );
    assert!(summary.contains("full output: "), "{summary}");
}

#[test]
fn run_follow_json_streams_output_events() {
    let daemon = TestDaemon::start();
    let out = daemon.run(&["--follow", "--json", "--", "seq", "1", "3"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let events: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.first().unwrap()["type"], "started");
    assert_eq!(events.last().unwrap()["type"], "exit");
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "output")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "1\n2\n3\n");
}

#[test]
fn a_raw_stream_carries_the_terminal_bytes() {
    let daemon = TestDaemon::start();
    let mut client = daemon.client();
    let mut request = shell("printf '\\033[31mred\\033[0m\\n'");
    request["stream"] = json!("raw");
    start(&mut client, &request);
    let mut data = String::new();
    loop {
        let event = client.event().unwrap();
        match event["type"].as_str().unwrap() {
            "raw" => data.push_str(event["data"].as_str().unwrap()),
            "exit" => {
                assert_eq!(event["content"], "red\n");
                break;
            }
            other => panic!("unexpected {other}: {event}"),
        }
    }
    assert_eq!(data, "\u{1b}[31mred\u{1b}[0m\r\n");
}

/// A run that ends before its raw stream has begun (a command that prints and exits at once,
/// asked for as a client at a terminal asks) still ends its stream with its exit: the end,
/// already there when the stream looks, is not waited for as a change to come. Many short
/// runs, as the race is between two threads (before the fix, one of these hung within 100).
#[test]
fn a_raw_stream_of_a_run_that_ends_at_once_still_ends() {
    let daemon = TestDaemon::start();
    for n in 0..100 {
        let mut client = daemon.client();
        let mut request = shell(&format!("test -t 0 && echo {n}"));
        request["stream"] = json!("raw");
        request["kill_on_disconnect"] = json!(true);
        start(&mut client, &request);
        loop {
            let event = client.event().expect("the stream's next event");
            match event["type"].as_str().unwrap() {
                "raw" => {}
                "exit" => {
                    assert_eq!(event["content"], format!("{n}\n"));
                    break;
                }
                other => panic!("unexpected {other}: {event}"),
            }
        }
    }
}

#[test]
fn kill_signals_the_group_and_the_run_ends_killed() {
    let daemon = TestDaemon::start();
    let mut runner = daemon
        .spillway()
        .args(["run", "-c", "echo up; sleep 1000 & exec sleep 1000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut run = None;
    wait_for(
        || {
            run = ps(&daemon).first().cloned();
            run.is_some()
        },
        "the run in ps",
    );
    let run = run.unwrap();
    let (id, pgid) = (id_of(&run), run["pid"].as_u64().unwrap() as u32);
    let killed = daemon
        .spillway()
        .args(["kill", &id, "--signal", "INT", "--json"])
        .output()
        .unwrap();
    assert!(killed.status.success(), "{}", stderr(&killed));
    let exit: Value = serde_json::from_slice(&killed.stdout).unwrap();
    assert_eq!(exit["status"], "killed", "{exit}");
    assert_eq!(exit["signal"], 2);
    assert!(processes_in_group(pgid).is_empty(), "the group is gone");
    let status = runner.wait().unwrap();
    let mut err = String::new();
    runner
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("was stopped by signal 2 (SIGINT)"), "{err}");

    let again = daemon.spillway().args(["kill", &id]).output().unwrap();
    assert_eq!(again.status.code(), Some(125));
    assert!(stderr(&again).contains("has ended"), "{}", stderr(&again));
    let bad = daemon
        .spillway()
        .args(["kill", &id, "--signal", "NOPE"])
        .output()
        .unwrap();
    assert!(stderr(&bad).contains("unknown signal"), "{}", stderr(&bad));
}

#[test]
fn ps_shows_running_commands_with_growing_counters() {
    let daemon = TestDaemon::start();
    assert!(ps(&daemon).is_empty());
    let mut client = daemon.client();
    let mut request = shell("for i in $(seq 1 40); do echo $i; sleep 0.05; done");
    request["tags"] = json!({"session": "s1"});
    let started = start(&mut client, &request);
    let id = id_of(&started);
    let mut first = None;
    wait_for(
        || {
            first = ps(&daemon)
                .into_iter()
                .find(|r| r["id"] == id.as_str() && r["total_lines"].as_u64() > Some(0));
            first.is_some()
        },
        "lines in ps",
    );
    let first = first.unwrap();
    assert_eq!(first["pid"], started["pid"]);
    assert_eq!(first["tags"]["session"], "s1");
    assert_eq!(first["tty"], true);
    assert!(first["command"].as_str().unwrap().contains("seq 1 40"));
    assert!(first["idle_ms"].as_u64().unwrap() < 1000);
    let lines = first["total_lines"].as_u64().unwrap();
    wait_for(
        || {
            ps(&daemon)
                .iter()
                .find(|r| r["id"] == id.as_str())
                .is_some_and(|r| {
                    r["total_lines"].as_u64().unwrap() > lines
                        && r["total_bytes"].as_u64() > first["total_bytes"].as_u64()
                        && r["elapsed_ms"].as_u64() > first["elapsed_ms"].as_u64()
                })
        },
        "the counters to grow",
    );
    let table = daemon.spillway().arg("ps").output().unwrap();
    assert!(stdout(&table).contains(&id), "{}", stdout(&table));
    let filtered = daemon
        .client()
        .ask(&json!({"v": 1, "op": "ps", "tags": {"session": "other"}}));
    assert_eq!(filtered["runs"], json!([]));
    assert_eq!(client.event().unwrap()["type"], "exit");
    assert!(ps(&daemon).is_empty(), "gone once ended");
    let none = daemon.spillway().arg("ps").output().unwrap();
    assert_eq!(stdout(&none), "no running commands\n");
}

#[test]
fn a_send_longer_than_the_line_buffer_arrives_whole() {
    let daemon = TestDaemon::start();
    for (script, expected) in [
        ("head -c 10000 | wc -c", "10000"),
        ("read -r x; echo ${#x}", "10000"),
        ("wc -c", "10001"),
    ] {
        let mut client = daemon.client();
        let mut request = shell(script);
        request["max_bytes"] = json!(400);
        let id = id_of(&start(&mut client, &request));
        // As a person would: type once the command reads its terminal, not while the shell
        // is still starting (its terminal's modes are then still being set).
        wait_until_reading(&daemon, &id);
        let text = "x".repeat(10_000);
        let mut send = daemon.spillway();
        send.args(["send", &id, &text]);
        if script == "wc -c" {
            send.arg("--eof");
        }
        let sent = send.output().unwrap();
        assert!(sent.status.success(), "{script}: {}", stderr(&sent));
        let exit = client.event().unwrap();
        assert_eq!(exit["status"], "exited", "{script}: {exit}");
        let spill = std::fs::read_to_string(exit["spill_path"].as_str().unwrap()).unwrap();
        // The count may land right after the echoed text, before the echo of the Enter.
        assert!(
            spill.trim_end().ends_with(expected),
            "{script}: {}",
            exit["content"]
        );
        assert_eq!(exit["exit_code"], 0, "{script}");
    }
}

#[test]
fn sending_to_an_unknown_a_finished_or_a_pipe_run_is_an_error() {
    let daemon = TestDaemon::start();
    let unknown = daemon
        .spillway()
        .args(["send", "20261121-101502-abcd", "hi"])
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(125));
    assert!(
        stderr(&unknown).contains("no run with id"),
        "{}",
        stderr(&unknown)
    );
    let invalid = daemon
        .spillway()
        .args(["send", "../x", "hi"])
        .output()
        .unwrap();
    assert_eq!(invalid.status.code(), Some(125));

    let mut client = daemon.client();
    let exit = client.run_to_exit(&shell("true"));
    let id = id_of(&exit);
    let ended = daemon
        .spillway()
        .args(["send", &id, "hi"])
        .output()
        .unwrap();
    assert_eq!(ended.status.code(), Some(125));
    assert!(stderr(&ended).contains("has ended"), "{}", stderr(&ended));
    let answer = daemon
        .client()
        .ask(&json!({"v": 1, "op": "send", "id": id, "text": "hi"}));
    assert_eq!(answer["code"], "not_running", "{answer}");

    let mut request = shell("sleep 5");
    request["tty"] = json!(false);
    let id = id_of(&start(&mut client, &request));
    let answer = daemon
        .client()
        .ask(&json!({"v": 1, "op": "send", "id": id, "text": "hi"}));
    assert_eq!(answer["code"], "no_input", "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("without a terminal")
    );
    let killed = daemon
        .client()
        .ask(&json!({"v": 1, "op": "kill", "id": id}));
    assert_eq!(killed["status"], "killed", "{killed}");
}

#[test]
fn kill_on_disconnect_kills_the_group_when_the_client_goes() {
    let daemon = TestDaemon::start();
    let mut client = daemon.client();
    let mut request = shell("sleep 1000 & sleep 1000");
    request["kill_on_disconnect"] = json!(true);
    let started = start(&mut client, &request);
    let (id, pgid) = (id_of(&started), started["pid"].as_u64().unwrap() as u32);
    assert!(!processes_in_group(pgid).is_empty());
    drop(client);
    wait_for(|| processes_in_group(pgid).is_empty(), "the group to die");
    let exit = wait_event(&daemon, json!({"id": id}));
    assert_eq!(exit["status"], "killed", "{exit}");
    assert_eq!(exit["signal"], 1, "SIGHUP: {exit}");

    // Without it, the run outlives its client (and a yielded one, its connection).
    let mut client = daemon.client();
    let mut request = shell("sleep 0.5; echo survived");
    request["yield_ms"] = json!(50);
    let id = id_of(&start(&mut client, &request));
    assert_eq!(client.event().unwrap()["type"], "running");
    drop(client);
    let exit = wait_event(&daemon, json!({"id": id}));
    assert_eq!(exit["content"], "survived\n", "{exit}");
}

#[test]
fn live_requests_are_checked() {
    let daemon = TestDaemon::start();
    let mut client = daemon.client();
    for (request, code) in [
        (json!({"v": 1, "op": "wait", "id": "nope"}), "bad_request"),
        (
            json!({"v": 1, "op": "wait", "id": "20261121-101502-abcd"}),
            "unknown_run",
        ),
        (
            json!({"v": 1, "op": "follow", "id": "20261121-101502-abcd", "from_line": 0}),
            "bad_request",
        ),
        (
            json!({"v": 1, "op": "kill", "id": "20261121-101502-abcd"}),
            "unknown_run",
        ),
        (
            json!({"v": 1, "op": "run", "shell": "true", "yield_ms": 0}),
            "bad_request",
        ),
        (
            json!({"v": 1, "op": "run", "shell": "true", "yield_ms": 5, "stream": "raw"}),
            "bad_request",
        ),
        (
            json!({"v": 1, "op": "run", "shell": "true", "stream": "loud"}),
            "bad_request",
        ),
        (json!({"v": 1, "op": "ps", "all": true}), "bad_request"),
    ] {
        let answer = client.ask(&request);
        assert_eq!(answer["code"], code, "{request}: {answer}");
    }
}

#[test]
fn eof_ends_the_input_even_after_an_open_line() {
    let daemon = TestDaemon::start();
    let mut client = daemon.client();
    let id = id_of(&start(&mut client, &shell("wc -c")));
    let send = |args: &[&str]| {
        let out = daemon
            .spillway()
            .args(["send", &id])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    };
    send(&["one"]);
    send(&["two", "--no-newline"]);
    send(&["--eof"]);
    let exit = client.event().unwrap();
    assert_eq!(exit["status"], "exited", "{exit}");
    // "one\n" and "two": the first EOF hands over the open line, the second ends the input.
    let spill = std::fs::read_to_string(exit["spill_path"].as_str().unwrap()).unwrap();
    assert!(spill.trim_end().ends_with('7'), "{spill:?}");
}

#[test]
fn wait_new_previews_keep_the_runs_highlight_patterns() {
    let daemon = TestDaemon::start();
    // Filler lines differ in letters, so none fold; the needles come after the yield.
    let script = "echo first; sleep 1.5; seq 1 300 | tr 0-9 a-j | sed 's/^/alpha /'; \
                  echo 'NEEDLE in the hay'; echo 'error: boom'; \
                  seq 1 300 | tr 0-9 a-j | sed 's/^/omega /'";
    let new_exit = |flags: &[&str]| -> String {
        let args = [
            &["--yield", "500ms", "--max-lines", "20"],
            flags,
            &["-c", script],
        ]
        .concat();
        let out = daemon.run(&args);
        assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
        let id = stderr(&out).split_whitespace().nth(2).unwrap().to_string();
        let done = daemon
            .spillway()
            .args(["wait", &id, "--new"])
            .output()
            .unwrap();
        assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
        stdout(&done)
    };
    let custom = new_exit(&["--highlight", "^NEEDLE"]);
    assert!(
        custom.contains("[at line 302]\nNEEDLE in the hay\n"),
        "{custom}"
    );
    assert!(custom.contains("new output truncated"), "{custom}");
    let off = new_exit(&["--no-highlights"]);
    assert!(!off.contains("error: boom"), "{off}");
    assert!(!off.contains("NEEDLE"), "{off}");
    let defaults = new_exit(&[]);
    assert!(
        defaults.contains("[at line 303]\nerror: boom\n"),
        "{defaults}"
    );
}

/// Waits (bounded) until run `id` is blocked reading its terminal, as `wait` reports it.
fn wait_until_reading(daemon: &TestDaemon, id: &str) {
    for _ in 0..100 {
        let out = daemon
            .spillway()
            .args(["wait", id, "--yield", "100ms", "--json"])
            .output()
            .unwrap();
        let event: Value = serde_json::from_slice(&out.stdout).unwrap();
        if event.get("waiting_for_input").is_some_and(|w| !w.is_null()) {
            return;
        }
    }
    panic!("run {id} never read its terminal");
}
