//! Looking at and managing locks and their table: [`LockClient::status`], force release, the
//! clean-up of expired items, lock items for `only_if_exists`, creating and checking the table.

use super::LockClient;
use crate::error::Error;
use crate::lock::Holder;
use crate::ops::cleanup::{self, CleanupCursor, CleanupReport};
use crate::ops::{inspect, kept, table};
use crate::outcome::LockStatus;
use std::time::Duration;

impl LockClient {
    /// Creates the item of a free lock on `resource` with `data` as its payload, unless an item is
    /// there already (then nothing changes): whether it created one. One conditional PutItem.
    ///
    /// For operators who decide which locks exist, with
    /// [`AcquireOptions::only_if_exists`](crate::AcquireOptions::only_if_exists) on the acquiring
    /// side; a client that keeps items ([`delete_on_release(false)`](crate::LockClientBuilder::delete_on_release))
    /// keeps the payload for each holder to read, one that deletes them deletes the item (and
    /// payload) on its first release. An application's item at the key is
    /// [`Error::NotALockItem`], left as it is.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// let created = client
    ///     .create_lock_item("tenant/acme", Some(br#"{"shard":3}"#))
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_lock_item(
        &self,
        resource: &str,
        data: Option<&[u8]>,
    ) -> Result<bool, Error> {
        kept::create(&self.settings.table, resource, data).await
    }

    /// Reads the lock on `resource` without taking it (a strongly consistent GetItem). An expired
    /// item that DynamoDB has not deleted yet reads as [`LockStatus::Free`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::LockStatus;
    ///
    /// let status = client.status("orders/42").await?;
    /// println!("{}", if status == LockStatus::Free { "free" } else { "held" });
    /// # Ok(()) }
    /// ```
    pub async fn status(&self, resource: &str) -> Result<LockStatus, Error> {
        inspect::status(&self.settings.table, resource).await
    }

    /// Deletes the lock on `resource` whoever holds it: an administrative override. Returns the
    /// holder whose live lock was removed, or `None` if there was no live lock (an expired or
    /// malformed item is deleted too).
    ///
    /// The removed holder is not told; until it checks (extend, release) it may believe it still
    /// holds the lock.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// if let Some(holder) = client.force_release("orders/42").await? {
    ///     println!("removed the lock of {}", holder.owner);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn force_release(&self, resource: &str) -> Result<Option<Holder>, Error> {
        inspect::force_release(&self.settings.table, resource).await
    }

    /// Deletes up to `max_deletes` lock items whose lease ended more than `expired_for` ago,
    /// scanning from `resume` (the [`next`](CleanupReport::next) of the previous call; `None`:
    /// from the start), and says where it stopped. Reads at most 10 scan pages per call, so a
    /// large table takes several calls: pass each report's `next` to the following one until it
    /// is `None`.
    ///
    /// Needs `dynamodb:Scan` on the table, which nothing else in the library does.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use std::time::Duration;
    ///
    /// let mut resume = None;
    /// loop {
    ///     let report = client.delete_expired(Duration::from_secs(3600), 100, resume.as_ref()).await?;
    ///     match report.next {
    ///         Some(next) => resume = Some(next),
    ///         None => break,
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn delete_expired(
        &self,
        expired_for: Duration,
        max_deletes: u32,
        resume: Option<&CleanupCursor>,
    ) -> Result<CleanupReport, Error> {
        cleanup::delete_expired(&self.settings.table, expired_for, max_deletes, resume).await
    }

    /// Creates the lock table (on-demand billing, the keys of the client's
    /// [`TableSchema`](crate::TableSchema), TTL on its TTL attribute unless it has none) unless it
    /// exists, waits until it is active, enables TTL if it is off, and checks the result with
    /// [`check_table`](Self::check_table). It never changes the TTL of a table whose keys are not
    /// the schema's.
    /// Safe to call on every start and from several processes at once.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// client.create_table().await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_table(&self) -> Result<(), Error> {
        table::create(&self.settings.table).await
    }

    /// Checks that the table exists with the key schema of the client's
    /// [`TableSchema`](crate::TableSchema) (by default `PK` (HASH, S) + `SK` (RANGE, S)) and TTL
    /// enabled on its TTL attribute (none needed if it has none); the error's
    /// [`TableProblem`](crate::TableProblem) is `Missing`, or `Mismatch` listing every difference,
    /// each with what was expected and what was found.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) {
    /// if let Err(err) = client.check_table().await {
    ///     panic!("lock table unusable: {err}");
    /// }
    /// # }
    /// ```
    pub async fn check_table(&self) -> Result<(), Error> {
        table::check(&self.settings.table).await
    }
}
