//! When a waiter in line reads the lock item next: from its place, and from how long holders hold
//! the lock.
//!
//! The period is a quarter of the backoff's first bound (5 ms by default). The waiter at place
//! `p` (0: first) waits `p + 1` periods, at most the backoff's largest delay: the first in line
//! reads every period, so a lock handed to it waits at most a period and a read; the waiters
//! behind it, who cannot be granted before it, read less often the further back they are.
//!
//! Where the item says how long holds and turns take (the line's figures, smoothed means that
//! each hand-over writes, see [`timing`](super::timing)), reads before the grant can come are
//! spared: the waiter at place `p` is granted once the current holder's turn and the turns of the
//! `p` waiters before it are over, counted from when the current holder's turn began
//! ([`holder_start`]: its `AcquiredAt` by the waiter's clock, kept within the looks that saw the
//! holder change, so no later than it can have been). It reads when its grant is likely there
//! ([`Turns`]), and after that the first in line every half period (its grant is due), the others
//! by their place.
//!
//! An earlier schedule estimated each turn's length from how fast the line had moved and slept
//! until the waiter's turn was due. It was not stable: a turn measured over a slow stretch of the
//! line made the next waiters sleep through their grants, which slowed the line further (a
//! benchmark run saw the hand-off gap's p99 go from 11 to 207 ms). Here a turn counts for no more
//! than a turn of a mean hold takes at the most, and one slow turn moves the mean by a quarter.

use super::timing::LineTiming;
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

    /// The delay before the next read, after a read at `now` found the waiter at `place`, with
    /// the current holder holding since `holder_since` (see [`holder_start`]) and the line's
    /// figures `turns` (see [`Turns`]).
    ///
    /// The waiter at place `n` reads when its grant is likely there: after the current holder's
    /// turn and `n` turns more ([`Turns::due`]). Then the first in line reads every half period
    /// (its grant is due), the others by their place.
    pub(crate) fn next_with_turns(
        &self,
        place: usize,
        turns: Turns,
        holder_since: Instant,
        now: Instant,
    ) -> Duration {
        // Figures too large for the clock (a corrupt item) read after the longest delay.
        let due = holder_since
            .checked_add(turns.due(self, place))
            .map_or(self.max, |at| at.saturating_duration_since(now));
        let after_due = match place {
            // The first in line, its grant due: every half period.
            0 => self.period / 2,
            _ => self.next(place),
        };
        due.max(after_due).min(self.max)
    }
}

/// What a waiter knows of how long a turn of the lock takes: the line's figures ([`LineTiming`]:
/// the holds' mean, the whole turns' mean and deviation) and this waiter's own round trip to the
/// table.
///
/// A turn is a hold and a hand-over: the grant's trip to the table, then the new holder's
/// discovery of it, a read sent after the grant, a round trip. The hand-over depends on the
/// waiters' own reads, which is why a schedule taken from whole turns alone can feed on its own
/// delays (a waiter reading late makes the turn longer, and the next waiters read later): a
/// turn counts here for no more than a turn of a mean hold takes at the most, and the current
/// holder's turn by the holds alone.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Turns {
    /// The line's figures, as the last hand-over wrote them.
    pub(crate) timing: LineTiming,
    /// This waiter's last request's round trip.
    pub(crate) round_trip: Duration,
}

impl Turns {
    /// The round trip, a slow one counting no more than a period.
    fn round_trip(&self, pace: &Pace) -> Duration {
        self.round_trip.min(pace.period)
    }

    /// A turn of a mean hold at the most it takes: the hold, the grant's trip and the read's
    /// round trip, and a period for when the holder's read found its grant (up to half a period
    /// after it) and the scheduler's delays.
    fn of_a_mean_hold(&self, pace: &Pace) -> Duration {
        let round_trip = self.round_trip(pace);
        self.timing
            .hold
            .saturating_add(pace.period + round_trip + round_trip / 2)
    }

    /// When the grant to the waiter at `place` is likely there, from the current holder's
    /// start: the current holder's turn of a mean hold and `place` turns of the turns' mean
    /// (each at most a turn of a mean hold), less twice the turns' deviation for those `place +
    /// 1` turns' spread (the square root of their number; half a period of it is allowed for
    /// already): where turns vary, the waiters read earlier, and the first in line then reads
    /// every half period.
    fn due(&self, pace: &Pace, place: usize) -> Duration {
        let most = self.of_a_mean_hold(pace);
        let turn = self.timing.turn.min(most);
        let places = u32::try_from(place).unwrap_or(u32::MAX);
        let width = f64::from(places.saturating_add(1)).sqrt();
        let spread = Duration::try_from_secs_f64(self.timing.turn_dev.as_secs_f64() * 2.0 * width)
            .unwrap_or(Duration::MAX)
            .saturating_sub(pace.period / 2);
        most.saturating_add(turn.saturating_mul(places))
            .saturating_sub(spread)
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

    fn turns(hold: u64, turn: u64, turn_dev: u64, round_trip: u64) -> Turns {
        Turns {
            timing: LineTiming {
                hold: ms(hold),
                turn: ms(turn),
                turn_dev: ms(turn_dev),
            },
            round_trip: ms(round_trip),
        }
    }

    #[test]
    fn a_waiter_reads_when_the_turns_before_its_own_grant_would_end() {
        let pace = pace();
        let now = Instant::now();
        let since = now - ms(15);
        // Holds of 40 ms, round trips of 2: the holder's turn takes at most 40 + 5 + 2 + 1 ms,
        // ending 33 ms from now, when the first in line reads.
        let steady = turns(40, 44, 0, 2);
        assert_eq!(pace.next_with_turns(0, steady, since, now), ms(33));
        // The fourth in line: its grant after that turn and three of 44 ms.
        assert_eq!(pace.next_with_turns(3, steady, since, now), ms(33 + 3 * 44));
        // A turn's mean counts for no more than a turn of a mean hold at the most (48 ms).
        let slow = turns(40, 90, 0, 2);
        assert_eq!(pace.next_with_turns(0, slow, since, now), ms(33));
        assert_eq!(pace.next_with_turns(3, slow, since, now), ms(33 + 3 * 48));
        // A slow round trip counts for a period at most.
        let slow_trip = turns(40, 44, 0, 50);
        assert_eq!(
            pace.next_with_turns(0, slow_trip, since, now),
            ms(40 + 5 + 5 - 15) + ms(5) / 2
        );
    }

    #[test]
    fn where_turns_vary_a_waiter_reads_earlier_by_twice_their_spread() {
        let pace = pace();
        let now = Instant::now();
        let since = now - ms(15);
        // A deviation of 4 ms: the first in line reads 2 x 4 ms early, less the half period the
        // schedule allows for already.
        let varying = turns(40, 44, 4, 2);
        assert_eq!(
            pace.next_with_turns(0, varying, since, now),
            ms(33) - (ms(8) - ms(5) / 2)
        );
        // The fourth in line: four turns' spread, twice as wide as one turn's.
        assert_eq!(
            pace.next_with_turns(3, varying, since, now),
            ms(33 + 3 * 44) - (ms(16) - ms(5) / 2)
        );
        // A deviation within the half period moves nothing.
        let jitter = turns(40, 44, 1, 2);
        assert_eq!(pace.next_with_turns(0, jitter, since, now), ms(33));
    }

    #[test]
    fn once_due_the_first_in_line_reads_every_half_period_the_others_by_their_place() {
        let pace = pace();
        let now = Instant::now();
        let since = now - ms(15);
        let short = turns(1, 4, 0, 1);
        assert_eq!(pace.next_with_turns(0, short, since, now), ms(5) / 2);
        assert_eq!(pace.next_with_turns(3, short, since, now), ms(20));
        // Holds that vary more than they last: due at once.
        let wild = turns(40, 44, 40, 2);
        assert_eq!(pace.next_with_turns(0, wild, since, now), ms(5) / 2);
        // Never longer than the backoff's maximum.
        let long = turns(40, 60, 0, 2);
        assert_eq!(pace.next_with_turns(30, long, since, now), ms(500));
    }

    #[test]
    fn figures_too_large_for_the_clock_read_after_the_longest_delay() {
        let pace = pace();
        let now = Instant::now();
        let since = now - ms(15);
        let huge = |hold, turn, turn_dev| Turns {
            timing: LineTiming {
                hold,
                turn,
                turn_dev,
            },
            round_trip: ms(2),
        };
        let endless = huge(Duration::MAX, Duration::MAX, Duration::ZERO);
        assert_eq!(pace.next_with_turns(0, endless, since, now), ms(500));
        assert_eq!(pace.next_with_turns(7, endless, since, now), ms(500));
        // A deviation without bounds: due at once.
        let wild = huge(ms(40), ms(44), Duration::MAX);
        assert_eq!(pace.next_with_turns(0, wild, since, now), ms(5) / 2);
        assert_eq!(pace.next_with_turns(3, wild, since, now), ms(20));
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
