//! How long a fair lock's turns take, as its hand-overs record it in the lock item: a line's
//! memory of its holds and turns, smoothed as TCP smooths its round trips (RFC 6298).
//!
//! Each hand-over (a holder's release that grants the lock to the next in line) writes three
//! figures, in milliseconds: `HoldMs`, the holds' smoothed mean; `TurnMs`, the whole turns'
//! smoothed mean (a turn: from a holder's grant to the next grant, its hold and the hand-overs'
//! delays); `TurnDevMs`, the turns' smoothed mean deviation. A new figure counts for a quarter,
//! what the item held for three. The waiters time their reads by them ([`pace`](super::pace)):
//! one turn that runs long or short moves the schedule by a quarter of the difference, and a
//! lock whose turns vary reads earlier by their deviation instead of sleeping through its grants.

use crate::item::{Item, HOLD_MS, TURN_DEV_MS, TURN_MS};
use aws_sdk_dynamodb::types::AttributeValue;
use std::time::Duration;

/// The line's smoothed figures, as a hand-over writes them and a waiter reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LineTiming {
    /// The holds' smoothed mean (`HoldMs`).
    pub(crate) hold: Duration,
    /// The whole turns' smoothed mean (`TurnMs`).
    pub(crate) turn: Duration,
    /// The whole turns' smoothed mean deviation (`TurnDevMs`; zero where the item has none).
    pub(crate) turn_dev: Duration,
}

/// The share of a new figure: a quarter.
const GAIN: u32 = 4;

impl LineTiming {
    /// The figures `item` carries, if a hand-over wrote them.
    pub(crate) fn of(item: &Item) -> Option<Self> {
        Some(LineTiming {
            hold: millis_of(item, HOLD_MS)?,
            turn: millis_of(item, TURN_MS)?,
            turn_dev: millis_of(item, TURN_DEV_MS).unwrap_or(Duration::ZERO),
        })
    }

    /// The figures after a holder held the lock `hold` in a turn of `turn`, where the item
    /// carried `before`. The first turn is its own mean, with half of it as its deviation (as
    /// RFC 6298 starts a round trip's variance): a line knows nothing yet of how its turns vary.
    pub(crate) fn after(before: Option<Self>, hold: Duration, turn: Duration) -> Self {
        match before {
            None => LineTiming {
                hold,
                turn,
                turn_dev: turn / 2,
            },
            Some(before) => LineTiming {
                hold: smoothed(before.hold, hold),
                turn: smoothed(before.turn, turn),
                turn_dev: smoothed(before.turn_dev, turn.abs_diff(before.turn)),
            },
        }
    }

    /// Adds the figures to a hand-over's update: its `SET` clauses and their values.
    pub(crate) fn write(&self, set: &mut Vec<&'static str>, values: &mut Item) {
        set.extend([
            "#hold_ms = :hold_ms",
            "#turn_ms = :turn_ms",
            "#turn_dev_ms = :turn_dev_ms",
        ]);
        values.insert(":hold_ms".to_owned(), millis(self.hold));
        values.insert(":turn_ms".to_owned(), millis(self.turn));
        values.insert(":turn_dev_ms".to_owned(), millis(self.turn_dev));
    }
}

/// `mean` moved a quarter of the way to `sample`.
fn smoothed(mean: Duration, sample: Duration) -> Duration {
    if sample >= mean {
        mean + (sample - mean) / GAIN
    } else {
        mean - (mean - sample) / GAIN
    }
}

/// A figure in milliseconds to the microsecond: whole milliseconds would bias every mean down by
/// half of one, and the schedule by as much.
fn millis(d: Duration) -> AttributeValue {
    AttributeValue::N(format!("{:.3}", d.as_secs_f64() * 1000.0))
}

/// A figure `item` carries in milliseconds, if it does.
fn millis_of(item: &Item, name: &str) -> Option<Duration> {
    match item.get(name) {
        Some(AttributeValue::N(ms)) => ms
            .parse::<f64>()
            .ok()
            .and_then(|ms| Duration::try_from_secs_f64(ms / 1000.0).ok()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_first_turn_is_its_own_mean_with_half_of_it_as_deviation() {
        let first = LineTiming::after(None, ms(40), ms(46));
        assert_eq!(
            first,
            LineTiming {
                hold: ms(40),
                turn: ms(46),
                turn_dev: ms(23),
            }
        );
    }

    #[test]
    fn a_new_figure_counts_for_a_quarter() {
        let before = LineTiming {
            hold: ms(40),
            turn: ms(48),
            turn_dev: ms(4),
        };
        // A turn 20 ms longer: the means move 5, the deviation a quarter of the way to 20.
        let longer = LineTiming::after(Some(before), ms(60), ms(68));
        assert_eq!(longer.hold, ms(45));
        assert_eq!(longer.turn, ms(53));
        assert_eq!(longer.turn_dev, ms(8));
        // As much shorter: the means move down as much.
        let shorter = LineTiming::after(Some(before), ms(20), ms(28));
        assert_eq!((shorter.hold, shorter.turn), (ms(35), ms(43)));
        assert_eq!(shorter.turn_dev, ms(8));
        // Turns that repeat bring the deviation down.
        let steady = LineTiming::after(Some(before), ms(40), ms(48));
        assert_eq!(steady.turn_dev, ms(3));
    }

    #[test]
    fn figures_written_are_read_back() {
        let timing = LineTiming {
            hold: Duration::from_micros(12_345),
            turn: ms(17),
            turn_dev: Duration::from_micros(2_501),
        };
        let (mut set, mut values) = (Vec::new(), Item::new());
        timing.write(&mut set, &mut values);
        // The item as DynamoDB would leave it: each clause's attribute with its value.
        let item: Item = set
            .iter()
            .map(|clause| {
                let (placeholder, value) = clause.split_once(" = ").unwrap();
                let name = crate::item::LOCK_PLACEHOLDERS
                    .iter()
                    .find(|(p, _)| *p == placeholder)
                    .map(|(_, name)| (*name).to_owned())
                    .unwrap();
                (name, values[value].clone())
            })
            .collect();
        assert_eq!(LineTiming::of(&item), Some(timing));
        // An item of an older version, without the deviation, reads it as none; without the
        // turn, as no figures.
        let mut older = item.clone();
        older.remove(TURN_DEV_MS);
        assert_eq!(
            LineTiming::of(&older).map(|t| t.turn_dev),
            Some(Duration::ZERO)
        );
        older.remove(TURN_MS);
        assert_eq!(LineTiming::of(&older), None);
        // No hand-over yet: no figures.
        assert_eq!(LineTiming::of(&Item::new()), None);
        // Figures no duration can hold (a corrupt item): none.
        for bad in ["-3", "1e400", "many"] {
            let mut corrupt = item.clone();
            corrupt.insert(HOLD_MS.to_owned(), AttributeValue::N(bad.to_owned()));
            assert_eq!(LineTiming::of(&corrupt), None, "{bad}");
        }
    }
}
