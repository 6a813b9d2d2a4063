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
/// joining until it gets the lock or gives up, so a stream of readers cannot starve it (path
/// locks below the item, which hold it by intention, are not stopped).
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
    /// Intention to hold something below this resource shared: what a
    /// [path lock](crate::LockPath) takes on each ancestor of a path it locks shared.
    /// Excludes only exclusive holders.
    IntentShared,
    /// Intention to hold something below this resource exclusively: what a path lock takes on
    /// each ancestor of a path it locks exclusively. Excludes exclusive and shared holders,
    /// not other intentions.
    IntentExclusive,
}

impl Mode {
    /// The mode's name as events and logs spell it: `exclusive` or `shared`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Exclusive => "exclusive",
            Mode::Shared => "shared",
            Mode::IntentShared => "intent_shared",
            Mode::IntentExclusive => "intent_exclusive",
        }
    }

    /// Whether holders in `self` and in `other` can hold one resource at once (Gray's
    /// multi-granularity compatibility matrix).
    ///
    /// # Examples
    ///
    /// ```
    /// use ddb_lock::Mode;
    ///
    /// assert!(Mode::Shared.compatible_with(Mode::IntentShared));
    /// assert!(Mode::IntentExclusive.compatible_with(Mode::IntentExclusive));
    /// assert!(!Mode::Shared.compatible_with(Mode::IntentExclusive));
    /// assert!(!Mode::Exclusive.compatible_with(Mode::IntentShared));
    /// ```
    pub fn compatible_with(self, other: Mode) -> bool {
        use Mode::{Exclusive, IntentExclusive, Shared};
        !matches!(
            (self, other),
            (Exclusive, _) | (_, Exclusive) | (Shared, IntentExclusive) | (IntentExclusive, Shared)
        )
    }

    /// The weakest mode that grants both `self` and `other` to one holder: what a lock set takes
    /// on a resource it names (or a path's ancestor) twice. Shared and intention-exclusive
    /// together (Gray's SIX) become exclusive.
    ///
    /// # Examples
    ///
    /// ```
    /// use ddb_lock::Mode;
    ///
    /// assert_eq!(Mode::IntentShared.join(Mode::IntentExclusive), Mode::IntentExclusive);
    /// assert_eq!(Mode::Shared.join(Mode::IntentShared), Mode::Shared);
    /// assert_eq!(Mode::Shared.join(Mode::IntentExclusive), Mode::Exclusive);
    /// ```
    pub fn join(self, other: Mode) -> Mode {
        use Mode::{Exclusive, IntentExclusive, IntentShared, Shared};
        match (self, other) {
            (a, b) if a == b => a,
            (IntentShared, b) => b,
            (a, IntentShared) => a,
            (Exclusive, _)
            | (_, Exclusive)
            | (Shared, IntentExclusive)
            | (IntentExclusive, Shared) => Exclusive,
            (a, _) => a,
        }
    }

    /// The intention mode a path lock in `self` takes on the path's ancestors.
    pub(crate) fn intention(self) -> Mode {
        match self {
            Mode::Exclusive | Mode::IntentExclusive => Mode::IntentExclusive,
            Mode::Shared | Mode::IntentShared => Mode::IntentShared,
        }
    }
}

/// A mode name other than `exclusive` or `shared`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a mode: `exclusive`, `shared`, `intent_shared` or `intent_exclusive`")]
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
            "intent_shared" => Ok(Mode::IntentShared),
            "intent_exclusive" => Ok(Mode::IntentExclusive),
            other => Err(UnknownMode(other.to_owned())),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
