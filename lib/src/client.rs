//! The lock operations: acquire, release, extend, status and force release, each one DynamoDB
//! request (acquire repeats its request until it wins or times out).
//!
//! Every conditional request asks for `ReturnValuesOnConditionCheckFailure = ALL_OLD`, so a failed
//! condition comes back with the item that failed it, at no extra request. That item tells a
//! waiter who holds the lock and until when, and it resolves the SDK's own retries: if a PutItem
//! succeeded but its answer was lost, the retry fails its condition on an item carrying our own
//! `LockID`, which is a success, not contention.

use crate::backoff::{Backoff, BackoffBounds};
use crate::builder::LockClientBuilder;
use crate::clock::Clock;
use crate::error::{Error, InvalidInput};
use crate::item::{self, Item, Record};
use crate::limits::{self, MIN_LEASE};
use crate::lock::{Holder, Lock, LockHandle, LockId};
use crate::options::AcquireOptions;
use crate::outcome::{AcquireAttempt, AcquireStats, ExtendOutcome, LockStatus, ReleaseOutcome};
use crate::timestamp;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use chrono::{DateTime, SubsecRound, TimeDelta, Utc};
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
}

/// A validated acquisition request.
struct Request<'a> {
    resource: &'a str,
    owner: &'a str,
    lease: Duration,
    idempotent: bool,
    data: Option<&'a [u8]>,
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
        &self.settings.table_name
    }

    /// The owner used when [`AcquireOptions`] names none.
    pub fn default_owner(&self) -> &str {
        &self.settings.owner
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
        let attempt = self.put_lock(&request).await?;
        match &attempt {
            AcquireAttempt::Acquired(lock) => log_acquired(lock, Duration::ZERO, 1),
            AcquireAttempt::Held(holder) => {
                debug!(resource, owner = request.owner, holder = %holder.owner, "lock held by another owner");
            }
        }
        Ok(attempt)
    }

    /// Takes the lock on `resource`, retrying until the timeout (the options', else the client's).
    ///
    /// Between attempts it sleeps a full-jitter exponential backoff, cut short to the holder's
    /// expiry when that comes first (the failed attempt returns the holder's `ExpiresAt`), and to
    /// the deadline, at which it makes one last attempt. On timeout the error names the resource,
    /// the time waited and the last holder seen. A zero timeout makes exactly one attempt.
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
        loop {
            stats.attempts += 1;
            let attempts = stats.attempts;
            let holder = match self.put_lock(&request).await? {
                AcquireAttempt::Acquired(lock) => {
                    log_acquired(&lock, started.elapsed(), attempts);
                    return Ok(lock);
                }
                AcquireAttempt::Held(holder) => holder,
            };
            let now = Instant::now();
            if now >= deadline {
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
                    holder,
                });
            }
            // The condition is `ExpiresAt < :now`, so the lock frees one millisecond after ExpiresAt.
            let until_free = span(self.now(), holder.expires_at) + Duration::from_millis(1);
            let delay = backoff.next_delay().min(until_free).min(deadline - now);
            debug!(resource, holder = %holder.owner, delay_ms = millis(delay), "lock held; backing off");
            tokio::time::sleep(delay).await;
        }
    }

    /// Releases a lock: one DeleteItem conditioned on the acquisition's `LockID` and `Owner`.
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

    /// The DeleteItem of release (`lock_id` given) and release_owned (owner only).
    async fn delete_lock(
        &self,
        resource: &str,
        owner: &str,
        lock_id: Option<LockId>,
    ) -> Result<ReleaseOutcome, Error> {
        let condition = match lock_id {
            Some(_) => item::RELEASE_CONDITION,
            None => item::RELEASE_OWNED_CONDITION,
        };
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
                ]
                .into_iter()
                .filter_map(|(name, value)| Some((name.to_owned(), value?)))
                .collect(),
            ))
            .return_values(ReturnValue::AllOld)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let now = self.now();
        let lock_id = lock_id.map(|id| id.short());
        match result {
            Ok(out) => {
                let held = out
                    .attributes()
                    .and_then(|old| item::decode(resource, old).ok())
                    .map(|record| {
                        if !record.holder.is_live_at(now) {
                            warn!(
                                resource,
                                owner,
                                expired_at = %timestamp::format(record.holder.expires_at),
                                "released a lock whose lease had already ended"
                            );
                        }
                        span(record.holder.acquired_at, now)
                    });
                info!(
                    resource,
                    owner,
                    lock_id,
                    held_ms = held.map(millis),
                    "lock released"
                );
                Ok(ReleaseOutcome::Released)
            }
            Err(err) => match err.as_service_error() {
                Some(DeleteItemError::ConditionalCheckFailedException(failed)) => {
                    let outcome = match self.record(resource, failed.item())? {
                        Some(record) if record.holder.is_live_at(now) => ReleaseOutcome::NotOwner {
                            holder: record.holder,
                        },
                        _ => ReleaseOutcome::NotFound,
                    };
                    info!(resource, owner, ?outcome, "lock not released");
                    Ok(outcome)
                }
                _ => Err(Error::backend("DeleteItem", err)),
            },
        }
    }

    /// Extends a held lock so that its lease ends `lease` from now: one UpdateItem of `ExpiresAt`
    /// and `TTL`, conditioned on the same `LockID` and `Owner` and on the lease not having ended.
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
        let handle = lock.as_ref();
        self.check_handle(handle)?;
        limits::duration("lease", lease, MIN_LEASE)?;
        let now = self.now();
        let expires_at = after(now, lease, "lease")?;
        let result = self
            .dynamodb()
            .update_item()
            .table_name(self.table_name())
            .set_key(Some(self.key(handle.resource())))
            .update_expression(item::EXTEND_UPDATE)
            .condition_expression(item::EXTEND_CONDITION)
            .set_expression_attribute_names(Some(item::names_for(&[
                item::EXTEND_UPDATE,
                item::EXTEND_CONDITION,
            ])))
            .expression_attribute_values(":expires_at", s(timestamp::format(expires_at)))
            .expression_attribute_values(
                ":ttl",
                AttributeValue::N(self.ttl_epoch_seconds(expires_at)?.to_string()),
            )
            .expression_attribute_values(":lock_id", s(handle.lock_id().to_string()))
            .expression_attribute_values(":owner", s(handle.owner()))
            .expression_attribute_values(":now", s(timestamp::format(now)))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(out) => {
                let record = self.record(handle.resource(), out.attributes())?.ok_or(
                    Error::UnexpectedResponse {
                        operation: "UpdateItem",
                        detail: "no attributes despite ReturnValues = ALL_NEW",
                    },
                )?;
                let lock = Lock::new(
                    handle.clone(),
                    record.holder.acquired_at,
                    record.holder.expires_at,
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
            Err(err) => match err.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                    let outcome = match self.record(handle.resource(), failed.item())? {
                        None => ExtendOutcome::NotFound,
                        Some(record)
                            if record.lock_id == handle.lock_id()
                                && record.holder.owner == handle.owner() =>
                        {
                            ExtendOutcome::Expired {
                                expired_at: record.holder.expires_at,
                            }
                        }
                        Some(record) if record.holder.is_live_at(now) => ExtendOutcome::NotOwner {
                            holder: record.holder,
                        },
                        Some(_) => ExtendOutcome::NotFound,
                    };
                    warn!(
                        resource = handle.resource(),
                        owner = handle.owner(),
                        ?outcome,
                        "lock not extended"
                    );
                    Ok(outcome)
                }
                _ => Err(Error::backend("UpdateItem", err)),
            },
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

    /// One conditional PutItem of a new lock item.
    async fn put_lock(&self, request: &Request<'_>) -> Result<AcquireAttempt, Error> {
        let now = self.now();
        let handle = LockHandle::new(request.resource, request.owner, LockId::generate());
        let lock = Lock::new(handle, now, after(now, request.lease, "lease")?);
        let ttl = self.ttl_epoch_seconds(lock.expires_at())?;
        let result = self
            .dynamodb()
            .put_item()
            .table_name(self.table_name())
            .set_item(Some(item::encode(
                &self.settings.key_prefix,
                &lock,
                ttl,
                request.data,
            )))
            .condition_expression(item::ACQUIRE_CONDITION)
            .set_expression_attribute_names(Some(item::names_for(&[item::ACQUIRE_CONDITION])))
            .expression_attribute_values(":now", s(timestamp::format(now)))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let err = match result {
            Ok(_) => return Ok(AcquireAttempt::Acquired(lock)),
            Err(err) => err,
        };
        let Some(PutItemError::ConditionalCheckFailedException(failed)) = err.as_service_error()
        else {
            return Err(Error::backend("PutItem", err));
        };
        let record =
            self.record(request.resource, failed.item())?
                .ok_or(Error::UnexpectedResponse {
                    operation: "PutItem",
                    detail: "condition failed but no item came back for ALL_OLD",
                })?;
        if record.lock_id == lock.lock_id() {
            // An earlier try of this very request (an SDK retry after a lost answer) wrote it.
            debug!(
                resource = request.resource,
                "condition failed on our own LockID: a retried PutItem had already succeeded"
            );
            return Ok(AcquireAttempt::Acquired(lock));
        }
        if request.idempotent
            && record.holder.owner == request.owner
            && record.holder.is_live_at(now)
        {
            debug!(
                resource = request.resource,
                owner = request.owner,
                "returning the live lock this owner already holds"
            );
            let handle = LockHandle::new(request.resource, request.owner, record.lock_id);
            let held = Lock::new(handle, record.holder.acquired_at, record.holder.expires_at);
            return Ok(AcquireAttempt::Acquired(held));
        }
        Ok(AcquireAttempt::Held(record.holder))
    }

    fn request<'a>(
        &'a self,
        resource: &'a str,
        opts: &'a AcquireOptions,
    ) -> Result<Request<'a>, Error> {
        limits::resource(resource, &self.settings.key_prefix)?;
        let owner = opts.owner_name().unwrap_or(&self.settings.owner);
        limits::owner(owner)?;
        let lease = opts.lease_duration().unwrap_or(self.settings.lease);
        limits::duration("lease", lease, MIN_LEASE)?;
        let data = opts.data_bytes();
        data.map(limits::data).transpose()?;
        Ok(Request {
            resource,
            owner,
            lease,
            idempotent: opts.is_idempotent(),
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

    /// The `TTL` value (epoch seconds) for a lease ending at `expires_at`.
    fn ttl_epoch_seconds(&self, expires_at: DateTime<Utc>) -> Result<i64, Error> {
        Ok(after(expires_at, self.settings.ttl_grace, "ttl_grace")?.timestamp())
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
