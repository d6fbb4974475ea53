//! How spillway names itself in the hints it prints (`Next: spillway read ...`, `spillway wait
//! ID`): as `spillway` when that name runs this very program, else by this program's own path,
//! so that a hint runs as printed after `cargo run`, or with an old `spillway` first on PATH.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::protocol::NextStep;

/// The program's name for hints, worked out once per process.
pub fn program() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| match std::env::current_exe() {
        Ok(exe) => name_for(&exe, std::env::var_os("PATH").as_deref()),
        Err(_) => "spillway".into(),
    })
}

/// `spillway` when the first `spillway` on `path` is the file `exe`, or when `exe` is not a
/// `spillway` at all (a test binary, a program embedding the library); else `exe`, quoted for
/// a shell when it needs it.
fn name_for(exe: &Path, path: Option<&std::ffi::OsStr>) -> String {
    if exe.file_name().is_none_or(|name| name != "spillway") {
        return "spillway".into();
    }
    let found = path.and_then(|path| first_on_path(path, "spillway"));
    if found.is_some_and(|found| same_file(&found, exe)) {
        return "spillway".into();
    }
    let text = exe.to_string_lossy();
    shlex::try_quote(&text).map_or_else(|_| text.to_string(), |q| q.into_owned())
}

/// The first executable file `name` in the directories of `path`, as a shell finds it.
pub(crate) fn first_on_path(path: &std::ffi::OsStr, name: &str) -> Option<PathBuf> {
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|meta| meta.is_file() && meta.mode() & 0o111 != 0)
        })
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.metadata(), b.metadata()) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// The next steps of a notice as command lines (`spillway read`, `grep`): what the wire's
/// notice names, given to the engine by whoever asks it for a preview.
#[derive(Debug, Clone, Copy, Default)]
pub struct CliSteps;

impl NextStep for CliSteps {
    fn read_from(&self, spill: &Path, line: u64) -> String {
        format!("{} read {} --offset {line}", program(), quote(spill))
    }

    fn search(&self, spill: &Path, pattern: &str) -> String {
        // Always quoted: a pattern is read as one, even the placeholder.
        let pattern = pattern.replace('\'', r"'\''");
        format!("grep -n -E '{pattern}' {}", quote(spill))
    }
}

/// Quotes a path for a shell command line, only when it needs it.
fn quote(path: &Path) -> String {
    let text = path.to_string_lossy();
    shlex::try_quote(&text).map_or_else(|_| text.to_string(), |q| q.into_owned())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn spillway_is_named_bare_only_when_that_name_runs_it() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let exe = bin.join("spillway");
        std::fs::write(&exe, "").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let on_path = std::env::join_paths([&bin]).unwrap();
        assert_eq!(name_for(&exe, Some(&on_path)), "spillway");
        assert_eq!(name_for(&exe, None), exe.to_string_lossy());
        let other = dir.path().join("other dir");
        std::fs::create_dir(&other).unwrap();
        let shadow = other.join("spillway");
        std::fs::write(&shadow, "").unwrap();
        std::fs::set_permissions(&shadow, std::fs::Permissions::from_mode(0o755)).unwrap();
        let shadowed = std::env::join_paths([&other, &bin]).unwrap();
        assert_eq!(
            name_for(&exe, Some(&shadowed)),
            exe.to_string_lossy(),
            "another spillway first on PATH is not this one"
        );
        assert_eq!(
            name_for(&shadow, None),
            format!("'{}'", shadow.display()),
            "quoted for a shell"
        );
        assert_eq!(name_for(Path::new("/x/deps/tests-1f2e"), None), "spillway");
    }
}
