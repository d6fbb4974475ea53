//! Where the cgroup hierarchies are: `/proc/self/mountinfo`'s lines, a cgroup's directory
//! under its mount, and the directory the runs' cgroups go in (v2, or a v1 controller's),
//! cleared of the empty ones other daemons left beside it.

use std::fs;
use std::path::{Path, PathBuf};

use crate::protocol::Resource;

/// One line of `/proc/self/mountinfo`, the fields used here.
pub(super) struct Mount {
    pub(super) root: String,
    pub(super) point: PathBuf,
    pub(super) fstype: String,
    pub(super) options: String,
}

/// `36 35 98:0 /root /mount/point opts [optional...] - fstype source superopts`.
pub(super) fn parse_mount(line: &str) -> Option<Mount> {
    let (before, after) = line.split_once(" - ")?;
    let fields: Vec<&str> = before.split(' ').collect();
    let mut after = after.split(' ');
    Some(Mount {
        root: unescape(fields.get(3)?),
        point: PathBuf::from(unescape(fields.get(4)?)),
        fstype: after.next()?.to_string(),
        options: after.nth(1).unwrap_or_default().to_string(),
    })
}

/// mountinfo escapes space, tab, newline and backslash as octal (`\040`).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).filter(|_| bytes[i] == b'\\');
        match octal.and_then(|o| u8::from_str_radix(std::str::from_utf8(o).ok()?, 8).ok()) {
            Some(byte) => {
                out.push(byte);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The directory of cgroup `path` in a hierarchy mounted at `mount` from its `root`.
pub(super) fn join_cgroup(mount: &Path, root: &str, path: &str) -> PathBuf {
    let relative = path
        .strip_prefix(root)
        .filter(|_| root != "/")
        .unwrap_or(path)
        .trim_start_matches('/');
    mount.join(relative)
}

/// Where the runs' directory goes: the parent of a `daemon` leaf (systemd's
/// `DelegateSubgroup=daemon` puts the daemon there, leaving the delegated cgroup free for
/// controllers), else the daemon's own cgroup.
pub(super) fn base_for_runs(mount: &Path, here: &Path) -> PathBuf {
    match here.parent() {
        Some(parent)
            if here != mount
                && here.file_name().is_some_and(|n| n == "daemon")
                && parent.starts_with(mount) =>
        {
            parent.to_path_buf()
        }
        _ => here.to_path_buf(),
    }
}

/// The runs' directory in the v1 hierarchy of `resource`'s controller, made if need be.
pub(super) fn v1_dir(resource: Resource, mounts: &str, own: &str, key: &str) -> Option<PathBuf> {
    let name = resource.name();
    let has = |list: &str| list.split(',').any(|c| c == name);
    let mount = mounts
        .lines()
        .filter_map(parse_mount)
        .find(|m| m.fstype == "cgroup" && has(&m.options))?;
    let path = own.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, list, path) = (parts.next()?, parts.next()?, parts.next()?);
        has(list).then_some(path)
    })?;
    let dir = join_cgroup(&mount.point, &mount.root, path).join(format!("spillway-{key}"));
    match fs::create_dir_all(&dir) {
        Ok(()) => {
            remove_empty_siblings(&dir);
            Some(dir)
        }
        Err(e) => {
            tracing::debug!(controller = name, "no v1 cgroup for runs: {e}");
            None
        }
    }
}

/// Removes the runs' directories of other daemons of this user (other data directories) that
/// hold no run: daemons killed without a shutdown leave them, and the rmdir of a cgroup with
/// anything in it fails, so a live daemon's runs are never touched.
pub(super) fn remove_empty_siblings(dir: &Path) {
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name().and_then(|n| n.to_str()))
    else {
        return;
    };
    let Some((prefix, _)) = name.rsplit_once('-') else {
        return;
    };
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let other = entry.file_name();
        let other = other.to_string_lossy();
        if other != name && other.starts_with(&format!("{prefix}-")) {
            let _ = fs::remove_dir(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_give_the_root_point_type_and_options() {
        let line = "30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid shared:9 - cgroup2 cgroup2 rw";
        let m = parse_mount(line).unwrap();
        assert_eq!(
            (m.root.as_str(), m.point.as_path(), m.fstype.as_str()),
            ("/", Path::new("/sys/fs/cgroup/unified"), "cgroup2")
        );
        let v1 = "33 25 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct";
        let m = parse_mount(v1).unwrap();
        assert_eq!(m.options, "rw,cpu,cpuacct");
        assert_eq!(unescape(r"/a\040b"), "/a b");
        assert!(parse_mount("garbage").is_none());
    }

    #[test]
    fn cgroup_paths_join_under_their_mount() {
        let mount = Path::new("/sys/fs/cgroup");
        assert_eq!(
            join_cgroup(mount, "/", "/user.slice/a.service"),
            Path::new("/sys/fs/cgroup/user.slice/a.service")
        );
        assert_eq!(join_cgroup(mount, "/", "/"), mount);
        assert_eq!(
            join_cgroup(mount, "/ns", "/ns/x"),
            Path::new("/sys/fs/cgroup/x")
        );
        let delegated = Path::new("/sys/fs/cgroup/u/spillway.service/daemon");
        assert_eq!(
            base_for_runs(mount, delegated),
            Path::new("/sys/fs/cgroup/u/spillway.service")
        );
        assert_eq!(base_for_runs(mount, mount), mount);
    }
}
