//! The token counts of ended runs, taken after their `exit` has been given.
//!
//! Counting a run's output and preview in o200k tokens, for the token accounting, took longer
//! than everything else its end did (at 13-21 MB/s: 7 ms for the 14 KB of `seq 3000`, 50 ms
//! for 170 KB; it is some four times as fast since), and nothing the run's client is told
//! needs it. So a run's end is recorded and its
//! `exit` given first, and its tokens are counted and recorded after. What reads the token
//! accounting (`history`, `stats`) waits first for the counts of the runs that had ended when
//! it asked, so a client that was told its run ended still finds the run's tokens there; a
//! shutdown waits for them too.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;

/// Longest a reader of the token accounting waits for the counts ahead of it: an exact count
/// (of 1 MiB at most) takes a tenth of a second, an estimate a hundredth.
pub(super) const SETTLE_PATIENCE: Duration = Duration::from_secs(5);

/// The counts under way, by ticket.
#[derive(Debug)]
pub(super) struct TokenCounts {
    next: AtomicU64,
    pending: watch::Sender<BTreeSet<u64>>,
}

impl TokenCounts {
    pub(super) fn new() -> TokenCounts {
        TokenCounts {
            next: AtomicU64::new(0),
            pending: watch::Sender::new(BTreeSet::new()),
        }
    }

    /// Notes a count about to start; it is over when the ticket is dropped.
    pub(super) fn start(&self) -> Ticket<'_> {
        let number = self.next.fetch_add(1, Ordering::SeqCst);
        self.pending.send_modify(|pending| {
            pending.insert(number);
        });
        Ticket {
            counts: self,
            number,
        }
    }

    /// Waits until every count started before this call (not before the future is first
    /// polled) is over, at most `patience`; says whether they all were.
    pub(super) fn settled(&self, patience: Duration) -> impl Future<Output = bool> + use<> {
        let before = self.next.load(Ordering::SeqCst);
        let mut pending = self.pending.subscribe();
        async move {
            let over = pending.wait_for(|pending| pending.range(..before).next().is_none());
            matches!(tokio::time::timeout(patience, over).await, Ok(Ok(_)))
        }
    }
}

/// A count under way ([`TokenCounts::start`]).
pub(super) struct Ticket<'a> {
    counts: &'a TokenCounts,
    number: u64,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.counts.pending.send_modify(|pending| {
            pending.remove(&self.number);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_reader_waits_for_the_counts_started_before_it_and_no_later_one() {
        let counts = TokenCounts::new();
        assert!(counts.settled(Duration::ZERO).await, "nothing under way");
        let first = counts.start();
        let second = counts.start();
        assert!(!counts.settled(Duration::from_millis(20)).await);
        // Ended out of order: the reader waits for both.
        drop(second);
        assert!(!counts.settled(Duration::from_millis(20)).await);
        let waiting = counts.settled(Duration::from_secs(10));
        let later = counts.start();
        drop(first);
        assert!(
            waiting.await,
            "a count started after it asked is not waited for"
        );
        drop(later);
        assert!(counts.settled(Duration::ZERO).await);
    }
}
