//! Faults the daemon must live through: being killed mid-run again and again, a full disk, an
//! index another process has locked, a damaged or foreign index, and symlinks planted where
//! its files go. Run with `--nocapture` to see the figures they measure.

use std::ffi::CString;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helper::daemon::{
    Groups, PATIENCE, TestDaemon, daemon_command, killpg, processes_in_group, wait_for,
};
use crate::helper::{Sandbox, stderr, stdout};

fn shell(script: &str) -> Value {
    json!({"v": 1, "op": "run", "shell": script, "cwd": "/"})
}

fn json_of(out: &Output) -> Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// Every recorded run, newest first.
fn history(daemon: &TestDaemon) -> Vec<Value> {
    let out = daemon
        .spillway()
        .args(["history", "--json", "--limit", "10000"])
        .output()
        .unwrap();
    json_of(&out)["runs"].as_array().unwrap().clone()
}

/// Processes other than this test whose command line mentions `text`.
fn processes_mentioning(text: &str) -> Vec<u32> {
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(text))
        })
        .collect()
}

const CYCLES: usize = 10;
const RUNS_PER_CYCLE: usize = 8;

#[test]
fn ten_kill_9s_mid_run_lose_no_run_and_leave_nothing_behind() {
    let mut daemon = TestDaemon::start();
    let sandbox_path = daemon.sandbox.dir.path().to_string_lossy().into_owned();
    let began = Instant::now();
    let mut groups = Groups::default();
    for cycle in 0..CYCLES {
        let mut clients = Vec::new();
        let mut runs = Vec::new();
        for run in 0..RUNS_PER_CYCLE {
            let text = format!("cycle {cycle} run {run}");
            let mut client = daemon.client();
            // Deaf to the hang-up the daemon's death sends: orphans that outlive it.
            let started = client.ask(&shell(&format!("trap '' HUP; echo '{text}'; sleep 1000")));
            assert_eq!(started["type"], "started", "{started}");
            let spill = started["spill_path"].as_str().unwrap().to_string();
            wait_for(
                || std::fs::read_to_string(&spill).is_ok_and(|s| s.contains(&text)),
                "the output to reach the spill",
            );
            let id = started["id"].as_str().unwrap().to_string();
            let pgid = started["pid"].as_u64().unwrap() as u32;
            groups.0.push(pgid);
            runs.push((id, pgid, text));
            clients.push(client);
        }
        daemon.kill9();
        for (_, pgid, _) in &runs {
            assert!(
                !processes_in_group(*pgid).is_empty(),
                "the command outlived its daemon"
            );
            killpg(*pgid);
        }
        for (_, pgid, _) in &runs {
            wait_for(
                || processes_in_group(*pgid).is_empty(),
                "the orphans to die",
            );
        }
        drop(clients);

        daemon.restart();
        let recorded = history(&daemon);
        for (id, _, text) in &runs {
            let row = recorded
                .iter()
                .find(|r| r["id"] == id.as_str())
                .unwrap_or_else(|| panic!("run {id} is not recorded"));
            assert_eq!(row["status"], "interrupted", "{row}");
            let show = daemon
                .spillway()
                .args(["show", id, "--raw"])
                .output()
                .unwrap();
            assert_eq!(stdout(&show), format!("{text}\n"), "{}", stderr(&show));
        }
        let interrupted = recorded
            .iter()
            .filter(|r| r["status"] == "interrupted")
            .count();
        assert_eq!(interrupted, (cycle + 1) * RUNS_PER_CYCLE);
        let alive = daemon.run(&["--", "echo", "alive"]);
        assert_eq!(stdout(&alive), "alive\n", "{}", stderr(&alive));
    }
    let elapsed = began.elapsed();
    println!(
        "faults: {CYCLES} kill -9/restart cycles, {RUNS_PER_CYCLE} runs in flight each \
         ({} runs in all): {elapsed:.2?}",
        CYCLES * (RUNS_PER_CYCLE + 1)
    );

    // Nothing left behind: every spill belongs to a recorded run, and once the daemon stops
    // no process, socket or lock file remains.
    let recorded = history(&daemon);
    assert_eq!(recorded.len(), CYCLES * (RUNS_PER_CYCLE + 1));
    let mut named: Vec<String> = recorded
        .iter()
        .map(|r| r["spill_path"].as_str().unwrap().to_string())
        .collect();
    let mut on_disk: Vec<String> = daemon
        .sandbox
        .spills()
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    named.sort();
    on_disk.sort();
    assert_eq!(on_disk, named);
    let socket = daemon.socket.clone();
    assert!(daemon.terminate().success());
    assert!(groups.0.iter().all(|&g| processes_in_group(g).is_empty()));
    assert!(!socket.exists(), "the socket is removed");
    assert!(
        !socket.with_extension("sock.lock").exists(),
        "the lock is removed"
    );
    assert_eq!(processes_mentioning(&sandbox_path), Vec::<u32>::new());
}

/// A tmpfs mounted for a test, lazily unmounted on drop (an open file cannot keep it).
struct Mount(CString);

impl Mount {
    /// Mounts a tmpfs of `size` on `dir`; None when this process may not (not root, or no
    /// CAP_SYS_ADMIN in a container).
    fn tmpfs(dir: &Path, size: &str) -> Option<Mount> {
        if !nix::unistd::geteuid().is_root() {
            return None;
        }
        let target = CString::new(dir.as_os_str().as_bytes()).unwrap();
        let options = CString::new(format!("size={size},mode=0700")).unwrap();
        // SAFETY: every pointer is a NUL-terminated string that outlives the call.
        let rc = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                options.as_ptr().cast(),
            )
        };
        (rc == 0).then_some(Mount(target))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        // SAFETY: a NUL-terminated path; MNT_DETACH unmounts even while files are open.
        unsafe { libc::umount2(self.0.as_ptr(), libc::MNT_DETACH) };
    }
}

/// How the spills' space runs out, and how it comes back.
enum Squeeze {
    /// A 2 MiB tmpfs over `spills/`, filled up by a file: a full file system.
    FullDisk { _mount: Mount, filler: PathBuf },
    /// A 2 MiB file-size limit (RLIMIT_FSIZE) on the daemon, raised again with prlimit.
    FileSize { pid: u32 },
}

const SQUEEZED_BYTES: u64 = 2 << 20;

impl Squeeze {
    fn full_disk(spills: &Path) -> Option<Squeeze> {
        let mount = Mount::tmpfs(spills, "2m")?;
        let filler = spills.join("filler");
        let mut file = File::create(&filler).unwrap();
        let block = vec![b'x'; 64 << 10];
        while std::io::Write::write_all(&mut file, &block).is_ok() {}
        Some(Squeeze::FullDisk {
            _mount: mount,
            filler,
        })
    }

    fn file_size(pid: u32) -> Squeeze {
        set_file_size_limit(pid, SQUEEZED_BYTES);
        Squeeze::FileSize { pid }
    }

    /// What the write error says.
    fn error(&self) -> &'static str {
        match self {
            Squeeze::FullDisk { .. } => "the disk was full (no space left on it)",
            Squeeze::FileSize { .. } => "File too large",
        }
    }

    fn release(&self) {
        match self {
            Squeeze::FullDisk { filler, .. } => std::fs::remove_file(filler).unwrap(),
            Squeeze::FileSize { pid } => set_file_size_limit(*pid, libc::RLIM_INFINITY),
        }
    }
}

fn set_file_size_limit(pid: u32, bytes: u64) {
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: `limit` is a valid rlimit and the old value is not asked for.
    let rc = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_FSIZE,
            &limit,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
}

/// `seq 1 n` as printed.
fn seq(n: u64) -> String {
    (1..=n).map(|i| format!("{i}\n")).collect()
}

/// Runs that overflow the squeezed spills complete with an "incomplete" notice, the daemon
/// lives on, and once the space is back a run's spill is whole again.
fn runs_survive(daemon: &TestDaemon, squeeze: &Squeeze) {
    const BIG: u64 = 400_000; // 2.7 MB, over the 2 MiB
    let big = format!("seq 1 {BIG}");
    let exits: Vec<Value> = std::thread::scope(|scope| {
        let runs: Vec<_> = (0..3)
            .map(|_| scope.spawn(|| json_of(&daemon.run(&["--json", "--no-tty", "-c", &big]))))
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    for exit in &exits {
        assert_eq!(exit["status"], "exited", "{exit}");
        assert_eq!(exit["total_lines"], BIG);
        let content = exit["content"].as_str().unwrap();
        assert!(content.contains("INCOMPLETE"), "{content}");
        assert!(content.contains(squeeze.error()), "{content}");
        assert!(content.contains(&format!("\n{BIG}\n")), "the tail is shown");
        let spill = std::fs::metadata(exit["spill_path"].as_str().unwrap()).unwrap();
        assert!(spill.len() <= SQUEEZED_BYTES);
    }
    assert_eq!(
        daemon.client().ask(&json!({"v": 1, "op": "ping"}))["type"],
        "pong"
    );
    let recorded = history(daemon);
    for exit in &exits {
        let row = recorded.iter().find(|r| r["id"] == exit["id"]).unwrap();
        assert_eq!(row["spill_complete"], false, "{row}");
    }

    squeeze.release();
    const WHOLE: u64 = 200_000; // 1.3 MB: fits
    let whole = format!("seq 1 {WHOLE}");
    let exit = json_of(&daemon.run(&["--json", "--no-tty", "-c", &whole]));
    let content = exit["content"].as_str().unwrap();
    assert!(!content.contains("INCOMPLETE"), "{content}");
    let spill = std::fs::read(exit["spill_path"].as_str().unwrap()).unwrap();
    assert!(spill == seq(WHOLE).as_bytes(), "the spill is byte-exact");
    let row = history(daemon).into_iter().find(|r| r["id"] == exit["id"]);
    assert_eq!(row.unwrap()["spill_complete"], true);
    daemon.assert_no_panic();
}

#[test]
fn a_full_spill_file_system_gives_incomplete_previews_then_whole_spills_again() {
    let mut daemon = TestDaemon::start_logged();
    let spills = daemon.sandbox.data_dir().join("spills");
    let squeeze = Squeeze::full_disk(&spills).unwrap_or_else(|| {
        println!("faults: cannot mount a tmpfs here (not root?): a file-size limit instead");
        Squeeze::file_size(daemon.pid())
    });
    runs_survive(&daemon, &squeeze);
    assert!(daemon.terminate().success());
}

#[test]
fn a_file_size_limit_gives_incomplete_previews_then_whole_spills_again() {
    let mut daemon = TestDaemon::start_logged();
    let squeeze = Squeeze::file_size(daemon.pid());
    runs_survive(&daemon, &squeeze);
    assert!(daemon.terminate().success());
}

/// Longer than SQLite's busy timeout (5 s), so a write that only waited for it would fail.
const LOCK_HELD: Duration = Duration::from_secs(7);

#[test]
fn runs_go_on_while_another_process_locks_the_index_and_are_recorded_after() {
    let daemon = TestDaemon::start_logged();
    let mut early = daemon.client();
    let started = early.ask(&shell("echo early; sleep 1.5; echo late"));
    let early_id = started["id"].as_str().unwrap().to_string();

    let holder = rusqlite::Connection::open(daemon.sandbox.data_dir().join("index.sqlite3"))
        .expect("open the index");
    holder
        .execute_batch("BEGIN EXCLUSIVE")
        .expect("take the write lock");
    let locked = Instant::now();
    let mut ids = Vec::new();
    for n in 1..=4 {
        let lines = 1000 * n;
        let began = Instant::now();
        let exit = json_of(&daemon.run(&["--json", "--", "seq", "1", &lines.to_string()]));
        let took = began.elapsed();
        println!("faults: a run while the index is locked took {took:.2?}");
        assert!(
            took < Duration::from_secs(3),
            "held up by the lock: {took:?}"
        );
        assert_eq!(exit["total_lines"], lines);
        ids.push((exit["id"].as_str().unwrap().to_string(), lines));
    }
    let early_exit = early.event().expect("the early run's exit");
    assert_eq!(early_exit["content"], "early\nlate\n");
    ids.push((early_id.clone(), 2));
    std::thread::sleep(LOCK_HELD.saturating_sub(locked.elapsed()));
    // Reads go on meanwhile; the records wait.
    let during = history(&daemon);
    let early_row = during
        .iter()
        .find(|r| r["id"] == early_id.as_str())
        .unwrap();
    assert_eq!(early_row["status"], "running", "its end is not written yet");
    assert_eq!(during.len(), 1, "only the early run's start was written");
    holder.execute_batch("COMMIT").unwrap();
    drop(holder);

    let released = Instant::now();
    wait_for(
        || {
            let rows = history(&daemon);
            ids.iter().all(|(id, lines)| {
                rows.iter().any(|r| {
                    r["id"] == id.as_str() && r["status"] == "exited" && r["total_lines"] == *lines
                })
            })
        },
        "the queued records to be written",
    );
    println!(
        "faults: records written {:.2?} after the lock was released",
        released.elapsed()
    );
    daemon.assert_no_panic();
}

/// Starts a daemon on `sandbox`'s data directory and `socket`, expecting it to refuse to start;
/// returns what it said. One that starts after all is killed, then the test fails.
fn refused_start(sandbox: &Sandbox, socket: &Path) -> String {
    let mut child = daemon_command(sandbox, socket)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(
        status.is_some_and(|s| !s.success()),
        "the daemon started: {err}"
    );
    err
}

/// 64 KiB that no SQLite would take for a database.
fn noise() -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..64 << 10)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn a_damaged_or_foreign_index_is_refused_untouched() {
    type Make = fn(&Path);
    let cases: [(&str, Make, &str); 3] = [
        (
            "random bytes",
            |db| std::fs::write(db, noise()).unwrap(),
            "is not an SQLite database or is damaged",
        ),
        (
            "another program's database",
            |db| {
                let conn = rusqlite::Connection::open(db).unwrap();
                conn.execute_batch(
                    "CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine');",
                )
                .unwrap();
            },
            "is an SQLite database but not a spillway run index (its tables: notes)",
        ),
        (
            "a newer spillway's database",
            |db| {
                let conn = rusqlite::Connection::open(db).unwrap();
                conn.execute_batch(
                    "CREATE TABLE runs (id TEXT PRIMARY KEY); PRAGMA user_version = 42;",
                )
                .unwrap();
            },
            "was written by a newer spillway (schema 42",
        ),
    ];
    for (what, make, expected) in cases {
        let sandbox = Sandbox::new();
        let data = sandbox.data_dir();
        std::fs::create_dir(&data).unwrap();
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o700)).unwrap();
        let db = data.join("index.sqlite3");
        make(&db);
        let before = std::fs::read(&db).unwrap();
        let socket = sandbox.dir.path().join("run/spillway.sock");
        let err = refused_start(&sandbox, &socket);
        assert!(err.contains(&db.display().to_string()), "{what}: {err}");
        assert!(err.contains(expected), "{what}: {err}");
        assert!(err.contains("move it away"), "{what}: {err}");
        assert!(
            std::fs::read(&db).unwrap() == before,
            "{what}: the file changed"
        );
        for suffix in ["-wal", "-shm", "-journal"] {
            let sibling = data.join(format!("index.sqlite3{suffix}"));
            assert!(
                !sibling.exists(),
                "{what}: {} was created",
                sibling.display()
            );
        }
        assert!(!socket.exists(), "{what}: a socket was left behind");
    }
}

/// Where a symlink is planted in the way of the daemon.
#[derive(Debug, Clone, Copy)]
enum Planted {
    DataDir,
    SpillsDir,
    SocketDir,
    SocketToFile,
    DanglingSocket,
    LockFile,
    Index,
}

/// Plants the symlink for `case`, pointing into `bait` (a directory of ours), and returns
/// where it is.
fn plant(case: Planted, data: &Path, socket: &Path, bait: &Path) -> PathBuf {
    let run_dir = socket.parent().unwrap();
    let (link, target) = match case {
        Planted::DataDir => (data.to_path_buf(), bait.to_path_buf()),
        Planted::SpillsDir => {
            std::fs::create_dir(data).unwrap();
            (data.join("spills"), bait.to_path_buf())
        }
        Planted::SocketDir => (run_dir.to_path_buf(), bait.to_path_buf()),
        Planted::SocketToFile => {
            std::fs::create_dir(run_dir).unwrap();
            std::fs::write(bait.join("precious"), "keep me").unwrap();
            (socket.to_path_buf(), bait.join("precious"))
        }
        Planted::DanglingSocket => {
            std::fs::create_dir(run_dir).unwrap();
            (socket.to_path_buf(), bait.join("new.sock"))
        }
        Planted::LockFile => {
            std::fs::create_dir(run_dir).unwrap();
            (run_dir.join("spillway.sock.lock"), bait.join("lock"))
        }
        Planted::Index => {
            std::fs::create_dir(data).unwrap();
            std::fs::write(bait.join("index"), "").unwrap();
            (data.join("index.sqlite3"), bait.join("index"))
        }
    };
    symlink(&target, &link).unwrap();
    link
}

/// A directory's files and their contents.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut found: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect();
    found.sort();
    found
}

#[test]
fn symlinks_where_the_daemons_files_go_are_refused_not_followed() {
    use Planted::*;
    for case in [
        DataDir,
        SpillsDir,
        SocketDir,
        SocketToFile,
        DanglingSocket,
        LockFile,
        Index,
    ] {
        let sandbox = Sandbox::new();
        let bait = sandbox.dir.path().join("bait");
        std::fs::create_dir(&bait).unwrap();
        std::fs::set_permissions(&bait, std::fs::Permissions::from_mode(0o700)).unwrap();
        let socket = sandbox.dir.path().join("run/spillway.sock");
        let link = plant(case, &sandbox.data_dir(), &socket, &bait);
        let before = snapshot(&bait);
        let err = refused_start(&sandbox, &socket);
        assert!(err.contains(&link.display().to_string()), "{case:?}: {err}");
        assert!(err.contains("symbolic link"), "{case:?}: {err}");
        assert_eq!(
            snapshot(&bait),
            before,
            "{case:?}: what the link names changed"
        );
        assert!(
            std::fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink()),
            "{case:?}: the link was removed"
        );
    }
}

#[test]
fn a_spill_swapped_for_a_symlink_is_never_read_through() {
    let daemon = TestDaemon::start();
    let secret = daemon.sandbox.dir.path().join("secret");
    std::fs::write(&secret, "TOP SECRET\n").unwrap();
    let mut client = daemon.client();
    let started = client.ask(&json!({
        "v": 1, "op": "run", "cwd": "/", "yield_ms": 300,
        "shell": "echo visible; sleep 2; echo after",
    }));
    let id = started["id"].as_str().unwrap().to_string();
    assert_eq!(client.event().unwrap()["type"], "running");
    let spill = PathBuf::from(started["spill_path"].as_str().unwrap());
    std::fs::rename(&spill, spill.with_extension("moved")).unwrap();
    symlink(&secret, &spill).unwrap();

    let mut seen = Vec::new();
    let mut follower = daemon.client();
    follower.send(&json!({"v": 1, "op": "follow", "id": id}));
    loop {
        let event = follower.event().expect("an event");
        let done = event["type"] != "output";
        seen.push(event);
        if done {
            break;
        }
    }
    let mut asker = daemon.client();
    seen.push(asker.ask(&json!({"v": 1, "op": "wait", "id": id, "new": true})));
    seen.push(asker.ask(&json!({"v": 1, "op": "show", "id": id})));
    seen.push(asker.ask(&json!({"v": 1, "op": "grep", "id": id, "pattern": "SECRET"})));
    for event in &seen {
        assert!(
            !event.to_string().contains("TOP SECRET"),
            "read through the link: {event}"
        );
    }
    let exit = seen
        .iter()
        .find(|e| e["type"] == "exit")
        .expect("the run's exit");
    assert_eq!(exit["content"], "visible\nafter\n");
}
