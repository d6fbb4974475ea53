//! Acting as another user (`nobody`, uid and gid 65534) for real: programs run through
//! `setpriv`, which needs root (the tests run as root here and in CI; they skip, saying why,
//! elsewhere).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The uid (and gid) the tests act as.
pub const NOBODY: u32 = 65534;

/// Why acting as another user is not possible here, if it is not.
pub fn cannot_act_as_nobody() -> Option<&'static str> {
    if !nix::unistd::geteuid().is_root() {
        return Some("acting as another user needs root");
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        return Some("setpriv (util-linux) is not installed");
    }
    None
}

/// `program` run as uid and gid 65534, with no supplementary groups.
pub fn as_nobody(program: &Path) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.args([
        format!("--reuid={NOBODY}"),
        format!("--regid={NOBODY}"),
        "--clear-groups".to_string(),
        "--".to_string(),
    ])
    .arg(program);
    cmd
}

/// `spillway` reachable by another user: a link (or copy) in a directory anyone may enter.
pub fn public_spillway(dir: &Path) -> PathBuf {
    let exe = dir.join("spillway");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_spillway"), &exe).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_spillway"), &exe).unwrap();
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    exe
}

/// A `python3` that `nobody` can run (the system's, not one under root's home), if any.
pub fn python_for_nobody() -> Option<PathBuf> {
    ["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"]
        .into_iter()
        .map(PathBuf::from)
        .find(|python| {
            as_nobody(python)
                .args(["-c", "pass"])
                .output()
                .is_ok_and(|out| out.status.success())
        })
}

pub fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}
