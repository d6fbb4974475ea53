//! A preview as it travels: the text the model sees and the facts about what it left out.
//! The engine builds it; every front end shows it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Secrets redacted from a text, by kind.
pub type Counts = BTreeMap<String, u64>;

/// Which part of a long output the preview keeps.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// The first lines: where a compiler's root-cause error usually is.
    Head,
    /// The last lines: where a run's result and final error usually are.
    Tail,
    /// The first and last lines around an elision marker, each end given half the budget.
    #[default]
    Both,
}

/// The limit that cut the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LimitKind {
    Lines,
    Bytes,
    /// The model-token budget (`max_tokens`), when one was given and it was the one that cut.
    Tokens,
}

/// A 1-based inclusive range of spill lines that appears whole in the preview.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineRange {
    pub first: u64,
    pub last: u64,
}

/// A single line too long for the byte budget, of which only part is shown: its first
/// `shown_bytes` (a head's line), its last (a tail's), or, when `ends` is given, its first
/// `ends.start_bytes` and its last `ends.end_bytes`, which add up to `shown_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartialLine {
    pub line: u64,
    pub shown_bytes: u64,
    pub line_bytes: u64,
    /// Set when both the line's start and its end are shown, around a marker that gives the
    /// size of the middle; left out of the JSON otherwise, so the documented shape stays exact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends: Option<LineEnds>,
}

/// How many bytes of a partial line's start and of its end are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineEnds {
    pub start_bytes: u64,
    pub end_bytes: u64,
}

/// The preview of one output: serialised by `--json` with exactly these fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preview {
    pub truncated: bool,
    /// The text to show: the output itself when it fits, else the kept lines, the elision
    /// marker and the notice.
    pub content: String,
    pub spill_path: Option<String>,
    pub total_lines: u64,
    pub total_bytes: u64,
    pub truncated_by: Option<LimitKind>,
    pub shown: Vec<LineRange>,
    pub omitted_lines: u64,
    pub partial_line: Option<PartialLine>,
    /// Set when the spill file stopped at its cap (`--max-spill`) before the output ended;
    /// left out of the JSON otherwise, so the documented shape stays exact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spill_capped: Option<SpillCap>,
    /// Secrets redacted from `content`, by kind (see [`Preview::redact`]); left out of the
    /// JSON when none were.
    #[serde(default, skip_serializing_if = "Counts::is_empty")]
    pub redactions: Counts,
    /// The notice's next steps as facts, for a front end that words them its own way
    /// ([`Preview::reworded`]); absent when the notice gives none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<NextSteps>,
    /// The bytes of `content`, `[start, end)`, of the line that names what the run's end
    /// stopped, worded from the exit's `stopped` for the command line: a front end words the
    /// same facts its own way there ([`Preview::reword_stopped`]). Absent when nothing was
    /// stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_at: Option<[usize; 2]>,
    /// The bytes of `content`, `[start, end)`, of the lines that say a limit stopped or held
    /// back the run, worded from the exit's `limits_hit` for the command line (`--memory`): a
    /// front end words the same facts with its own names there ([`Preview::reword_limits`]).
    /// Absent when no limit was reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits_at: Option<[usize; 2]>,
    /// Where the output's own text ends and the notice of a cut preview begins (the line
    /// break before its blank line), as the engine wrote it; whatever changes the text before
    /// it moves it. Not on the wire, whose shape is fixed: only the daemon redacts, and it
    /// holds the preview the engine made.
    #[serde(skip)]
    pub notice_at: Option<usize>,
    /// The template folds `content` shows, in order (`--compact`); left out of the JSON when
    /// there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub folds: Vec<TemplateFold>,
}

/// Lines `first..=last` of the spill, folded into one marker: every one of them is an
/// instance of one of `templates`, in the counts given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateFold {
    pub first: u64,
    pub last: u64,
    pub templates: Vec<FoldTemplate>,
}

/// One template of a fold: its words, variable fields as `<*>`, and how many of the fold's
/// lines are of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoldTemplate {
    pub text: String,
    pub count: u64,
}

/// How a notice words the next steps, so each front end can name the commands or tools its
/// reader can actually call.
pub trait NextStep {
    /// How to read the spill from line `line` on.
    fn read_from(&self, spill: &Path, line: u64) -> String;
    /// How to search the whole spill for `pattern` (an extended regular expression).
    fn search(&self, spill: &Path, pattern: &str) -> String;
}

/// The next steps a truncated preview's notice gives, as data: where to read on, what to
/// search for, and where in `content` each stands as the daemon worded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextSteps {
    /// The first line not shown, to read on from (the spill's numbering).
    pub read_from: u64,
    /// The pattern to search the spill with: one that finds the omitted lines that look like
    /// errors, or a placeholder for the reader's own.
    pub search: String,
    /// The bytes of `content` that word the read step, `[start, end)`.
    pub read_at: [usize; 2],
    /// The bytes of `content` that word the search step, `[start, end)`.
    pub search_at: [usize; 2],
}

/// A span of bytes `[start, end)` moved by `delta` bytes.
pub fn moved_span([start, end]: [usize; 2], delta: isize) -> [usize; 2] {
    [
        start.saturating_add_signed(delta),
        end.saturating_add_signed(delta),
    ]
}

impl NextSteps {
    /// The same steps with `content` grown (or shrunk) by `delta` bytes before them.
    pub fn moved(&self, delta: isize) -> NextSteps {
        let at = |span| moved_span(span, delta);
        NextSteps {
            read_at: at(self.read_at),
            search_at: at(self.search_at),
            ..self.clone()
        }
    }
}

/// A spill file that reached its cap: it holds the first `bytes` bytes of the output, which end
/// inside or just before `line`, the first line it lacks (in part or whole).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpillCap {
    pub bytes: u64,
    pub line: u64,
}
