//! Typed outcomes of the operations on a lock that someone may have lost or taken over, and why a
//! guarded lock stopped being held ([`LockLost`]). They are not errors: each says what was found
//! in DynamoDB.

use crate::lock::{Holder, Lock};
use chrono::{DateTime, Utc};
use std::fmt;
use std::time::Duration;

/// The result of one acquire attempt, from
/// [`try_acquire_with_holder`](crate::LockClient::try_acquire_with_holder).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcquireAttempt {
    /// The lock is ours.
    Acquired(Lock),
    /// Someone else holds a live lock.
    Held(Holder),
}

/// What [`release`](crate::LockClient::release) found.
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: ddb_lock::LockClient, lock: ddb_lock::Lock) -> Result<(), ddb_lock::Error> {
/// use ddb_lock::ReleaseOutcome;
///
/// match client.release(&lock).await? {
///     ReleaseOutcome::Released => {}
///     ReleaseOutcome::NotFound => eprintln!("already released, or expired and taken away"),
///     ReleaseOutcome::NotOwner { holder } => eprintln!("{} holds it now", holder.owner),
///     ReleaseOutcome::AlreadyReleased { released_at } => eprintln!("released at {released_at}"),
///     ReleaseOutcome::Unconfirmed => eprintln!("released, by a request whose answer was lost"),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseOutcome {
    /// The lock item of this acquisition was deleted.
    Released,
    /// No live lock of this acquisition exists: it was released already, or it expired and was
    /// deleted, or it expired and someone else's lock on it has expired too. The release was sent
    /// once, so the lock was gone before it: while held, it was lost.
    NotFound,
    /// The release was sent more than once (an answer was lost, and the request sent again, by
    /// the SDK or by the client's background release) and the last send found this acquisition's
    /// lock gone, or released (its release record, where items are kept): an earlier send
    /// released it, or it was gone already. Not held either way;
    /// whether it was held until the release cannot be told, and it is not taken for a loss
    /// ([`NotFound`](Self::NotFound) is). Someone else may hold the lock since, and is not named.
    Unconfirmed,
    /// Someone else holds the lock now (or the owner given does not match the acquisition); the
    /// item was left untouched.
    NotOwner {
        /// The current holder.
        holder: Holder,
    },
    /// This acquisition (for a release by owner: a lock of this owner) was released already, and
    /// nobody has taken the lock since. Only a client that keeps released items can tell
    /// ([`delete_on_release(false)`](crate::LockClientBuilder::delete_on_release), or for a while
    /// [`keep_released_for`](crate::LockClientBuilder::keep_released_for)); a client that deletes
    /// them answers [`NotFound`](Self::NotFound).
    AlreadyReleased {
        /// When it was released, by the releasing client's clock.
        released_at: DateTime<Utc>,
    },
}

/// What [`extend`](crate::LockClient::extend) found.
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: ddb_lock::LockClient, lock: ddb_lock::Lock) -> Result<(), ddb_lock::Error> {
/// use ddb_lock::ExtendOutcome;
/// use std::time::Duration;
///
/// match client.extend(&lock, Duration::from_secs(30)).await? {
///     ExtendOutcome::Extended(lock) => println!("held until {}", lock.expires_at()),
///     lost => eprintln!("lock lost, stop working: {lost:?}"),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtendOutcome {
    /// The lease now ends at the returned lock's `expires_at`.
    Extended(Lock),
    /// No lock of this acquisition exists any more.
    NotFound,
    /// The lease ended before the extension arrived; nobody has taken the lock yet, but the
    /// holder's exclusivity lapsed, so the lock is not extended. If an earlier extension of it
    /// sent through this client may still land (unanswered, or dropped with its request on the
    /// way), the client has released the lock, so that no late extension holds it again.
    Expired {
        /// When the lease ended.
        expired_at: DateTime<Utc>,
    },
    /// Someone else holds the lock now (or the owner given does not match the acquisition).
    NotOwner {
        /// The current holder.
        holder: Holder,
    },
}

impl ExtendOutcome {
    /// The lock as extended, or how a guard of it is lost by this outcome.
    pub(crate) fn lock_or_lost(&self) -> Result<&Lock, LockLost> {
        match self {
            ExtendOutcome::Extended(lock) => Ok(lock),
            ExtendOutcome::NotFound => Err(LockLost::NotFound),
            ExtendOutcome::Expired { expired_at } => Err(LockLost::Expired {
                expired_at: *expired_at,
            }),
            ExtendOutcome::NotOwner { holder } => Err(LockLost::TakenOver {
                holder: holder.clone(),
            }),
        }
    }
}

/// What [`status`](crate::LockClient::status) read.
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
/// use ddb_lock::LockStatus;
///
/// if let LockStatus::Held { holder, remaining, .. } = client.status("orders/42").await? {
///     println!("{} holds it for {remaining:?} more", holder.owner);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockStatus {
    /// Nobody holds the lock: no item, or an expired one.
    Free,
    /// A live lock.
    Held {
        /// Who holds it.
        holder: Holder,
        /// Time left on the lease at the moment of reading (by this client's clock).
        remaining: Duration,
        /// The fair acquirers waiting in line for it, first first
        /// ([`AcquireOptions::fair`](crate::AcquireOptions::fair)); Locktopus's `ENQUEUED`.
        queue: Vec<crate::QueuedWaiter>,
    },
    /// Held in [`Mode::Shared`](crate::Mode::Shared) by one or more live holders (readers, or a
    /// semaphore's permits), or by path locks below this resource (intention holders).
    Shared {
        /// The live shared holders, the first lease to end first.
        holders: Vec<Holder>,
        /// The live holders of path locks below this resource
        /// ([`Mode::IntentShared`](crate::Mode::IntentShared),
        /// [`Mode::IntentExclusive`](crate::Mode::IntentExclusive)), the first lease to end first.
        intents: Vec<Holder>,
        /// An exclusive acquirer waiting for them to leave, until its `expires_at`; new shared
        /// holders are refused meanwhile.
        writer_waiting: Option<Holder>,
    },
}

/// What one [`acquire_with_stats`](crate::LockClient::acquire_with_stats) call cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquireStats {
    /// Conditional PutItems made (each one a billed write request).
    pub attempts: u32,
    /// Time from the call to its outcome.
    pub waited: Duration,
}

/// Why a guarded lock stopped being held.
///
/// # Examples
///
/// ```no_run
/// # async fn run(guard: ddb_lock::LockGuard) {
/// use ddb_lock::LockLost;
///
/// match guard.lost().await {
///     LockLost::TakenOver { holder } => eprintln!("{} has it now", holder.owner),
///     other => eprintln!("lock lost: {other}"),
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockLost {
    /// An extension found no lock of this acquisition: released with its credential elsewhere,
    /// force-released, or deleted after it expired.
    NotFound,
    /// An extension arrived after the lease had ended (nobody had taken the lock yet).
    Expired {
        /// When the lease ended, as stored.
        expired_at: DateTime<Utc>,
    },
    /// Someone else holds the lock now.
    TakenOver {
        /// The new holder.
        holder: Holder,
    },
    /// No extension succeeded before the lease ran out on this process's monotonic clock.
    LeaseRanOut {
        /// The last extension error, if an extension failed rather than went unanswered.
        last_error: Option<String>,
    },
    /// The lock was released through this process: [`LockGuard::release`](crate::LockGuard::release)
    /// started, the guard was dropped, [`LockClient::with_lock`](crate::LockClient::with_lock)
    /// finished its work, or the guard's client released the lock some other way (`release`,
    /// `release_owned`, `force_release`, `release_all`, or another guard of the same idempotent
    /// acquisition). Every [`LockWatch`](crate::LockWatch) of the guard says so from the moment the
    /// release starts, before its request is answered.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::{AcquireOptions, LockLost};
    ///
    /// let guard = client.lock("reports/daily", &AcquireOptions::new()).await?;
    /// let watch = guard.watch();
    /// drop(guard);
    /// assert!(!watch.is_held());
    /// assert_eq!(watch.lost().await, LockLost::Released);
    /// # Ok(()) }
    /// ```
    Released,
}

impl fmt::Display for LockLost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockLost::NotFound => f.write_str("the lock item of this acquisition is gone"),
            LockLost::Expired { expired_at } => write!(
                f,
                "the lease ended at {} before an extension arrived",
                crate::timestamp::format(*expired_at)
            ),
            LockLost::TakenOver { holder } => write!(f, "`{}` holds the lock now", holder.owner),
            LockLost::LeaseRanOut { last_error: None } => {
                f.write_str("the lease ran out with no extension answered")
            }
            LockLost::LeaseRanOut {
                last_error: Some(error),
            } => write!(f, "the lease ran out; the last extension failed: {error}"),
            LockLost::Released => {
                f.write_str("the lock was released through this process (its guard or its client)")
            }
        }
    }
}
