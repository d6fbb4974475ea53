//! The daemon end to end: a real daemon in a temp dir, driven through the CLI and raw socket
//! writes.

use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::Instant;

use serde_json::json;

use crate::helper::daemon::{
    PATIENCE, ProcStat, RawClient, TestDaemon, daemon_command, processes_in_group, signal,
    wait_child, wait_for,
};
use crate::helper::{Sandbox, stderr, stdout};

fn run_request(argv: &[&str]) -> serde_json::Value {
    json!({"v": 1, "op": "run", "argv": argv, "cwd": "/"})
}

#[test]
fn run_prints_the_output_and_passes_on_the_exit_code() {
    let daemon = TestDaemon::start();
    let out = daemon.run(&["--", "sh", "-c", "echo hello; echo oops >&2; exit 3"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(stdout(&out), "hello\noops\n");
    assert!(stderr(&out).contains("exited with code 3"));

    let ok = daemon.run(&["-c", "printf 'a b'"]);
    assert_eq!(ok.status.code(), Some(0));
    assert_eq!(stdout(&ok), "a b");
    assert_eq!(stderr(&ok), "");
}

#[test]
fn signals_and_timeouts_map_to_exit_codes() {
    let daemon = TestDaemon::start();
    let killed = daemon.run(&["--", "sh", "-c", "kill -KILL $$"]);
    assert_eq!(killed.status.code(), Some(137));
    assert!(stderr(&killed).contains("SIGKILL"), "{}", stderr(&killed));

    let timed_out = daemon.run(&["--timeout", "300ms", "--", "sleep", "100"]);
    assert_eq!(timed_out.status.code(), Some(124));
    assert!(stderr(&timed_out).contains("timed out"));
}

#[test]
fn a_timeout_kills_the_whole_process_tree() {
    let daemon = TestDaemon::start();
    let out = daemon.run(&[
        "--json",
        "--timeout",
        "500ms",
        "-c",
        "echo $$; sleep 1000 & sleep 1000 & sleep 1000",
    ]);
    assert_eq!(out.status.code(), Some(124));
    let exit: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(exit["status"], "timed_out");
    // The first line is the shell's pid; a note of what the stop found still dying may follow.
    let content = exit["content"].as_str().unwrap();
    let pgid: u32 = content.lines().next().unwrap().trim().parse().unwrap();
    wait_for(
        || processes_in_group(pgid).is_empty(),
        "the process group to die",
    );
}

#[test]
fn output_is_byte_exact_in_the_spill_for_pty_and_pipe() {
    let daemon = TestDaemon::start();
    let file = daemon.sandbox.dir.path().join("big.txt");
    let mut text = String::with_capacity(100 << 20);
    let mut i = 0u64;
    while text.len() < 100 << 20 {
        text.push_str(&format!(
            "{i:>10} the quick brown fox\tjumps over the lazy dog {}\n",
            i * 7919 % 1000
        ));
        i += 1;
    }
    std::fs::write(&file, &text).unwrap();
    for mode in [&[][..], &["--no-tty"]] {
        let out = daemon.run(&[mode, &["--json", "--", "cat", file.to_str().unwrap()]].concat());
        assert!(out.status.success(), "{}", stderr(&out));
        let exit: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(exit["total_bytes"], text.len(), "{mode:?}");
        let spill = std::fs::read(exit["spill_path"].as_str().unwrap()).unwrap();
        assert!(
            spill == text.as_bytes(),
            "spill differs from the file ({mode:?})"
        );
    }
}

#[test]
fn thirty_two_concurrent_runs_are_each_correct() {
    let daemon = TestDaemon::start();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..32)
            .map(|i| {
                let daemon = &daemon;
                scope.spawn(move || {
                    let script = format!("seq 1 {}; echo run-{i}", 1000 + i * 100);
                    (i, daemon.run(&["--max-lines", "5000", "-c", &script]))
                })
            })
            .collect();
        for handle in handles {
            let (i, out) = handle.join().unwrap();
            assert!(out.status.success(), "run {i}: {}", stderr(&out));
            let expected: String = (1..=1000 + i * 100)
                .map(|n| format!("{n}\n"))
                .chain([format!("run-{i}\n")])
                .collect();
            assert_eq!(stdout(&out), expected, "run {i}");
        }
    });
}

#[test]
fn bad_requests_get_errors_and_the_connection_stays_usable() {
    let daemon = TestDaemon::start();
    let mut client = daemon.client();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"this is not json\n".to_vec(), "malformed_json"),
        (b"[1,2,3]\n".to_vec(), "malformed_json"),
        (
            b"{\"v\":1,\"op\":\"run\",\"argv\":[\"ls\"]\xff}\n".to_vec(),
            "malformed_json",
        ),
        (b"{\"op\":\"ping\"}\n".to_vec(), "unsupported_version"),
        (
            b"{\"v\":7,\"op\":\"ping\"}\n".to_vec(),
            "unsupported_version",
        ),
        (b"{\"v\":1,\"op\":\"fly\"}\n".to_vec(), "unknown_op"),
        (b"{\"v\":1}\n".to_vec(), "unknown_op"),
        (b"{\"v\":1,\"op\":\"run\"}\n".to_vec(), "bad_request"),
        (
            b"{\"v\":1,\"op\":\"run\",\"argv\":\"ls\"}\n".to_vec(),
            "bad_request",
        ),
        (
            b"{\"v\":1,\"op\":\"run\",\"argv\":[\"ls\"],\"max_lines\":0}\n".to_vec(),
            "bad_request",
        ),
        (
            b"{\"v\":1,\"op\":\"run\",\"argv\":[\"ls\"],\"timeout_ms\":\"soon\"}\n".to_vec(),
            "bad_request",
        ),
        (
            b"{\"v\":1,\"op\":\"run\",\"argv\":[\"ls\"],\"cwd\":\"relative\"}\n".to_vec(),
            "bad_request",
        ),
        (
            b"{\"v\":1,\"op\":\"run\",\"argv\":[\"ls\"],\"cwd\":\"/no/such/dir\"}\n".to_vec(),
            "bad_cwd",
        ),
        (
            b"{\"v\":1,\"op\":\"run\",\"argv\":[\"no-such-program-xyz\"],\"cwd\":\"/\"}\n".to_vec(),
            "spawn_failed",
        ),
    ];
    for (line, code) in cases {
        client.send_raw(&line);
        let event = client.event().expect("an error event");
        assert_eq!(event["type"], "error", "{}", String::from_utf8_lossy(&line));
        assert_eq!(
            event["code"],
            code,
            "{}: {event}",
            String::from_utf8_lossy(&line)
        );
        assert!(!event["message"].as_str().unwrap().is_empty());
    }
    let pong = client.ask(&json!({"v": 1, "op": "ping"}));
    assert_eq!(pong["type"], "pong");
    let exit = client.run_to_exit(&run_request(&["echo", "still here"]));
    assert_eq!(exit["content"], "still here\n");
}

#[test]
fn an_oversized_request_closes_only_that_connection() {
    let daemon = TestDaemon::start();
    let mut big = daemon.client();
    let mut line = vec![b'x'; (1 << 20) + 10];
    line.push(b'\n');
    big.send_raw(&line);
    let event = big.event().expect("an error");
    assert_eq!(event["code"], "request_too_large");
    assert!(big.event().is_none(), "the connection is closed");
    let mut other = daemon.client();
    assert_eq!(other.ask(&json!({"v": 1, "op": "ping"}))["type"], "pong");
}

#[test]
fn an_unknown_program_and_a_bad_cwd_are_clear_cli_errors() {
    let daemon = TestDaemon::start();
    let out = daemon.run(&["--", "no-such-program-xyz", "--flag"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains("no-such-program-xyz"),
        "{}",
        stderr(&out)
    );
    let out = daemon.run(&["--cwd", "/no/such/dir", "--", "ls"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(stderr(&out).contains("/no/such/dir"), "{}", stderr(&out));
}

#[test]
fn a_stale_socket_is_replaced_and_a_live_one_is_not() {
    let sandbox = Sandbox::new();
    let dir = sandbox.dir.path().join("run");
    std::fs::create_dir(&dir).unwrap();
    let socket = dir.join("spillway.sock");
    drop(UnixListener::bind(&socket).unwrap()); // leaves the file behind, like a crash
    let mut first = daemon_command(&sandbox, &socket).spawn().unwrap();
    wait_for(|| UnixStream::connect(&socket).is_ok(), "the first daemon");

    let second = daemon_command(&sandbox, &socket)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(!second.status.success());
    assert!(
        stderr(&second).contains(&format!(
            "another spillway daemon (pid {}, listening on {}) already serves data directory",
            first.id(),
            socket.display()
        )),
        "{}",
        stderr(&second)
    );
    assert!(
        UnixStream::connect(&socket).is_ok(),
        "the first daemon still serves"
    );
    signal(first.id(), "TERM");
    assert!(wait_child(&mut first).success());
}

#[test]
fn the_socket_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let daemon = TestDaemon::start();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&daemon.socket), 0o600);
    assert_eq!(mode(daemon.socket.parent().unwrap()), 0o700);
}

#[test]
fn socket_activation_serves_the_passed_listener() {
    let sandbox = Sandbox::new();
    let socket = sandbox.dir.path().join("activated.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&listener);
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg(r#"LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" daemon"#)
        .arg(env!("CARGO_BIN_EXE_spillway"))
        .env("SPILLWAY_DATA_DIR", sandbox.data_dir())
        .env("SPILLWAY_SOCKET", sandbox.dir.path().join("unused.sock"))
        .env("SPILLWAY_LOG", crate::helper::daemon::daemon_log_level());
    // SAFETY: dup2 and fcntl are async-signal-safe; the listener stays open until spawn.
    unsafe {
        cmd.pre_exec(move || {
            // dup2 onto itself keeps close-on-exec, so fd 3 needs the flag cleared instead.
            let ok = if fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0) != -1
            } else {
                libc::dup2(fd, 3) != -1
            };
            if ok {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let mut child = cmd.spawn().unwrap();
    drop(listener);
    let mut client = RawClient::connect(&socket);
    assert_eq!(client.ask(&json!({"v": 1, "op": "ping"}))["type"], "pong");
    let exit = client.run_to_exit(&run_request(&["echo", "activated"]));
    assert_eq!(exit["content"], "activated\n");
    assert!(!sandbox.dir.path().join("unused.sock").exists());
    signal(child.id(), "TERM");
    assert!(wait_child(&mut child).success());
}

#[test]
fn sigterm_stops_runs_records_them_and_exits_cleanly() {
    let mut daemon = TestDaemon::start();
    let mut client = daemon.client();
    client.send(&run_request(&["sh", "-c", "echo begun; sleep 1000"]));
    let started = client.event().unwrap();
    assert_eq!(started["type"], "started");
    let pgid = started["pid"].as_u64().unwrap() as u32;
    // The shell's echo races the signal otherwise (a run killed 2 ms in has no output).
    wait_for(
        || {
            let ps = daemon.client().ask(&json!({"v": 1, "op": "ps"}));
            ps["runs"][0]["total_lines"].as_u64() > Some(0)
        },
        "the run's first line",
    );
    let socket = daemon.socket.clone();
    let status = daemon.terminate();
    assert!(status.success(), "{status:?}");
    let exit = client.event().expect("the exit event");
    assert_eq!(exit["type"], "exit");
    assert_eq!(exit["status"], "killed");
    assert_eq!(exit["content"], "begun\n");
    assert!(processes_in_group(pgid).is_empty());
    assert!(!socket.exists(), "the socket is removed");
}

#[test]
fn a_run_outlives_its_client() {
    let daemon = TestDaemon::start();
    let marker = daemon.sandbox.dir.path().join("marker");
    let script = format!("sleep 0.3; echo done > {}", marker.display());
    let mut client = daemon.client();
    client.send(&run_request(&["sh", "-c", &script]));
    assert_eq!(client.event().unwrap()["type"], "started");
    drop(client);
    wait_for(|| marker.exists(), "the run to finish without its client");
}

#[test]
fn runs_get_a_pager_safe_environment_and_their_own_variables() {
    let daemon = TestDaemon::start();
    let out = daemon.run(&[
        "--env",
        "EXTRA=1",
        "-c",
        "echo $PAGER $GIT_PAGER $GIT_TERMINAL_PROMPT $EXTRA $TERM; [ -t 1 ] && echo tty; stty size",
    ]);
    assert_eq!(stdout(&out), "cat cat 0 1 xterm-256color\ntty\n50 200\n");
    let piped = daemon.run(&["--no-tty", "-c", "[ -t 1 ] || echo pipe"]);
    assert_eq!(stdout(&piped), "pipe\n");
}

#[test]
fn git_log_does_not_wait_for_a_pager() {
    let daemon = TestDaemon::start();
    let repo = daemon.sandbox.dir.path().join("repo");
    let setup = format!(
        "git init -q {0} && cd {0} && for i in $(seq 1 150); do \
         git -c user.name=t -c user.email=t@t commit -q --allow-empty -m \"commit $i\"; done",
        repo.display()
    );
    assert!(
        std::process::Command::new("sh")
            .arg("-c")
            .arg(&setup)
            .status()
            .unwrap()
            .success()
    );
    let started = Instant::now();
    let out = daemon.run(&[
        "--cwd",
        repo.to_str().unwrap(),
        "--timeout",
        "20s",
        "--",
        "git",
        "log",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("commit 150"));
    assert!(started.elapsed() < PATIENCE);
}

#[test]
fn run_starts_a_daemon_when_none_is_running_and_racers_share_it() {
    let sandbox = Sandbox::new();
    let socket = sandbox.dir.path().join("auto/spillway.sock");
    let outputs: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..3)
            .map(|i| {
                let (sandbox, socket) = (&sandbox, &socket);
                scope.spawn(move || {
                    let mut cmd = sandbox.spillway();
                    cmd.env("SPILLWAY_SOCKET", socket).args([
                        "run",
                        "--",
                        "echo",
                        &format!("racer {i}"),
                    ]);
                    cmd.output().unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, out) in outputs.iter().enumerate() {
        assert!(out.status.success(), "{}", stderr(out));
        assert_eq!(stdout(out), format!("racer {i}\n"));
    }
    let mut client = RawClient::connect(&socket);
    let pid = client.ask(&json!({"v": 1, "op": "ping"}))["pid"]
        .as_u64()
        .unwrap() as u32;
    // A racer whose own daemon lost connects to the winner as soon as its socket answers, and
    // may be done before its daemon has found the data directory taken and gone away.
    let daemons = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
                    let c = String::from_utf8_lossy(&c);
                    c.contains("daemon") && c.contains(socket.to_str().unwrap())
                })
            })
            .count()
    };
    wait_for(|| daemons() <= 1, "the daemons that lost the race to exit");
    assert_eq!(daemons(), 1, "exactly one daemon serves the socket");
    drop(client);
    signal(pid, "TERM");
    wait_for(|| !socket.exists(), "the autostarted daemon to stop");
}

#[test]
fn an_idle_daemon_started_with_idle_exit_goes_away() {
    let mut daemon = TestDaemon::start_with(&["--idle-exit", "300ms"]);
    let out = daemon.run(&["--", "true"]);
    assert!(out.status.success());
    assert!(daemon.wait_exit().success());
    assert!(!daemon.socket.exists());
}

#[test]
fn json_output_carries_the_whole_exit_event() {
    let daemon = TestDaemon::start();
    let out = daemon.run(&["--json", "--tag", "session=abc", "--", "seq", "1", "5000"]);
    assert!(out.status.success());
    let exit: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for field in [
        "id",
        "status",
        "exit_code",
        "signal",
        "duration_ms",
        "started_at",
        "ended_at",
        "truncated",
        "content",
        "spill_path",
        "total_lines",
        "total_bytes",
        "truncated_by",
        "shown",
        "omitted_lines",
        "partial_line",
    ] {
        assert!(exit.get(field).is_some(), "missing {field}: {exit}");
    }
    assert_eq!(exit["type"], "exit");
    assert_eq!(exit["status"], "exited");
    assert_eq!(exit["exit_code"], 0);
    assert_eq!(exit["total_lines"], 5000);
    assert_eq!(exit["truncated"], true);
    let spill = std::fs::read_to_string(exit["spill_path"].as_str().unwrap()).unwrap();
    let expected: String = (1..=5000).map(|n| format!("{n}\n")).collect();
    assert_eq!(spill, expected);
    // Short outputs are spilled too: history reads every run.
    let short = daemon.run(&["--json", "--", "echo", "hi"]);
    let exit: serde_json::Value = serde_json::from_slice(&short.stdout).unwrap();
    assert_eq!(
        std::fs::read_to_string(exit["spill_path"].as_str().unwrap()).unwrap(),
        "hi\n"
    );
}

#[test]
fn run_previews_carry_highlights_and_keep_a_token_budget() {
    let daemon = TestDaemon::start();
    // Filler lines differ in letters, so no two fold together.
    let filler = |name: &str| format!("seq 1 400 | tr 0-9 a-j | sed 's/^/{name} unit /'");
    let script = format!(
        "{}; echo 'src/a.c:3:4: error: boom'; echo 'NEEDLE in the hay'; {}",
        filler("compiling"),
        filler("linking")
    );
    let exit_of = |flags: &[&str]| -> serde_json::Value {
        let out = daemon.run(&[&["--json", "--no-tty"], flags, &["-c", &script]].concat());
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", stderr(&out)))
    };
    let plain = exit_of(&["--max-lines", "50"]);
    let content = plain["content"].as_str().unwrap();
    assert!(
        content.contains("[at line 401]\nsrc/a.c:3:4: error: boom\n"),
        "{content}"
    );
    assert!(!content.contains("NEEDLE"));

    let custom = exit_of(&["--max-lines", "50", "--highlight", "^NEEDLE"]);
    assert!(
        custom["content"]
            .as_str()
            .unwrap()
            .contains("\nNEEDLE in the hay\n")
    );

    let off = exit_of(&["--max-lines", "50", "--no-highlights"]);
    assert!(!off["content"].as_str().unwrap().contains("error: boom"));

    let budget = exit_of(&["--max-tokens", "80"]);
    assert_eq!(budget["truncated_by"], "tokens");

    let bad = daemon.run(&["--highlight", "(unclosed", "--", "true"]);
    assert_eq!(bad.status.code(), Some(125));
    assert!(
        stderr(&bad).contains("bad highlight pattern"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn how_a_run_ended_decides_which_needle_a_tight_budget_shows() {
    let daemon = TestDaemon::start();
    // 400 lines of one shape (paths differ in letters, so the outline does not fold them), a
    // restatement a pattern names at line 151, and a line only its rarity marks at line 301;
    // 9 lines leave room for one highlight.
    let script = |code: u8| {
        format!(
            "seq 1 400 | tr 0-9 a-j | awk '{{ if (NR==151) print \"make: *** [all] Error 2\"; \
             else if (NR==301) print \"the cache index was rebuilt from scratch\"; \
             else print \"checked /srv/\" $1 \"/mod.py fine\" }}'; exit {code}"
        )
    };
    let content = |code: u8| -> String {
        let flags = ["--json", "--no-tty", "--compact", "off", "--max-lines", "9"];
        let out = daemon.run(&[&flags[..], &["--", "sh", "-c", &script(code)]].concat());
        let exit: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", stderr(&out)));
        exit["content"].as_str().unwrap().to_string()
    };
    let restatement = "[at line 151]\nmake: *** [all] Error 2\n";
    let rare = "[at line 301]\nthe cache index was rebuilt from scratch\n";
    // A failed run: the rare line is likelier why (and nearer the end).
    let failed = content(1);
    assert!(
        failed.contains(rare) && !failed.contains(restatement),
        "{failed}"
    );
    // A run that succeeded: what a pattern names comes first.
    let succeeded = content(0);
    assert!(
        succeeded.contains(restatement) && !succeeded.contains(rare),
        "{succeeded}"
    );
}

#[test]
fn a_process_that_escaped_its_run_is_stopped_and_reaped() {
    let daemon = TestDaemon::start();
    // The escapee leaves the run's group (setsid; not forked, so $! is the escapee) and lets
    // go of the output: it would outlive its shell, a zombie of the daemon (a subreaper) when
    // it died. The run's end stops it, names it, and the daemon reaps it.
    let script = "setsid sh -c 'exec >/dev/null 2>&1; sleep 2' & echo $!; sleep 0.3";
    let out = daemon.run(&["--json", "--no-tty", "--", "sh", "-c", script]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let exit: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let escapee: u64 = exit["content"]
        .as_str()
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(exit["stopped"][0]["pid"], escapee, "{exit}");
    wait_for(
        || ProcStat::of(escapee as u32).is_none(),
        "the escapee to be stopped and reaped",
    );
}

/// The command gets the caller's umask and resource limits, not the daemon's: a file made
/// under `umask 027` is 0640, and `ulimit -n` and `-c` are the caller's. A bad `caller` is a
/// bad request, and the daemon lives on.
#[test]
fn a_run_gets_the_callers_umask_and_resource_limits() {
    // A daemon that raises its open-file limit (its soft one below its hard one), as it gives
    // commands the limit it started with unless the caller sends one.
    let daemon = TestDaemon::start_customised(|cmd, _| {
        use nix::sys::resource::{Resource, getrlimit, setrlimit};
        let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        // SAFETY: the hook only calls setrlimit, which is async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                let _ = setrlimit(Resource::RLIMIT_NOFILE, 1000.min(hard), hard);
                Ok(())
            });
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("made");
    let mut cmd = std::process::Command::new("sh");
    cmd.args([
        "-c",
        "umask 027; ulimit -Sn 200; ulimit -c 0; exec \"$0\" run --no-tty -- sh -c \
         'touch \"$0\"; umask; ulimit -Sn; ulimit -c' \"$1\"",
        env!("CARGO_BIN_EXE_spillway"),
        file.to_str().unwrap(),
    ]);
    for (k, v) in daemon.spillway().get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = cmd.output().unwrap();
    assert_eq!(stdout(&out), "0027\n200\n0\n", "{}", stderr(&out));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);

    let mut client = daemon.client();
    for caller in [
        json!({"umask": 512}),
        json!({"rlimits": {"files": {"soft": 1, "hard": 1}}}),
        json!({"rlimits": {"nofile": {"soft": 9, "hard": 8}}}),
    ] {
        let mut request = run_request(&["true"]);
        request["caller"] = caller.clone();
        let answer = client.ask(&request);
        assert_eq!(answer["code"], "bad_request", "{caller}: {answer}");
    }
    let out = daemon.run(&["--", "echo", "alive"]);
    assert_eq!(stdout(&out), "alive\n");
}
