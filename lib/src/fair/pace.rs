//! When a waiter in line reads the lock item next: from its place and how fast the line moves.
//!
//! The period is a quarter of the backoff's first bound (5 ms by default): how often the first
//! in line reads once its turn may have come, and the shortest delay. Until the line has moved,
//! the waiter at place `p` (0: first) waits `p + 1` periods. Once it has seen the line move, a
//! turn lasts about `turn` (the time since its first read over the places gained): the waiter at
//! place `p ≥ 1` waits `p` turns less half of one, and the first in line waits for the rest of
//! the holder's expected turn (a turn less what the holder has held) less one period, so that it
//! reads about as the holder releases. Every delay is at most the backoff's largest.

use crate::wait::backoff::BackoffBounds;
use std::time::Duration;
use tokio::time::Instant;

/// The reading schedule of one waiter.
#[derive(Debug)]
pub(crate) struct Pace {
    period: Duration,
    max: Duration,
    /// The first read: when, and the place it found.
    first: Option<(Instant, usize)>,
}

impl Pace {
    /// The schedule under `bounds`.
    pub(crate) fn new(bounds: BackoffBounds) -> Self {
        let period = (bounds.initial() / 4).max(Duration::from_millis(1));
        Pace {
            period,
            max: bounds.max().max(period),
            first: None,
        }
    }

    /// The delay before the next read, after a read sent `at` found the waiter at `place` and
    /// the holder holding for `held_for` (by the reader's clock, if it knows).
    pub(crate) fn next(
        &mut self,
        at: Instant,
        place: usize,
        held_for: Option<Duration>,
    ) -> Duration {
        let (first_at, first_place) = *self.first.get_or_insert((at, place));
        let gained = first_place.saturating_sub(place);
        let turn =
            (gained > 0).then(|| (at - first_at) / u32::try_from(gained).unwrap_or(u32::MAX));
        let places = u32::try_from(place).unwrap_or(u32::MAX);
        let delay = match (place, turn) {
            (0, Some(turn)) => turn
                .saturating_sub(held_for.unwrap_or_default())
                .saturating_sub(self.period),
            (_, Some(turn)) => turn.saturating_mul(places).saturating_sub(turn / 2),
            (_, None) => self.period.saturating_mul(places.saturating_add(1)),
        };
        delay.clamp(self.period, self.max)
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
    fn before_the_line_moves_the_nth_waits_n_plus_one_periods() {
        let start = Instant::now();
        assert_eq!(pace().next(start, 0, None), ms(5));
        assert_eq!(pace().next(start, 3, Some(ms(2))), ms(20));
        assert_eq!(pace().next(start, 1_000, None), ms(500));
        assert_eq!(pace().next(start, usize::MAX, None), ms(500));
    }

    #[test]
    fn once_the_line_moves_a_waiter_reads_about_when_its_turn_comes() {
        let start = Instant::now();
        let mut pace = pace();
        pace.next(start, 4, None);
        // Two places in 40 ms: a turn is 20 ms; two places ahead, it waits 40 - 10 ms.
        assert_eq!(pace.next(start + ms(40), 2, None), ms(30));
        // First in line after four places in 100 ms (a turn is 25 ms), the holder 6 ms into its
        // turn: read a period before its expected end, 25 - 6 - 5 ms.
        assert_eq!(pace.next(start + ms(100), 0, Some(ms(6))), ms(14));
        let mut pace = Pace::new(BackoffBounds::new(ms(20), ms(500)));
        pace.next(start, 1, None);
        assert_eq!(pace.next(start + ms(100), 0, Some(ms(10))), ms(85));
        // Past the expected end of the holder's turn: every period.
        assert_eq!(pace.next(start + ms(200), 0, Some(ms(250))), ms(5));
    }

    #[test]
    fn no_delay_exceeds_the_backoff_maximum() {
        let start = Instant::now();
        let mut pace = pace();
        pace.next(start, 100, None);
        assert_eq!(
            pace.next(start + Duration::from_secs(60), 99, None),
            ms(500)
        );
    }
}
