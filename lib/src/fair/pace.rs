//! When a waiter in line reads the lock item next: from its place, and from how long holders hold
//! the lock.
//!
//! The period is a quarter of the backoff's first bound (5 ms by default). The waiter at place
//! `p` (0: first) waits `p + 1` periods, at most the backoff's largest delay: the first in line
//! reads every period, so a lock handed to it waits at most a period and a read; the waiters
//! behind it, who cannot be granted before it, read less often the further back they are.
//!
//! Where the item says how long the last holder held the lock (`HoldMs`, written by the hand-over
//! that ended its hold, see [`lines_seen`](crate::lines_seen)), reads before the grant can come
//! are spared: the waiter at place `p ≥ 1` cannot be granted before `p` holders have held the lock
//! (it waits at least three quarters of `p` holds), and the first in line, if it saw the current
//! holder's grant happen (between two of its reads), reads first when that holder's hold, as long
//! as the last one, would end, counted from the earlier of the two reads, so never later than it
//! could end. After that it reads every period. `HoldMs` is the application's own hold, measured
//! by the holders, with no waiter's delay in it, so this cannot feed on itself.
//!
//! An earlier schedule estimated each turn's length from how fast the line had moved and slept
//! until the waiter's turn was due. It was not stable: a turn measured over a slow stretch of the
//! line made the next waiters sleep through their grants, which slowed the line further (a
//! benchmark run saw the hand-off gap's p99 go from 11 to 207 ms).

use crate::wait::backoff::BackoffBounds;
use std::time::Duration;
use tokio::time::Instant;

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

    /// The delay before the next read, after a read found the waiter at `place`, by the place
    /// alone.
    pub(crate) fn next(&self, place: usize) -> Duration {
        let places = u32::try_from(place).unwrap_or(u32::MAX);
        self.period
            .saturating_mul(places.saturating_add(1))
            .clamp(self.period, self.max)
    }

    /// The delay before the next read, after a read at `now` found the waiter at `place` and the
    /// last holder's hold `hold` long; `holder_since`, when the waiter saw the current holder's
    /// grant happen, is the send of the last read before it.
    pub(crate) fn next_with_holds(
        &self,
        place: usize,
        hold: Duration,
        holder_since: Option<Instant>,
        now: Instant,
    ) -> Duration {
        let by_place = self.next(place);
        let held = match place {
            0 => holder_since
                .map(|since| (since + hold).saturating_duration_since(now))
                .unwrap_or_default(),
            _ => {
                let places = u32::try_from(place).unwrap_or(u32::MAX);
                hold.saturating_mul(places).saturating_mul(3) / 4
            }
        };
        by_place.max(held).min(self.max)
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
    fn the_waiters_behind_the_first_wait_three_quarters_of_a_hold_per_place() {
        let pace = pace();
        let now = Instant::now();
        assert_eq!(pace.next_with_holds(1, ms(40), None, now), ms(30));
        assert_eq!(pace.next_with_holds(4, ms(40), None, now), ms(120));
        // Never sooner than by the place, never longer than the backoff's maximum.
        assert_eq!(pace.next_with_holds(3, ms(1), None, now), ms(20));
        assert_eq!(pace.next_with_holds(30, ms(40), None, now), ms(500));
    }

    #[test]
    fn the_first_reads_when_the_holders_hold_would_end() {
        let pace = pace();
        let now = Instant::now();
        let since = now - ms(15);
        assert_eq!(pace.next_with_holds(0, ms(40), Some(since), now), ms(25));
        // Due already, or the holder's grant not seen: every period.
        assert_eq!(pace.next_with_holds(0, ms(10), Some(since), now), ms(5));
        assert_eq!(pace.next_with_holds(0, ms(40), None, now), ms(5));
    }

    #[test]
    fn a_tiny_backoff_still_waits_a_millisecond() {
        let pace = Pace::new(BackoffBounds::new(ms(1), ms(1)));
        assert_eq!(pace.next(0), ms(1));
        assert_eq!(pace.next(5), ms(1));
    }
}
