//! A run's command starts inside its run's cgroup (`clone3` with `CLONE_INTO_CGROUP`, where
//! its only cgroup is a v2 one) or, in a daemon started with `SPILLWAY_NO_CLONE_INTO_CGROUP`,
//! joins it by writing `cgroup.procs` before `exec`. Each test runs both ways, checks that the
//! command sees the same thing, and reads in the daemon's debug log which way each run went,
//! so that a silent fall-back from one to the other fails. A machine where the daemon gets no
//! cgroup (not root, no writable v2 hierarchy) says so and checks what it can.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::helper::daemon::{TestDaemon, wait_for};
use crate::helper::{stderr, stdout};

/// How a daemon starts its commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    /// The default: inside the cgroup where the kernel can.
    Inside,
    /// `SPILLWAY_NO_CLONE_INTO_CGROUP=1`: the write into `cgroup.procs`.
    Written,
}

const WAYS: [Way; 2] = [Way::Inside, Way::Written];

/// A daemon started `way`, logging at debug level into `daemon.log` in its sandbox.
fn daemon(way: Way) -> TestDaemon {
    daemon_with(way, |_| {})
}

/// [`daemon`], with `configure` applied to its command too.
fn daemon_with(way: Way, configure: impl FnOnce(&mut std::process::Command)) -> TestDaemon {
    TestDaemon::start_customised(|cmd, sandbox| {
        let log = std::fs::File::create(sandbox.dir.path().join("daemon.log")).unwrap();
        cmd.env("SPILLWAY_LOG", "info,spillway::supervisor=debug")
            .stderr(log);
        if way == Way::Written {
            cmd.env("SPILLWAY_NO_CLONE_INTO_CGROUP", "1");
        }
        configure(cmd);
    })
}

/// What the daemon has logged so far.
fn log(daemon: &TestDaemon) -> String {
    std::fs::read_to_string(daemon.sandbox.dir.path().join("daemon.log")).unwrap()
}

/// The way the log says run `id` was started; `None` when it had no cgroup to start in.
fn way_of(log: &str, id: &str) -> Option<Way> {
    let run = format!("run={id}");
    let said = |what: &str| log.lines().any(|l| l.contains(what) && l.contains(&run));
    if said("started inside its cgroup") {
        Some(Way::Inside)
    } else if said("joins its cgroup by writing cgroup.procs") {
        Some(Way::Written)
    } else {
        None
    }
}

/// Whether this kernel refused `clone3` with `CLONE_INTO_CGROUP` (then every run is written).
fn clone_into_unavailable(log: &str) -> bool {
    log.contains("clone3 with CLONE_INTO_CGROUP is not available")
}

/// Checks that run `id` went `way` (or the write, where the kernel has no `clone3` for it);
/// `false` when the run had no cgroup at all on this machine.
fn went(daemon: &TestDaemon, id: &str, way: Way) -> bool {
    let log = log(daemon);
    let Some(went) = way_of(&log, id) else {
        eprintln!("run {id} had no cgroup here: the way it started is not checked");
        return false;
    };
    let expected = if clone_into_unavailable(&log) {
        eprintln!("clone3 with CLONE_INTO_CGROUP is not available here");
        Way::Written
    } else {
        way
    };
    assert_eq!(went, expected, "run {id}:\n{log}");
    true
}

fn json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} / {}", stdout(out), stderr(out)))
}

/// The v2 path (`0::PATH`) in a `/proc/PID/cgroup` text.
fn v2_path(cgroup: &str) -> Option<&str> {
    cgroup.lines().find_map(|l| l.strip_prefix("0::"))
}

/// Where the cgroup v2 hierarchy is mounted, from this process's mount table.
fn v2_mount() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mounts.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let point = left.split_whitespace().nth(4)?;
        (right.split_whitespace().next() == Some("cgroup2")).then(|| PathBuf::from(point))
    })
}

/// The command and a child it forks at once are both in the run's cgroup, and they see it in
/// `/proc/self/cgroup` (the run id is the cgroup's name).
#[test]
fn a_command_and_its_first_child_are_in_the_runs_cgroup() {
    for way in WAYS {
        let daemon = daemon(way);
        let out = daemon.run(&[
            "--json",
            "--no-tty",
            "--",
            "sh",
            "-c",
            "cat /proc/self/cgroup; sleep 30 & cat /proc/$!/cgroup; kill $!",
        ]);
        let exit = json(&out);
        let id = exit["id"].as_str().unwrap();
        let content = exit["content"].as_str().unwrap();
        if !went(&daemon, id, way) {
            continue;
        }
        let paths: Vec<&str> = content
            .split("0::")
            .skip(1)
            .map(|rest| rest.lines().next().unwrap_or_default())
            .collect();
        assert_eq!(paths.len(), 2, "{way:?}: {content}");
        for path in paths {
            assert!(
                path.ends_with(&format!("/{id}")),
                "{way:?}: {path} is not the run's cgroup: {content}"
            );
        }
    }
}

/// A pids limit of one holds from the command's start: the command itself is the one, and
/// the child it forks at once is refused. Where a v1 hierarchy holds the limit (a hybrid
/// host), the command must write itself into it, so it is never started inside.
#[test]
fn a_pids_limit_counts_the_command_from_its_start() {
    for way in WAYS {
        let daemon = daemon(way);
        let out = daemon.run(&[
            "--json",
            "--no-tty",
            "--pids",
            "1",
            "--",
            "sh",
            "-c",
            // Builtins only, but for the one fork.
            "while read -r line; do echo \"$line\"; done < /proc/self/cgroup; \
             /bin/echo forked",
        ]);
        let exit = json(&out);
        let id = exit["id"].as_str().unwrap();
        let content = exit["content"].as_str().unwrap();
        let by_v1 = content.contains(":pids:/spillway-");
        went(&daemon, id, if by_v1 { Way::Written } else { way });
        if content.contains("process limit is not enforced") {
            eprintln!("no pids controller here: {content}");
            continue;
        }
        assert!(!content.contains("forked"), "{way:?}: {content}");
        assert_eq!(exit["limits_hit"][0]["resource"], "pids", "{way:?}: {exit}");
        assert_eq!(exit["limits_hit"][0]["events"], 1, "{way:?}: {exit}");
    }
}

/// Under a terminal the command leads a session of its own with the terminal as its
/// controlling one; without, it leads a session and has none. Its working directory,
/// environment, signal mask and dispositions are those the run asked for, the same both ways.
#[test]
fn a_command_started_either_way_sees_the_same_process_context() {
    let cwd = tempfile::tempdir().unwrap();
    let script = "set -- $(cut -d')' -f2 /proc/$$/stat); \
                  [ \"$4\" = $$ ] && echo leader; [ \"$5\" != 0 ] && echo controlling; \
                  [ -t 1 ] && echo tty; pwd; echo \"$EXTRA\" \"$SPILLWAY_RUN_ID\"; \
                  grep -E '^Sig(Blk|Ign)' /proc/self/status";
    let mut seen = Vec::new();
    for way in WAYS {
        let daemon = daemon(way);
        for tty in [&[][..], &["--no-tty"][..]] {
            let dir = cwd.path().to_str().unwrap();
            let args = [
                &["--json", "--cwd", dir, "--env", "EXTRA=given"][..],
                tty,
                &["--", "sh", "-c", script],
            ]
            .concat();
            let out = daemon.run(&args);
            let exit = json(&out);
            let id = exit["id"].as_str().unwrap();
            went(&daemon, id, way);
            let content = standard_signals(&exit["content"].as_str().unwrap().replace(id, "ID"));
            let canonical = cwd.path().canonicalize().unwrap();
            let terminal = if tty.is_empty() {
                "leader\ncontrolling\ntty\n"
            } else {
                "leader\n"
            };
            let expected = format!(
                "{terminal}{}\ngiven ID\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n",
                canonical.display()
            );
            assert_eq!(content, expected, "{way:?} {tty:?}: {exit}");
            seen.push(content);
        }
    }
    assert_eq!(seen[..2], seen[2..], "both ways give the same context");
}

/// The caller's open-file limit is its run's alone: a command started inside its cgroup
/// shares the daemon's memory until its `exec`, so its set-up must not change the daemon's
/// setting as a forked child's copy may. A daemon that raised its soft limit gives a run the
/// caller's when it sends one, and the limit the daemon started with to every run that sends
/// none, before and after.
#[test]
fn a_callers_open_file_limit_stays_with_its_run() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    if hard <= 300 {
        eprintln!("the hard open-file limit is {hard}: nothing to raise, nothing checked");
        return;
    }
    let limit =
        |soft: u64| serde_json::json!({"rlimits": {"nofile": {"soft": soft, "hard": hard}}});
    for way in WAYS {
        let daemon = daemon_with(way, |cmd| {
            use std::os::unix::process::CommandExt;
            // SAFETY: the hook only calls setrlimit, which is async-signal-safe.
            unsafe {
                cmd.pre_exec(move || {
                    let _ = setrlimit(Resource::RLIMIT_NOFILE, 300, hard);
                    Ok(())
                });
            }
        });
        let mut client = daemon.client();
        for (caller, expected) in [(None, "300"), (Some(limit(200)), "200"), (None, "300")] {
            let mut request = serde_json::json!({
                "v": 1, "op": "run", "argv": ["sh", "-c", "ulimit -Sn"], "cwd": "/"
            });
            if let Some(caller) = caller {
                request["caller"] = caller;
            }
            let exit = client.run_to_exit(&request);
            let id = exit["id"].as_str().unwrap();
            went(&daemon, id, way);
            assert_eq!(exit["content"], format!("{expected}\n"), "{way:?}: {exit}");
        }
    }
}

/// A script without a `#!` line is run by `/bin/sh`, to which `execvpe` passes every
/// argument again, on the child's stack: one with more arguments than a fixed stack would
/// hold gets them all, both ways.
#[test]
fn a_script_without_an_interpreter_line_gets_all_its_arguments() {
    let scratch = tempfile::tempdir().unwrap();
    let script = scratch.path().join("count");
    std::fs::write(&script, "echo \"$#\" \"$1\" \"${50000}\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut argv = vec![script.to_str().unwrap().to_string(), "first".to_string()];
    argv.extend((2..50_000).map(|n| n.to_string()));
    argv.push("last".to_string());
    for way in WAYS {
        let daemon = daemon(way);
        let request = serde_json::json!({"v": 1, "op": "run", "argv": argv, "cwd": "/"});
        let exit = daemon.client().run_to_exit(&request);
        let id = exit["id"].as_str().unwrap();
        went(&daemon, id, way);
        assert_eq!(exit["content"], "50000 first last\n", "{way:?}: {exit}");
    }
}

/// `text` with the signal sets of `/proc/PID/status` cut to the standard signals (1 to 31):
/// real-time ones the daemon inherited ignored stay so, whichever way the command starts.
fn standard_signals(text: &str) -> String {
    text.lines()
        .map(|line| match line.split_once(":\t") {
            Some((name @ ("SigBlk" | "SigIgn"), hex)) => {
                let set = u64::from_str_radix(hex, 16).unwrap();
                format!("{name}:\t{:016x}\n", set & 0x7fff_ffff)
            }
            _ => format!("{line}\n"),
        })
        .collect()
}

/// A program that cannot be run is the same clear error both ways, leaves no cgroup behind,
/// and the daemon lives on.
#[test]
fn a_failed_exec_is_the_same_error_either_way() {
    let scratch = tempfile::tempdir().unwrap();
    let script = scratch.path().join("no-interpreter");
    std::fs::write(&script, "#!/nonexistent/interpreter\n").unwrap();
    let plain = scratch.path().join("not-executable");
    std::fs::write(&plain, "echo never\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut errors = Vec::new();
    for way in WAYS {
        let daemon = daemon(way);
        let first = daemon.run(&["--json", "--", "cat", "/proc/self/cgroup"]);
        let tree = tree_of(&json(&first));
        for program in [&script, &plain] {
            let out = daemon.run(&["--", program.to_str().unwrap()]);
            assert_eq!(out.status.code(), Some(125), "{way:?}: {}", stderr(&out));
            errors.push(stderr(&out));
        }
        if let Some(tree) = tree {
            // The first run's cgroup goes once its end is handled, which may come after its
            // exit event; a cgroup the failed starts left would stay for good.
            wait_for(
                || runs_in(&tree).is_empty(),
                &format!("{way:?}: no cgroup left in {}", tree.display()),
            );
        }
        let alive = daemon.run(&["--", "echo", "alive"]);
        assert_eq!(stdout(&alive), "alive\n", "{way:?}: the daemon lives on");
    }
    assert!(
        errors[0].contains("not found (or its #! interpreter is missing)"),
        "{}",
        errors[0]
    );
    assert!(
        errors[1].contains("permission denied (not executable?)"),
        "{}",
        errors[1]
    );
    assert_eq!(errors[..2], errors[2..], "both ways give the same error");
}

/// The runs' cgroups in `tree` (none once another daemon's start removed it while empty).
fn runs_in(tree: &Path) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(tree)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| e.file_name())
                .collect()
        })
        .unwrap_or_default()
}

/// The directory holding a daemon's runs' cgroups, from a run that printed its
/// `/proc/self/cgroup`; `None` where the run had no v2 cgroup of spillway's.
fn tree_of(exit: &Value) -> Option<PathBuf> {
    let path = v2_path(exit["content"].as_str()?)?;
    let (tree, _) = path.trim().rsplit_once('/')?;
    if !tree.contains("spillway-") {
        eprintln!("the run had no cgroup here: {path}");
        return None;
    }
    let relative = Path::new(tree.trim_start_matches('/'));
    Some(v2_mount()?.join(relative))
}
