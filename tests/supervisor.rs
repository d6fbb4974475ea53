//! The run engine with real processes: exit statuses, signals, timeouts and stops killing whole
//! process trees, byte-exact capture under a PTY and through a pipe, the child's environment
//! and terminal, launch errors, and concurrent runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use spillway::engine::capture::Limits;
use spillway::protocol::Direction;
use spillway::protocol::{RunId, RunStatus};
use spillway::storage::spill::DataDir;
use spillway::supervisor::{
    Finished, LaunchError, Launched, RunSpec, StopReason, TtySize, child_env, launch,
};

/// Longest any test run may take before the test fails instead of hanging.
const RUN_LIMIT: Duration = Duration::from_secs(60);

/// A data directory and a scratch directory, removed on drop.
struct Rig {
    tmp: tempfile::TempDir,
    data: DataDir,
}

impl Rig {
    fn new() -> Rig {
        let tmp = tempfile::tempdir().unwrap();
        let data = DataDir::open(&tmp.path().join("data")).unwrap();
        Rig { tmp, data }
    }

    fn scratch(&self) -> &Path {
        self.tmp.path()
    }

    /// A spec for `argv` under a 200x50 PTY, in the scratch directory, with the test's own
    /// environment made pager-safe.
    fn spec(&self, argv: &[&str]) -> RunSpec {
        RunSpec {
            id: RunId::generate(),
            argv: argv.iter().map(ToString::to_string).collect(),
            cwd: self.scratch().to_path_buf(),
            env: child_env(
                std::env::vars(),
                true,
                Some("xterm-256color"),
                &BTreeMap::new(),
            ),
            tty: Some(TtySize {
                cols: 200,
                rows: 50,
            }),
            timeout: None,
            kill_grace: Duration::from_secs(5),
            limits: Limits::default(),
            direction: Direction::Both,
            raw: false,
            raw_stream: false,
            highlights: Some(spillway::engine::highlight::Patterns::new(&[]).unwrap()),
            max_tokens: None,
            compact: true,
            max_spill: spillway::engine::capture::DEFAULT_MAX_SPILL,
            cgroups: None,
            resources: Default::default(),
            stdin: None,
            caller: None,
        }
    }

    fn sh(&self, script: &str) -> RunSpec {
        self.spec(&["sh", "-c", script])
    }

    async fn start(&self, spec: RunSpec) -> Launched {
        launch(spec, &self.data).await.expect("launch")
    }

    async fn run(&self, spec: RunSpec) -> Finished {
        finish(self.start(spec).await).await
    }
}

fn no_tty(mut spec: RunSpec) -> RunSpec {
    spec.tty = None;
    spec
}

async fn finish(launched: Launched) -> Finished {
    tokio::time::timeout(RUN_LIMIT, launched.finished)
        .await
        .expect("the run ends")
        .expect("the run reports")
}

/// The whole captured output.
fn spill(f: &Finished) -> Vec<u8> {
    std::fs::read(f.preview.spill_path.as_ref().expect("a spill file")).unwrap()
}

fn spill_text(f: &Finished) -> String {
    String::from_utf8(spill(f)).unwrap()
}

/// Processes (zombies included) whose process group is `pgid`, as "pid state".
fn group_members(pgid: u32) -> Vec<String> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...: comm may hold spaces, so split after its ')'.
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(2) == Some(&pgid.to_string().as_str()) {
            let pid = head.split_whitespace().next().unwrap_or("?");
            members.push(format!("{pid} {}", fields[0]));
        }
    }
    members
}

/// Waits (polling, at most 10 s) until `path` exists.
async fn wait_for_file(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn elapsed(f: &Finished) -> Duration {
    (f.ended_at - f.started_at).to_std().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn exit_codes_are_reported() {
    let rig = Rig::new();
    for (script, code) in [("exit 0", 0), ("echo hi; exit 3", 3)] {
        for spec in [rig.sh(script), no_tty(rig.sh(script))] {
            let f = rig.run(spec).await;
            assert_eq!(f.status, RunStatus::Exited, "{script}");
            assert_eq!((f.exit_code, f.signal), (Some(code), None), "{script}");
            assert!(f.ended_at >= f.started_at);
        }
    }
    let f = rig.run(rig.sh("echo hi; exit 3")).await;
    assert_eq!(f.preview.content, "hi\n");
    assert_eq!(f.preview.total_lines, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_signal_spillway_did_not_send_is_signaled() {
    let rig = Rig::new();
    let f = rig.run(rig.sh("kill -TERM $$")).await;
    assert_eq!(f.status, RunStatus::Signaled);
    assert_eq!((f.exit_code, f.signal), (None, Some(15)));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_command_leads_its_own_session_and_process_group() {
    let rig = Rig::new();
    let launched = rig.start(rig.sh("cat /proc/$$/stat")).await;
    let pid = launched.pid.to_string();
    let f = finish(launched).await;
    let stat = spill_text(&f);
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    // pgrp and session (fields 5 and 6) are the command's own pid.
    assert_eq!(
        (fields[2], fields[3]),
        (pid.as_str(), pid.as_str()),
        "{stat}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timeout_kills_the_whole_tree() {
    let rig = Rig::new();
    for mut spec in [
        rig.sh("sleep 1000 & sleep 1000"),
        no_tty(rig.sh("sleep 1000 & sleep 1000")),
    ] {
        spec.timeout = Some(Duration::from_millis(300));
        let launched = rig.start(spec).await;
        let pid = launched.pid;
        let f = finish(launched).await;
        assert_eq!(f.status, RunStatus::TimedOut);
        assert_eq!((f.exit_code, f.signal), (None, Some(15)));
        // SIGTERM did it: well before the 5 s grace.
        assert!(elapsed(&f) < Duration::from_secs(3), "{:?}", elapsed(&f));
        assert_eq!(group_members(pid), Vec::<String>::new());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_kills_the_group_and_says_killed() {
    let rig = Rig::new();
    let ready = rig.scratch().join("ready");
    let launched = rig
        .start(rig.sh("touch ready; sleep 1000 & sleep 1000"))
        .await;
    let pid = launched.pid;
    wait_for_file(&ready).await;
    launched.control.stop(StopReason::Kill(Signal::SIGTERM));
    let f = finish(launched).await;
    assert_eq!(f.status, RunStatus::Killed);
    assert_eq!(f.signal, Some(15));
    assert_eq!(group_members(pid), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_escalates_to_sigkill_after_the_grace() {
    let rig = Rig::new();
    let ready = rig.scratch().join("ready");
    let mut spec = no_tty(rig.sh("trap '' TERM; touch ready; sleep 1000"));
    spec.kill_grace = Duration::from_millis(200);
    let launched = rig.start(spec).await;
    let pid = launched.pid;
    wait_for_file(&ready).await;
    let control = launched.control.clone();
    control.stop(StopReason::Shutdown);
    control.stop(StopReason::Shutdown);
    let f = finish(launched).await;
    assert_eq!(f.status, RunStatus::Killed);
    assert_eq!(f.signal, Some(9));
    assert!(elapsed(&f) >= Duration::from_millis(200));
    assert_eq!(group_members(pid), Vec::<String>::new());
    // The run has ended: stopping it again does nothing.
    control.stop(StopReason::Kill(Signal::SIGKILL));
}

/// A plain-text file of about `bytes` bytes.
fn text_file(dir: &Path, bytes: usize) -> PathBuf {
    let mut text = String::with_capacity(bytes + 100);
    let mut i = 0u64;
    while text.len() < bytes {
        text.push_str(&format!(
            "{i:08} the quick brown fox jumps over the lazy dog\t{}\n",
            i % 97
        ));
        i += 1;
    }
    let path = dir.join("input.txt");
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn cat_of_a_big_file_is_byte_exact_in_the_spill() {
    let rig = Rig::new();
    let input = text_file(rig.scratch(), 20 << 20);
    let expected = std::fs::read(&input).unwrap();
    let path = input.to_str().unwrap();
    for spec in [rig.spec(&["cat", path]), no_tty(rig.spec(&["cat", path]))] {
        let tty = spec.tty.is_some();
        let f = rig.run(spec).await;
        assert_eq!(f.status, RunStatus::Exited);
        let got = spill(&f);
        assert!(
            got == expected,
            "tty={tty}: {} of {} bytes",
            got.len(),
            expected.len()
        );
        assert_eq!(f.preview.total_bytes, expected.len() as u64);
        assert!(f.preview.truncated);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_last_bytes_before_exit_are_kept() {
    let rig = Rig::new();
    for _ in 0..10 {
        for spec in [
            rig.spec(&["printf", "last"]),
            no_tty(rig.spec(&["printf", "last"])),
        ] {
            let f = rig.run(spec).await;
            assert_eq!(spill(&f), b"last");
            assert_eq!(f.preview.content, "last");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_tty_stdout_and_stderr_keep_their_order() {
    let rig = Rig::new();
    let f = rig
        .run(no_tty(rig.sh("echo 1; echo 2 >&2; echo 3; echo 4 >&2")))
        .await;
    assert_eq!(spill_text(&f), "1\n2\n3\n4\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_cwd_is_refused() {
    let rig = Rig::new();
    let file = rig.scratch().join("file");
    std::fs::write(&file, "").unwrap();
    for cwd in [rig.scratch().join("missing"), file] {
        let mut spec = rig.spec(&["true"]);
        spec.cwd = cwd.clone();
        match launch(spec, &rig.data).await {
            Err(LaunchError::BadCwd { cwd: got, .. }) => assert_eq!(got, cwd),
            other => panic!("expected BadCwd, got {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_or_unrunnable_program_is_a_spawn_error() {
    let rig = Rig::new();
    let err = launch(rig.spec(&["no-such-program-xyz"]), &rig.data)
        .await
        .unwrap_err();
    assert!(matches!(err, LaunchError::Spawn { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("no-such-program-xyz")
            && message.contains("not found")
            && message.contains("PATH="),
        "{message}"
    );

    std::fs::write(rig.scratch().join("plain"), "echo hi\n").unwrap();
    for argv in [["./plain"], ["./missing"]] {
        let err = launch(rig.spec(&argv), &rig.data).await.unwrap_err();
        assert!(matches!(err, LaunchError::Spawn { .. }), "{err:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_program_is_looked_up_in_the_childs_path() {
    let rig = Rig::new();
    let bin = rig.scratch().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let tool = bin.join("my-tool");
    std::fs::write(&tool, "#!/bin/sh\necho from-my-tool\n").unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut spec = rig.spec(&["my-tool"]);
    let path = format!("{}:/usr/bin:/bin", bin.display());
    spec.env.retain(|(k, _)| k != "PATH");
    spec.env.push(("PATH".into(), path));
    let f = rig.run(spec).await;
    assert_eq!(spill_text(&f), "from-my-tool\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_environment_is_exactly_the_one_given() {
    let rig = Rig::new();
    let base = [
        ("PATH", "/usr/bin:/bin"),
        ("HOME", "/nowhere"),
        ("NOTIFY_SOCKET", "/run/systemd/notify"),
        ("PAGER", "less"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()));
    let overrides = BTreeMap::from([("MY_VAR".to_string(), "x y".to_string())]);
    let mut spec = rig.spec(&["env"]);
    spec.env = child_env(base, true, Some("xterm-256color"), &overrides);
    let id = spec.id.to_string();
    let f = rig.run(spec).await;
    let mut lines: Vec<String> = spill_text(&f).lines().map(String::from).collect();
    lines.sort();
    let mut expected: Vec<String> = [
        "PATH=/usr/bin:/bin",
        "HOME=/nowhere",
        "TERM=xterm-256color",
        "MY_VAR=x y",
        "PAGER=cat",
        "GIT_PAGER=cat",
        "MANPAGER=cat",
        "SYSTEMD_PAGER=",
        "GIT_TERMINAL_PROMPT=0",
        "GH_PAGER=cat",
        "AWS_PAGER=",
        "PSQL_PAGER=cat",
        "GCM_INTERACTIVE=never",
        "DEBIAN_FRONTEND=noninteractive",
    ]
    .map(String::from)
    .to_vec();
    // The run's marker, which every process it starts inherits.
    expected.push(format!("SPILLWAY_RUN_ID={id}"));
    expected.sort();
    assert_eq!(lines, expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_command_sees_a_terminal_only_under_a_pty() {
    let rig = Rig::new();
    let script = "[ -t 0 ] && echo in; [ -t 1 ] && echo out; [ -t 2 ] && echo err; \
                  readlink /proc/$$/fd/0";
    let f = rig.run(rig.sh(script)).await;
    let text = spill_text(&f);
    assert!(text.starts_with("in\nout\nerr\n/dev/pts/"), "{text}");

    // Without one, stdin is /dev/null: `cat` ends at once.
    let f = rig
        .run(no_tty(rig.sh(&format!("{script}; cat; echo end"))))
        .await;
    assert_eq!(spill_text(&f), "/dev/null\nend\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_pty_has_the_requested_size() {
    let rig = Rig::new();
    let f = rig.run(rig.spec(&["stty", "size"])).await;
    assert_eq!(spill_text(&f), "50 200\n");
    let mut spec = rig.spec(&["stty", "size"]);
    spec.tty = Some(TtySize { cols: 80, rows: 24 });
    assert_eq!(spill_text(&rig.run(spec).await), "24 80\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn processes_left_behind_are_killed_and_the_run_ends_promptly() {
    let rig = Rig::new();
    for spec in [
        rig.sh("sleep 1000 & echo started"),
        no_tty(rig.sh("sleep 1000 & echo started")),
        // Deaf to the hangup a terminal sends when its session leader exits.
        rig.sh("trap '' HUP; sleep 1000 & echo started"),
    ] {
        let launched = rig.start(spec).await;
        let pid = launched.pid;
        let f = finish(launched).await;
        assert_eq!(f.status, RunStatus::Exited);
        assert_eq!(f.exit_code, Some(0));
        assert_eq!(spill_text(&f), "started\n");
        assert!(elapsed(&f) < Duration::from_secs(3), "{:?}", elapsed(&f));
        assert_eq!(group_members(pid), Vec::<String>::new());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_that_closes_its_output_runs_on_to_its_exit() {
    let rig = Rig::new();
    let script = "echo a; exec >/dev/null 2>&1 </dev/null; sleep 0.2; exit 4";
    for spec in [rig.sh(script), no_tty(rig.sh(script))] {
        let f = rig.run(spec).await;
        // Not hung up (SIGHUP) when its output ended: the terminal stays open until it exits.
        assert_eq!(f.status, RunStatus::Exited);
        assert_eq!(f.exit_code, Some(4));
        assert_eq!(spill_text(&f), "a\n");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn commands_that_exit_with_their_pipes_full_still_spill_every_byte() {
    // Each writes more than its (widened) pipe holds as fast as it can and exits, leaving it
    // full: four at once, so the engines are slow to go through what is left. No writer is
    // left, so each reader reads to the end of file, however long after the exit that is.
    let rig = std::sync::Arc::new(Rig::new());
    let mut runs = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let rig = std::sync::Arc::clone(&rig);
        runs.spawn(async move { rig.run(no_tty(rig.sh("seq 1 300000"))).await });
    }
    let expected: String = (1..=300_000).map(|n| format!("{n}\n")).collect();
    while let Some(f) = runs.join_next().await {
        let f = f.unwrap();
        assert_eq!(f.status, RunStatus::Exited);
        assert_eq!(f.exit_code, Some(0));
        assert!(
            spill_text(&f) == expected,
            "{} bytes spilled",
            spill(&f).len()
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_process_that_escaped_the_group_cannot_hold_the_run_open() {
    let rig = Rig::new();
    // The shell exits only once the escapee has its own session (setsid(1) does not fork
    // here, so $! is the escapee itself); the escapee holds the pipe.
    let script = "setsid sh -c 'touch escaped; exec sleep 1000' & echo $!; \
                  while [ ! -e escaped ]; do sleep 0.01; done";
    let f = rig.run(no_tty(rig.sh(script))).await;
    let escaped: i32 = spill_text(&f).trim().parse().unwrap();
    assert_eq!(f.status, RunStatus::Exited);
    // EXIT_DRAIN + KILLED_DRAIN, then the run ends without the pipe's end of file.
    assert!(
        elapsed(&f) >= Duration::from_millis(500),
        "{:?}",
        elapsed(&f)
    );
    assert!(elapsed(&f) < Duration::from_secs(3), "{:?}", elapsed(&f));
    let pid = nix::unistd::Pid::from_raw(escaped);
    nix::sys::signal::kill(pid, Signal::SIGKILL).unwrap();
    // It was handed to this process (a subreaper) when its shell exited: reap it.
    let _ = nix::sys::wait::waitpid(pid, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_runs_are_independent() {
    let rig = std::sync::Arc::new(Rig::new());
    let mut runs = tokio::task::JoinSet::new();
    for i in 0..8 {
        let rig = std::sync::Arc::clone(&rig);
        runs.spawn(async move {
            let script = format!("seq 1 {}; echo done-{i}", 20_000 + i * 1000);
            let spec = if i % 2 == 0 {
                rig.sh(&script)
            } else {
                no_tty(rig.sh(&script))
            };
            let f = rig.run(spec).await;
            let expected: String = (1..=20_000 + i * 1000)
                .map(|n| format!("{n}\n"))
                .chain([format!("done-{i}\n")])
                .collect();
            assert_eq!(f.status, RunStatus::Exited);
            assert!(spill_text(&f) == expected, "run {i}");
        });
    }
    while let Some(done) = runs.join_next().await {
        done.unwrap();
    }
}
