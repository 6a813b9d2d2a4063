//! [`LockBackend`] over a [`LockClient`]: `try_lock` is `try_acquire` (one conditional PutItem,
//! or the fenced transaction), `renew` is `extend`, `release` is `release`. `cleanup` is the
//! trait's default: DynamoDB's time to live deletes expired items (or
//! [`delete_expired`](LockClient::delete_expired), which scans, when you call it).

use super::{BackendError, BackendFuture, BackendLock, LockBackend};
use crate::client::LockClient;
use crate::error::Error;
use crate::ops::extend::DataChange;
use crate::options::AcquireOptions;
use crate::outcome::{ExtendOutcome, ReleaseOutcome};
use crate::pending_by_key::PendingByKey;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use tokio::sync::oneshot;

/// The DynamoDB [`LockBackend`]: locks of a [`LockClient`], owned by the client's owner.
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::BackendError> {
/// use ddb_lock::{DynamoDbBackend, LockBackend};
/// use std::time::Duration;
///
/// let locks = DynamoDbBackend::new(client).fencing(true);
/// if let Some(lock) = locks.try_lock("nightly-report", Duration::from_secs(60)).await? {
///     println!("token {:?}", lock.fencing_token());
///     locks.release(lock).await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct DynamoDbBackend {
    client: LockClient,
    fencing: bool,
    /// The releases under way (sent from the background), by key: a `try_lock` of that key waits
    /// for them, as the memory backend, which releases at the call, finds the key free at once
    /// (a `try_lock` after a dropped release met the backend's own lock and said held by
    /// another).
    releasing: PendingByKey,
}

/// The longest a `try_lock` waits for a release of its key under way.
const RELEASE_WAIT: Duration = Duration::from_secs(1);

impl DynamoDbBackend {
    /// A backend taking `client`'s locks, without fencing tokens.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn run(client: ddb_lock::LockClient) {
    /// let locks = ddb_lock::DynamoDbBackend::new(client);
    /// # }
    /// ```
    pub fn new(client: LockClient) -> Self {
        DynamoDbBackend {
            client,
            fencing: false,
            releasing: PendingByKey::default(),
        }
    }

    /// Whether every lock gets a fencing token (an acquisition is then one `TransactWriteItems`
    /// of the lock and its fence item instead of one PutItem).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn run(client: ddb_lock::LockClient) {
    /// let locks = ddb_lock::DynamoDbBackend::new(client).fencing(true);
    /// # }
    /// ```
    pub fn fencing(mut self, fencing: bool) -> Self {
        self.fencing = fencing;
        self
    }
}

impl LockBackend for DynamoDbBackend {
    fn name(&self) -> &str {
        "dynamodb"
    }

    fn try_lock<'a>(
        &'a self,
        key: &'a str,
        ttl: Duration,
    ) -> BackendFuture<'a, Option<BackendLock>> {
        Box::pin(async move {
            // The lease as written (whole milliseconds), as the memory backend keeps it.
            let ttl = crate::limits::lease(ttl)?;
            // For a while at most: a release stuck on a connection (the SDK sets no timeout of
            // its own) must not hold up a `try_lock`, which then tries as before.
            let _ = tokio::time::timeout(RELEASE_WAIT, self.releasing.wait(key)).await;
            let opts = AcquireOptions::new().lease(ttl).fencing(self.fencing);
            let lock = self.client.try_acquire(key, &opts).await?;
            Ok(lock.map(|lock| {
                BackendLock::new(
                    lock.handle().clone(),
                    ttl,
                    lock.acquired_at(),
                    lock.fencing_token(),
                )
            }))
        })
    }

    fn keep_until_expiry(&self, lock: &BackendLock) -> bool {
        self.client
            .settings
            .table
            .holds
            .keep_until_expiry(lock.handle().lock_id())
    }

    fn renew<'a>(&'a self, lock: &'a BackendLock) -> BackendFuture<'a, ()> {
        Box::pin(async move {
            match self.client.extend(lock.handle(), lock.ttl()).await? {
                ExtendOutcome::Extended(_) => Ok(()),
                _ => Err(BackendError::not_held(lock.key())),
            }
        })
    }

    /// Sent from a task of its own, started at the call: dropping the returned future (a
    /// `select!`, a timeout) cancels nothing, and [`flush`](LockBackend::flush) waits for it.
    fn release(&self, lock: BackendLock) -> BackendFuture<'_, ()> {
        // Ended at the call, as the memory backend ends it: a renewal made before the spawned
        // release has run is refused, not applied ahead of the delete.
        let mut underway = self
            .client
            .settings
            .table
            .holds
            .release_starts(lock.handle());
        let (answer, answered) = oneshot::channel();
        let (client, spawned_lock) = (self.client.clone(), lock.clone());
        let releasing = self.releasing.start(lock.key());
        // (Not spawned, the task is dropped, and the release under way with it.)
        let spawned = self.client.release_in_background(async move {
            // A release of the same lock through this backend answered before it (a clone's):
            // that one released it, and this one finds it released already, as in memory (read
            // as a resend of that one, it answered released too; found by review). Else tried
            // again when DynamoDB fails it, as a dropped guard's release is: the caller may have
            // dropped its future.
            let released = if underway
                .earlier_answered(Some(spawned_lock.acquired_at()))
                .await
            {
                let released = Ok(ReleaseOutcome::NotFound);
                underway.answered(&released);
                released
            } else {
                client
                    .release_retrying(spawned_lock.handle(), DataChange::Keep, Some(underway))
                    .await
            };
            // Ended before the answer: a `try_lock` after it does not wait.
            drop(releasing);
            let _ = answer.send(released_or_not(released, &spawned_lock));
        });
        Box::pin(async move {
            match answered.await {
                Ok(released) => released,
                // No runtime to spawn on at the call: released here.
                Err(_) if !spawned => {
                    released_or_not(self.client.release(lock.handle()).await, &lock)
                }
                Err(_) => Err(BackendError::Unavailable(Box::new(
                    Error::ReleaseAbandoned {
                        resource: lock.key().to_owned(),
                    },
                ))),
            }
        })
    }

    fn flush(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(self.client.flush())
    }
}

/// A release's outcome as the trait answers it: `NotHeld` unless it released, or was sent again
/// after a lost answer and found the lock gone (its first send's doing, as far as anyone can
/// tell: the memory backend, which loses no answer, says released).
fn released_or_not(
    released: Result<ReleaseOutcome, Error>,
    lock: &BackendLock,
) -> Result<(), BackendError> {
    match released? {
        ReleaseOutcome::Released | ReleaseOutcome::Unconfirmed => Ok(()),
        _ => Err(BackendError::not_held(lock.key())),
    }
}
