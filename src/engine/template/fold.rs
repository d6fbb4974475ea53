//! Which lines a preview folds, from the learnt templates: data for the preview to render,
//! never text.
//!
//! The rules (issue 27's contract, rules 2 and 3): a line folds only into a marker right after
//! a shown line of its template, so the first line of every folded group is shown as it is;
//! a marker names one contiguous range of lines, every one of them folded, counted per
//! template (up to [`MAX_GROUPS`] interleaved templates in one marker). Never folded: a line the
//! caller keeps (highlights and their blocks, `--highlight` matches), a line without a
//! template, a line whose template has one line in the whole output, the output's first and
//! last lines. A run of fewer than [`MIN_FOLDED`] lines per template it counts is shown instead:
//! its marker would cost more than the lines.

use super::{Learner, TemplateId};

/// Most templates one marker counts: test runners print each test as a cycle of a few line
/// shapes (node's TAP: 5), which one marker must cover whole, or it breaks into markers that
/// cost more than the lines.
pub const MAX_GROUPS: usize = 6;
/// Fewest lines a marker stands for, per template it counts: a marker quotes each template,
/// so it must hide more lines than it quotes.
pub const MIN_FOLDED: u64 = 3;
/// Most templates remembered as shown since the last line that breaks folding: a bound on the
/// planner's state, not on what folds (a template shown before it was forgotten is shown again).
const MAX_SHOWN: usize = 16;

/// One line given to the planner: its number in the output and the template the learner gave
/// it. The lines given are in order; where their numbers jump (a head and a tail), no fold
/// spans the gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineTemplate {
    pub line: u64,
    pub template: Option<TemplateId>,
}

/// The lines of one template in a fold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldGroup {
    pub template: TemplateId,
    /// The template's text, variable fields as `<*>`.
    pub text: String,
    /// How many of the fold's lines are of this template.
    pub count: u64,
    /// The shown line of the template that the fold follows.
    pub shown_line: u64,
}

/// Lines `first..=last`, all folded into one marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fold {
    pub first: u64,
    pub last: u64,
    /// In the order their templates first appear in the range; counts add up to the range.
    pub groups: Vec<FoldGroup>,
}

impl Fold {
    /// How many lines it hides.
    pub fn lines(&self) -> u64 {
        self.last - self.first + 1
    }
}

/// The folds of `lines` (see the module's rules): `total_lines` is the output's number of lines,
/// `keep` says which lines must be shown.
pub fn plan_folds(
    lines: &[LineTemplate],
    learner: &Learner,
    total_lines: u64,
    keep: &dyn Fn(u64) -> bool,
) -> Vec<Fold> {
    let mut planner = Planner::default();
    let mut previous: Option<u64> = None;
    for line in lines {
        if previous.is_some_and(|p| p + 1 != line.line) {
            planner.break_here(learner);
        }
        previous = Some(line.line);
        match foldable(line, learner, total_lines, keep) {
            Some(id) => planner.offer(line.line, id, learner),
            None => planner.break_here(learner),
        }
    }
    planner.break_here(learner);
    planner.folds
}

/// The template a line may fold into, or `None` when a rule keeps it shown.
fn foldable(
    line: &LineTemplate,
    learner: &Learner,
    total_lines: u64,
    keep: &dyn Fn(u64) -> bool,
) -> Option<TemplateId> {
    let id = line.template?;
    let shown_anyway = line.line <= 1 || line.line >= total_lines || keep(line.line);
    let template = learner.template(id)?;
    (!shown_anyway && template.count() > 1).then_some(id)
}

#[derive(Debug, Default)]
struct Planner {
    /// Templates with a shown line since the last break: (template, that line).
    shown: Vec<(TemplateId, u64)>,
    /// The run being folded: its first line, and per template its count.
    run: Option<(u64, Vec<(TemplateId, u64)>)>,
    /// The last line offered.
    last: u64,
    folds: Vec<Fold>,
}

impl Planner {
    /// A line that may fold: into the run when its template was shown since the last break and
    /// the run has room for it; else it is shown, and closes the run.
    fn offer(&mut self, line: u64, id: TemplateId, learner: &Learner) {
        let was_shown = self.shown.iter().any(|(t, _)| *t == id);
        let room = self.run.as_ref().is_none_or(|(_, groups)| {
            groups.len() < MAX_GROUPS || groups.iter().any(|(t, _)| *t == id)
        });
        if was_shown && room {
            let (_, groups) = self.run.get_or_insert_with(|| (line, Vec::new()));
            match groups.iter_mut().find(|(t, _)| *t == id) {
                Some((_, count)) => *count += 1,
                None => groups.push((id, 1)),
            }
        } else {
            self.close_run(learner);
            self.shown.retain(|(t, _)| *t != id);
            if self.shown.len() == MAX_SHOWN {
                self.shown.remove(0);
            }
            self.shown.push((id, line));
        }
        self.last = line;
    }

    /// A line that must be shown, or a gap in the lines: closes the run and forgets what was
    /// shown, so the next fold follows a shown line of its own template again.
    fn break_here(&mut self, learner: &Learner) {
        self.close_run(learner);
        self.shown.clear();
    }

    /// Ends the run: a fold when it is long enough, else its lines are shown (and count as
    /// shown lines of their templates, which they already are).
    fn close_run(&mut self, learner: &Learner) {
        let Some((first, groups)) = self.run.take() else {
            return;
        };
        if self.last + 1 - first < MIN_FOLDED * groups.len() as u64 {
            return;
        }
        let groups = groups
            .into_iter()
            .filter_map(|(template, count)| {
                let shown_line = self.shown.iter().find(|(t, _)| *t == template)?.1;
                Some(FoldGroup {
                    template,
                    text: learner.template(template)?.text(),
                    count,
                    shown_line,
                })
            })
            .collect();
        self.folds.push(Fold {
            first,
            last: self.last,
            groups,
        });
    }
}
