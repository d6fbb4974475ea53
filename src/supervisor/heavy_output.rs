//! What a run that writes a lot is given beyond the defaults, each from a budget shared by
//! all runs: a wider pipe (`--no-tty`) and larger reads.
//!
//! Both cost memory or a resource of the user's for as long as the run lasts, so both are
//! handed out only while a slot of their budget is free; a run beyond the budget keeps the
//! defaults, which are correct, only slower.
//!
//! - A `--no-tty` run's pipe is widened to [`WIDE_PIPE`] (as many at a time as
//!   [`WIDE_PIPES`]): a command then writes on without waiting for the reader, and the reader
//!   wakes once per megabyte rather than per 64 KiB.
//! - A run whose read fills the reader's [`READ_CHUNK`] buffer (more was waiting) is read in
//!   [`LARGE_READ`]s from then on (as many runs at a time as [`LARGE_READERS`]). The engine
//!   has a fixed cost per read (the capture's and the outline's tails, the hand-off to the
//!   spill writer), which a quarter as many reads pays a quarter as often: 256 MiB through
//!   `run --no-tty -- cat` took 0.49 s with 64 KiB reads and 0.40 s with 256 KiB ones. But a
//!   read's size is also the size of every buffer the batch passes through (the read, the
//!   normaliser's output, the batch in the spill writer's hands and its spare), so sixteen
//!   runs in flight all reading 256 KiB held 10 MiB more than with 64 KiB. Four large readers
//!   cost at most 3 MiB more; a single heavy build, the common case, always gets one.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::supervisor::pty::Output;

/// Size of each read from a run's output, to begin with.
pub(super) const READ_CHUNK: usize = 64 * 1024;

/// Size of each read once a read has filled [`READ_CHUNK`] and a large reader's slot was free.
pub(super) const LARGE_READ: usize = 256 * 1024;

/// Most runs read in [`LARGE_READ`]s at once.
pub const LARGE_READERS: usize = 4;

/// What a `--no-tty` run's pipe is widened to: the most an unprivileged user may ask for by
/// default (`/proc/sys/fs/pipe-max-size`).
pub const WIDE_PIPE: usize = 1 << 20;

/// Most wide pipes at once. A user's pipes share a budget of pages (by default 64 MiB,
/// `/proc/sys/fs/pipe-user-pages-soft`): past it every new pipe of that user, spillway's or
/// not, gets only a page or two. Sixteen take a quarter; a run beyond them keeps the
/// kernel's 64 KiB.
pub const WIDE_PIPES: usize = 16;

/// A number of slots shared by every run.
struct Budget {
    in_use: AtomicUsize,
    slots: usize,
}

impl Budget {
    const fn new(slots: usize) -> Budget {
        Budget {
            in_use: AtomicUsize::new(0),
            slots,
        }
    }

    /// A slot, if one is free.
    fn take(&'static self) -> Option<Slot> {
        self.in_use
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.slots).then_some(n + 1)
            })
            .ok()?;
        Some(Slot { budget: self })
    }
}

/// One slot of a [`Budget`], given back when dropped.
pub(super) struct Slot {
    budget: &'static Budget,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.budget.in_use.fetch_sub(1, Ordering::AcqRel);
    }
}

static WIDE_PIPE_BUDGET: Budget = Budget::new(WIDE_PIPES);
static LARGE_READ_BUDGET: Budget = Budget::new(LARGE_READERS);

/// Widens `output` if it is a pipe and one of the wide pipes is free; the slot is held for as
/// long as the pipe is read.
pub(super) fn widen_pipe(output: &Output) -> Option<Slot> {
    let slot = WIDE_PIPE_BUDGET.take()?;
    output.grow_pipe(WIDE_PIPE).map(|_| slot)
}

/// One of the large readers' slots, if one is free.
pub(super) fn large_reader() -> Option<Slot> {
    LARGE_READ_BUDGET.take()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervisor::pty::{Channel, open_pipe};

    #[test]
    fn no_more_pipes_are_widened_at_once_than_the_budget() {
        let pipes: Vec<Channel> = (0..=WIDE_PIPES).map(|_| open_pipe().unwrap()).collect();
        let taken: Vec<Option<Slot>> = pipes.iter().map(|c| widen_pipe(&c.output)).collect();
        // Other tests' runs may hold some meanwhile, so only the bound is certain.
        assert!(
            taken.iter().any(Option::is_none),
            "one more than the budget"
        );
        assert!(WIDE_PIPE_BUDGET.in_use.load(Ordering::Acquire) <= WIDE_PIPES);
    }

    #[test]
    fn a_budget_s_slots_come_back_when_dropped() {
        static BUDGET: Budget = Budget::new(2);
        let first = BUDGET.take().expect("a free slot");
        let second = BUDGET.take().expect("a second free slot");
        assert!(BUDGET.take().is_none(), "no third slot");
        drop(first);
        let third = BUDGET.take().expect("the first slot, given back");
        assert_eq!(BUDGET.in_use.load(Ordering::Acquire), 2);
        drop((second, third));
        assert_eq!(BUDGET.in_use.load(Ordering::Acquire), 0);
    }
}
