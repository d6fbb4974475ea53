//! The budget a cut preview's whole text is held to: `--max-lines`, `--max-bytes` and
//! `--max-tokens` bound everything the reader gets, the preview's own markers and notice
//! included, because a host that cuts at its own cap would otherwise cut spillway's preview
//! again (and lose its notice, the one part that says how to read on).
//!
//! The notice's size depends on what is shown (the ranges it names, the line to read on from),
//! so the shown lines are chosen first within the whole limits, and the choice is made again
//! within the limits less what the text went over, until it fits.

use crate::engine::capture::Limits;
use crate::protocol::LimitKind;

/// How many lines, bytes and (when counted) model tokens the shown lines may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Budget {
    pub(super) lines: usize,
    pub(super) bytes: usize,
    pub(super) tokens: Option<usize>,
}

/// How far a text is over each part of a budget (0 where it is within).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Over {
    lines: usize,
    bytes: usize,
    tokens: usize,
}

impl Budget {
    /// The whole limits.
    pub(super) fn of(limits: Limits, max_tokens: Option<usize>) -> Budget {
        Budget {
            lines: limits.max_lines(),
            bytes: limits.max_bytes(),
            tokens: max_tokens,
        }
    }

    /// How far `text` is over this budget, or `None` when it is within every part.
    pub(super) fn over(&self, text: &str) -> Option<Over> {
        let lines = text.lines().count();
        let tokens = self
            .tokens
            .map_or(0, |n| crate::engine::tokens::count(text).saturating_sub(n));
        let over = Over {
            lines: lines.saturating_sub(self.lines),
            bytes: text.len().saturating_sub(self.bytes),
            tokens,
        };
        (over != Over::default()).then_some(over)
    }

    /// The larger share of its line or byte limit `text` takes.
    pub(super) fn share(&self, text: &str) -> f64 {
        let share = |used: usize, of: usize| used as f64 / of.max(1) as f64;
        share(text.lines().count(), self.lines).max(share(text.len(), self.bytes))
    }

    /// This budget in the parts `over` went over, `bigger`'s in the others: a text within a
    /// part says nothing against a bigger one (a smaller budget elsewhere can drop a highlight
    /// and its notice line, and leave lines to spare).
    pub(super) fn where_over(&self, over: Over, bigger: &Budget) -> Budget {
        let pick = |part: usize, over: usize, bigger: usize| if over > 0 { part } else { bigger };
        Budget {
            lines: pick(self.lines, over.lines, bigger.lines),
            bytes: pick(self.bytes, over.bytes, bigger.bytes),
            tokens: match (self.tokens, bigger.tokens) {
                (Some(n), Some(b)) => Some(pick(n, over.tokens, b)),
                (tokens, _) => tokens,
            },
        }
    }

    /// This budget less `over`; `None` when that would leave a part under `floor`'s, or
    /// changes nothing.
    pub(super) fn less(&self, over: Over, floor: &Budget) -> Option<Budget> {
        let left = Budget {
            lines: self.lines.saturating_sub(over.lines),
            bytes: self.bytes.saturating_sub(over.bytes),
            tokens: self.tokens.map(|n| n.saturating_sub(over.tokens)),
        };
        let next = left.zip_with(floor, |left, floor| (left >= floor).then_some(left))?;
        (next != *self).then_some(next)
    }

    /// Half of each limit: limits whose text is over them by more than that (the preview's
    /// own lines, a few lines and a few hundred bytes, take more than half) leave the output
    /// the limits themselves, and the notice comes on top, as a notice around one shown byte
    /// helps nobody.
    pub(super) fn floor(&self) -> Budget {
        Budget {
            lines: self.lines.div_ceil(2),
            bytes: self.bytes.div_ceil(2),
            tokens: self.tokens.map(|n| n.div_ceil(2)),
        }
    }

    /// The budget halfway from this one to `bigger`, or `None` when no part is two or more
    /// apart (nothing left to win).
    pub(super) fn towards(&self, bigger: &Budget) -> Option<Budget> {
        let mid = |a: usize, b: usize| Some(if b > a + 1 { a + (b - a) / 2 } else { a });
        let next = self.zip_with(bigger, mid)?;
        (next != *self).then_some(next)
    }

    /// The least a budget of these limits can be: two lines and two bytes (the first and the
    /// last line of a `both` preview, in part at worst) and one token, or the limits
    /// themselves when they are less.
    pub(super) fn least(&self) -> Budget {
        Budget {
            lines: self.lines.min(2),
            bytes: self.bytes.min(2),
            tokens: self.tokens.map(|n| n.min(1)),
        }
    }

    /// Each part of this budget and the same part of `other` through `part`, or `None` when
    /// `part` gives none for one of them. Tokens go through it only when both budgets count
    /// them; where only this one does, its own are kept. (Every budget of a preview is made
    /// from the same limits, so both count tokens or neither.)
    fn zip_with(
        &self,
        other: &Budget,
        part: impl Fn(usize, usize) -> Option<usize>,
    ) -> Option<Budget> {
        Some(Budget {
            lines: part(self.lines, other.lines)?,
            bytes: part(self.bytes, other.bytes)?,
            tokens: match (self.tokens, other.tokens) {
                (Some(a), Some(b)) => Some(part(a, b)?),
                (tokens, _) => tokens,
            },
        })
    }
}

impl Over {
    /// This much, `factor` times over.
    pub(super) fn times(self, factor: usize) -> Over {
        Over {
            lines: self.lines.saturating_mul(factor),
            bytes: self.bytes.saturating_mul(factor),
            tokens: self.tokens.saturating_mul(factor),
        }
    }

    /// The limit the text went furthest over, in proportion to the limit.
    pub(super) fn most(&self, limits: &Budget) -> LimitKind {
        let share = |over: usize, of: usize| over as f64 / of.max(1) as f64;
        let lines = share(self.lines, limits.lines);
        let bytes = share(self.bytes, limits.bytes);
        let tokens = limits.tokens.map_or(0.0, |n| share(self.tokens, n));
        if tokens > lines && tokens > bytes {
            LimitKind::Tokens
        } else if lines >= bytes {
            LimitKind::Lines
        } else {
            LimitKind::Bytes
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(lines: usize, bytes: usize, tokens: Option<usize>) -> Budget {
        Budget {
            lines,
            bytes,
            tokens,
        }
    }

    #[test]
    fn a_text_over_a_budget_says_by_how_much_in_each_part() {
        let b = budget(4, 20, None);
        assert_eq!(b.over("a\nb\n"), None);
        let over = b.over("a\nb\nc\nd\ne\n0123456789012345").unwrap();
        assert_eq!(
            over,
            Over {
                lines: 2,
                bytes: 6,
                tokens: 0
            }
        );
        assert_eq!(b.less(over, &b.floor()), Some(budget(2, 14, None)));
        assert_eq!(over.most(&b), LimitKind::Lines);
    }

    #[test]
    fn a_budget_never_leaves_the_output_less_than_half_a_limit() {
        let b = budget(10, 1000, None);
        let over = Over {
            lines: 6,
            bytes: 0,
            tokens: 0,
        };
        assert_eq!(
            b.less(over, &b.floor()),
            None,
            "4 lines of 10 left: the notice goes on top"
        );
        assert_eq!(b.less(over, &b.least()), Some(budget(4, 1000, None)));
        assert_eq!(budget(1, 5, Some(9)).least(), budget(1, 2, Some(1)));
        assert_eq!(
            budget(10, 100, None).towards(&budget(11, 200, None)),
            Some(budget(10, 150, None))
        );
        assert_eq!(budget(10, 100, None).towards(&budget(11, 101, None)), None);
        let tokens = budget(100, 1000, Some(30));
        let over = tokens.over(&"word ".repeat(100)).unwrap();
        assert_eq!(over.most(&tokens), LimitKind::Tokens);
        assert_eq!(tokens.less(over, &tokens.floor()), None);
        let small = over.times(0);
        assert_eq!(tokens.less(small, &tokens.least()), None, "nothing changes");
        let a_little = Over {
            lines: 0,
            bytes: 0,
            tokens: 5,
        };
        assert_eq!(
            tokens.less(a_little, &tokens.floor()).unwrap().tokens,
            Some(25)
        );
    }

    #[test]
    fn tokens_are_a_part_only_when_both_budgets_count_them() {
        let sum = |a: usize, b: usize| Some(a + b);
        let counted = budget(1, 2, Some(3));
        let uncounted = budget(10, 20, None);
        assert_eq!(counted.zip_with(&counted, sum), Some(budget(2, 4, Some(6))));
        assert_eq!(
            counted.zip_with(&uncounted, sum),
            Some(budget(11, 22, Some(3)))
        );
        assert_eq!(
            uncounted.zip_with(&counted, sum),
            Some(budget(11, 22, None))
        );
        let refused = |a: usize, _| (a < 3).then_some(a);
        assert_eq!(
            counted.zip_with(&counted, refused),
            None,
            "one part refused"
        );
    }
}
