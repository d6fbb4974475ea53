//! Shared helpers: run the real `spillway` binary with a private data directory.

pub mod daemon;
pub mod node;
pub mod npm;
pub mod python;
pub mod terminal;
pub mod users;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A scratch data directory, removed on drop.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        Sandbox {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn spills(&self) -> Vec<PathBuf> {
        match std::fs::read_dir(self.data_dir().join("spills")) {
            Ok(entries) => entries.map(|e| e.unwrap().path()).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// A `spillway` command pointed at this sandbox's data directory.
    pub fn spillway(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_spillway"));
        cmd.env("SPILLWAY_DATA_DIR", self.data_dir());
        cmd
    }
}

/// Runs `cmd` with `input` on stdin and returns its output.
pub fn run_with_input(mut cmd: Command, input: &[u8]) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn spillway");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        // The child may stop reading early (bad flags); a broken pipe is fine then.
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().expect("wait spillway");
    writer.join().unwrap();
    out
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The spill path a JSON result names.
pub fn spill_path(json: &serde_json::Value) -> &Path {
    Path::new(json["spill_path"].as_str().expect("spill_path"))
}

/// `n` numbered lines, each ending in a newline.
pub fn numbered(n: usize) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}
