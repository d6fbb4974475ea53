//! A recorded run's spill file, found from its row in the index and refused if it lies
//! outside the spills directory or is not this user's: a row is data, never a trusted path.

use std::path::{Path, PathBuf};

use crate::protocol::{ErrorCode, ErrorEvent, RunId};
use crate::storage::index::RunRow;

use super::errors::unknown_run;
use super::state::Daemon;

/// Finds a run's record and the spill file it names, refusing any path outside the spills
/// directory: a row is data, never a trusted path.
pub(super) async fn spill_of(id: RunId, daemon: &Daemon) -> Result<(RunRow, PathBuf), ErrorEvent> {
    let wanted = id.clone();
    let row = daemon
        .with_index(move |index| index.get(&wanted))
        .await?
        .ok_or_else(|| unknown_run(&id))?;
    let missing = |why: &str| ErrorEvent {
        code: ErrorCode::SpillMissing,
        message: format!("the output of run {id} is gone: {why}; its record remains"),
    };
    let Some(path) = row.spill_path.clone() else {
        return Err(missing("it never had a spill file"));
    };
    if row.spill_missing {
        return Err(missing(&format!("{path} was deleted or lost")));
    }
    let path = confine(Path::new(&path), &daemon.data_dir.spills_dir()).ok_or_else(|| {
        missing(&format!(
            "{path} is missing or outside the spills directory"
        ))
    })?;
    // A file another user put in its place is not this run's output.
    let me = nix::unistd::geteuid().as_raw();
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if std::os::unix::fs::MetadataExt::uid(&meta) == me && meta.is_file() => {}
        _ => {
            return Err(missing(&format!(
                "{} is not a file of this user's",
                path.display()
            )));
        }
    }
    Ok((row, path))
}

/// `path` resolved, if it exists and lies inside `dir`.
fn confine(path: &Path, dir: &Path) -> Option<PathBuf> {
    let path = path.canonicalize().ok()?;
    let dir = dir.canonicalize().ok()?;
    (path.starts_with(&dir) && path != dir).then_some(path)
}
