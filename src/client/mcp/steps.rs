//! The notice's next steps in the MCP server's words: the tools a model can call, with the
//! run's id, instead of the command lines a shell user would type.

use std::path::Path;

use crate::protocol::{NextStep, Preview, RunId};

use super::words::json_string;

/// Words a notice's next steps as calls of the server's own tools (`read_output`,
/// `grep_output`), which find a run's spill by its id.
#[derive(Debug, Clone)]
pub struct McpSteps {
    pub id: RunId,
}

impl NextStep for McpSteps {
    fn read_from(&self, _spill: &Path, line: u64) -> String {
        format!("call read_output with id=\"{}\" offset={line}", self.id)
    }

    fn search(&self, _spill: &Path, pattern: &str) -> String {
        format!(
            "call grep_output with id=\"{}\" pattern={}",
            self.id,
            json_string(pattern)
        )
    }
}

/// Rewords `preview`'s next steps (worded by the daemon for the command line) for run `id`,
/// where the preview's facts say they stand.
pub fn reword(preview: &mut Preview, id: &RunId) {
    preview.content = preview.reworded(&McpSteps { id: id.clone() });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::capture::{Capture, Limits, SpillPolicy};
    use crate::program::CliSteps;
    use crate::protocol::Direction;
    use crate::storage::spill::DataDir;

    fn id() -> RunId {
        "20261121-101502-k3f7".parse().unwrap()
    }

    /// Previews of `text` with CLI and MCP wording, spilled under `dir_name`.
    fn both_wordings(
        text: &str,
        lines: u64,
        direction: Direction,
        dir_name: &str,
    ) -> (Preview, Preview) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = DataDir::open(&tmp.path().join(dir_name)).unwrap();
        let mut capture = Capture::new(
            Limits::new(lines, 100_000).unwrap(),
            SpillPolicy::Always(dir),
        );
        capture.write(text);
        capture.finish();
        let view = capture.view();
        (
            Preview::build(&view, direction, &CliSteps),
            Preview::build(&view, direction, &McpSteps { id: id() }),
        )
    }

    fn numbered(n: usize) -> String {
        (1..=n).map(|i| format!("line {i}\n")).collect()
    }

    #[test]
    fn rewording_equals_building_with_mcp_steps() {
        let mut with_errors = numbered(50);
        with_errors.push_str("src/a.c:3:4: error: it's broken\n");
        for i in 0..30 {
            with_errors.push_str(&format!("make[1]: *** [Makefile:{i}: all] Error 1\n"));
        }
        with_errors.push_str(&numbered(300));
        let cases = [
            (numbered(100), 6, Direction::Both, "plain"),
            (numbered(100), 6, Direction::Head, "with space"),
            (numbered(100), 6, Direction::Tail, "it's quoted"),
            (with_errors, 40, Direction::Both, "errors 'and' quotes"),
        ];
        for (text, lines, direction, dir_name) in cases {
            let (cli, mcp) = both_wordings(&text, lines, direction, dir_name);
            assert!(cli.truncated, "{dir_name}");
            let mut reworded = cli.clone();
            reword(&mut reworded, &id());
            assert_eq!(reworded.content, mcp.content, "{dir_name}");
            assert!(!reworded.content.contains("spillway read"), "{dir_name}");
            assert!(!reworded.content.contains("grep -n"), "{dir_name}");
        }
    }

    #[test]
    fn the_mcp_notice_names_the_tools_and_the_id() {
        let (_, mcp) = both_wordings(&numbered(100), 6, Direction::Both, "d");
        assert!(
            mcp.content
                .contains("call read_output with id=\"20261121-101502-k3f7\" offset=4"),
            "{}",
            mcp.content
        );
        assert!(
            mcp.content
                .contains("call grep_output with id=\"20261121-101502-k3f7\" pattern=\"PATTERN\"")
        );
    }

    #[test]
    fn output_that_looks_like_a_step_is_left_alone() {
        let (cli, _) = both_wordings(&numbered(3), 100, Direction::Both, "d");
        let spill = cli.spill_path.clone().unwrap();
        let echoed = format!("spillway read {spill} --offset 2\n");
        let mut preview = Preview {
            truncated: true,
            content: format!("{echoed}\n[spillway: output truncated ...]\n"),
            ..cli
        };
        reword(&mut preview, &id());
        assert!(preview.content.starts_with(&echoed));
    }

    #[test]
    fn steps_are_reworded_where_they_stand_after_redaction() {
        // A credential in the shown lines is redacted after the notice is written: the text
        // before the steps changes length, and the steps' places move with it.
        let mut text = String::from("token=ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789\n");
        text.push_str(&numbered(100));
        let (cli, mcp) = both_wordings(&text, 6, Direction::Both, "d");
        let mut redacted = cli.clone();
        redacted.redact(crate::engine::redact::Redactor::builtin());
        assert_ne!(
            redacted.content.len(),
            cli.content.len(),
            "something was redacted"
        );
        reword(&mut redacted, &id());
        let notice =
            |p: &Preview| p.content[p.content.rfind("[spillway: output").unwrap()..].to_string();
        assert!(
            notice(&redacted).starts_with(&notice(&mcp)[..notice(&mcp).len() - 1]),
            "{}",
            redacted.content
        );
        assert!(!redacted.content.contains("spillway read"));
    }
}
