//! Full-jitter exponential backoff between acquire attempts.
//!
//! The n-th delay is uniform in `[0, min(max, initial * 2^n)]` ("full jitter"): waiters spread out
//! instead of retrying in step, which keeps request counts low under contention while the expected
//! delay still grows exponentially. The acquire loop shortens a delay when the holder's lease ends
//! sooner (see [`LockClient::acquire`](crate::LockClient::acquire)).

use rand::Rng;
use std::time::Duration;

/// Bounds of the backoff between acquire attempts.
///
/// # Examples
///
/// ```
/// use ddb_lock::BackoffBounds;
/// use std::time::Duration;
///
/// let bounds = BackoffBounds::new(Duration::from_millis(10), Duration::from_millis(200));
/// assert_eq!(bounds.max(), Duration::from_millis(200));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffBounds {
    initial: Duration,
    max: Duration,
}

impl BackoffBounds {
    /// Default initial delay bound.
    pub const DEFAULT_INITIAL: Duration = Duration::from_millis(20);
    /// Default maximum delay bound.
    pub const DEFAULT_MAX: Duration = Duration::from_millis(500);

    /// Bounds from the first delay's upper bound and the largest delay. Checked (positive, ordered,
    /// not absurd) when the client is built.
    pub fn new(initial: Duration, max: Duration) -> Self {
        BackoffBounds { initial, max }
    }

    /// Upper bound of the first delay.
    pub fn initial(&self) -> Duration {
        self.initial
    }

    /// Upper bound of every delay.
    pub fn max(&self) -> Duration {
        self.max
    }
}

impl Default for BackoffBounds {
    fn default() -> Self {
        BackoffBounds::new(Self::DEFAULT_INITIAL, Self::DEFAULT_MAX)
    }
}

/// The delays of one acquire call.
#[derive(Debug)]
pub(crate) struct Backoff {
    bounds: BackoffBounds,
    attempt: u32,
}

impl Backoff {
    pub(crate) fn new(bounds: BackoffBounds) -> Self {
        Backoff { bounds, attempt: 0 }
    }

    /// The next delay: uniform in `[0, min(max, initial * 2^attempt)]`.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let ceiling = self
            .bounds
            .initial
            .checked_mul(1 << self.attempt.min(31))
            .map_or(self.bounds.max, |d| d.min(self.bounds.max));
        self.attempt = self.attempt.saturating_add(1);
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(rand::rng().random_range(0..=nanos))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_stay_under_a_doubling_ceiling_capped_at_max() {
        let bounds = BackoffBounds::new(Duration::from_millis(10), Duration::from_millis(75));
        let mut backoff = Backoff::new(bounds);
        for ceiling_ms in [10, 20, 40, 75, 75, 75] {
            let delay = backoff.next_delay();
            assert!(delay <= Duration::from_millis(ceiling_ms), "{delay:?}");
        }
    }

    #[test]
    fn many_attempts_do_not_overflow() {
        let mut backoff = Backoff::new(BackoffBounds::default());
        for _ in 0..200 {
            assert!(backoff.next_delay() <= BackoffBounds::DEFAULT_MAX);
        }
    }
}
