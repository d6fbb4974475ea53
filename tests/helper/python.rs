//! Python environments for tests that drive spillway with clients we did not write.
//!
//! A virtualenv per requirements file, made on demand under cargo's scratch directory for
//! tests (`target/tmp`) and keyed by the requirements' text, so a fresh machine (CI) installs
//! the pinned packages once and later runs reuse them. It is built in a directory of its own
//! and renamed into place when complete, so a build cut short is never mistaken for one.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The `python` of a virtualenv holding `requirements` (a pip requirements file), made if
/// needed. Panics, loudly and with pip's output, when it cannot be made: CI must run the
/// tests that need it, never skip them quietly.
pub fn venv_python(requirements: &Path) -> PathBuf {
    // Tests of this binary run on threads of one process: one builds at a time.
    static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    let text = std::fs::read_to_string(requirements).expect("read the requirements file");
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let key = hasher.finish();
    let venv = root.join(format!("venv-{key:016x}"));
    let python = venv.join("bin/python");
    if python.exists() {
        return python;
    }
    // Named for the requirements too: tests of one process build different venvs at once.
    let building = root.join(format!("venv-building-{key:016x}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&building);
    run(Command::new("python3").args(["-m", "venv"]).arg(&building));
    run(Command::new(building.join("bin/python"))
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--quiet",
            "-r",
        ])
        .arg(requirements));
    // Another test run may have finished first; either copy is whole.
    if std::fs::rename(&building, &venv).is_err() {
        let _ = std::fs::remove_dir_all(&building);
    }
    assert!(python.exists(), "no python in {}", venv.display());
    python
}

fn run(command: &mut Command) {
    let out = command.output().unwrap_or_else(|e| {
        panic!("cannot run {command:?}: {e} (is python3 with venv installed?)")
    });
    assert!(
        out.status.success(),
        "setting up the Python test environment failed: {command:?} ({})\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
