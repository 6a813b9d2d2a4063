//! Fair locks: a line of waiters kept in the lock item, granted in order
//! ([`AcquireOptions::fair`](crate::AcquireOptions::fair); Locktopus's `ENQUEUED` state).
//!
//! A fair acquirer first tries the lock as any acquirer does, with one more clause: nobody waits
//! in line (`attribute_not_exists(#queue)`). Refused by a live exclusive holder, it joins the line
//! ([`line::join`]): one UpdateItem appends its `LockID` to `Queue` and writes its entry
//! `Queued:<LockID>` (owner, lease, deadline). From then on it does not write; it reads the item
//! now and then ([`wait`]), the first in line often, the others less, until the item carries its
//! `LockID` as the holder's.
//!
//! The lock reaches it by a grant ([`grant`]): one UpdateItem that makes the first live waiter
//! the holder (its `LockID`, owner, a lease from the grant) and removes it, and any waiter whose
//! deadline passed before it, from the line, conditioned on those waiters still standing first.
//! The holder's release grants (its DeleteItem requires an empty line; refused, it sends the
//! grant instead: a hand-over, the lock is never free in between); when a holder's lease has run
//! out instead, any waiter that sees it grants. A waiter that gives up (deadline, dropped future)
//! leaves ([`line::leave`]), and releases the lock if it was granted meanwhile.

pub(crate) mod grant;
pub(crate) mod line;
pub(crate) mod pace;
pub(crate) mod timing;
pub(crate) mod wait;

use chrono::{DateTime, Utc};
use std::time::Duration;

/// A waiter in a fair lock's line, as [`LockClient::status`](crate::LockClient::status) lists it.
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
/// use ddb_lock::LockStatus;
///
/// if let LockStatus::Held { holder, queue, .. } = client.status("ledger").await? {
///     println!("{} holds it; next: {:?}", holder.owner, queue.first().map(|w| &w.owner));
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedWaiter {
    /// The owner that waits.
    pub owner: String,
    /// When it joined the line (its clock).
    pub joined_at: DateTime<Utc>,
    /// The lease it asked for, which a grant gives it.
    pub lease: Duration,
    /// When it stops waiting (its clock), if it waits until a deadline; a grant passes it over
    /// once that moment is gone.
    pub until: Option<DateTime<Utc>>,
}
