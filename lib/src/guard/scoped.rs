//! Taking a guard: [`LockClient::lock`], [`LockClient::try_lock`], and [`LockClient::with_lock`],
//! which runs work under the lock and always releases it.

use super::{LockGuard, LockWatch};
use crate::client::LockClient;
use crate::error::{Error, InvalidInput};
use crate::limits::{self, MIN_LEASE};
use crate::options::AcquireOptions;
use crate::outcome::{LockLost, ReleaseOutcome};
use futures_util::FutureExt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;
use tracing::warn;

/// The loss that the release ending scoped work found, if the lock was not ours by then (the end
/// of the work was not under the lock): someone else's, or gone before a release sent once (force
/// released, or expired by a clock ahead and deleted; answered the work's `Ok`, found by review),
/// or, items kept, released before a release sent once (its record of this very acquisition, a
/// force release's: the same loss; answered the work's `Ok`, found by review). A release sent
/// again after a lost answer that finds the lock gone is no loss: its first send may have
/// released it (and reads `Unconfirmed`). A release that failed is logged: the lock expires with
/// its lease.
pub(crate) fn taken_at_release(
    resource: &str,
    released: Result<ReleaseOutcome, Error>,
) -> Option<LockLost> {
    match released {
        Ok(ReleaseOutcome::NotOwner { holder }) => Some(LockLost::TakenOver { holder }),
        Ok(ReleaseOutcome::NotFound | ReleaseOutcome::AlreadyReleased { .. }) => {
            Some(LockLost::NotFound)
        }
        Ok(ReleaseOutcome::Released | ReleaseOutcome::Unconfirmed) => None,
        Err(err) => {
            warn!(resource, %err, "could not release after the work; the lock expires with its lease");
            None
        }
    }
}

/// How the work of [`LockClient::with_lock`] ended.
enum Finished<T> {
    Done(T),
    Lost(LockLost),
    Panicked(Box<dyn std::any::Any + Send>),
}

impl LockClient {
    /// Acquires the lock on `resource` (waiting as [`acquire`](Self::acquire) does) and returns
    /// a [`LockGuard`] that keeps extending it until it is released, dropped or lost.
    ///
    /// The guard extends by the options' lease (else the client's) every
    /// [`heartbeat`](AcquireOptions::heartbeat) (default: a third of the lease).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::AcquireOptions;
    ///
    /// let guard = client.lock("orders/42", &AcquireOptions::new().fencing(true)).await?;
    /// let token = guard.fencing_token();
    /// // ... fenced writes with `token`, checking guard.is_held() before each ...
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock(&self, resource: &str, opts: &AcquireOptions) -> Result<LockGuard, Error> {
        let (lease, heartbeat) = self.guard_timing(opts)?;
        let lock = self.acquire(resource, opts).await?;
        Ok(LockGuard::start(self, lock, lease, heartbeat))
    }

    /// Tries once to take the lock on `resource`; `Ok(None)` if someone else holds it. See
    /// [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::AcquireOptions;
    ///
    /// if let Some(guard) = client.try_lock("cron/nightly", &AcquireOptions::new()).await? {
    ///     // ... this tick's job ...
    ///     guard.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_lock(
        &self,
        resource: &str,
        opts: &AcquireOptions,
    ) -> Result<Option<LockGuard>, Error> {
        let (lease, heartbeat) = self.guard_timing(opts)?;
        Ok(self
            .try_acquire(resource, opts)
            .await?
            .map(|lock| LockGuard::start(self, lock, lease, heartbeat)))
    }

    /// Runs `work` while holding the lock on `resource`, and always releases it afterwards: when
    /// `work` returns `Ok`, when it returns an error, and when it panics (the panic then resumes).
    ///
    /// `work` gets a [`LockWatch`] to check or await the lock's loss. If the lock is lost while
    /// `work` runs, `work` is stopped at its next `.await` (its future is dropped) and the result is
    /// [`Error::Lost`]; the same if it is found lost when `work` finishes, or if the release after
    /// it finds someone else's lock (taken from under the work before the guard learned of it:
    /// [`LockLost::TakenOver`]). Errors of `work` pass through, so its error type needs
    /// `From<ddb_lock::Error>`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::AcquireOptions;
    ///
    /// let total = client
    ///     .with_lock("ledger/7", &AcquireOptions::new(), |watch| async move {
    ///         // ... read, compute, write; `watch.is_held()` before each write ...
    ///         Ok::<_, ddb_lock::Error>(42)
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn with_lock<T, E, F, Fut>(
        &self,
        resource: &str,
        opts: &AcquireOptions,
        work: F,
    ) -> Result<T, E>
    where
        F: FnOnce(LockWatch) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: From<Error>,
    {
        let guard = self.lock(resource, opts).await?;
        let watch = guard.watch();
        let finished = tokio::select! {
            biased;
            lost = guard.lost() => Finished::Lost(lost),
            result = AssertUnwindSafe(work(watch)).catch_unwind() => match result {
                Err(panic) => Finished::Panicked(panic),
                Ok(result) if guard.is_held() => Finished::Done(result),
                Ok(_) => Finished::Lost(guard.lost().await),
            },
        };
        let taken = taken_at_release(resource, guard.release().await);
        let finished = match (finished, taken) {
            (Finished::Done(_), Some(lost)) => Finished::Lost(lost),
            (finished, _) => finished,
        };
        match finished {
            Finished::Done(result) => result,
            Finished::Lost(reason) => Err(Error::Lost {
                resource: resource.to_owned(),
                reason: Box::new(reason),
            }
            .into()),
            Finished::Panicked(panic) => std::panic::resume_unwind(panic),
        }
    }

    /// The lease a guard extends by and how often, validated before anything is acquired.
    pub(crate) fn guard_timing(
        &self,
        opts: &AcquireOptions,
    ) -> Result<(Duration, Duration), InvalidInput> {
        let lease = limits::lease(opts.lease_duration().unwrap_or(self.default_lease()))?;
        let heartbeat = opts.heartbeat_period().unwrap_or(lease / 3);
        limits::duration("heartbeat", heartbeat, MIN_LEASE)?;
        if heartbeat >= lease {
            return Err(InvalidInput::DurationTooLong {
                field: "heartbeat",
                value: heartbeat,
                max: lease.saturating_sub(MIN_LEASE),
            });
        }
        Ok((lease, heartbeat))
    }
}
