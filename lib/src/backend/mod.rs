//! A lock backend of the shape plugin systems expect (`try_lock`, `renew`, `release`), so that
//! code written against it runs on DynamoDB ([`DynamoDbBackend`]) or in one process
//! ([`MemoryBackend`]: local development, single instances, tests of the code that uses it).
//!
//! Contention is not failure: [`try_lock`](LockBackend::try_lock) answers `Ok(Some(lock))` when it
//! acquired, `Ok(None)` when someone else holds the key, and `Err` only when the backend is broken
//! or the input is invalid. [`renew`](LockBackend::renew) and [`release`](LockBackend::release)
//! answer `Err` when the handle no longer holds its key ([`BackendError::NotHeld`]), whatever the
//! reason: the caller must stop acting as the holder. A [`BackendLock`] is opaque: a random token
//! minted at acquisition (compare-and-delete: a stale handle never releases a newer holder's
//! lock), its key, its time to live, and a fencing token when the backend issues them.
//!
//! Both backends give the same outcomes for the same sequence of calls; one test suite runs over
//! the trait against each (`lib/tests/backends.rs`).

mod dynamodb;
mod memory;

pub use dynamodb::DynamoDbBackend;
pub use memory::MemoryBackend;

use crate::error::{Error, InvalidInput};
use crate::fencing::FencingToken;
use crate::lock::{LockHandle, LockId};
use chrono::{DateTime, Utc};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// What a [`LockBackend`] method returns: a boxed future, so that the trait can be used as
/// `dyn LockBackend`.
pub type BackendFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, BackendError>> + Send + 'a>>;

/// Locks on string keys with a time to live.
///
/// # Examples
///
/// Code that takes a lock through the trait runs on either backend:
///
/// ```
/// use ddb_lock::{LockBackend, MemoryBackend};
/// use std::time::Duration;
///
/// async fn run_once(locks: &dyn LockBackend, job: &str) -> Result<bool, ddb_lock::BackendError> {
///     let Some(lock) = locks.try_lock(job, Duration::from_secs(30)).await? else {
///         return Ok(false); // another node runs it
///     };
///     // ... the job, calling locks.renew(&lock) while it runs ...
///     locks.release(lock).await?;
///     Ok(true)
/// }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let locks = MemoryBackend::new();
/// assert!(run_once(&locks, "nightly-report").await?);
/// # Ok::<(), ddb_lock::BackendError>(()) }).unwrap();
/// ```
pub trait LockBackend: Send + Sync {
    /// The backend's name, for logs.
    fn name(&self) -> &str;

    /// Takes the lock on `key` for `ttl` if nobody holds it: `Ok(Some(lock))`; `Ok(None)` if
    /// someone does. `Err` only for invalid input or a broken backend.
    fn try_lock<'a>(
        &'a self,
        key: &'a str,
        ttl: Duration,
    ) -> BackendFuture<'a, Option<BackendLock>>;

    /// Extends `lock` by its time to live from now. `Err(NotHeld)` if its time to live ran out
    /// or another holder has the key.
    fn renew<'a>(&'a self, lock: &'a BackendLock) -> BackendFuture<'a, ()>;

    /// Releases `lock` (compare-and-delete on its token). `Err(NotHeld)` if another holder has
    /// the key or it was released already.
    fn release(&self, lock: BackendLock) -> BackendFuture<'_, ()>;

    /// Keeps `lock` to its time to live: a lock meant never to be released, such as a scheduled
    /// tick's, which a release of everything its client holds for shutdown
    /// ([`LockClient::release_all`](crate::LockClient::release_all), at the end of a Lambda
    /// invocation) would otherwise release, letting another node run the tick again. `false`
    /// if such a release took the lock first (between its acquisition and this call): it is
    /// being released, and no longer held (default: the backend releases nothing on its own,
    /// `true`).
    fn keep_until_expiry(&self, lock: &BackendLock) -> bool {
        let _ = lock;
        true
    }

    /// Removes what expired locks left behind, if the backend keeps anything (default: nothing
    /// to do).
    fn cleanup(&self) -> BackendFuture<'_, ()> {
        Box::pin(async { Ok(()) })
    }

    /// Completes once every release under way has been answered, including those whose futures
    /// were dropped (default: none is ever under way). A Lambda handler awaits it before it
    /// returns, since its execution environment is frozen afterwards.
    fn flush(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async {})
    }
}

/// A held lock of a [`LockBackend`]: pass it back unchanged to `renew` and `release`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendLock {
    handle: LockHandle,
    ttl: Duration,
    acquired_at: DateTime<Utc>,
    fencing_token: Option<FencingToken>,
}

impl BackendLock {
    pub(crate) fn new(
        handle: LockHandle,
        ttl: Duration,
        acquired_at: DateTime<Utc>,
        fencing_token: Option<FencingToken>,
    ) -> Self {
        BackendLock {
            handle,
            ttl,
            acquired_at,
            fencing_token,
        }
    }

    pub(crate) fn handle(&self) -> &LockHandle {
        &self.handle
    }

    /// The key it locks.
    ///
    /// # Examples
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use ddb_lock::{LockBackend, MemoryBackend};
    /// let lock = MemoryBackend::new().try_lock("a", std::time::Duration::from_secs(1)).await?.unwrap();
    /// assert_eq!(lock.key(), "a");
    /// # Ok::<(), ddb_lock::BackendError>(()) }).unwrap();
    /// ```
    pub fn key(&self) -> &str {
        self.handle.resource()
    }

    /// The random token minted at acquisition, which renew and release compare.
    ///
    /// # Examples
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use ddb_lock::{LockBackend, MemoryBackend};
    /// let backend = MemoryBackend::new();
    /// let a = backend.try_lock("a", std::time::Duration::from_secs(1)).await?.unwrap();
    /// let b = backend.try_lock("b", std::time::Duration::from_secs(1)).await?.unwrap();
    /// assert_ne!(a.token(), b.token());
    /// # Ok::<(), ddb_lock::BackendError>(()) }).unwrap();
    /// ```
    pub fn token(&self) -> LockId {
        self.handle.lock_id()
    }

    /// The time to live it was taken for, which each renewal grants again.
    ///
    /// # Examples
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use ddb_lock::{LockBackend, MemoryBackend};
    /// use std::time::Duration;
    /// let lock = MemoryBackend::new().try_lock("a", Duration::from_secs(5)).await?.unwrap();
    /// assert_eq!(lock.ttl(), Duration::from_secs(5));
    /// # Ok::<(), ddb_lock::BackendError>(()) }).unwrap();
    /// ```
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// When it was taken, by the clock the acquisition's condition compared the previous
    /// holder's expiry with: a lock taken over from a lapsed holder was taken after that
    /// holder's lease had ended by this reading.
    ///
    /// # Examples
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use ddb_lock::{LockBackend, MemoryBackend};
    /// let lock = MemoryBackend::new().try_lock("a", std::time::Duration::from_secs(5)).await?.unwrap();
    /// assert!(lock.acquired_at() <= chrono::Utc::now());
    /// # Ok::<(), ddb_lock::BackendError>(()) }).unwrap();
    /// ```
    pub fn acquired_at(&self) -> DateTime<Utc> {
        self.acquired_at
    }

    /// Its fencing token, if the backend issues them ([`MemoryBackend`] always does,
    /// [`DynamoDbBackend`] when built with [`fencing`](DynamoDbBackend::fencing)); it grows
    /// with every acquisition of the key.
    ///
    /// # Examples
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use ddb_lock::{LockBackend, MemoryBackend};
    /// use std::time::Duration;
    /// let backend = MemoryBackend::new();
    /// let first = backend.try_lock("a", Duration::from_secs(5)).await?.unwrap();
    /// let token = first.fencing_token();
    /// backend.release(first).await?;
    /// let second = backend.try_lock("a", Duration::from_secs(5)).await?.unwrap();
    /// assert!(second.fencing_token() > token);
    /// # Ok::<(), ddb_lock::BackendError>(()) }).unwrap();
    /// ```
    pub fn fencing_token(&self) -> Option<FencingToken> {
        self.fencing_token
    }
}

/// Why a [`LockBackend`] call failed.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The handle no longer holds its key: its time to live ran out, it was released already, or
    /// another holder has the key. Stop acting as the holder.
    #[error("the lock on `{key}` is no longer held by this handle")]
    NotHeld {
        /// The key.
        key: String,
    },
    /// The key or the time to live is invalid (the field and the limit are named).
    #[error(transparent)]
    Invalid(#[from] InvalidInput),
    /// The backend could not answer (DynamoDB unreachable, throttled past the retries, …).
    #[error("the lock backend is unavailable: {0}")]
    Unavailable(#[source] Box<Error>),
}

impl BackendError {
    fn not_held(key: &str) -> Self {
        BackendError::NotHeld {
            key: key.to_owned(),
        }
    }
}

impl From<Error> for BackendError {
    fn from(error: Error) -> Self {
        match error {
            Error::InvalidInput(invalid) => BackendError::Invalid(invalid),
            other => BackendError::Unavailable(Box::new(other)),
        }
    }
}
