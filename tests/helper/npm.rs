//! Pinned npm packages whose binaries the tests run (the agent hosts' CLIs, the MCP
//! Inspector), installed on demand under cargo's scratch directory for tests and keyed by the
//! `package.json`'s text, like `node.rs` and `python.rs` do.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// Installs are serialised: tests in this binary run on threads of one process.
static INSTALLING: Mutex<()> = Mutex::new(());

/// A directory whose `node_modules` holds what `package_json` pins, installed if needed.
///
/// Installed with `--ignore-scripts` (nothing runs at install but the steps below), then the
/// two packages that ship their binary in a per-platform package and copy it into place in
/// their `postinstall` (Claude Code, opencode) get that step run by hand: it copies a file
/// already downloaded from the registry, nothing else. Panics with npm's output when it
/// cannot be installed: CI must run these tests, never skip them quietly.
pub fn installed(package_json: &Path) -> PathBuf {
    let _guard = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    let text = std::fs::read_to_string(package_json).expect("read package.json");
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let dir = root.join(format!("npm-{:016x}", hasher.finish()));
    if dir.join(".installed").exists() {
        return dir;
    }
    let building = root.join(format!("npm-building-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&building);
    std::fs::create_dir_all(&building).expect("create the npm scratch directory");
    std::fs::write(building.join("package.json"), &text).expect("copy package.json");
    run(Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--ignore-scripts"])
        .current_dir(&building));
    let modules = building.join("node_modules");
    if modules
        .join("@anthropic-ai/claude-code/install.cjs")
        .exists()
    {
        run(Command::new("node")
            .arg("install.cjs")
            .current_dir(modules.join("@anthropic-ai/claude-code")));
    }
    if modules.join("opencode-ai/postinstall.mjs").exists() {
        run(Command::new("node")
            .arg("postinstall.mjs")
            .current_dir(modules.join("opencode-ai")));
    }
    std::fs::write(building.join(".installed"), "").expect("mark the install complete");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&building, &dir).expect("move the install into place");
    dir
}

fn run(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e} (is Node with npm installed?)"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
