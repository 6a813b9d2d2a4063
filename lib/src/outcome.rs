//! Typed outcomes of the operations on a lock that someone may have lost or taken over.
//! They are not errors: each says what was found in DynamoDB.

use crate::lock::{Holder, Lock};
use chrono::{DateTime, Utc};
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
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseOutcome {
    /// The lock item of this acquisition was deleted.
    Released,
    /// No live lock of this acquisition exists: it was released already, or it expired and was
    /// deleted, or it expired and someone else's lock on it has expired too.
    NotFound,
    /// Someone else holds the lock now (or the owner given does not match the acquisition); the
    /// item was left untouched.
    NotOwner {
        /// The current holder.
        holder: Holder,
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
    /// holder's exclusivity lapsed, so the lock is not extended.
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

/// What [`status`](crate::LockClient::status) read.
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
/// use ddb_lock::LockStatus;
///
/// if let LockStatus::Held { holder, remaining } = client.status("orders/42").await? {
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
