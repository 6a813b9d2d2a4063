//! The in-process [`LockBackend`]: a map of keys to holders behind a mutex, for local
//! development, single-instance deployments and tests of code written against the trait. Not
//! distributed: two processes never see each other's locks.
//!
//! It answers as [`DynamoDbBackend`](super::DynamoDbBackend) answers on the default table
//! layout, call for call: a key is held while its expiry is not before now (by the backend's
//! [`Clock`], at millisecond precision, as DynamoDB stores it); a lapsed lock is taken over by the
//! next `try_lock`, cannot be renewed, but can still be released by its holder until someone
//! takes it; keys and times to live are checked against the same limits. Entries whose time to
//! live ended more than [`SWEEP_AFTER`](MemoryBackend::SWEEP_AFTER) ago are swept on every call
//! (as DynamoDB's time to live deletes items), so a dead holder never wedges a key or memory;
//! that time is counted on the monotonic clock, as DynamoDB's deletion follows AWS's clock, which
//! a step of the backend's clock does not move.
//! Fencing tokens are as DynamoDB's: the acquisition's time in microseconds (at millisecond
//! precision), or above every token issued before if that is higher (one counter for the
//! backend, so nothing is kept per key).

use super::{BackendError, BackendFuture, BackendLock, LockBackend};
use crate::clock::{Clock, SystemClock};
use crate::fencing::FencingToken;
use crate::limits;
use crate::lock::{LockHandle, LockId};
use crate::schema::TableSchema;
use chrono::{DateTime, SubsecRound, Utc};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::time::Instant;

/// The owner every in-memory lock is held by (the token tells holders apart).
const OWNER: &str = "memory";

/// The in-process [`LockBackend`].
///
/// # Examples
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use ddb_lock::{LockBackend, MemoryBackend};
/// use std::time::Duration;
///
/// let locks = MemoryBackend::new();
/// let held = locks.try_lock("job", Duration::from_secs(30)).await?.expect("free");
/// assert!(locks.try_lock("job", Duration::from_secs(30)).await?.is_none(), "contention is not an error");
/// locks.release(held).await?;
/// # Ok::<(), ddb_lock::BackendError>(()) }).unwrap();
/// ```
#[derive(Debug)]
pub struct MemoryBackend {
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
    max_key_bytes: usize,
}

#[derive(Debug, Default)]
struct State {
    held: HashMap<String, Holder>,
    /// The last fencing token issued, for any key.
    last_token: u64,
}

#[derive(Debug)]
struct Holder {
    token: LockId,
    expires_at: DateTime<Utc>,
    /// The latest lease end a renewal asked for (applied or not).
    latest_asked: Option<DateTime<Utc>>,
    /// When the entry may be swept, on the monotonic clock: its lease and
    /// [`MemoryBackend::SWEEP_AFTER`] from when it was written or renewed. By the backend's clock
    /// alone, a clock that jumped ahead and back swept a live holder's entry, and the next
    /// `try_lock` took its key (found by review).
    swept_at: Instant,
}

impl Holder {
    /// When an entry whose lease ends at `expires_at`, by a clock that reads `now`, is swept.
    fn swept_at(now: DateTime<Utc>, expires_at: DateTime<Utc>) -> Instant {
        let lease = (expires_at - now).to_std().unwrap_or_default();
        Instant::now() + lease + MemoryBackend::SWEEP_AFTER
    }
}

impl Default for MemoryBackend {
    fn default() -> Self {
        MemoryBackend::with_clock(Arc::new(SystemClock))
    }
}

impl MemoryBackend {
    /// How long after its time to live an entry is swept: DynamoDB's default time to live grace
    /// ([`LockClientBuilder::DEFAULT_TTL_GRACE`](crate::LockClientBuilder::DEFAULT_TTL_GRACE)).
    pub const SWEEP_AFTER: Duration = crate::LockClientBuilder::DEFAULT_TTL_GRACE;

    /// A backend on the system clock.
    ///
    /// # Examples
    ///
    /// ```
    /// let locks = ddb_lock::MemoryBackend::new();
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// A backend whose expiries follow `clock` (a test's clock, to make time pass at once).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// let locks = ddb_lock::MemoryBackend::with_clock(Arc::new(ddb_lock::SystemClock));
    /// ```
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        MemoryBackend {
            clock,
            state: Mutex::default(),
            max_key_bytes: TableSchema::new().max_resource_bytes(),
        }
    }

    /// The state, with the entries swept whose time has come by both clocks: the monotonic one
    /// (see [`Holder::swept_at`]) and the backend's, which `now` read (time paused in a test
    /// runs on while the system clock does not: swept by the first alone, a live holder's entry
    /// went; found by review). A panic elsewhere while the mutex was held cannot leave a
    /// half-made entry (every change is one map operation), so a poisoned mutex is used as it is.
    fn state(&self, now: DateTime<Utc>) -> MutexGuard<'_, State> {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let (instant, grace) = (
            Instant::now(),
            chrono::Duration::from_std(Self::SWEEP_AFTER),
        );
        let sweep_before = now - grace.unwrap_or_default();
        state
            .held
            .retain(|_, holder| holder.swept_at > instant || holder.expires_at >= sweep_before);
        state
    }

    fn now(&self) -> DateTime<Utc> {
        self.clock.now().trunc_subsecs(3)
    }

    fn expiry(now: DateTime<Utc>, ttl: Duration) -> Result<DateTime<Utc>, BackendError> {
        Ok(crate::time::after(now, ttl, "lease")?)
    }
}

impl LockBackend for MemoryBackend {
    fn name(&self) -> &str {
        "memory"
    }

    fn try_lock<'a>(
        &'a self,
        key: &'a str,
        ttl: Duration,
    ) -> BackendFuture<'a, Option<BackendLock>> {
        Box::pin(async move {
            limits::resource(key, self.max_key_bytes)?;
            let ttl = limits::lease(ttl)?;
            let now = self.now();
            let expires_at = Self::expiry(now, ttl)?;
            let mut state = self.state(now);
            if state
                .held
                .get(key)
                .is_some_and(|holder| holder.expires_at >= now)
            {
                return Ok(None);
            }
            let token = LockId::generate();
            state.held.insert(
                key.to_owned(),
                Holder {
                    token,
                    expires_at,
                    latest_asked: None,
                    swept_at: Holder::swept_at(now, expires_at),
                },
            );
            // As a fenced DynamoDB acquisition guesses its token: the clock's microseconds, or
            // one above the last token if the clock reads earlier.
            let micros = u64::try_from(now.timestamp_micros()).unwrap_or(0);
            state.last_token = micros.max(state.last_token.saturating_add(1));
            let handle = LockHandle::new(key, OWNER, token);
            Ok(Some(BackendLock::new(
                handle,
                ttl,
                now,
                Some(FencingToken::new(state.last_token)),
            )))
        })
    }

    fn renew<'a>(&'a self, lock: &'a BackendLock) -> BackendFuture<'a, ()> {
        Box::pin(async move {
            let now = self.now();
            let expires_at = Self::expiry(now, lock.ttl())?;
            let mut state = self.state(now);
            match state.held.get_mut(lock.key()) {
                Some(holder) if holder.token == lock.token() && holder.expires_at >= now => {
                    // As the DynamoDB backend's client asks: an end a millisecond past every
                    // end an earlier renewal asked for (applied or not), when the lease from now
                    // does not reach past it (a clock stepped back). And as DynamoDB's extension
                    // applies it: never shortened (a clock stepped back would otherwise end the
                    // lease before the holder was told it ends).
                    let asked = holder.latest_asked.map_or(expires_at, |latest| {
                        expires_at.max(latest + chrono::TimeDelta::milliseconds(1))
                    });
                    holder.expires_at = holder.expires_at.max(asked);
                    holder.swept_at = holder.swept_at.max(Holder::swept_at(now, asked));
                    holder.latest_asked = Some(holder.latest_asked.map_or(asked, |l| l.max(asked)));
                    Ok(())
                }
                _ => Err(BackendError::not_held(lock.key())),
            }
        })
    }

    /// Released at the call, not when the future is polled: a future dropped unpolled (a
    /// `select!`, a timeout) releases too.
    fn release(&self, lock: BackendLock) -> BackendFuture<'_, ()> {
        let mut state = self.state(self.now());
        let released = match state.held.get(lock.key()) {
            Some(holder) if holder.token == lock.token() => {
                state.held.remove(lock.key());
                Ok(())
            }
            _ => Err(BackendError::not_held(lock.key())),
        };
        Box::pin(std::future::ready(released))
    }
}
