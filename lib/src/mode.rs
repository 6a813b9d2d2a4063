//! The mode of a hold: exclusive (the mutex every lock was before modes existed) or shared (a
//! reader of a read-write lock, or one permit of a semaphore).

use std::fmt;
use std::str::FromStr;

/// How a lock is held: alone, or alongside other shared holders.
///
/// Go's `RWMutex` in a table: any number of [`Shared`](Mode::Shared) holders coexist (up to
/// [`MAX_SHARED_HOLDERS`](crate::limits::MAX_SHARED_HOLDERS), or the
/// [`permits`](crate::AcquireOptions::permits) of a semaphore), an
/// [`Exclusive`](Mode::Exclusive) holder excludes everyone. Each holder has its own lease,
/// extension and release. An exclusive waiter that finds shared holders stops new ones from
/// joining until it gets the lock or gives up, so a stream of readers cannot starve it.
///
/// # Examples
///
/// ```
/// use ddb_lock::{AcquireOptions, Mode};
///
/// let read = AcquireOptions::new().mode(Mode::Shared);
/// assert_eq!(read.lock_mode(), Mode::Shared);
/// assert_eq!(AcquireOptions::new().lock_mode(), Mode::Exclusive);
/// assert_eq!(Mode::Shared.to_string(), "shared");
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// One holder, no one else: the mutex. The default.
    #[default]
    Exclusive,
    /// Any number of shared holders together, and no exclusive one.
    Shared,
}

impl Mode {
    /// The mode's name as events and logs spell it: `exclusive` or `shared`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Exclusive => "exclusive",
            Mode::Shared => "shared",
        }
    }
}

/// A mode name other than `exclusive` or `shared`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a mode: `exclusive` or `shared`")]
pub struct UnknownMode(pub String);

impl FromStr for Mode {
    type Err = UnknownMode;

    /// Reads a mode as [`as_str`](Mode::as_str) writes it.
    ///
    /// # Examples
    ///
    /// ```
    /// use ddb_lock::Mode;
    ///
    /// assert_eq!("shared".parse::<Mode>().unwrap(), Mode::Shared);
    /// assert!("read".parse::<Mode>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "exclusive" => Ok(Mode::Exclusive),
            "shared" => Ok(Mode::Shared),
            other => Err(UnknownMode(other.to_owned())),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
