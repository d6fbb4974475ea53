//! A long shell result that a host saved to a file of its own, of which the model would read
//! only the start, replaced by spillway's preview of that file.
//!
//! Copilot CLI keeps a shell result of up to about 20,000 characters whole; past that it
//! writes the whole output to `$TMPDIR/<millis>-copilot-tool-output-<...>.txt` and hands the
//! model `Output too large to read at once (N KB). Saved to: PATH`, the file's first 500
//! characters and the exit line (`<shellId: N completed with exit code X>`), so the end of the
//! output, where a failure usually is, never reaches the model. Its `postToolUse` hook may
//! replace that result: spillway answers with the preview `spillway truncate` makes of the file
//! (kept in the data directory, with the notice saying where), and the host's exit line. The
//! command itself ran exactly as Copilot ran it: its permission rules, approval mode and
//! history never see spillway.

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::budget::Budget;

/// The first words of Copilot CLI's result for an output it saved to a file.
const SAVED_HEADER: &str = "Output too large to read at once (";

/// What comes before the saved file's path on the header's line.
const SAVED_AT: &str = "Saved to: ";

/// The part of the saved file's name that only Copilot CLI's own files have.
const SAVED_NAME: &str = "-copilot-tool-output-";

/// The saved file that `result` (the text the model would read) names, if `result` is Copilot
/// CLI's note for an output too large to show: only a file of the host's own naming, directly in
/// the temporary directory, so a command printing a look-alike note cannot point the hook at
/// another file.
pub(super) fn saved_file(result: &str) -> Option<PathBuf> {
    let header = result.strip_prefix(SAVED_HEADER)?.lines().next()?;
    let path = Path::new(header.split_once(SAVED_AT)?.1.trim());
    let name = path.file_name()?.to_str()?;
    let (millis, _) = name.split_once(SAVED_NAME)?;
    let in_temp = path.parent() == Some(std::env::temp_dir().as_path())
        || path.parent() == Some(Path::new("/tmp"));
    let named =
        !millis.is_empty() && millis.bytes().all(|b| b.is_ascii_digit()) && name.ends_with(".txt");
    (in_temp && named).then(|| path.to_path_buf())
}

/// The host's exit line that ends `result` (`<shellId: 0 completed with exit code 3>`), which
/// the preview keeps, since it is the model's only sight of the exit code.
pub(super) fn exit_line(result: &str) -> Option<&str> {
    let last = result.trim_end().rsplit('\n').next()?;
    (last.starts_with('<') && last.ends_with('>')).then_some(last)
}

/// spillway's preview of the saved file under `budget`, from `spillway truncate` run on it
/// (`program` is this binary). None when the file cannot be opened as a regular file of its
/// own (a link is not followed) or truncate fails: the model then reads the host's own result.
pub(super) fn preview(program: &str, file: &Path, budget: Budget) -> Option<String> {
    let input = File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(file)
        .ok()?;
    if !input.metadata().ok()?.is_file() {
        return None;
    }
    let out = Command::new(program)
        .args(["truncate", "--max-lines", &budget.max_lines.to_string()])
        .args(["--max-bytes", &budget.max_bytes.to_string()])
        .stdin(input)
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(path: &str) -> String {
        format!(
            "Output too large to read at once (575.1 KB). Saved to: {path}\nConsider using tools \
             like rg.\n\nPreview (first 500 chars):\n1\n2\n\n<shellId: 2 completed with exit code 3>"
        )
    }

    #[test]
    fn finds_only_the_hosts_own_saved_files() {
        let own = "/tmp/1795707989410-copilot-tool-output-16928-31b7.txt";
        assert_eq!(saved_file(&note(own)), Some(PathBuf::from(own)));
        for other in [
            "/home/me/.ssh/id_rsa",
            "/tmp/x-copilot-tool-output-1.txt",
            "/tmp/sub/1795707989410-copilot-tool-output-1.txt",
            "/tmp/1795707989410-copilot-tool-output-1.sh",
            "/tmp/../etc/1795707989410-copilot-tool-output-1.txt",
        ] {
            assert_eq!(saved_file(&note(other)), None, "{other}");
        }
        assert_eq!(saved_file(&format!("hello\n{}", note(own))), None);
        assert_eq!(saved_file("Output too large to read at once ("), None);
    }

    #[test]
    fn keeps_the_hosts_exit_line() {
        assert_eq!(
            exit_line(&note("/tmp/1-copilot-tool-output-1.txt")),
            Some("<shellId: 2 completed with exit code 3>")
        );
        assert_eq!(exit_line("1\n2\n"), None);
    }
}
