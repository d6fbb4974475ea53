//! Replays the committed fuzz corpus (`fuzz/corpus/<target>/`) through the fuzz targets' own
//! checks, so `cargo test` keeps every case the fuzzers found interesting, crashes included,
//! without a nightly compiler or cargo-fuzz.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use crate::invariants;

/// A fuzz target's check of one input; it panics when the input breaks an invariant.
type Check = fn(&[u8]);

/// Each fuzz target's check, by the name of its corpus directory.
const TARGETS: [(&str, Check); 3] = [
    ("request", invariants::request_bytes),
    ("normalise", invariants::normalise_bytes),
    ("preview", invariants::preview_bytes),
];

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus")
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    files.sort();
    files
}

#[test]
fn every_corpus_directory_belongs_to_a_target() {
    for dir in files_in(&corpus_dir()) {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            TARGETS.iter().any(|(target, _)| *target == name),
            "fuzz/corpus/{name} has no check in tests/fuzz_corpus.rs"
        );
    }
}

#[test]
fn the_fuzz_corpus_keeps_every_invariant() {
    let mut failed = Vec::new();
    for (target, check) in TARGETS {
        let files = files_in(&corpus_dir().join(target));
        assert!(!files.is_empty(), "fuzz/corpus/{target} is empty");
        for file in files {
            let data = std::fs::read(&file).expect("a corpus file");
            if catch_unwind(AssertUnwindSafe(|| check(&data))).is_err() {
                failed.push(file.display().to_string());
            }
        }
    }
    assert!(
        failed.is_empty(),
        "these fail their checks (panics above):\n{}",
        failed.join("\n")
    );
}
