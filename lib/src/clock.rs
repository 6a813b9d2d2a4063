//! Where "now" comes from.
//!
//! Whether a lock has expired is decided by comparing its `ExpiresAt` with the caller's idea of the
//! current time, so the library reads the wall clock through one seam. Production code uses
//! [`SystemClock`]; tests and simulations inject their own [`Clock`] (for example one that runs ahead)
//! through [`LockClientBuilder::clock`](crate::LockClientBuilder::clock).
//! Waiting (backoff, sleeping until an expiry) always uses tokio's monotonic timer, never this clock.

use chrono::{DateTime, Utc};
use std::fmt;

/// A source of wall-clock time for lock expiry decisions.
///
/// # Examples
///
/// A clock that runs a fixed offset ahead of the system clock:
///
/// ```
/// use chrono::{DateTime, TimeDelta, Utc};
/// use ddb_lock::Clock;
///
/// #[derive(Debug)]
/// struct Ahead(TimeDelta);
///
/// impl Clock for Ahead {
///     fn now(&self) -> DateTime<Utc> {
///         Utc::now() + self.0
///     }
/// }
///
/// let clock = Ahead(TimeDelta::seconds(5));
/// assert!(clock.now() > Utc::now());
/// ```
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current time, in UTC.
    fn now(&self) -> DateTime<Utc>;
}

/// The operating system's wall clock (`chrono::Utc::now`), the default.
///
/// # Examples
///
/// ```
/// use ddb_lock::{Clock, SystemClock};
///
/// let before = chrono::Utc::now();
/// assert!(SystemClock.now() >= before);
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}
