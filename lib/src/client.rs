//! The client façade: [`LockClient`] holds the validated settings and hands each call to the
//! operation that makes its request ([`ops`](crate::ops)) or to the waiting loop
//! ([`wait`](crate::wait)).
//!
//! Nothing here builds a request or reads an answer: the façade resolves the caller's options
//! against the client's defaults (owner, lease, timeout, backoff), validates them, and delegates.
//! Keeping it thin lets a reader find each request's expressions and its outcome rules in one
//! operation module, named after the request; the price is a level of indirection between a public
//! method and its request.

use crate::builder::LockClientBuilder;
use crate::error::{Error, InvalidInput};
use crate::holds::Held;
use crate::limits;
use crate::lock::{Holder, Lock, LockHandle};
use crate::lock_table::LockTable;
use crate::ops::acquire::Request;
use crate::ops::cleanup::{self, CleanupCursor, CleanupReport};
use crate::ops::extend::{self, DataChange};
use crate::ops::release::{self, Release};
use crate::ops::{inspect, kept, table};
use crate::options::AcquireOptions;
use crate::outcome::{
    AcquireAttempt, AcquireStats, ExtendOutcome, LockLost, LockStatus, ReleaseOutcome,
};
use crate::wait::backoff::BackoffBounds;
use crate::wait::{self, Wait};
use chrono::{DateTime, Utc};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// A client for locks in one DynamoDB table. Cheap to clone; clones share configuration and the
/// SDK client's connection pool.
///
/// # Examples
///
/// ```no_run
/// # async fn run() -> Result<(), ddb_lock::Error> {
/// use ddb_lock::{AcquireOptions, LockClient};
///
/// let config = aws_config::load_from_env().await;
/// let client = LockClient::builder(aws_sdk_dynamodb::Client::new(&config))
///     .table_name("locks")
///     .build()?;
/// let lock = client.acquire("invoice/2026-0042", &AcquireOptions::new()).await?;
/// // ... the critical section ...
/// client.release(&lock).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct LockClient {
    pub(crate) settings: Arc<Settings>,
}

/// Validated configuration, shared by clones of a client: the table the operations work on, and
/// the defaults the façade applies before calling them.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) table: Arc<LockTable>,
    pub(crate) owner: String,
    pub(crate) lease: Duration,
    pub(crate) acquire_timeout: Duration,
    pub(crate) backoff: BackoffBounds,
}

impl Settings {
    /// The same defaults over another `table`.
    pub(crate) fn with_table(&self, table: LockTable) -> Settings {
        Settings {
            table: Arc::new(table),
            owner: self.owner.clone(),
            lease: self.lease,
            acquire_timeout: self.acquire_timeout,
            backoff: self.backoff,
        }
    }
}

impl LockClient {
    /// Starts configuring a client over an SDK client, which brings its own region, endpoint,
    /// credentials and retry settings.
    pub fn builder(dynamodb: aws_sdk_dynamodb::Client) -> LockClientBuilder {
        LockClientBuilder::new(dynamodb)
    }

    pub(crate) fn from_settings(settings: Settings) -> Self {
        LockClient {
            settings: Arc::new(settings),
        }
    }

    /// The lock table's name.
    pub fn table_name(&self) -> &str {
        &self.settings.table.name
    }

    /// The lease used when [`AcquireOptions`] sets none.
    pub fn default_lease(&self) -> Duration {
        self.settings.lease
    }

    /// The owner used when [`AcquireOptions`] names none.
    pub fn default_owner(&self) -> &str {
        &self.settings.owner
    }

    /// Waits until every release this client (or a clone) sent in the background has finished:
    /// those of dropped [`LockGuard`](crate::LockGuard)s, of a `release()` or an acquisition
    /// whose future was dropped mid-request. Call it before a Lambda handler returns: the
    /// execution environment is frozen afterwards, and a release still in flight would wait for
    /// the next invocation (the lock meanwhile held until its lease ends).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::AcquireOptions;
    ///
    /// {
    ///     let _guard = client.lock("orders/42", &AcquireOptions::new()).await?;
    ///     // ... work; the guard is dropped here, its release sent from a spawned task ...
    /// }
    /// client.flush().await; // the release has been answered
    /// # Ok(()) }
    /// ```
    pub async fn flush(&self) {
        self.settings.table.background.finished().await;
    }

    /// Releases every lock this client (and its clones) holds, for shutdown: a container's
    /// SIGTERM, the end of a Lambda invocation. One release request per lock, sent concurrently;
    /// then waits for the client's background releases ([`flush`](Self::flush)).
    ///
    /// It covers every lock acquired through the client and not yet released through it, found
    /// lost or run out of lease, whichever call took it: [`acquire`](Self::acquire),
    /// [`try_acquire`](Self::try_acquire), [`lock`](Self::lock) and the rest. A
    /// [`LockGuard`](crate::LockGuard) among them stops extending and says released
    /// ([`LockLost::Released`](crate::LockLost::Released)) before its release is sent, so no guard
    /// reports a lock held that is being released; a guard whose acquisition completes while
    /// `release_all` runs starts released. An acquisition still in flight when it is called may
    /// complete after it and stay held: stop acquiring first. A lock whose release fails (the
    /// error is in its entry) is still remembered, for another `release_all`.
    ///
    /// Returns each lock with its release's outcome: [`ReleaseOutcome::Released`], or
    /// [`NotFound`](ReleaseOutcome::NotFound) / [`NotOwner`](ReleaseOutcome::NotOwner) for a lock
    /// that was lost meanwhile (left untouched).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use tokio::signal::unix::{signal, SignalKind};
    ///
    /// let mut terminate = signal(SignalKind::terminate()).expect("a signal handler");
    /// terminate.recv().await;
    /// for (lock, outcome) in client.release_all().await {
    ///     eprintln!("{}: {:?}", lock.resource(), outcome);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn release_all(&self) -> Vec<(LockHandle, Result<ReleaseOutcome, Error>)> {
        let table = &self.settings.table;
        let held = table.holds.take_all();
        for lock in &held {
            lock.stop(&LockLost::Released);
        }
        // Each release runs in a task of its own, so that dropping this future (a shutdown
        // deadline, a `select!`) neither cancels a release nor forgets a lock: `flush` still
        // waits for them, and a failed one is remembered again.
        let releases: Vec<_> = held
            .into_iter()
            .map(|lock| {
                let (answer, answered) = tokio::sync::oneshot::channel();
                let client = self.clone();
                let spawned_lock = lock.clone();
                let spawned = self.release_in_background(async move {
                    let _ = answer.send(client.release_remembering(&spawned_lock).await);
                });
                (lock, spawned.then_some(answered))
            })
            .collect();
        let mut outcomes = Vec::with_capacity(releases.len());
        for (lock, answered) in releases {
            let outcome = match answered {
                Some(answered) => answered.await.unwrap_or_else(|_| {
                    Err(Error::ReleaseAbandoned {
                        resource: lock.handle.resource().to_owned(),
                    })
                }),
                // No runtime to spawn on (another executor polls this): released here.
                None => self.release_remembering(&lock).await,
            };
            outcomes.push((lock.handle, outcome));
        }
        self.flush().await;
        outcomes
    }

    /// Releases `lock`, remembering it again if the release failed.
    async fn release_remembering(&self, lock: &Held) -> Result<ReleaseOutcome, Error> {
        let outcome = self.release(&lock.handle).await;
        if outcome.is_err() {
            self.settings
                .table
                .holds
                .acquired(&lock.handle, lock.acquired_at, lock.until);
        }
        outcome
    }

    /// The table and memory the client's operations share.
    pub(crate) fn table(&self) -> &Arc<LockTable> {
        &self.settings.table
    }

    /// Sends `release` from a spawned task that [`flush`](Self::flush) waits for; false if
    /// there is no runtime to spawn it on.
    pub(crate) fn release_in_background(
        &self,
        release: impl Future<Output = ()> + Send + 'static,
    ) -> bool {
        self.settings.table.release_in_background(release)
    }

    /// Tries once to take the lock on `resource`: one conditional PutItem.
    ///
    /// Returns `Ok(None)` when someone else holds a live lock on it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::AcquireOptions;
    ///
    /// match client.try_acquire("nightly-report", &AcquireOptions::new()).await? {
    ///     Some(lock) => {
    ///         // ... produce the report ...
    ///         client.release(&lock).await?;
    ///     }
    ///     None => println!("another worker is on it; skipping this run"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(
        &self,
        resource: &str,
        opts: &AcquireOptions,
    ) -> Result<Option<Lock>, Error> {
        Ok(match self.try_acquire_with_holder(resource, opts).await? {
            AcquireAttempt::Acquired(lock) => Some(lock),
            AcquireAttempt::Held(_) => None,
        })
    }

    /// [`try_acquire`](Self::try_acquire), telling who holds the lock when it is refused (from
    /// the refused write's answer: no extra request).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::{AcquireAttempt, AcquireOptions};
    ///
    /// match client.try_acquire_with_holder("nightly-report", &AcquireOptions::new()).await? {
    ///     AcquireAttempt::Acquired(lock) => client.release(&lock).await.map(|_| ())?,
    ///     AcquireAttempt::Held(holder) => println!("{} runs it until {}", holder.owner, holder.expires_at),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire_with_holder(
        &self,
        resource: &str,
        opts: &AcquireOptions,
    ) -> Result<AcquireAttempt, Error> {
        let request = self.request(resource, opts)?;
        wait::try_once(&self.settings.table, &request, self.settings.backoff).await
    }

    /// Takes the lock on `resource`, retrying until the timeout (the options', else the client's).
    ///
    /// Between attempts it sleeps a full-jitter exponential backoff, cut short to the holder's
    /// expiry when that comes first (the failed attempt returns the holder's `ExpiresAt`), and to
    /// the deadline, at which it makes one last attempt. On timeout the error names the resource,
    /// the time waited and the last holder seen. A zero timeout makes exactly one attempt.
    ///
    /// Tasks waiting for the same resource through this client (or its clones) line up, first come
    /// first served, and only the first in line makes requests. While another task of this client
    /// holds the lock, the first in line polls only once per backoff maximum (in case another
    /// process releases it): a [`release`](Self::release) through this client wakes it, and it
    /// makes its PutItem at once.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::{AcquireOptions, Error};
    /// use std::time::Duration;
    ///
    /// let opts = AcquireOptions::new().timeout(Duration::from_secs(2));
    /// match client.acquire("user/42/default-graph", &opts).await {
    ///     Ok(lock) => client.release(&lock).await.map(|_| ())?,
    ///     Err(Error::Timeout { holder, .. }) => eprintln!("still held: {holder:?}"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self, resource: &str, opts: &AcquireOptions) -> Result<Lock, Error> {
        self.acquire_with_stats(resource, opts).await.0
    }

    /// [`acquire`](Self::acquire), also reporting how many conditional writes it made and how
    /// long it waited, whatever the outcome (for metrics: every attempt is a billed request).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) {
    /// use ddb_lock::AcquireOptions;
    ///
    /// let (result, stats) = client.acquire_with_stats("orders/42", &AcquireOptions::new()).await;
    /// println!("{} attempts over {:?}: {}", stats.attempts, stats.waited, result.is_ok());
    /// # }
    /// ```
    pub async fn acquire_with_stats(
        &self,
        resource: &str,
        opts: &AcquireOptions,
    ) -> (Result<Lock, Error>, AcquireStats) {
        let started = Instant::now();
        let mut stats = AcquireStats {
            attempts: 0,
            waited: Duration::ZERO,
        };
        // Not a helper `async fn`: every layer of future here nests in the callers' futures.
        let result = match self.request(resource, opts).and_then(|request| {
            let timeout = opts
                .timeout_duration()
                .unwrap_or(self.settings.acquire_timeout);
            limits::duration("timeout", timeout, Duration::ZERO)?;
            Ok((request, started + timeout))
        }) {
            Ok((request, deadline)) => {
                let wait = Wait {
                    table: &self.settings.table,
                    request: &request,
                    bounds: self.settings.backoff,
                    started,
                    deadline,
                };
                wait.run(&mut stats).await
            }
            Err(err) => Err(err),
        };
        stats.waited = started.elapsed();
        (result, stats)
    }

    /// The validated acquisition request of `opts`, with this client's defaults.
    pub(crate) fn request<'a>(
        &'a self,
        resource: &'a str,
        opts: &'a AcquireOptions,
    ) -> Result<Request<'a>, Error> {
        let defaults = (self.settings.owner.as_str(), self.settings.lease);
        Request::new(&self.settings.table, resource, opts, defaults)
    }

    /// Releases a lock: one DeleteItem conditioned on the acquisition's `LockID` and `Owner`.
    ///
    /// If a task of this client is waiting for the resource in [`acquire`](Self::acquire), the
    /// release wakes it, and it makes its PutItem at once.
    ///
    /// Accepts a [`Lock`] or a [`LockHandle`]. A lock that is already gone is
    /// [`ReleaseOutcome::NotFound`]; a lock someone else holds now is left untouched and reported as
    /// [`ReleaseOutcome::NotOwner`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient, lock: ddb_lock::Lock) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::ReleaseOutcome;
    ///
    /// let outcome = client.release(&lock).await?;
    /// assert_eq!(outcome, ReleaseOutcome::Released);
    /// # Ok(()) }
    /// ```
    pub async fn release(&self, lock: impl AsRef<LockHandle>) -> Result<ReleaseOutcome, Error> {
        self.release_changing_data(lock.as_ref(), DataChange::Keep)
            .await
    }

    /// Releases a held lock as [`release`](Self::release) does, keeping the item (one
    /// UpdateItem) with `data` as its payload for the next holder (`None` removes it). Only on a
    /// client that keeps items ([`delete_on_release(false)`](crate::LockClientBuilder::delete_on_release));
    /// on one that deletes them it is [`InvalidInput::DataNotKept`](crate::InvalidInput::DataNotKept)
    /// and nothing is sent. If the release finds the lock lost, the payload is not written.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient, lock: ddb_lock::Lock) -> Result<(), ddb_lock::Error> {
    /// client
    ///     .release_and_replace_data(&lock, Some(br#"{"last_row":9812}"#.to_vec()))
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn release_and_replace_data(
        &self,
        lock: impl AsRef<LockHandle>,
        data: Option<Vec<u8>>,
    ) -> Result<ReleaseOutcome, Error> {
        if self.settings.table.delete_on_release {
            return Err(InvalidInput::DataNotKept.into());
        }
        if let Some(data) = &data {
            limits::data(data)?;
        }
        let change = data
            .as_deref()
            .map_or(DataChange::Remove, DataChange::Replace);
        self.release_changing_data(lock.as_ref(), change).await
    }

    async fn release_changing_data(
        &self,
        handle: &LockHandle,
        change: DataChange<'_>,
    ) -> Result<ReleaseOutcome, Error> {
        self.settings.table.check_handle(handle)?;
        let release = Release::of(handle);
        release::send(&self.settings.table, &release, change).await
    }

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

    /// Releases the lock on `resource` if `owner` holds it, whatever its `LockID`: one DeleteItem
    /// conditioned on `Owner` alone. For cleaning up after an owner that can no longer release
    /// with its lock id, such as a Step Functions execution that failed, timed out or was
    /// aborted. Safe only where owner names are unique per holder (execution ARNs are).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// let execution = "arn:aws:states:eu-west-1:123456789012:execution:checkout:7b1e";
    /// client.release_owned("invoice/2026-0042", execution).await?;
    /// # Ok(()) }
    /// ```
    pub async fn release_owned(
        &self,
        resource: &str,
        owner: &str,
    ) -> Result<ReleaseOutcome, Error> {
        self.settings.table.check_resource(resource)?;
        limits::owner(owner)?;
        let release = Release::owned(resource, owner, None);
        release::send(&self.settings.table, &release, DataChange::Keep).await
    }

    /// [`release_owned`](Self::release_owned), sparing a lock of `owner` acquired after
    /// `acquired_by`: one DeleteItem conditioned on `Owner` and on `AcquiredAt <= acquired_by`.
    ///
    /// For releasing the lock of a Step Functions execution that stopped at `acquired_by` (the
    /// stop time its status-change event carries): if the execution was redriven since, under the
    /// same execution ARN, and took the lock again, that newer lock is left alone (reported as
    /// [`ReleaseOutcome::NotOwner`]), however late or often the event arrives. `AcquiredAt` is
    /// the acquirer's clock and the stop time the service's: a redrive sooner after the stop than
    /// the skew between them could be mistaken for the old acquisition.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use chrono::{TimeZone, Utc};
    ///
    /// let execution = "arn:aws:states:eu-west-1:123456789012:execution:checkout:7b1e";
    /// let stopped_at = Utc.timestamp_millis_opt(1_795_459_402_000).unwrap();
    /// client
    ///     .release_owned_acquired_by("invoice/2026-0042", execution, stopped_at)
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn release_owned_acquired_by(
        &self,
        resource: &str,
        owner: &str,
        acquired_by: DateTime<Utc>,
    ) -> Result<ReleaseOutcome, Error> {
        self.settings.table.check_resource(resource)?;
        limits::owner(owner)?;
        let release = Release::owned(resource, owner, Some(acquired_by));
        release::send(&self.settings.table, &release, DataChange::Keep).await
    }

    /// Extends a held lock so that its lease ends `lease` from now: one UpdateItem of `ExpiresAt`
    /// and `TTL`, conditioned on the same `LockID` and `Owner`, on the lease not having ended, and
    /// on the stored lease end not being later than the new one: an extension never shortens a
    /// lease. If another extension of this lock already stored a later end, that one stands and
    /// is returned (with a [`valid_until`](Lock::valid_until) counted from this request).
    ///
    /// Returns the lock with its new expiry, or how it was lost.
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
        extend::extend(&self.settings.table, lock.as_ref(), lease, DataChange::Keep).await
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
        extend::extend(&self.settings.table, lock.as_ref(), lease, change).await
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
