//! Waiting within a caller's deadline: how long an operation may wait so that it ends a margin
//! before a deadline given in epoch milliseconds, as an AWS Lambda invocation's context gives it.

use std::time::Duration;
use tracing::debug;

/// How long an operation may wait so that it ends `margin` before the deadline `deadline_ms`
/// (epoch milliseconds), at `now_ms` (epoch milliseconds). `None` when the deadline carries no
/// information: local emulators send a fixed deadline in the past, which is clamped away rather
/// than failing every wait.
///
/// # Examples
///
/// ```
/// use ddb_lock::wait_budget;
/// use std::time::Duration;
///
/// let margin = Duration::from_millis(500);
/// assert_eq!(wait_budget(10_000, 8_000, margin), Some(Duration::from_millis(1_500)));
/// assert_eq!(wait_budget(10_000, 9_800, margin), Some(Duration::ZERO));
/// assert_eq!(wait_budget(5_000, 8_000, margin), None);
/// ```
pub fn wait_budget(deadline_ms: u64, now_ms: i64, margin: Duration) -> Option<Duration> {
    let remaining = i64::try_from(deadline_ms)
        .unwrap_or(i64::MAX)
        .saturating_sub(now_ms);
    if remaining <= 0 {
        debug!(
            deadline_ms,
            "invocation deadline is in the past; ignoring it"
        );
        return None;
    }
    let remaining = Duration::from_millis(remaining.unsigned_abs());
    Some(remaining.saturating_sub(margin))
}
