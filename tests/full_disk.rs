//! A full disk under the whole data directory (index, log, spills): a small tmpfs, mounted in
//! a private mount namespace (`unshare -m`, as root, so nothing changes for the rest of the
//! machine), filled by runs, or set to exact fill levels. The index stays writable, new runs
//! run (their spills keep what fits, their notice says the disk was full), `history`, `show`,
//! `grep`, `stats`, `ps` and `purge` work, a daemon restarts and answers on the full disk (its
//! index read-only if it must be), and a daemon that cannot open an index there says why. Run
//! with `--nocapture` for the figures.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Instant;

use serde_json::Value;

use crate::helper::daemon::wait_for;
use crate::helper::{Sandbox, stderr};

const EXE: &str = env!("CARGO_BIN_EXE_spillway");
const MIB: u64 = 1 << 20;

/// A private mount namespace holding a tmpfs, kept alive by a `sleep` inside it; the tmpfs
/// goes with the namespace when the sleep is killed (on drop).
struct Namespace {
    holder: Child,
    mount: PathBuf,
}

impl Namespace {
    /// A `size` tmpfs at `mount` in a new namespace; Err says why there cannot be one here.
    fn with_tmpfs(mount: &Path, size: &str) -> Result<Namespace, String> {
        if !nix::unistd::geteuid().is_root() {
            return Err("a mount namespace needs root".into());
        }
        let tried = Command::new("unshare").args(["-m", "true"]).output();
        if !tried.is_ok_and(|out| out.status.success()) {
            return Err("unshare -m is not permitted here (no CAP_SYS_ADMIN?)".into());
        }
        if Command::new("nsenter").arg("--version").output().is_err() {
            return Err("nsenter (util-linux) is not installed".into());
        }
        std::fs::create_dir_all(mount).unwrap();
        let script = format!(
            "mount -t tmpfs -o size={size},mode=0700 tmpfs '{}' && echo mounted && exec sleep 3600",
            mount.display()
        );
        let mut holder = Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run unshare: {e}"))?;
        let mut line = String::new();
        let out = holder.stdout.take().unwrap();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line).unwrap();
        if line.trim() != "mounted" {
            let _ = holder.kill();
            let _ = holder.wait();
            return Err("cannot mount a tmpfs in the namespace".into());
        }
        Ok(Namespace {
            holder,
            mount: mount.to_path_buf(),
        })
    }

    /// `program` run inside the namespace.
    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.args(["-t", &self.holder.id().to_string(), "-m", "--", program]);
        cmd
    }

    /// `path` (inside the namespace) as this process can reach it: through the holder's root.
    fn outside(&self, path: &Path) -> PathBuf {
        let mut outside = PathBuf::from(format!("/proc/{}/root", self.holder.id()));
        outside.push(path.strip_prefix("/").unwrap());
        outside
    }

    /// Bytes free on the tmpfs.
    fn free(&self) -> u64 {
        let stat = nix::sys::statvfs::statvfs(&self.outside(&self.mount)).unwrap();
        #[allow(clippy::useless_conversion)]
        let free = u64::from(stat.blocks_available()) * u64::from(stat.fragment_size());
        free
    }

    /// Leaves exactly `free` bytes free on the tmpfs (a whole number of its pages), by growing
    /// or shrinking a filler file no spillway code would delete; never frees more on the way,
    /// so the daemon never sees room it should not.
    fn leave_free(&self, free: u64) {
        let path = self.outside(&self.mount.join("level-filler"));
        let filler = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .unwrap();
        // The daemon may write meanwhile (its index): aim again until the level holds.
        for _ in 0..10 {
            let (now, len) = (self.free(), filler.metadata().unwrap().len());
            match now.cmp(&free) {
                std::cmp::Ordering::Equal => return,
                std::cmp::Ordering::Greater => {
                    let more = i64::try_from(now - free).unwrap();
                    nix::fcntl::posix_fallocate(&filler, i64::try_from(len).unwrap(), more)
                        .unwrap();
                }
                std::cmp::Ordering::Less => {
                    filler.set_len(len.saturating_sub(free - now)).unwrap();
                }
            }
        }
        assert_eq!(self.free(), free, "the tmpfs would not stay at that level");
    }

    /// Fills the tmpfs to the last byte (with a file no spillway code would delete).
    fn fill(&self) {
        let filler = self.mount.join("filler");
        let script = format!("head -c 1000000000 /dev/zero >> '{}'", filler.display());
        let _ = self.command("sh").args(["-c", &script]).output().unwrap();
        assert_eq!(self.free(), 0);
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

/// A daemon in the namespace, killed and reaped on drop.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Setup {
    ns: Namespace,
    sandbox: Sandbox,
    data: PathBuf,
    socket: PathBuf,
}

impl Setup {
    /// A data directory on a `size` tmpfs of its own; None (said why) where there cannot be one.
    fn on_tmpfs(size: &str) -> Option<Setup> {
        let sandbox = Sandbox::new();
        let mount = sandbox.dir.path().join("mnt");
        match Namespace::with_tmpfs(&mount, size) {
            Ok(ns) => Some(Setup {
                data: mount.join("data"),
                socket: sandbox.dir.path().join("run/spillway.sock"),
                ns,
                sandbox,
            }),
            Err(why) => {
                println!("full_disk: skipped, {why}");
                None
            }
        }
    }

    fn start_daemon(&self) -> Daemon {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.sandbox.dir.path().join("daemon.log"))
            .unwrap();
        let child = self
            .ns
            .command(EXE)
            .arg("daemon")
            .arg("--socket")
            .arg(&self.socket)
            .arg("--data-dir")
            .arg(&self.data)
            .args(["--kill-grace", "1s"])
            .env("SPILLWAY_LOG", "info")
            .stdin(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut daemon = Daemon(child);
        wait_for(
            || {
                let exited = daemon.0.try_wait().unwrap();
                assert!(exited.is_none(), "the daemon exited: {}", self.log());
                std::os::unix::net::UnixStream::connect(&self.socket).is_ok()
            },
            "the daemon on the tmpfs",
        );
        daemon
    }

    /// `spillway ARGS` in the namespace, against this daemon.
    fn spillway(&self, args: &[&str]) -> Output {
        self.ns
            .command(EXE)
            .args(args)
            .env("SPILLWAY_SOCKET", &self.socket)
            .env("SPILLWAY_DATA_DIR", &self.data)
            .output()
            .unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.spillway(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.sandbox.dir.path().join("daemon.log")).unwrap_or_default()
    }
}

#[test]
fn a_full_disk_under_the_data_directory_keeps_the_index_writable() {
    let sandbox = Sandbox::new();
    let mount = sandbox.dir.path().join("mnt");
    let ns = match Namespace::with_tmpfs(&mount, "64m") {
        Ok(ns) => ns,
        Err(why) => {
            println!("full_disk: skipped, {why}");
            return;
        }
    };
    let setup = Setup {
        data: mount.join("data"),
        socket: sandbox.dir.path().join("run/spillway.sock"),
        ns,
        sandbox,
    };
    let ns = &setup.ns;
    let mut daemon = setup.start_daemon();
    let reserve = ns.outside(&setup.data.join("space-reserve"));
    wait_for(|| reserve.exists(), "the space reserve");

    // A run that will fill the disk to the last byte itself, once told to (it starts while
    // there is room; its end is recorded on the full disk).
    let go = mount.join("go");
    let filler = mount.join("filler");
    let script = format!(
        "while [ ! -e '{}' ]; do sleep 0.05; done; head -c 100000000 /dev/zero > '{}'; echo filled",
        go.display(),
        filler.display()
    );
    let b = std::thread::scope(|scope| {
        let b = scope.spawn(|| setup.json(&["run", "--json", "-c", &script]));
        wait_for(
            || {
                setup.json(&["ps", "--json"])["runs"]
                    .as_array()
                    .is_some_and(|r| !r.is_empty())
            },
            "the filling run to start",
        );

        // A run whose output would fill the disk: its spill stops while there is room left.
        let started = Instant::now();
        let flood = "yes 0123456789abcdefghijklmnopqrstuvwxyz0123456789 | head -c 100000000";
        let a = setup.json(&["run", "--json", "--no-tty", "-c", flood]);
        let a_spill = ns.outside(Path::new(a["spill_path"].as_str().unwrap()));
        let a_bytes = std::fs::metadata(&a_spill).unwrap().len();
        println!(
            "full_disk: 100 MB of output on a 64 MiB disk: spill stopped at {:.1} MiB with \
             {:.2} MiB free, in {:.1?}",
            a_bytes as f64 / MIB as f64,
            ns.free() as f64 / MIB as f64,
            started.elapsed()
        );
        assert_eq!(a["status"], "exited");
        assert_eq!(a["total_bytes"], 100_000_000u64);
        let content = a["content"].as_str().unwrap();
        assert!(
            content.contains("INCOMPLETE") && content.contains("the disk was full"),
            "{content}"
        );
        assert!(a_bytes > 40 * MIB, "{a_bytes}");
        assert!(ns.free() > 4 * MIB, "the floor left room: {}", ns.free());
        std::fs::write(ns.outside(&go), b"").unwrap();
        (a, a_bytes, b.join().unwrap())
    });
    let (a, a_bytes, b) = b;
    assert_eq!(b["exit_code"], 0, "{b}");
    ns.fill();

    // Both runs are recorded as ended (newest first: the filler started first); the disk use
    // is counted.
    let runs = setup.json(&["history", "--json"])["runs"].clone();
    let statuses: Vec<(&str, &str)> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["id"].as_str().unwrap(), r["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        statuses,
        [
            (a["id"].as_str().unwrap(), "exited"),
            (b["id"].as_str().unwrap(), "exited")
        ]
    );
    let stats = setup.json(&["stats", "--json"]);
    assert!(stats["spill_bytes"].as_u64().unwrap() >= a_bytes, "{stats}");

    // The daemon dies on the full disk; a new one starts there and answers.
    let _ = daemon.0.kill();
    let _ = daemon.0.wait();
    ns.fill();
    let restarted = Instant::now();
    let daemon = setup.start_daemon();
    let after = setup.json(&["history", "--json"])["runs"].clone();
    assert_eq!(after.as_array().unwrap().len(), 2, "{after}");
    println!(
        "full_disk: a daemon started on the full disk ({} B free) and answered history in {:.1?}",
        ns.free(),
        restarted.elapsed()
    );

    // A daemon that cannot open an index there (a new data directory, no reserve) says why,
    // and its client prints it at once.
    ns.fill();
    let asked = Instant::now();
    let fresh = ns
        .command(EXE)
        .args(["run", "--", "true"])
        .env("SPILLWAY_DATA_DIR", mount.join("fresh"))
        .env(
            "SPILLWAY_SOCKET",
            setup.sandbox.dir.path().join("run/fresh.sock"),
        )
        .output()
        .unwrap();
    assert_eq!(
        fresh.status.code(),
        Some(125),
        "{} B free; stdout {:?}; stderr {:?}",
        ns.free(),
        String::from_utf8_lossy(&fresh.stdout),
        stderr(&fresh)
    );
    assert!(
        stderr(&fresh)
            .contains("the daemon could not start: the disk holding spillway's data directory")
            && stderr(&fresh).contains("is full (0 B free)"),
        "{}",
        stderr(&fresh)
    );
    println!(
        "full_disk: autostart on a full disk failed with its reason in {:.1?}",
        asked.elapsed()
    );

    // The purge frees the disk, files first.
    let purged = setup.json(&["purge", "--json", "--older-than", "0s"]);
    let freed = purged["freed_bytes"].as_u64().unwrap();
    assert!(freed >= a_bytes, "{purged}");
    assert_eq!(purged["expired"].as_array().unwrap().len(), 2, "{purged}");
    assert!(ns.free() > 40 * MIB, "{}", ns.free());
    assert!(
        setup.json(&["history", "--json"])["runs"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // And runs are whole again; the reserve is made again.
    let d = setup.json(&["run", "--json", "--no-tty", "--", "seq", "1", "100000"]);
    let d_spill = ns.outside(Path::new(d["spill_path"].as_str().unwrap()));
    let expected: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
    assert!(std::fs::read(&d_spill).unwrap() == expected.as_bytes());
    wait_for(|| reserve.exists(), "the space reserve again");
    let log = setup.log();
    assert!(!log.contains("panicked"), "{log}");
    assert!(
        log.contains("released the space reserve"),
        "the reserve was used: {log}"
    );
    drop(daemon);
}

/// The floor spillway keeps free for its run index (`storage::space::LOW_SPACE`).
const FLOOR: u64 = 8 * MIB;
const KIB: u64 = 1 << 10;

/// `seq 1 200000`: 1,288,895 bytes, more than the disk has room for at every level below.
const SEQ_BYTES: u64 = 1_288_895;

/// One fill level's runs: a short one, whose output is all in the preview, and one with more
/// output than the disk takes, whose spill keeps what fits and whose notice says so.
fn runs_at(setup: &Setup, level: &str) -> [Value; 2] {
    let echo = setup.json(&["run", "--json", "--no-tty", "--", "echo", "after-full"]);
    assert_eq!(echo["exit_code"], 0, "{level}: {echo}");
    assert!(
        echo["content"].as_str().unwrap().contains("after-full"),
        "{level}: {echo}"
    );
    let seq = setup.json(&[
        "run",
        "--json",
        "--no-tty",
        "--max-lines",
        "20",
        "--",
        "seq",
        "1",
        "200000",
    ]);
    assert_eq!(seq["exit_code"], 0, "{level}: {seq}");
    assert_eq!(seq["total_bytes"], SEQ_BYTES, "{level}: {seq}");
    let spill = setup
        .ns
        .outside(Path::new(seq["spill_path"].as_str().unwrap()));
    let saved = std::fs::metadata(&spill).unwrap().len();
    let content = seq["content"].as_str().unwrap();
    let full: Vec<&str> = content
        .lines()
        .filter(|line| line.contains("the disk was full"))
        .collect();
    assert_eq!(full.len(), 1, "{level}: one line says it: {content}");
    assert!(
        full[0].contains(&format!(
            "only its first {saved} bytes were saved, the other {} were not",
            SEQ_BYTES - saved
        )),
        "{level}: the exact count: {content}"
    );
    let expected: String = (1..=200_000).map(|i| format!("{i}\n")).collect();
    assert!(
        expected
            .as_bytes()
            .starts_with(&std::fs::read(&spill).unwrap()),
        "{level}: what was saved is the output's start"
    );
    println!(
        "full_disk: {level}: {} B free after; the spill kept {saved} of {SEQ_BYTES} bytes",
        setup.ns.free()
    );
    [echo, seq]
}

/// The status `history` gives the run `id`, if it lists it.
fn status_of(setup: &Setup, id: &Value) -> Option<String> {
    setup.json(&["history", "--json", "--limit", "1000"])["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == *id)
        .map(|r| r["status"].as_str().unwrap().to_string())
}

/// Whether `history` lists the run `id`.
fn listed(setup: &Setup, id: &Value) -> bool {
    setup.json(&["history", "--json", "--limit", "1000"])["runs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["id"] == *id)
}

#[test]
fn runs_run_and_reads_answer_at_every_fill_level_of_the_disk() {
    let Some(setup) = Setup::on_tmpfs("48m") else {
        return;
    };
    let ns = &setup.ns;
    let mut daemon = setup.start_daemon();
    let reserve = ns.outside(&setup.data.join("space-reserve"));
    wait_for(|| reserve.exists(), "the space reserve");
    // A big spill made while there is room, for the purge to free at the end.
    let big = setup.json(&["run", "--json", "--no-tty", "--", "seq", "1", "2000000"]);
    let big_bytes = std::fs::metadata(ns.outside(Path::new(big["spill_path"].as_str().unwrap())))
        .unwrap()
        .len();
    assert!(big_bytes > 14 * MIB, "{big_bytes}");

    // Above, at and below the floor; below the reserve's size; none at all. Each run runs and
    // is recorded (the last level's from the reserve, which is given up for it).
    let levels = [
        ("256 KiB above the floor", FLOOR + 256 * KIB),
        ("at the floor", FLOOR),
        ("20 KiB below the floor", FLOOR - 20 * KIB),
        ("1 MiB free", MIB),
        ("0 bytes free", 0),
    ];
    let mut runs = Vec::new();
    for (level, free) in levels {
        ns.leave_free(free);
        let [echo, seq] = runs_at(&setup, level);
        if free > FLOOR {
            let spill = ns.outside(Path::new(seq["spill_path"].as_str().unwrap()));
            let saved = std::fs::metadata(spill).unwrap().len();
            assert!(
                saved > 0,
                "{level}: the spill keeps what fits above the floor"
            );
        }
        for run in [echo, seq] {
            assert!(listed(&setup, &run["id"]), "{level}: recorded: {run}");
            runs.push(run);
        }
    }
    assert!(!reserve.exists(), "the reserve was given up for the index");

    // Full again, with no reserve left: a run still runs, and either it is recorded or its
    // client is told it is not; never silently missing.
    ns.leave_free(0);
    let last = setup.json(&["run", "--json", "--no-tty", "--", "echo", "after-full"]);
    assert_eq!(last["exit_code"], 0, "{last}");
    let content = last["content"].as_str().unwrap();
    assert!(content.contains("after-full"), "{last}");
    let told = content.contains("was not recorded in the run index");
    let status = status_of(&setup, &last["id"]);
    match (told, status.as_deref()) {
        (false, Some("exited")) => {}
        (true, None) => assert!(content.contains("will not list it"), "{content}"),
        (true, Some("running")) => assert!(content.contains("shows it as running"), "{content}"),
        other => panic!("told {other:?}: {last}"),
    }
    println!("full_disk: 0 bytes free, no reserve: a run ran, recorded: {status:?}");

    // The daemon stops cleanly, with room to fold its index's write-ahead log in (so the log
    // and its shared-memory file go), the disk fills, and a new daemon starts there and
    // answers every read: SQLite cannot open the index for writing with no room for a new
    // shared-memory file, so it opens it read-only.
    ns.leave_free(FLOOR + MIB);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(daemon.0.id()).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    daemon.0.wait().unwrap();
    // A clean stop usually leaves no write-ahead log (the file is then opened immutable);
    // when a late reader kept one, the read-only opening uses its shared-memory file: both
    // ways must answer.
    ns.leave_free(0);
    let restarted = Instant::now();
    let daemon = setup.start_daemon();
    let history = setup.json(&["history", "--json", "--limit", "1000"]);
    println!(
        "full_disk: a daemon started on the full disk ({} B free, no reserve, no write-ahead \
         log) and answered history in {:.1?}",
        ns.free(),
        restarted.elapsed()
    );
    assert!(
        setup.log().contains("the run index is open read-only"),
        "{}",
        setup.log()
    );
    let seq = &runs[runs.len() - 1];
    let id = seq["id"].as_str().unwrap();
    assert!(listed(&setup, &seq["id"]), "{history}");
    let shown = setup.spillway(&["show", id]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    let grep = setup.spillway(&["grep", big["id"].as_str().unwrap(), "^1999999$"]);
    assert!(
        String::from_utf8_lossy(&grep.stdout).contains("1999999"),
        "{}",
        stderr(&grep)
    );
    let stats = setup.json(&["stats", "--json"]);
    assert!(
        stats["spill_bytes"].as_u64().unwrap() >= big_bytes,
        "{stats}"
    );
    setup.json(&["ps", "--json"]);
    let after = setup.json(&["run", "--json", "--no-tty", "--", "echo", "after-restart"]);
    assert_eq!(after["exit_code"], 0, "{after}");
    let content = after["content"].as_str().unwrap();
    assert!(
        content.contains("after-restart") && content.contains("will not list it"),
        "the read-only index took no row, and the client is told: {content}"
    );
    assert!(!listed(&setup, &after["id"]));

    // The purge frees the disk, spills first, and then the rows go too.
    let purged = setup.json(&["purge", "--json", "--older-than", "0s"]);
    let freed = purged["freed_bytes"].as_u64().unwrap();
    assert!(freed >= big_bytes, "{purged}");
    assert!(ns.free() >= big_bytes, "{}", ns.free());
    assert!(!listed(&setup, &big["id"]), "{purged}");
    println!(
        "full_disk: purge on the full disk freed {freed} B; {} B free after",
        ns.free()
    );

    // And runs are whole and recorded again.
    let whole = setup.json(&["run", "--json", "--no-tty", "--", "seq", "1", "1000"]);
    let expected: String = (1..=1000).map(|i| format!("{i}\n")).collect();
    let spill = ns.outside(Path::new(whole["spill_path"].as_str().unwrap()));
    assert!(std::fs::read(spill).unwrap() == expected.as_bytes());
    assert!(listed(&setup, &whole["id"]));
    let log = setup.log();
    assert!(!log.contains("panicked"), "{log}");
    drop(daemon);
}
