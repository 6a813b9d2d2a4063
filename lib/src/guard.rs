//! Holding a lock: a guard that extends it in the background, knows when it is lost, and releases
//! it when dropped, plus a scoped helper that always releases.
//!
//! A guard counts its lease on this process's monotonic clock from just before each write that set
//! it was sent. [`LockGuard::is_held`] is false as soon as that lease has run out without a
//! successful extension, even if the background task never got to run (a blocked runtime, a
//! paused process): the answer never depends on the task having noticed.

use crate::background::retrying;
use crate::client::LockClient;
use crate::error::{Error, InvalidInput};
use crate::fencing::FencingToken;
use crate::limits::{self, MIN_LEASE};
use crate::lock::Lock;
use crate::options::AcquireOptions;
use crate::outcome::{ExtendOutcome, LockLost, ReleaseOutcome};
use futures_util::FutureExt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Mutex};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, warn};

/// What a guard knows: the lock as last extended, or why it was lost. Once lost, always lost.
#[derive(Debug, Clone)]
enum State {
    Held(Lock),
    Lost { lock: Lock, lost: LockLost },
}

/// How the work of [`LockClient::with_lock`] ended.
enum Finished<T> {
    Done(T),
    Lost(LockLost),
    Panicked(Box<dyn std::any::Any + Send>),
}

/// A cheap, cloneable view of a guard's lock, for code that runs while the lock is held (such as
/// the work given to [`LockClient::with_lock`]): whether it is still held, and a future that
/// completes when it is lost.
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
/// use ddb_lock::AcquireOptions;
///
/// let guard = client.lock("reports/daily", &AcquireOptions::new()).await?;
/// let watch = guard.watch();
/// tokio::spawn(async move {
///     let lost = watch.lost().await;
///     eprintln!("stop writing: {lost}");
/// });
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct LockWatch {
    state: watch::Receiver<State>,
}

impl LockWatch {
    /// Whether the lock is held now: the guard has not released it (or started to), no extension
    /// has reported it lost, and the lease (as last extended, counted on the monotonic clock) has
    /// not run out.
    pub fn is_held(&self) -> bool {
        match &*self.state.borrow() {
            State::Held(lock) => Instant::now() < lock.valid_until_instant(),
            State::Lost { .. } => false,
        }
    }

    /// The lock as acquired or last extended.
    pub fn lock(&self) -> Option<Lock> {
        match &*self.state.borrow() {
            State::Held(lock) => Some(lock.clone()),
            State::Lost { .. } => None,
        }
    }

    /// Completes when the lock is lost: an extension found it gone or taken, its lease ran out
    /// without a successful extension, or the guard released it ([`LockLost::Released`], from the
    /// moment the release starts). Cancel-safe, for use in `tokio::select!`.
    pub async fn lost(&self) -> LockLost {
        let mut state = self.state.clone();
        loop {
            let valid_until = match &*state.borrow_and_update() {
                State::Lost { lost, .. } => return lost.clone(),
                State::Held(lock) => lock.valid_until_instant(),
            };
            tokio::select! {
                changed = state.changed() => {
                    if changed.is_err() {
                        // The guard is gone; its lease is the only thing left to go by.
                        tokio::time::sleep_until(valid_until).await;
                        return LockLost::LeaseRanOut { last_error: None };
                    }
                }
                () = tokio::time::sleep_until(valid_until) => {
                    return LockLost::LeaseRanOut { last_error: None };
                }
            }
        }
    }
}

/// A held lock that extends itself in the background and is released when dropped.
///
/// Made by [`LockClient::lock`] and [`LockClient::try_lock`]. Every `heartbeat` (by default a
/// third of the lease) a background task extends the lease; if an extension finds the lock gone
/// or taken, or none succeeds before the lease runs out, the guard is lost for good:
/// [`is_held`](Self::is_held) turns false and [`lost`](Self::lost) completes. Dropping the guard
/// releases the lock from a spawned task (best effort, never blocking);
/// [`release`](Self::release) releases it and tells what it found.
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
/// use ddb_lock::AcquireOptions;
/// use std::time::Duration;
///
/// let guard = client
///     .lock("invoice/2026-0042", &AcquireOptions::new().lease(Duration::from_secs(10)))
///     .await?;
/// tokio::select! {
///     lost = guard.lost() => eprintln!("stopped: {lost}"),
///     () = tokio::time::sleep(Duration::from_secs(60)) => println!("a minute of work, held throughout"),
/// }
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct LockGuard {
    client: LockClient,
    lease: Duration,
    state: Arc<watch::Sender<State>>,
    /// Held by whichever extension of this guard is in flight (the heartbeat's or
    /// [`replace_data`](Self::replace_data)'s), so that the guard never has two at once and its
    /// answers settle in the order the requests were sent.
    extending: Arc<Mutex<()>>,
    watch: LockWatch,
    heartbeat: JoinHandle<()>,
    /// Set once [`release`](Self::release) has its answer: until then Drop releases (again).
    released: bool,
}

impl LockGuard {
    pub(crate) fn start(
        client: &LockClient,
        lock: Lock,
        lease: Duration,
        heartbeat: Duration,
    ) -> Self {
        let lock_id = lock.lock_id();
        let (sender, receiver) = watch::channel(State::Held(lock));
        let state = Arc::new(sender);
        let extending = Arc::new(Mutex::new(()));
        let task = tokio::spawn(extend_until_lost(
            client.clone(),
            Arc::clone(&state),
            Arc::clone(&extending),
            lease,
            heartbeat,
        ));
        // From here the client can stop the guard (a release of its lock through the client, by
        // another guard of the same acquisition, or an extension that found it lost); if the
        // client released the lock already (between the acquisition and now), the guard starts
        // released.
        let abort = task.abort_handle();
        let stopped = Arc::downgrade(&state);
        let stop = Arc::new(move |lost| {
            if let Some(state) = stopped.upgrade() {
                lose(&state, lost);
            }
            abort.abort();
        });
        if !client.table().holds.guarded(lock_id, stop) {
            task.abort();
            lose(&state, LockLost::Released);
        }
        LockGuard {
            client: client.clone(),
            lease,
            state,
            extending,
            watch: LockWatch { state: receiver },
            heartbeat: task,
            released: false,
        }
    }

    /// Whether the lock is held now; see [`LockWatch::is_held`].
    pub fn is_held(&self) -> bool {
        self.watch.is_held()
    }

    /// Completes when the lock is lost; see [`LockWatch::lost`].
    pub async fn lost(&self) -> LockLost {
        self.watch.lost().await
    }

    /// A cloneable view of this guard's state, to hand to the code doing the work.
    pub fn watch(&self) -> LockWatch {
        self.watch.clone()
    }

    /// The lock as acquired or last extended, if not lost.
    pub fn lock(&self) -> Option<Lock> {
        self.watch.lock()
    }

    /// The acquisition's fencing token, if it was fenced.
    pub fn fencing_token(&self) -> Option<FencingToken> {
        self.lock().and_then(|lock| lock.fencing_token())
    }

    /// Replaces the payload stored with the lock (`None` removes it), extending the lease in the
    /// same write. A lost outcome makes the guard lost too.
    ///
    /// It waits for an extension of the heartbeat that is in flight, and gives up when the lease
    /// runs out as the heartbeat does: then, or if the guard was lost already, the result is
    /// [`Error::Lost`] and the guard is lost.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(guard: ddb_lock::LockGuard) -> Result<(), ddb_lock::Error> {
    /// guard.replace_data(Some(br#"{"step":"2/3"}"#.to_vec())).await?;
    /// # Ok(()) }
    /// ```
    pub async fn replace_data(&self, data: Option<Vec<u8>>) -> Result<ExtendOutcome, Error> {
        if let Some(data) = &data {
            limits::data(data)?;
        }
        let lost = |lock: &Lock| Error::Lost {
            resource: lock.resource().to_owned(),
            reason: Box::new(why_lost(&self.state)),
        };
        let valid_until = match &*self.state.borrow() {
            State::Held(lock) => lock.valid_until_instant(),
            State::Lost { lock, .. } => return Err(lost(lock)),
        };
        // The heartbeat holds the turn at most until the lease it extends runs out.
        let turn = tokio::time::timeout_at(valid_until, self.extending.lock()).await;
        let lock = self.last_lock();
        let Ok(_turn) = turn else {
            lose(&self.state, LockLost::LeaseRanOut { last_error: None });
            return Err(lost(&lock));
        };
        if held(&self.state).is_none() {
            return Err(lost(&lock));
        }
        let answer = tokio::time::timeout_at(
            lock.valid_until_instant(),
            self.client.extend_and_replace_data(&lock, self.lease, data),
        )
        .await;
        if let Ok(answer) = answer {
            let outcome = answer?;
            match settle(&self.state, &outcome) {
                Ok(()) => return Ok(outcome),
                // Found gone, expired or taken: the outcome says so.
                Err(_) if !matches!(outcome, ExtendOutcome::Extended(_)) => return Ok(outcome),
                // Extended, but answered after the lease ran out.
                Err(_) => {}
            }
        } else {
            lose(&self.state, LockLost::LeaseRanOut { last_error: None });
        }
        // The guard is lost, but the extension may have landed (or may still land): release, so
        // that the lock is not held for a lease nobody uses.
        if let Err(err) = self.client.release(&lock).await {
            debug!(resource = lock.resource(), %err, "release after an unanswered extension failed");
        }
        Err(lost(&lock))
    }

    /// Stops extending and releases the lock: one conditional DeleteItem. Tells what it found,
    /// including [`ReleaseOutcome::NotFound`] or [`ReleaseOutcome::NotOwner`] if the lock had been
    /// lost.
    ///
    /// From the moment it starts, every [`LockWatch`] of the guard says the lock is not held
    /// ([`LockLost::Released`]). If this future is dropped before the DeleteItem is answered (a
    /// `select!`, an outer timeout), or DynamoDB fails it ([`Error::Backend`], which is returned),
    /// the guard's drop sends the release again from a spawned task, as for a dropped guard
    /// ([`LockClient::flush`] waits for it); a second DeleteItem of the same acquisition can
    /// delete nothing else.
    pub async fn release(mut self) -> Result<ReleaseOutcome, Error> {
        self.heartbeat.abort();
        lose(&self.state, LockLost::Released);
        let lock = self.last_lock();
        let outcome = self.client.release(&lock).await;
        // Only now: a release cancelled at its await is covered by Drop, and so is one that
        // DynamoDB failed: the guard, consumed, is the caller's only way to the lock, so Drop
        // sends it again from the background rather than leave it held for its lease.
        self.released = !matches!(outcome, Err(Error::Backend { .. }));
        outcome
    }

    /// [`release`](Self::release), keeping the item with `data` as its payload for the next
    /// holder (`None` removes it): see [`LockClient::release_and_replace_data`], which it calls,
    /// and which needs a client built with
    /// [`delete_on_release(false)`](crate::LockClientBuilder::delete_on_release). On a client
    /// that deletes items it fails with [`InvalidInput::DataNotKept`](crate::InvalidInput::DataNotKept),
    /// and the guard, consumed, is dropped: its lock is released as a dropped guard's.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(guard: ddb_lock::LockGuard) -> Result<(), ddb_lock::Error> {
    /// guard.release_and_replace_data(Some(b"resume at page 12".to_vec())).await?;
    /// # Ok(()) }
    /// ```
    pub async fn release_and_replace_data(
        mut self,
        data: Option<Vec<u8>>,
    ) -> Result<ReleaseOutcome, Error> {
        if self.client.table().delete_on_release {
            return Err(InvalidInput::DataNotKept.into());
        }
        if let Some(data) = &data {
            limits::data(data)?;
        }
        self.heartbeat.abort();
        lose(&self.state, LockLost::Released);
        let lock = self.last_lock();
        let outcome = self.client.release_and_replace_data(&lock, data).await;
        // As for `release`: a release cancelled at its await, or failed by DynamoDB, is covered
        // by Drop (without data).
        self.released = !matches!(outcome, Err(Error::Backend { .. }));
        outcome
    }

    /// The lock as last known, lost or not (its credential never changes).
    fn last_lock(&self) -> Lock {
        match &*self.state.borrow() {
            State::Held(lock) | State::Lost { lock, .. } => lock.clone(),
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        self.heartbeat.abort();
        if self.released {
            return;
        }
        lose(&self.state, LockLost::Released);
        let lock = match &*self.state.borrow() {
            // Held until now, a release that did not complete, or a lease that ran out while an
            // extension may still land (the heartbeat's own release of it was just aborted).
            State::Lost {
                lock,
                lost: LockLost::Released | LockLost::LeaseRanOut { .. },
            } => lock.clone(),
            // Found gone, expired or taken by an extension: nothing of ours to release.
            State::Lost { .. } | State::Held(_) => return,
        };
        // Marked as being released at once, so that no idempotent acquisition of this client is
        // handed the lock back before the release below is sent.
        self.client.table().holds.release_starts(lock.handle());
        // Releasing needs a request; Drop cannot wait for one without blocking the runtime.
        let client = self.client.clone();
        self.client.release_in_background(async move {
            match retrying(|| client.release(&lock)).await {
                Ok(outcome) => debug!(resource = lock.resource(), ?outcome, "dropped guard released its lock"),
                Err(err) => warn!(resource = lock.resource(), %err, "dropped guard could not release its lock; it expires with its lease"),
            }
        });
    }
}

/// Records an extension's outcome: a later lease replaces an earlier one; a loss is final. An
/// extension answered after the guard's lease ran out on the monotonic clock loses the guard
/// (`LeaseRanOut`) instead of reviving it: `is_held` has said false and `lost` has completed.
/// Returns why the guard is lost, if it is.
fn settle(state: &watch::Sender<State>, outcome: &ExtendOutcome) -> Result<(), LockLost> {
    let lost = match outcome.lock_or_lost() {
        Ok(extended) => {
            let now = Instant::now();
            let mut ran_out = false;
            state.send_if_modified(|current| match current {
                State::Held(lock) if now >= lock.valid_until_instant() => {
                    ran_out = true;
                    false
                }
                State::Held(lock)
                    if extended.valid_until_instant() > lock.valid_until_instant() =>
                {
                    // Every stored lease end an answer tells was stored at some point, and while
                    // the item is ours it never moves back (an extension never shortens it): the
                    // latest one known is not after the stored one.
                    let expires_at = lock.expires_at().max(extended.expires_at());
                    *lock = Lock::new(
                        extended.handle().clone(),
                        extended.acquired_at(),
                        expires_at,
                        extended.valid_until_instant(),
                    )
                    .with_fencing_token(extended.fencing_token())
                    .with_data(extended.data().map(<[u8]>::to_vec));
                    true
                }
                _ => false,
            });
            if !ran_out {
                return match &*state.borrow() {
                    State::Held(_) => Ok(()),
                    State::Lost { lost, .. } => Err(lost.clone()),
                };
            }
            LockLost::LeaseRanOut { last_error: None }
        }
        Err(lost) => lost,
    };
    lose(state, lost);
    match &*state.borrow() {
        State::Held(_) => Ok(()),
        State::Lost { lost, .. } => Err(lost.clone()),
    }
}

/// Moves the guard to lost for `lost`, unless it is lost already (the first reason stays).
fn lose(state: &watch::Sender<State>, lost: LockLost) {
    state.send_if_modified(|current| match current {
        State::Held(lock) => {
            if lost == LockLost::Released {
                debug!(resource = lock.resource(), "guard releasing its lock");
            } else {
                warn!(resource = lock.resource(), %lost, "lock lost");
            }
            *current = State::Lost {
                lock: lock.clone(),
                lost,
            };
            true
        }
        State::Lost { .. } => false,
    });
}

/// Why the guard is lost (`LeaseRanOut` if it is not lost yet but its lease ran out).
fn why_lost(state: &watch::Sender<State>) -> LockLost {
    match &*state.borrow() {
        State::Lost { lost, .. } => lost.clone(),
        State::Held(_) => LockLost::LeaseRanOut { last_error: None },
    }
}

/// The lock while the guard holds it.
fn held(state: &watch::Sender<State>) -> Option<Lock> {
    match &*state.borrow() {
        State::Held(lock) => Some(lock.clone()),
        State::Lost { .. } => None,
    }
}

/// The guard's background task: extend every `heartbeat`, retry failures until the lease runs
/// out, stop at the first loss.
async fn extend_until_lost(
    client: LockClient,
    state: Arc<watch::Sender<State>>,
    extending: Arc<Mutex<()>>,
    lease: Duration,
    heartbeat: Duration,
) {
    // An extension is due when as much lease is left as a fresh lease has left after one
    // heartbeat. Counting back from the lock's own lease end, rather than forward from when the
    // guard (or the last extension's answer) started, matters for a lock handed back with little
    // lease left (an idempotent acquire of a lock this owner already held): it is extended at
    // once, not a whole heartbeat later, when it may have expired.
    let margin = lease.saturating_sub(heartbeat);
    let mut retry_at: Option<Instant> = None;
    let mut last_error: Option<String> = None;
    loop {
        let Some(planned) = held(&state) else { return };
        let valid_until = planned.valid_until_instant();
        let due = retry_at
            .unwrap_or_else(|| valid_until.checked_sub(margin).unwrap_or_else(Instant::now));
        tokio::time::sleep_until(due).await;
        // A replace_data in flight holds the turn at most until the lease runs out too.
        let Ok(_turn) = tokio::time::timeout_at(valid_until, extending.lock()).await else {
            break;
        };
        let Some(lock) = held(&state) else { return };
        if lock.valid_until_instant() > valid_until {
            // Extended meanwhile (replace_data): due again later.
            retry_at = None;
            continue;
        }
        if Instant::now() >= valid_until {
            break;
        }
        let answer = tokio::time::timeout_at(valid_until, client.extend(&lock, lease)).await;
        match answer {
            Ok(Ok(outcome)) => match settle(&state, &outcome) {
                Ok(()) => {
                    last_error = None;
                    retry_at = None;
                }
                Err(LockLost::LeaseRanOut { .. }) => break,
                Err(_) => return,
            },
            Ok(Err(err)) if Instant::now() < valid_until => {
                warn!(resource = lock.resource(), %err, "lock extension failed; retrying");
                last_error = Some(err.to_string());
                retry_at = Some((Instant::now() + heartbeat / 4).min(valid_until));
            }
            Ok(Err(err)) => {
                last_error = Some(err.to_string());
                break;
            }
            Err(_elapsed) => break,
        }
    }
    lose(&state, LockLost::LeaseRanOut { last_error });
    // An extension may still land after its answer was given up on: release, so that the lock
    // does not stay taken for a lease nobody is using.
    let lock = match &*state.borrow() {
        State::Held(lock) | State::Lost { lock, .. } => lock.clone(),
    };
    if let Err(err) = client.release(&lock).await {
        debug!(resource = lock.resource(), %err, "release after losing the lease failed");
    }
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
    /// [`Error::Lost`]; the same if it is found lost when `work` finishes. Errors of `work` pass
    /// through, so its error type needs `From<ddb_lock::Error>`.
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
        if let Err(err) = guard.release().await {
            warn!(resource, %err, "could not release after the work; the lock expires with its lease");
        }
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
