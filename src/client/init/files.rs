//! Changing a host's file with care: which file may be edited, the backup, the atomic write
//! that keeps its mode, removing a file (and its empty directories) that `init` created, and
//! the diff `--dry-run` prints.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};

use super::{Edit, Mode, Scope, Setup, backup_path};

/// The file to edit for `path`, checked: a read-only file is refused (its owner said it is not
/// to change); a symbolic link is refused in a project (its target, a file of the user's home
/// perhaps, would be copied into a file meant to be committed) and followed at user scope,
/// where the target is edited in place and the link kept (a dotfiles repository's link).
pub(super) fn editable_path(path: &Path, scope: Scope) -> Result<PathBuf> {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return Ok(path.to_path_buf());
    };
    let target = if meta.file_type().is_symlink() {
        if scope == Scope::Project {
            bail!(
                "{} is a symbolic link: spillway does not edit a link in a project (what it \
                 points at would be copied into the project's file); replace it with a file",
                path.display()
            );
        }
        fs::canonicalize(path)
            .with_context(|| format!("cannot follow the link {}", path.display()))?
    } else {
        path.to_path_buf()
    };
    if fs::metadata(&target).is_ok_and(|m| m.permissions().mode() & 0o200 == 0) {
        bail!(
            "{} is read-only: spillway leaves it as it is (make it writable to install)",
            target.display()
        );
    }
    Ok(target)
}

pub(super) fn read_optional(path: &Path) -> Result<Option<String>> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Writes one planned change (or, with `dry_run`, says what it would be).
pub(super) fn apply(
    edit: &Edit,
    old: Option<String>,
    mut new: Option<String>,
    mode: Mode,
    dry_run: bool,
    setup: &Setup,
    out: &mut impl Write,
) -> Result<()> {
    let path = &edit.path;
    let backup = backup_path(path);
    let saved = read_optional(&backup)?;
    let mut restored = false;
    if mode == Mode::Uninstall {
        match (&new, &saved) {
            (Some(text), Some(saved)) if edit.same(text, saved) => {
                new = Some(saved.clone());
                restored = true;
            }
            (Some(text), None) if old.is_some() && edit.is_empty(text) => new = None,
            _ => {}
        }
    }
    let shown = path.display();
    if new == old {
        if restored && !dry_run {
            remove_file(&backup)?;
        }
        writeln!(out, "unchanged {shown}")?;
        return Ok(());
    }
    if dry_run {
        match (&old, &new) {
            (None, Some(text)) => writeln!(out, "would create {shown}:\n{}", indent(text))?,
            (Some(_), None) => writeln!(out, "would remove {shown}")?,
            (Some(old), Some(text)) => {
                writeln!(out, "would change {shown}:\n{}", diff(old, text))?;
                if mode == Mode::Install && saved.is_none() {
                    writeln!(
                        out,
                        "  (its original would be kept as {})",
                        backup.display()
                    )?;
                }
            }
            (None, None) => {}
        }
        return Ok(());
    }
    match new {
        Some(text) => {
            if mode == Mode::Install
                && let Some(original) = &old
                && saved.is_none()
            {
                write_atomic(&backup, original, file_mode(path))?;
            }
            write_atomic(path, &text, file_mode(path))?;
            let verb = match (&old, restored) {
                (None, _) => "created",
                (Some(_), true) => "restored",
                (Some(_), false) => "updated",
            };
            writeln!(out, "{verb} {shown}")?;
            if restored {
                remove_file(&backup)?;
            } else if mode == Mode::Uninstall && saved.is_some() {
                writeln!(
                    out,
                    "  kept {}: the file has changed since it was taken",
                    backup.display()
                )?;
            }
        }
        None => {
            remove_file(path)?;
            remove_empty_parents(path, setup);
            writeln!(out, "removed {shown}")?;
        }
    }
    Ok(())
}

fn remove_file(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot remove {}", path.display())),
    }
}

/// Removes the directories above a removed file while they are empty, up to the home or
/// project directory: the ones `init` had to create for it.
fn remove_empty_parents(path: &Path, setup: &Setup) {
    let mut dir = path.parent();
    while let Some(d) = dir {
        if d == setup.home
            || d == setup.project
            || !d.starts_with(&setup.home) && !d.starts_with(&setup.project)
        {
            break;
        }
        if fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
}

/// Writes through a temporary file and a rename, so a crash never leaves half a config.
/// The permission bits of the file at `path`, if it exists.
fn file_mode(path: &Path) -> Option<u32> {
    fs::metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o7777)
}

/// Writes `text` to `path` through a temporary file renamed over it, both made with `mode`
/// (the original's: a 0600 file holding API keys is never, even briefly, readable by others),
/// or the default for a new file.
fn write_atomic(path: &Path, text: &str, mode: Option<u32>) -> Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".spillway-tmp-{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    if let Some(mode) = mode {
        options.mode(mode);
    }
    let written = options
        .open(&tmp)
        .and_then(|mut file| {
            if let Some(mode) = mode {
                file.set_permissions(fs::Permissions::from_mode(mode))?;
            }
            file.write_all(text.as_bytes())
        })
        .with_context(|| format!("cannot write {}", tmp.display()));
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    fs::rename(&tmp, path).with_context(|| format!("cannot replace {}", path.display()))
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}\n")).collect::<String>()
}

/// The changed lines between `old` and `new`: what they share at both ends is left out.
fn diff(old: &str, new: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let mut out = String::new();
    for line in &a[head..a.len() - tail] {
        out.push_str(&format!("  - {line}\n"));
    }
    for line in &b[head..b.len() - tail] {
        out.push_str(&format!("  + {line}\n"));
    }
    out
}
