//! The lines of one template, as ranges of consecutive line numbers, in bounded memory: a
//! template that keeps coming back between other lines would otherwise hold one range per
//! visit. Past [`MAX_RANGES`] ranges the list stops growing and says it is incomplete; the
//! template's count and last line stay exact.

/// Most ranges kept per template.
pub const MAX_RANGES: usize = 16;

/// A template's line numbers: the first [`MAX_RANGES`] ranges of consecutive lines, and whether
/// that is all of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineRanges {
    ranges: Vec<(u64, u64)>,
    complete: bool,
    last: u64,
}

impl LineRanges {
    /// The ranges of a template first seen at `line`.
    pub fn new(line: u64) -> LineRanges {
        LineRanges {
            ranges: vec![(line, line)],
            complete: true,
            last: line,
        }
    }

    /// Adds `line`, which comes after every line added so far.
    pub fn push(&mut self, line: u64) {
        self.last = line;
        if !self.complete {
            return;
        }
        let full = self.ranges.len() == MAX_RANGES;
        match self.ranges.last_mut() {
            Some(range) if range.1 + 1 == line => range.1 = line,
            _ if full => self.complete = false,
            _ => self.ranges.push((line, line)),
        }
    }

    /// The ranges kept, first to last, each inclusive.
    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges
    }

    /// Whether [`LineRanges::ranges`] holds every line of the template.
    pub fn complete(&self) -> bool {
        self.complete
    }

    /// The template's last line so far.
    pub fn last(&self) -> u64 {
        self.last
    }

    /// Heap bytes a full list takes: what the learner reserves for it.
    pub const fn reserved_bytes() -> usize {
        MAX_RANGES * std::mem::size_of::<(u64, u64)>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_lines_share_a_range_and_the_list_stops_at_its_cap() {
        let mut ranges = LineRanges::new(3);
        for line in [4, 5, 9, 11, 12] {
            ranges.push(line);
        }
        assert_eq!(ranges.ranges(), [(3, 5), (9, 9), (11, 12)]);
        assert!(ranges.complete());
        for i in 0..MAX_RANGES as u64 {
            ranges.push(20 + 2 * i);
        }
        assert_eq!(ranges.ranges().len(), MAX_RANGES);
        assert!(!ranges.complete());
        assert_eq!(ranges.last(), 20 + 2 * (MAX_RANGES as u64 - 1));
        // An incomplete list does not grow again, even by a consecutive line.
        let kept = ranges.ranges().to_vec();
        ranges.push(ranges.last() + 1);
        assert_eq!(ranges.ranges(), kept);
    }
}
