//! What a daemon puts right at start-up, after another died: runs left `running` become
//! `interrupted`, and spill files its predecessor created but never recorded become
//! `interrupted` runs too.
//!
//! Both rely on the data directory's daemon lock (`crate::daemon`): the daemon that holds it is
//! the only one alive, so every run a daemon left `running` is dead, and the spills named with
//! the last holder's pid that no row names are runs it started in the instant before it died
//! (the spill file exists from the moment the command is spawned; the row a moment later).
//! Without this, such a run's client saw only "the daemon closed the connection", and its
//! output was swept up an hour later as an orphan file, never listed.

use std::path::Path;

use chrono::{DateTime, NaiveDateTime, Utc};

use crate::protocol::RunId;
use crate::storage::index::{Index, IndexError, RecoveredRun};

/// Whether process `pid` is running. A zombie is not (it has exited; only its parent has not
/// reaped it), nor is a pid that does not exist.
pub fn process_lives(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    let exists = matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None),
        Ok(()) | Err(nix::errno::Errno::EPERM)
    );
    exists && !is_zombie(pid)
}

/// Whether `/proc` says `pid` is a zombie (false when it cannot tell).
fn is_zombie(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The command name (in parentheses) may hold anything: the state follows its last ')'.
    stat.rfind(')')
        .and_then(|end| stat[end + 1..].split_whitespace().next())
        == Some("Z")
}

/// Records as `interrupted` the spill files in `spills_dir` that `predecessor` (the pid of the
/// daemon that held the lock before) created and no run names. Each ends when it was last
/// known alive: the latest of its spill's last write and `last_alive`, never after `now`.
/// Returns the ids recorded.
pub fn record_orphan_spills(
    index: &mut Index,
    spills_dir: &Path,
    predecessor: u32,
    last_alive: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<Vec<RunId>, IndexError> {
    let io_error = |source| IndexError::Io {
        path: spills_dir.to_path_buf(),
        source,
    };
    let mut recorded = Vec::new();
    for entry in std::fs::read_dir(spills_dir).map_err(io_error)? {
        let entry = entry.map_err(io_error)?;
        let name = entry.file_name();
        let Some((started_at, pid)) = name.to_str().and_then(parse_spill_name) else {
            continue;
        };
        if pid != predecessor {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() || index.names_spill(&name.to_string_lossy())? {
            continue;
        }
        let modified = meta.modified().ok().map(DateTime::<Utc>::from);
        let ended_at = [Some(started_at), modified, last_alive]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(now)
            .min(now)
            .max(started_at);
        let spill_path = entry.path().to_string_lossy().into_owned();
        loop {
            let run = RecoveredRun {
                id: RunId::starting_at(started_at),
                started_at,
                ended_at,
                spill_path: spill_path.clone(),
                spill_bytes: meta.len(),
            };
            if index.insert_recovered(&run)? {
                recorded.push(run.id);
                break;
            }
        }
    }
    Ok(recorded)
}

/// The creation time and pid in a spill file's name, `<UTC time>-<pid>-<counter>.log`
/// (`crate::storage::spill`).
fn parse_spill_name(name: &str) -> Option<(DateTime<Utc>, u32)> {
    let stem = name.strip_suffix(".log")?;
    let mut parts = stem.rsplitn(3, '-');
    let _counter = parts.next()?;
    let pid = parts.next()?.parse().ok()?;
    let time = NaiveDateTime::parse_from_str(parts.next()?, "%Y%m%dT%H%M%S%.6fZ").ok()?;
    Some((time.and_utc(), pid))
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;
    use crate::protocol::RunStatus;
    use crate::storage::index::{INDEX_FILE, RECOVERED_COMMAND};

    #[test]
    fn spill_names_give_their_time_and_pid() {
        let (time, pid) = parse_spill_name("20261121T101153.064630Z-27005-000003.log").unwrap();
        assert_eq!(pid, 27005);
        assert_eq!(time.to_rfc3339(), "2026-11-21T10:11:53.064630+00:00");
        assert_eq!(parse_spill_name("filler"), None);
        assert_eq!(parse_spill_name("x-y-z.log"), None);
    }

    #[test]
    fn a_zombie_is_not_alive() {
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Not reaped yet: a zombie once it has exited.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !is_zombie(pid) {
            assert!(
                std::time::Instant::now() < deadline,
                "never became a zombie"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!process_lives(pid));
        child.wait().unwrap();
        assert!(!process_lives(pid));
        assert!(process_lives(std::process::id()));
    }

    #[test]
    fn the_predecessors_unrecorded_spills_become_interrupted_runs() {
        let dir = tempfile::tempdir().unwrap();
        let spills = dir.path().join("spills");
        std::fs::create_dir(&spills).unwrap();
        let mut index = Index::open(&dir.path().join(INDEX_FILE)).unwrap();
        let orphan = spills.join("20260101T000000.000000Z-77-000001.log");
        std::fs::write(&orphan, b"started\n").unwrap();
        let others = [
            "20260101T000000.000000Z-78-000001.log", // another process's
            "notes.txt",
        ];
        for name in others {
            std::fs::write(spills.join(name), b"x").unwrap();
        }
        let now = Utc::now();
        let recorded = record_orphan_spills(&mut index, &spills, 77, None, now).unwrap();
        assert_eq!(recorded.len(), 1);
        let row = index.get(&recorded[0]).unwrap().unwrap();
        assert_eq!(row.status, RunStatus::Interrupted);
        assert_eq!(row.command, RECOVERED_COMMAND);
        assert_eq!(row.spill_path.as_deref(), Some(&*orphan.to_string_lossy()));
        assert_eq!(row.spill_bytes, 8);
        assert_eq!(row.started_at.to_rfc3339(), "2026-01-01T00:00:00+00:00");
        assert!(row.ended_at.unwrap() <= now);
        assert!(recorded[0].as_str().starts_with("20260101-000000-"));
        // Recorded once: a second start finds it named.
        assert!(
            record_orphan_spills(&mut index, &spills, 77, None, now)
                .unwrap()
                .is_empty()
        );
    }
}
