//! Node packages for tests: the pinned `devDependencies` of a `package.json` (the TypeScript
//! compiler and Node's type definitions), installed on demand under cargo's scratch directory
//! for tests and keyed by the file's text, like the Python environments in `python.rs`.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A directory whose `node_modules` holds what `package_json` pins, installed if needed.
/// Panics loudly when it cannot be: CI must run the tests that need it.
pub fn node_modules_for(package_json: &Path) -> PathBuf {
    let text = std::fs::read_to_string(package_json).expect("read package.json");
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let dir = root.join(format!("node-{:016x}", hasher.finish()));
    if dir.join("node_modules/.bin/tsc").exists() {
        return dir;
    }
    let building = root.join(format!("node-building-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&building);
    std::fs::create_dir_all(&building).expect("create the node scratch directory");
    std::fs::write(building.join("package.json"), &text).expect("copy package.json");
    let out = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--ignore-scripts"])
        .current_dir(&building)
        .output()
        .unwrap_or_else(|e| panic!("cannot run npm: {e} (is Node with npm installed?)"));
    assert!(
        out.status.success(),
        "npm install for the TypeScript example failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if std::fs::rename(&building, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&building);
    }
    dir
}
