//! The lock operations: acquire, release, extend, status and force release, each one DynamoDB
//! request (acquire repeats its request until it wins or times out).
//!
//! Every conditional request asks for `ReturnValuesOnConditionCheckFailure = ALL_OLD`, so a failed
//! condition comes back with the item that failed it, at no extra request. That item tells a
//! waiter who holds the lock and until when, and it resolves the SDK's own retries: if a PutItem
//! succeeded but its answer was lost, the retry fails its condition on an item carrying our own
//! `LockID`, which is a success, not contention.

use crate::background::BackgroundReleases;
use crate::backoff::{Backoff, BackoffBounds};
use crate::builder::LockClientBuilder;
use crate::clock::Clock;
use crate::error::{Error, InvalidInput};
use crate::fencing::FencingToken;
use crate::in_flight::InFlightAcquisition;
use crate::item::{self, Item, Record, Written};
use crate::limits;
use crate::lock::{Holder, Lock, LockHandle, LockId};
use crate::options::AcquireOptions;
use crate::outcome::{AcquireAttempt, AcquireStats, ExtendOutcome, LockStatus, ReleaseOutcome};
use crate::queue::{Place, WaitQueues};
use crate::takeover::{Observations, TakeoverRule};
use crate::timestamp;
use crate::transmissions::Transmissions;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::builders::PutItemFluentBuilder;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{
    AttributeValue, CancellationReason, Put, ReturnValue, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};
use chrono::{DateTime, SubsecRound, TimeDelta, Utc};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tracing::{debug, info, warn};

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
    settings: Arc<Settings>,
}

/// Validated configuration, shared by clones of a client.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) dynamodb: aws_sdk_dynamodb::Client,
    pub(crate) table_name: String,
    pub(crate) key_prefix: String,
    pub(crate) owner: String,
    pub(crate) lease: Duration,
    pub(crate) acquire_timeout: Duration,
    pub(crate) backoff: BackoffBounds,
    pub(crate) ttl_grace: Duration,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) takeover: TakeoverRule,
    pub(crate) observations: Observations,
    /// This client's waiters, in line per resource.
    pub(crate) queues: WaitQueues,
    /// Releases sent from spawned tasks (dropped guards, dropped acquisitions).
    pub(crate) background: BackgroundReleases,
    /// Added to the clock (in microseconds) when guessing a fencing token: raised whenever a guess
    /// was stale, so that a client behind the tokens already issued pays for it once (a hybrid
    /// logical clock).
    pub(crate) token_offset: AtomicU64,
}

/// A validated acquisition request.
struct Request<'a> {
    resource: &'a str,
    owner: &'a str,
    lease: Duration,
    idempotent: bool,
    fencing: bool,
    data: Option<&'a [u8]>,
}

/// The outcome of one acquisition attempt.
enum Attempt {
    Acquired(Lock),
    /// Someone else holds the lock; this client's rule lets it try again at `retry_at`.
    Held {
        holder: Holder,
        retry_at: Instant,
    },
    /// A concurrent write to the same items cancelled a fenced acquisition's transaction, or
    /// changed the item between a refusal and the reclaim that followed it.
    Conflict,
}

/// What a lock-item update changes besides the lease.
#[derive(Clone, Copy)]
enum DataChange<'a> {
    Keep,
    Replace(&'a [u8]),
    Remove,
}

/// How many times a fenced acquisition re-reads a fence token that moved under it, or retries a
/// transaction cancelled by a conflict, within one attempt.
const MAX_FENCE_TRIES: u32 = 3;

/// How many times a data replacement is written again because another extension of the same lock
/// stored a later lease end first.
const MAX_EXTEND_TRIES: u32 = 3;

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
        &self.settings.table_name
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
        self.settings.background.finished().await;
    }

    /// Sends `release` from a spawned task that [`flush`](Self::flush) waits for; false if
    /// there is no runtime to spawn it on.
    pub(crate) fn release_in_background(
        &self,
        release: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> bool {
        self.settings.background.spawn(release)
    }

    pub(crate) fn dynamodb(&self) -> &aws_sdk_dynamodb::Client {
        &self.settings.dynamodb
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
        let mut backoff = Backoff::new(self.settings.backoff);
        for tries in 1..=MAX_FENCE_TRIES {
            match self.put_lock(&request, None).await? {
                Attempt::Acquired(lock) => {
                    log_acquired(&lock, Duration::ZERO, tries);
                    return Ok(AcquireAttempt::Acquired(lock));
                }
                Attempt::Held { holder, .. } => {
                    debug!(resource, owner = request.owner, holder = %holder.owner, "lock held by another owner");
                    return Ok(AcquireAttempt::Held(holder));
                }
                Attempt::Conflict => tokio::time::sleep(backoff.next_delay()).await,
            }
        }
        Err(Error::backend_other(
            "TransactWriteItems",
            TransactionConflicts(MAX_FENCE_TRIES),
        ))
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
        let result = self.acquire_loop(resource, opts, started, &mut stats).await;
        stats.waited = started.elapsed();
        (result, stats)
    }

    async fn acquire_loop(
        &self,
        resource: &str,
        opts: &AcquireOptions,
        started: Instant,
        stats: &mut AcquireStats,
    ) -> Result<Lock, Error> {
        let request = self.request(resource, opts)?;
        let timeout = opts
            .timeout_duration()
            .unwrap_or(self.settings.acquire_timeout);
        limits::duration("timeout", timeout, Duration::ZERO)?;
        let deadline = started + timeout;
        let mut backoff = Backoff::new(self.settings.backoff);
        let mut last_holder: Option<Holder> = None;
        let queues = &self.settings.queues;
        let place = queues.join(resource);
        // Behind other tasks of this client: wait for our turn. If the deadline comes first, the
        // one last attempt below is still made.
        let first = tokio::time::timeout_at(deadline, place.first()).await.ok();
        // An idempotent request does not wait for a lock this client holds: it may be its own,
        // which it takes back at once (a saga step retried in the same Lambda instance).
        let waits_for_release_here = first.is_some() && !request.idempotent;
        loop {
            if waits_for_release_here {
                self.wait_while_held_here(&place, resource, deadline).await;
            }
            // Registered before the attempt, so that a release during it is not missed.
            let freed = place.freed();
            tokio::pin!(freed);
            freed.as_mut().enable();
            stats.attempts += 1;
            let attempts = stats.attempts;
            let floor = last_holder.as_ref().and_then(|h| h.fencing_token);
            let retry_at = match self.put_lock(&request, floor).await? {
                Attempt::Acquired(lock) => {
                    log_acquired(&lock, started.elapsed(), attempts);
                    return Ok(lock);
                }
                Attempt::Held { holder, retry_at } => {
                    last_holder = Some(holder);
                    retry_at
                }
                Attempt::Conflict => Instant::now() + self.settings.backoff.max(),
            };
            let now = Instant::now();
            if now >= deadline {
                let Some(holder) = last_holder else {
                    return Err(Error::backend_other(
                        "TransactWriteItems",
                        TransactionConflicts(attempts),
                    ));
                };
                let waited = now - started;
                info!(
                    resource,
                    owner = request.owner,
                    holder = %holder.owner,
                    waited_ms = millis(waited),
                    attempts,
                    "lock acquire timed out"
                );
                return Err(Error::Timeout {
                    resource: resource.to_owned(),
                    waited,
                    holder: Box::new(holder),
                });
            }
            if waits_for_release_here && queues.held_here(resource, now).is_some() {
                continue;
            }
            let delay = backoff
                .next_delay()
                .min(retry_at.saturating_duration_since(now))
                .min(deadline - now);
            debug!(resource, delay_ms = millis(delay), "lock held; backing off");
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = &mut freed, if first.is_some() => {}
            }
        }
    }

    /// While this client holds the lock on `resource` (taken by another of its tasks), waits for
    /// its release through this client, its lease end, the deadline, or the backoff's largest
    /// delay, whichever comes first: the last, in case it is released elsewhere.
    async fn wait_while_held_here(&self, place: &Place<'_>, resource: &str, deadline: Instant) {
        let freed = place.freed();
        tokio::pin!(freed);
        freed.as_mut().enable();
        let now = Instant::now();
        let Some(lease_end) = self.settings.queues.held_here(resource, now) else {
            return;
        };
        let wake = lease_end
            .min(now + self.settings.backoff.max())
            .min(deadline);
        debug!(
            resource,
            "lock held by this client; waiting for its release"
        );
        tokio::select! {
            () = tokio::time::sleep_until(wake) => {}
            () = freed => {}
        }
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
        let handle = lock.as_ref();
        self.check_handle(handle)?;
        self.delete_lock(handle.resource(), handle.owner(), Some(handle.lock_id()))
            .await
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
        limits::resource(resource, &self.settings.key_prefix)?;
        limits::owner(owner)?;
        self.delete_lock(resource, owner, None).await
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
        limits::resource(resource, &self.settings.key_prefix)?;
        limits::owner(owner)?;
        self.delete_lock_where(resource, owner, None, Some(acquired_by))
            .await
    }

    /// The DeleteItem of release (`lock_id` given) and release_owned (owner only).
    pub(crate) async fn delete_lock(
        &self,
        resource: &str,
        owner: &str,
        lock_id: Option<LockId>,
    ) -> Result<ReleaseOutcome, Error> {
        self.delete_lock_where(resource, owner, lock_id, None).await
    }

    /// The release DeleteItem: by acquisition (`lock_id`), else by owner, perhaps only for a lock
    /// acquired no later than `acquired_by`.
    async fn delete_lock_where(
        &self,
        resource: &str,
        owner: &str,
        lock_id: Option<LockId>,
        acquired_by: Option<DateTime<Utc>>,
    ) -> Result<ReleaseOutcome, Error> {
        let condition = match (lock_id, acquired_by) {
            (Some(_), _) => item::RELEASE_CONDITION,
            (None, Some(_)) => item::RELEASE_OWNED_BY_CONDITION,
            (None, None) => item::RELEASE_OWNED_CONDITION,
        };
        let transmissions = Transmissions::default();
        let result = self
            .dynamodb()
            .delete_item()
            .table_name(self.table_name())
            .set_key(Some(self.key(resource)))
            .condition_expression(condition)
            .set_expression_attribute_names(Some(item::names_for(&[condition])))
            .set_expression_attribute_values(Some(
                [
                    (":owner", Some(s(owner))),
                    (":lock_id", lock_id.map(|id| s(id.to_string()))),
                    (
                        ":acquired_by",
                        acquired_by.map(|t| s(timestamp::format(t.trunc_subsecs(3)))),
                    ),
                ]
                .into_iter()
                .filter_map(|(name, value)| Some((name.to_owned(), value?)))
                .collect(),
            ))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .customize()
            .interceptor(transmissions.clone())
            .send()
            .await;
        match result {
            Ok(_) => {
                self.settings.queues.freed(resource, lock_id);
                info!(
                    resource,
                    owner,
                    lock_id = lock_id.map(|id| id.short()),
                    "lock released"
                );
                Ok(ReleaseOutcome::Released)
            }
            Err(err) => match err.as_service_error() {
                Some(DeleteItemError::ConditionalCheckFailedException(failed)) => {
                    // Not ours (any more): not held by this client either.
                    self.settings.queues.freed(resource, lock_id);
                    let record = self.record(resource, failed.item())?;
                    let retried = transmissions.retried();
                    Ok(self.not_released(resource, owner, lock_id, record, retried))
                }
                _ => Err(Error::backend("DeleteItem", err)),
            },
        }
    }

    /// What a release whose condition failed on `record` (ALL_OLD) tells its caller.
    fn not_released(
        &self,
        resource: &str,
        owner: &str,
        lock_id: Option<LockId>,
        record: Option<Record>,
        retried: bool,
    ) -> ReleaseOutcome {
        // A retry may have failed on what our own earlier attempt did: deleted our item, after
        // which someone else may have acquired. Never call that a mismatch; it is at most "not
        // found".
        let ours = |r: &Record| match lock_id {
            Some(id) => r.lock_id == id,
            None => r.holder.owner == owner,
        };
        let outcome = match record {
            Some(record) if retried && !ours(&record) => {
                info!(resource, owner, "release was retried after an answer was lost; the lock is gone, perhaps by that attempt");
                ReleaseOutcome::NotFound
            }
            Some(record) if record.holder.is_live_at(self.now()) => ReleaseOutcome::NotOwner {
                holder: record.holder,
            },
            _ => ReleaseOutcome::NotFound,
        };
        info!(resource, owner, ?outcome, "lock not released");
        outcome
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
        self.update_lock(lock.as_ref(), lease, DataChange::Keep)
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
        self.update_lock(lock.as_ref(), lease, change).await
    }

    /// The UpdateItem of extend: a new lease, a new version, perhaps a new payload.
    async fn update_lock(
        &self,
        handle: &LockHandle,
        lease: Duration,
        change: DataChange<'_>,
    ) -> Result<ExtendOutcome, Error> {
        self.check_handle(handle)?;
        let lease = limits::lease(lease)?;
        let sent = Instant::now();
        let now = self.now();
        let mut expires_at = after(now, lease, "lease")?;
        let mut tries = 0;
        let record = loop {
            tries += 1;
            let version = uuid::Uuid::new_v4().to_string();
            let failed_on = match self
                .update_lock_item(handle, lease, change, now, expires_at, &version)
                .await?
            {
                Ok(record) => break record,
                Err(failed_on) => failed_on,
            };
            match failed_on {
                // An SDK retry failed on the item its own earlier attempt wrote.
                Some(record) if record.version == version => break record,
                // Only "never shorten" failed: a later extension of this very lock was stored
                // first (sent later but applied earlier, or this one is a late retry). The stored,
                // longer lease stands; the lock is returned with it, and with a monotonic lease
                // counted from this request's send, which cannot outlast the stored one. A data
                // change was not applied: it is written again with the stored lease end.
                Some(record)
                    if record.lock_id == handle.lock_id()
                        && record.holder.owner == handle.owner()
                        && record.holder.expires_at > expires_at =>
                {
                    if matches!(change, DataChange::Keep) {
                        break record;
                    }
                    if tries >= MAX_EXTEND_TRIES {
                        return Err(Error::UnexpectedResponse {
                            operation: "UpdateItem",
                            detail: "concurrent extensions of the lock kept moving its lease end; the data was not replaced",
                        });
                    }
                    expires_at = record.holder.expires_at;
                }
                record => {
                    let outcome = self.lost_outcome(handle, record, now);
                    self.settings
                        .queues
                        .freed(handle.resource(), Some(handle.lock_id()));
                    warn!(
                        resource = handle.resource(),
                        owner = handle.owner(),
                        ?outcome,
                        "lock not extended"
                    );
                    return Ok(outcome);
                }
            }
        };
        let lock = Lock::new(
            handle.clone(),
            record.holder.acquired_at,
            record.holder.expires_at,
            sent + lease,
        )
        .with_fencing_token(record.holder.fencing_token);
        self.settings.queues.extended(
            handle.resource(),
            handle.lock_id(),
            lock.valid_until_instant(),
        );
        info!(
            resource = handle.resource(),
            owner = handle.owner(),
            lock_id = %handle.lock_id().short(),
            lease_ms = millis(lease),
            held_ms = millis(span(lock.acquired_at(), now)),
            "lock extended"
        );
        Ok(ExtendOutcome::Extended(lock))
    }

    /// One UpdateItem of extend, to `expires_at`: `Ok(Ok(record))` as written, `Ok(Err(record))`
    /// with the item its condition failed on (`ALL_OLD`), if any.
    async fn update_lock_item(
        &self,
        handle: &LockHandle,
        lease: Duration,
        change: DataChange<'_>,
        now: DateTime<Utc>,
        expires_at: DateTime<Utc>,
        version: &str,
    ) -> Result<Result<Record, Option<Record>>, Error> {
        let update = match change {
            DataChange::Keep => item::EXTEND_UPDATE.to_owned(),
            DataChange::Replace(_) => {
                format!("{}{}", item::EXTEND_UPDATE, item::EXTEND_REPLACE_DATA)
            }
            DataChange::Remove => format!("{}{}", item::EXTEND_UPDATE, item::EXTEND_REMOVE_DATA),
        };
        let mut values = HashMap::from([
            (":expires_at", s(timestamp::format(expires_at))),
            (
                ":ttl",
                AttributeValue::N(self.ttl_epoch_seconds(expires_at)?.to_string()),
            ),
            (":version", s(version)),
            (":lease_ms", item::millis(lease)),
            (":lock_id", s(handle.lock_id().to_string())),
            (":owner", s(handle.owner())),
            (":now", s(timestamp::format(now))),
        ]);
        if let DataChange::Replace(data) = change {
            values.insert(":data", AttributeValue::B(Blob::new(data)));
        }
        let values = values
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect();
        let result = self
            .dynamodb()
            .update_item()
            .table_name(self.table_name())
            .set_key(Some(self.key(handle.resource())))
            .update_expression(&update)
            .condition_expression(item::EXTEND_CONDITION)
            .set_expression_attribute_names(Some(item::names_for(&[
                &update,
                item::EXTEND_CONDITION,
            ])))
            .set_expression_attribute_values(Some(values))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(out) => Ok(Ok(self
                .record(handle.resource(), out.attributes())?
                .ok_or(Error::UnexpectedResponse {
                    operation: "UpdateItem",
                    detail: "no attributes despite ReturnValues = ALL_NEW",
                })?)),
            Err(err) => match err.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                    Ok(Err(self.record(handle.resource(), failed.item())?))
                }
                _ => Err(Error::backend("UpdateItem", err)),
            },
        }
    }

    /// Why an extension's condition failed, from the item it failed on.
    fn lost_outcome(
        &self,
        handle: &LockHandle,
        record: Option<Record>,
        now: DateTime<Utc>,
    ) -> ExtendOutcome {
        match record {
            None => ExtendOutcome::NotFound,
            Some(record)
                if record.lock_id == handle.lock_id() && record.holder.owner == handle.owner() =>
            {
                ExtendOutcome::Expired {
                    expired_at: record.holder.expires_at,
                }
            }
            Some(record) if record.holder.is_live_at(now) => ExtendOutcome::NotOwner {
                holder: record.holder,
            },
            Some(_) => ExtendOutcome::NotFound,
        }
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
        limits::resource(resource, &self.settings.key_prefix)?;
        let out = self
            .dynamodb()
            .get_item()
            .table_name(self.table_name())
            .set_key(Some(self.key(resource)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| Error::backend("GetItem", e))?;
        let now = self.now();
        Ok(match self.record(resource, out.item())? {
            Some(record) if record.holder.is_live_at(now) => LockStatus::Held {
                remaining: span(now, record.holder.expires_at),
                holder: record.holder,
            },
            _ => LockStatus::Free,
        })
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
        limits::resource(resource, &self.settings.key_prefix)?;
        let out = self
            .dynamodb()
            .delete_item()
            .table_name(self.table_name())
            .set_key(Some(self.key(resource)))
            .return_values(ReturnValue::AllOld)
            .send()
            .await
            .map_err(|e| Error::backend("DeleteItem", e))?;
        self.settings.queues.freed(resource, None);
        let now = self.now();
        let removed = match self.record(resource, out.attributes()) {
            Ok(Some(record)) if record.holder.is_live_at(now) => Some(record.holder),
            Ok(_) => None,
            Err(malformed) => {
                warn!(resource, %malformed, "force release deleted a malformed lock item");
                None
            }
        };
        warn!(
            resource,
            removed_owner = removed.as_ref().map(|h| h.owner.as_str()),
            "lock force-released"
        );
        Ok(removed)
    }

    /// Hands back this owner's live lock under the observed-lease rule. A waiter there times a
    /// version from when it first saw it, which may be long ago, so the wall clock's view of the
    /// remaining lease promises nothing: the lock is extended first (one UpdateItem, a new
    /// version), and its lease counts from that write. If the item changed meanwhile, the attempt
    /// is retried as after a conflict.
    async fn reclaim(&self, lock: Lock, lease: Duration) -> Result<Attempt, Error> {
        match self.extend(&lock, lease).await? {
            ExtendOutcome::Extended(extended) => Ok(self.acquired(extended)),
            outcome => {
                debug!(
                    resource = lock.resource(),
                    ?outcome,
                    "own lock changed before its reclaim"
                );
                Ok(Attempt::Conflict)
            }
        }
    }

    /// One acquisition attempt: a conditional PutItem of a new lock item, or with fencing a
    /// TransactWriteItems of that Put and the fence item's token. `floor` is a fencing token known
    /// to be issued already (the holder's, from an earlier refusal).
    async fn put_lock(
        &self,
        request: &Request<'_>,
        floor: Option<FencingToken>,
    ) -> Result<Attempt, Error> {
        let sent = Instant::now();
        let now = self.now();
        let handle = LockHandle::new(request.resource, request.owner, LockId::generate());
        let lock = Lock::new(
            handle,
            now,
            after(now, request.lease, "lease")?,
            sent + request.lease,
        );
        let version = uuid::Uuid::new_v4().to_string();
        let written = Written {
            version: &version,
            ttl_epoch_seconds: self.ttl_epoch_seconds(lock.expires_at())?,
            data: request.data,
        };
        let (condition, values) = self.acquire_condition(request.resource, now, sent);
        if request.fencing {
            return self
                .put_fenced(request, lock, &written, (condition, values), floor)
                .await;
        }
        let in_flight = InFlightAcquisition::new(self, lock.handle());
        let result = self
            .put_lock_item(&lock, &written)
            .condition_expression(condition)
            .set_expression_attribute_names(Some(item::names_for(&[condition])))
            .set_expression_attribute_values(values)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => {
                in_flight.answered();
                Ok(self.acquired(lock))
            }
            Err(err) => match err.as_service_error() {
                Some(PutItemError::ConditionalCheckFailedException(failed)) => {
                    in_flight.answered();
                    self.refused(request, lock, failed.item(), "PutItem").await
                }
                // No answer, or one that does not say whether the write was applied (a timeout,
                // a lost connection after the SDK's last retry): `in_flight` is dropped armed,
                // releasing what may have been written.
                _ => Err(Error::backend("PutItem", err)),
            },
        }
    }

    /// A PutItem of `lock`'s full item, to be given its condition.
    fn put_lock_item(&self, lock: &Lock, written: &Written<'_>) -> PutItemFluentBuilder {
        self.dynamodb()
            .put_item()
            .table_name(self.table_name())
            .set_item(Some(item::encode(&self.settings.key_prefix, lock, written)))
    }

    /// The fenced attempt: the lock item's Put and the fence item's token raise succeed or fail
    /// together. The token is guessed, so that no read is needed: the larger of `floor + 1` and the
    /// clock in microseconds plus the client's token offset. A stale guess fails only the fence
    /// item's condition, whose answer carries the current token; the attempt is retried at once
    /// with the next token, and the offset raised so that the next guess is not stale.
    async fn put_fenced(
        &self,
        request: &Request<'_>,
        lock: Lock,
        written: &Written<'_>,
        (condition, values): (&'static str, Option<HashMap<String, AttributeValue>>),
        floor: Option<FencingToken>,
    ) -> Result<Attempt, Error> {
        let clock_micros = u64::try_from(lock.acquired_at().timestamp_micros()).unwrap_or(0);
        let offset = &self.settings.token_offset;
        let guess = clock_micros.saturating_add(offset.load(Ordering::Relaxed));
        let mut token = FencingToken::new(guess.max(floor.map_or(0, |t| t.value() + 1)));
        for _ in 0..MAX_FENCE_TRIES {
            let lock = lock.clone().with_fencing_token(Some(token));
            let put = Put::builder()
                .table_name(self.table_name())
                .set_item(Some(item::encode(
                    &self.settings.key_prefix,
                    &lock,
                    written,
                )))
                .condition_expression(condition)
                .set_expression_attribute_names(Some(item::names_for(&[condition])))
                .set_expression_attribute_values(values.clone())
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .build()
                .map_err(|e| Error::backend_other("TransactWriteItems", e))?;
            let fence = Update::builder()
                .table_name(self.table_name())
                .set_key(Some(item::fence_key(
                    &self.settings.key_prefix,
                    request.resource,
                )))
                .update_expression(item::FENCE_UPDATE)
                .condition_expression(item::FENCE_CONDITION)
                .set_expression_attribute_names(Some(item::names_for(&[
                    item::FENCE_UPDATE,
                    item::FENCE_CONDITION,
                ])))
                .expression_attribute_values(":fencing_token", item::token(token))
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .build()
                .map_err(|e| Error::backend_other("TransactWriteItems", e))?;
            let in_flight = InFlightAcquisition::new(self, lock.handle());
            let result = self
                .dynamodb()
                .transact_write_items()
                .transact_items(TransactWriteItem::builder().put(put).build())
                .transact_items(TransactWriteItem::builder().update(fence).build())
                .send()
                .await;
            let err = match result {
                Ok(_) => {
                    in_flight.answered();
                    return Ok(self.acquired(lock));
                }
                Err(err) => err,
            };
            // Any other error leaves `in_flight` armed: the transaction may have been applied
            // by an attempt whose answer was lost, and what it wrote is released.
            let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) =
                err.as_service_error()
            else {
                return Err(Error::backend("TransactWriteItems", err));
            };
            let reasons = cancelled.cancellation_reasons();
            let code = |i: usize| reasons.get(i).and_then(CancellationReason::code);
            if code(0) == Some("ConditionalCheckFailed") {
                // The lock item refused it (our own LockID there, if an earlier attempt wrote it).
                in_flight.answered();
                let item = reasons.first().and_then(CancellationReason::item);
                return self
                    .refused(request, lock, item, "TransactWriteItems")
                    .await;
            }
            if code(1) == Some("ConditionalCheckFailed") {
                // Only the fence refused: nothing of ours is written (an earlier attempt's Put
                // would have failed the lock's condition too), and the next try reuses this
                // LockID, which a clean-up in the background must not delete.
                in_flight.answered();
                let item = reasons.get(1).and_then(CancellationReason::item);
                let current = item
                    .map(|item| item::decode_fence(request.resource, item))
                    .transpose()?
                    .flatten()
                    .ok_or(Error::UnexpectedResponse {
                        operation: "TransactWriteItems",
                        detail: "the fence condition failed but no token came back for ALL_OLD",
                    })?;
                debug!(resource = request.resource, %current, guessed = %token, "fencing token guess was stale");
                token = FencingToken::new(current.value() + 1);
                offset.fetch_max(
                    token.value().saturating_sub(clock_micros),
                    Ordering::Relaxed,
                );
                continue;
            }
            if (0..2).any(|i| code(i) == Some("TransactionConflict")) {
                return Ok(Attempt::Conflict);
            }
            return Err(Error::backend("TransactWriteItems", err));
        }
        Ok(Attempt::Conflict)
    }

    /// A successful attempt.
    fn acquired(&self, lock: Lock) -> Attempt {
        Attempt::Acquired(self.took(lock))
    }

    /// This client has taken `lock`: it no longer waits on the resource, and its waiters know
    /// who holds it.
    fn took(&self, lock: Lock) -> Lock {
        // Only the observed-lease rule remembers versions; the wall-clock path skips the lock.
        if self.settings.takeover == TakeoverRule::ObservedLease {
            self.settings.observations.forget(lock.resource());
        }
        self.settings
            .queues
            .acquired(lock.resource(), lock.lock_id(), lock.valid_until_instant());
        lock
    }

    /// What a refused attempt found in the item that refused it (`ALL_OLD`).
    async fn refused(
        &self,
        request: &Request<'_>,
        lock: Lock,
        item: Option<&Item>,
        operation: &'static str,
    ) -> Result<Attempt, Error> {
        let record = self
            .record(request.resource, item)?
            .ok_or(Error::UnexpectedResponse {
                operation,
                detail: "condition failed but no item came back for ALL_OLD",
            })?;
        if record.lock_id == lock.lock_id() {
            // An earlier try of this very request (an SDK retry after a lost answer) wrote it.
            debug!(
                resource = request.resource,
                "condition failed on our own LockID: a retried write had already succeeded"
            );
            return Ok(self.acquired(lock));
        }
        let received = Instant::now();
        let now = self.now();
        // A fenced request is not given back an unfenced lock: it has no token to offer.
        if request.idempotent
            && record.holder.owner == request.owner
            && record.holder.is_live_at(now)
            && (!request.fencing || record.holder.fencing_token.is_some())
        {
            debug!(
                resource = request.resource,
                owner = request.owner,
                "returning the live lock this owner already holds"
            );
            let handle = LockHandle::new(request.resource, request.owner, record.lock_id);
            let held = Lock::new(
                handle,
                record.holder.acquired_at,
                record.holder.expires_at,
                received + span(now, record.holder.expires_at),
            )
            .with_fencing_token(record.holder.fencing_token);
            return match self.settings.takeover {
                TakeoverRule::WallClock => Ok(self.acquired(held)),
                TakeoverRule::ObservedLease => self.reclaim(held, request.lease).await,
            };
        }
        let retry_at = match self.settings.takeover {
            // The condition is `ExpiresAt < :now`, so the lock frees a millisecond after ExpiresAt.
            TakeoverRule::WallClock => {
                received + span(now, record.holder.expires_at) + Duration::from_millis(1)
            }
            TakeoverRule::ObservedLease => self.settings.observations.observe(
                request.resource,
                &record.version,
                record.lease,
                received,
            ),
        };
        Ok(Attempt::Held {
            holder: record.holder,
            retry_at,
        })
    }

    /// The acquire condition under this client's takeover rule, and its values.
    fn acquire_condition(
        &self,
        resource: &str,
        now: DateTime<Utc>,
        sent: Instant,
    ) -> (&'static str, Option<HashMap<String, AttributeValue>>) {
        let (condition, value) = match self.settings.takeover {
            TakeoverRule::WallClock => (
                item::ACQUIRE_CONDITION,
                Some((":now", s(timestamp::format(now)))),
            ),
            TakeoverRule::ObservedLease => match self.settings.observations.ripe(resource, sent) {
                Some(version) => (item::TAKEOVER_CONDITION, Some((":version", s(version)))),
                None => (item::ACQUIRE_FREE_CONDITION, None),
            },
        };
        let values = value.map(|(name, value)| HashMap::from([(name.to_owned(), value)]));
        (condition, values)
    }

    fn request<'a>(
        &'a self,
        resource: &'a str,
        opts: &'a AcquireOptions,
    ) -> Result<Request<'a>, Error> {
        limits::resource(resource, &self.settings.key_prefix)?;
        let owner = opts.owner_name().unwrap_or(&self.settings.owner);
        limits::owner(owner)?;
        let lease = limits::lease(opts.lease_duration().unwrap_or(self.settings.lease))?;
        let data = opts.data_bytes();
        data.map(limits::data).transpose()?;
        Ok(Request {
            resource,
            owner,
            lease,
            idempotent: opts.is_idempotent(),
            fencing: opts.is_fencing(),
            data,
        })
    }

    fn check_handle(&self, handle: &LockHandle) -> Result<(), InvalidInput> {
        limits::resource(handle.resource(), &self.settings.key_prefix)?;
        limits::owner(handle.owner())
    }

    /// The key prefix of every lock item.
    pub(crate) fn key_prefix(&self) -> &str {
        &self.settings.key_prefix
    }

    /// The clock's reading at the stored precision, so that every `Lock` and `Holder` carries
    /// exactly the timestamps DynamoDB holds.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        self.settings.clock.now().trunc_subsecs(3)
    }

    fn key(&self, resource: &str) -> Item {
        item::key(&self.settings.key_prefix, resource)
    }

    fn record(&self, resource: &str, item: Option<&Item>) -> Result<Option<Record>, Error> {
        item.map(|item| item::decode(resource, item)).transpose()
    }

    /// The `TTL` value (epoch seconds) for a lease ending at `expires_at`: rounded up, so that
    /// even with no grace DynamoDB never deletes an item before its lease has ended.
    fn ttl_epoch_seconds(&self, expires_at: DateTime<Utc>) -> Result<i64, Error> {
        let deletable = after(expires_at, self.settings.ttl_grace, "ttl_grace")?;
        let rounded_up = i64::from(deletable.timestamp_subsec_nanos() > 0);
        Ok(deletable.timestamp() + rounded_up)
    }
}

fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

/// `t + d`, or the field's range error if that leaves chrono's range (validated durations never do).
fn after(t: DateTime<Utc>, d: Duration, field: &'static str) -> Result<DateTime<Utc>, Error> {
    TimeDelta::from_std(d)
        .ok()
        .and_then(|d| t.checked_add_signed(d))
        .ok_or_else(|| {
            InvalidInput::DurationTooLong {
                field,
                value: d,
                max: limits::MAX_DURATION,
            }
            .into()
        })
}

/// The time from `from` to `to`, zero if `to` is not later.
fn span(from: DateTime<Utc>, to: DateTime<Utc>) -> Duration {
    (to - from).to_std().unwrap_or(Duration::ZERO)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn log_acquired(lock: &Lock, waited: Duration, attempts: u32) {
    info!(
        resource = lock.resource(),
        owner = lock.owner(),
        lock_id = %lock.lock_id().short(),
        waited_ms = millis(waited),
        attempts,
        lease_ms = millis(span(lock.acquired_at(), lock.expires_at())),
        "lock acquired"
    );
}

/// Every try of a fenced acquisition was cancelled by concurrent writes to the same items.
#[derive(Debug)]
struct TransactionConflicts(u32);

impl fmt::Display for TransactionConflicts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} tries cancelled by concurrent writes to the lock item",
            self.0
        )
    }
}

impl std::error::Error for TransactionConflicts {}
