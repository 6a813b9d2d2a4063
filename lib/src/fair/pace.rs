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
//! are spared: the waiter at place `p` cannot be granted before the current holder and the `p`
//! waiters before it have held the lock, each (by the last hold) `HoldMs`, counted from when the
//! current holder's hold began ([`holder_start`]: its `AcquiredAt` by the waiter's clock, kept
//! within the looks that saw the holder change, so no later than it can have been). It reads
//! then, and after that the first in line every half period (its grant is due), the others by
//! their place. `HoldMs` is the application's own hold, measured
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

    /// The delay before the next read, after a read at `now` found the waiter at `place`, the
    /// last holder's hold `hold` long, and the current holder holding since `holder_since` (see
    /// [`holder_start`]): the waiter's grant cannot come before `place + 1` holds from then.
    pub(crate) fn next_with_holds(
        &self,
        place: usize,
        hold: Duration,
        holder_since: Instant,
        now: Instant,
    ) -> Duration {
        let holds = u32::try_from(place).unwrap_or(u32::MAX).saturating_add(1);
        let due = (holder_since + hold.saturating_mul(holds)).saturating_duration_since(now);
        let after_due = match place {
            // The first in line, its grant due: every half period.
            0 => self.period / 2,
            _ => self.next(place),
        };
        due.max(after_due).min(self.max)
    }
}

/// When the current holder's hold began, at the latest it can have: its `AcquiredAt`, `ago` before
/// now by this client's wall clock, kept within what the waiter saw, after its look before the one
/// that first showed this holder (`earliest`, if that look showed another) and before the look
/// that first showed it (`latest`). A clock skewed from the granter's moves it only within those.
pub(crate) fn holder_start(
    ago: Option<Duration>,
    earliest: Option<Instant>,
    latest: Instant,
    now: Instant,
) -> Instant {
    let by_clock = ago.map_or(latest, |ago| now.checked_sub(ago).unwrap_or(latest));
    let start = by_clock.min(latest);
    earliest.map_or(start, |earliest| start.max(earliest))
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
    fn a_waiter_reads_when_the_holds_before_its_own_would_end() {
        let pace = pace();
        let now = Instant::now();
        let since = now - ms(15);
        // The holder's hold ends 25 ms from now; the first in line reads then.
        assert_eq!(pace.next_with_holds(0, ms(40), since, now), ms(25));
        // The fourth in line: the holder's and three more holds.
        assert_eq!(pace.next_with_holds(3, ms(40), since, now), ms(145));
        // Due already: the first every half period, the others by their place.
        assert_eq!(pace.next_with_holds(0, ms(10), since, now), ms(5) / 2);
        assert_eq!(pace.next_with_holds(3, ms(1), since, now), ms(20));
        // Never longer than the backoff's maximum.
        assert_eq!(pace.next_with_holds(30, ms(40), since, now), ms(500));
    }

    #[test]
    fn a_holders_start_by_its_clock_stays_within_what_the_waiter_saw() {
        let now = Instant::now();
        let (earliest, latest) = (now - ms(30), now - ms(10));
        // By the clock, within the two looks: taken.
        assert_eq!(
            holder_start(Some(ms(20)), Some(earliest), latest, now),
            now - ms(20)
        );
        // A clock that says earlier than the look before, or later than the look that showed
        // it, is held to them.
        assert_eq!(
            holder_start(Some(ms(90)), Some(earliest), latest, now),
            earliest
        );
        assert_eq!(
            holder_start(Some(ms(1)), Some(earliest), latest, now),
            latest
        );
        // Its grant not seen: no earliest.
        assert_eq!(holder_start(Some(ms(90)), None, latest, now), now - ms(90));
        assert_eq!(holder_start(None, None, latest, now), latest);
    }

    #[test]
    fn a_tiny_backoff_still_waits_a_millisecond() {
        let pace = Pace::new(BackoffBounds::new(ms(1), ms(1)));
        assert_eq!(pace.next(0), ms(1));
        assert_eq!(pace.next(5), ms(1));
    }
}
