//! Extending a held lock's lease: [`LockClient::extend`], with or without a new payload.

use super::LockClient;
use crate::error::Error;
use crate::limits;
use crate::lock::LockHandle;
use crate::ops::extend::{self, DataChange};
use crate::outcome::ExtendOutcome;
use std::time::Duration;
use tracing::warn;

impl LockClient {
    /// Extends a held lock so that its lease ends `lease` from now: one UpdateItem of `ExpiresAt`
    /// and `TTL`, conditioned on the same `LockID` and `Owner`, on the lease not having ended, and
    /// on the stored lease end not being later than the new one: an extension never shortens a
    /// lease. If another extension of this lock already stored a later end, that one stands and
    /// is returned (with a [`valid_until`](crate::Lock::valid_until) counted from this request).
    ///
    /// Returns the lock with its new expiry, or how it was lost. An
    /// [`Expired`](ExtendOutcome::Expired) found while an earlier extension of the lock through
    /// this client may still land (unanswered, or dropped with its request on the way) also
    /// releases the lock (one DeleteItem, from a task of the client that
    /// [`flush`](Self::flush) waits for), so that the late one holds nothing.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient, lock: ddb_lock::Lock) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::ExtendOutcome;
    /// use std::time::Duration;
    ///
    /// let ExtendOutcome::Extended(lock) = client.extend(&lock, Duration::from_secs(30)).await? else {
    ///     panic!("lost the lock: stop before doing harm");
    /// };
    /// # Ok(()) }
    /// ```
    pub async fn extend(
        &self,
        lock: impl AsRef<LockHandle>,
        lease: Duration,
    ) -> Result<ExtendOutcome, Error> {
        self.extend_changing_data(lock.as_ref(), lease, DataChange::Keep)
            .await
    }

    /// [`extend`](Self::extend), also replacing the payload stored with the lock (`Some`) or
    /// removing it (`None`), in the same UpdateItem. Only the holder can do this, and only while
    /// its lease stands; [`status`](Self::status) returns the new payload.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient, lock: ddb_lock::Lock) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::ExtendOutcome;
    /// use std::time::Duration;
    ///
    /// let progress = br#"{"step":"3/5"}"#.to_vec();
    /// let outcome = client
    ///     .extend_and_replace_data(&lock, Duration::from_secs(30), Some(progress))
    ///     .await?;
    /// assert!(matches!(outcome, ExtendOutcome::Extended(_)));
    /// # Ok(()) }
    /// ```
    pub async fn extend_and_replace_data(
        &self,
        lock: impl AsRef<LockHandle>,
        lease: Duration,
        data: Option<Vec<u8>>,
    ) -> Result<ExtendOutcome, Error> {
        if let Some(data) = &data {
            limits::data(data)?;
        }
        let change = match &data {
            Some(data) => DataChange::Replace(data),
            None => DataChange::Remove,
        };
        self.extend_changing_data(lock.as_ref(), lease, change)
            .await
    }

    /// Extends `handle`'s lock with `change`. An extension that finds the lease over while an
    /// earlier one of the lock, sent through this client, may still land (unanswered, or dropped
    /// with its request on the way) releases the lock before it answers: sent while the lease
    /// stood, that one held the lock again for its lease, answered expired and used by nobody
    /// (found by review). So does one applied after this client's release of the lock failed,
    /// answered `NotFound` (see [`Answered::to_release`](extend::Answered::to_release)). The
    /// release goes on if this future is dropped.
    async fn extend_changing_data(
        &self,
        handle: &LockHandle,
        lease: Duration,
        change: DataChange<'_>,
    ) -> Result<ExtendOutcome, Error> {
        let table = &self.settings.table;
        let answered = extend::extend(table, handle, lease, change).await?;
        // (Unless a release of it is on its way already: sent again, it could land first.)
        let underway = table.holds.release_underway(handle.lock_id());
        if let (true, Some(version)) = (answered.to_release, &answered.applied_version) {
            // Applied after its release started: only the version it wrote (by its lock id
            // alone, the release deleted the lock a same-owner acquisition in another process
            // had been handed back since; found by review), after any release on its way (one
            // of another late extension's version, refused by this one's, left it; found by
            // review).
            extend::release_late_extension(table, handle, version);
        } else if answered.to_release && !underway {
            if let Err(err) = self.release_detached(handle).await {
                warn!(resource = handle.resource(), %err, "could not release a lock an earlier extension may still hold, or extended after its release; it expires with its lease");
            }
        }
        Ok(answered.outcome)
    }
}
