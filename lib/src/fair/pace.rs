//! When a waiter in line reads the lock item next: from its place alone.
//!
//! The period is a quarter of the backoff's first bound (5 ms by default). The waiter at place
//! `p` (0: first) waits `p + 1` periods, at most the backoff's largest delay: the first in line
//! reads every period, so a lock handed to it waits at most a period and a read; the waiters
//! behind it, who cannot be granted before it, read less often the further back they are.
//!
//! An earlier schedule estimated each turn's length from how fast the line had moved and slept
//! until the waiter's turn was due. It was not stable: a turn measured over a slow stretch of the
//! line made the next waiters sleep through their grants, which slowed the line further (a
//! benchmark run saw the hand-off gap's p99 go from 11 to 207 ms). A schedule that depends on
//! the place alone cannot feed on itself.

use crate::wait::backoff::BackoffBounds;
use std::time::Duration;

/// The reading schedule of one waiter.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pace {
    period: Duration,
    max: Duration,
}

impl Pace {
    /// The schedule under `bounds`.
    pub(crate) fn new(bounds: BackoffBounds) -> Self {
        let period = (bounds.initial() / 4).max(Duration::from_millis(1));
        Pace {
            period,
            max: bounds.max().max(period),
        }
    }

    /// The delay before the next read, after a read found the waiter at `place`.
    pub(crate) fn next(&self, place: usize) -> Duration {
        let places = u32::try_from(place).unwrap_or(u32::MAX);
        self.period
            .saturating_mul(places.saturating_add(1))
            .clamp(self.period, self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn pace() -> Pace {
        Pace::new(BackoffBounds::new(ms(20), ms(500)))
    }

    #[test]
    fn the_nth_in_line_waits_n_plus_one_periods() {
        let pace = pace();
        assert_eq!(pace.next(0), ms(5));
        assert_eq!(pace.next(1), ms(10));
        assert_eq!(pace.next(3), ms(20));
    }

    #[test]
    fn no_delay_exceeds_the_backoff_maximum() {
        let pace = pace();
        assert_eq!(pace.next(99), ms(500));
        assert_eq!(pace.next(1_000), ms(500));
        assert_eq!(pace.next(usize::MAX), ms(500));
    }

    #[test]
    fn a_tiny_backoff_still_waits_a_millisecond() {
        let pace = Pace::new(BackoffBounds::new(ms(1), ms(1)));
        assert_eq!(pace.next(0), ms(1));
        assert_eq!(pace.next(5), ms(1));
    }
}
