//! Taking a lock: [`LockClient::try_acquire`] (one try), [`LockClient::acquire`] (waiting), their
//! variants, and the request both resolve from the caller's options.

use super::LockClient;
use crate::error::{Error, InvalidInput};
use crate::limits;
use crate::lock::Lock;
use crate::ops::acquire::Request;
use crate::options::AcquireOptions;
use crate::outcome::{AcquireAttempt, AcquireStats};
use crate::wait::{self, Wait};
use std::time::Duration;
use tokio::time::Instant;

impl LockClient {
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
        let request = self.single_request(resource, opts)?;
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
        let result = match self.single_request(resource, opts).and_then(|request| {
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

    /// [`request`](Self::request) for a lock taken alone, not as a lock set's member: a fenced
    /// one of a path's resource name is refused (see [`InvalidInput::FencedPathName`]).
    fn single_request<'a>(
        &'a self,
        resource: &'a str,
        opts: &'a AcquireOptions,
    ) -> Result<Request<'a>, Error> {
        let request = self.request(resource, opts)?;
        if opts.is_fencing() && crate::path::common_fence([resource]).is_some() {
            return Err(InvalidInput::FencedPathName {
                resource: resource.to_owned(),
            }
            .into());
        }
        Ok(request)
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
}
