//! Arithmetic on lease times: a lease end from a start and a duration, the time left until a
//! moment, durations rounded up to whole milliseconds, and as whole milliseconds for logs.
//!
//! Every moment the library stores is already truncated to the millisecond (see
//! [`LockTable::now`](crate::lock_table::LockTable::now)), so these helpers never round; they only
//! guard against leaving chrono's range, which validated durations never do.

use crate::error::{Error, InvalidInput};
use crate::limits;
use chrono::{DateTime, TimeDelta, Utc};
use std::time::Duration;

/// `t + d`, or the field's range error if that leaves chrono's range (validated durations never do).
pub(crate) fn after(
    t: DateTime<Utc>,
    d: Duration,
    field: &'static str,
) -> Result<DateTime<Utc>, Error> {
    TimeDelta::from_std(d)
        .ok()
        .and_then(|d| t.checked_add_signed(d))
        .ok_or_else(|| {
            InvalidInput::DurationTooLong {
                field,
                value: d,
                max: limits::MAX_DURATION,
            }
            .into()
        })
}

/// The time from `from` to `to`, zero if `to` is not later.
pub(crate) fn span(from: DateTime<Utc>, to: DateTime<Utc>) -> Duration {
    (to - from).to_std().unwrap_or(Duration::ZERO)
}

/// `d` in whole milliseconds, rounded up: the precision of a stored lease end (a lease asked
/// for that long covers all of `d`).
pub(crate) fn whole_millis_up(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_micros().div_ceil(1000)).unwrap_or(u64::MAX))
}

/// A duration in whole milliseconds, for log fields.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
