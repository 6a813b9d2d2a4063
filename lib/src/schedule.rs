//! A scheduled-job guard: run a job every period on every node, and let each tick run once
//! across the nodes that share a [`LockBackend`] (seed 003's `LockingHint`).
//!
//! Tick `n` of a job of period `p` starts at `n × p` after the Unix epoch. Under
//! [`LockingHint::RequireGlobal`] a node takes the lock `schedule:<id>:<n>` (one key per tick)
//! before running the job: held elsewhere, the node skips the tick; a backend error is logged and
//! the tick skipped. The lease is the expected run time plus a margin, renewed while the job runs
//! (every third of it); a job that runs longer than that lease is reported
//! ([`TickOutcome::Ran::overran`]). The lock is not released when the job ends: it expires on its
//! own, so that a node whose timer fires late for the same tick still finds it held, and a node
//! later than a whole lease past the tick's start does not run the tick at all
//! ([`TickOutcome::Missed`]): between them, each tick runs once. [`LockingHint::PreferGlobal`]
//! does the same when a backend is configured and runs node-locally when none is;
//! [`LockingHint::NodeLocal`] never locks.

use crate::backend::{BackendError, BackendFuture, LockBackend};
use crate::clock::{Clock, SystemClock};
use crate::error::InvalidInput;
use crate::limits;
use chrono::{DateTime, TimeZone, Utc};
use futures_util::FutureExt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{Instant, MissedTickBehavior};
use tracing::{info, warn};

/// How a scheduled job is kept from running on several nodes at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockingHint {
    /// No lock: every node runs its own copy (per-node maintenance).
    NodeLocal,
    /// The tick's lock is required: skip the tick if another node holds it, or if the backend
    /// fails. A scheduler without a backend refuses such a job.
    RequireGlobal,
    /// As `RequireGlobal` when the scheduler has a backend, as `NodeLocal` when it has none.
    PreferGlobal,
}

/// A job's schedule: its id, period, locking hint, and the lease its tick locks get.
///
/// # Examples
///
/// ```
/// use ddb_lock::{LockingHint, ScheduledJob};
/// use std::time::Duration;
///
/// let job = ScheduledJob::every("nightly-report", Duration::from_secs(24 * 3600))
///     .hint(LockingHint::RequireGlobal)
///     .expected_run(Duration::from_secs(300))
///     .margin(Duration::from_secs(60));
/// assert_eq!(job.lease(), Duration::from_secs(360));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledJob {
    id: String,
    period: Duration,
    hint: LockingHint,
    expected_run: Duration,
    margin: Duration,
}

impl ScheduledJob {
    /// A job run every `period` (ticks on multiples of it since the Unix epoch), required to run
    /// once per tick across nodes ([`LockingHint::RequireGlobal`]), expected to run for a tenth of
    /// its period, with a margin of as much again.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let job = ddb_lock::ScheduledJob::every("gc", Duration::from_secs(60));
    /// assert_eq!(job.lease(), Duration::from_secs(12));
    /// ```
    pub fn every(id: impl Into<String>, period: Duration) -> Self {
        ScheduledJob {
            id: id.into(),
            period,
            hint: LockingHint::RequireGlobal,
            expected_run: period / 10,
            margin: period / 10,
        }
    }

    /// The locking hint.
    ///
    /// # Examples
    ///
    /// ```
    /// use ddb_lock::{LockingHint, ScheduledJob};
    /// let job = ScheduledJob::every("gc", std::time::Duration::from_secs(60)).hint(LockingHint::NodeLocal);
    /// ```
    pub fn hint(mut self, hint: LockingHint) -> Self {
        self.hint = hint;
        self
    }

    /// How long a run is expected to take.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let job = ddb_lock::ScheduledJob::every("gc", Duration::from_secs(60)).expected_run(Duration::from_secs(20));
    /// ```
    pub fn expected_run(mut self, expected: Duration) -> Self {
        self.expected_run = expected;
        self
    }

    /// The safety margin added to the expected run for the lease.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let job = ddb_lock::ScheduledJob::every("gc", Duration::from_secs(60)).margin(Duration::from_secs(5));
    /// ```
    pub fn margin(mut self, margin: Duration) -> Self {
        self.margin = margin;
        self
    }

    /// The lease of a tick's lock: the expected run plus the margin.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let job = ddb_lock::ScheduledJob::every("gc", Duration::from_secs(60));
    /// assert_eq!(job.lease(), Duration::from_secs(12));
    /// ```
    pub fn lease(&self) -> Duration {
        self.expected_run.saturating_add(self.margin)
    }

    /// The number of the tick under way at `now`.
    ///
    /// # Examples
    ///
    /// ```
    /// use chrono::{TimeZone, Utc};
    /// let job = ddb_lock::ScheduledJob::every("gc", std::time::Duration::from_secs(60));
    /// assert_eq!(job.tick_at(Utc.timestamp_opt(150, 0).unwrap()), 2);
    /// ```
    pub fn tick_at(&self, now: DateTime<Utc>) -> u64 {
        let now_ms = u64::try_from(now.timestamp_millis()).unwrap_or(0);
        now_ms / self.period_ms()
    }

    /// When tick `tick` starts.
    ///
    /// # Examples
    ///
    /// ```
    /// use chrono::{TimeZone, Utc};
    /// let job = ddb_lock::ScheduledJob::every("gc", std::time::Duration::from_secs(60));
    /// assert_eq!(job.tick_start(2), Utc.timestamp_opt(120, 0).unwrap());
    /// ```
    pub fn tick_start(&self, tick: u64) -> DateTime<Utc> {
        let ms = tick.saturating_mul(self.period_ms());
        i64::try_from(ms)
            .ok()
            .and_then(|ms| Utc.timestamp_millis_opt(ms).single())
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    }

    /// The key of tick `tick`'s lock.
    fn key(&self, tick: u64) -> String {
        format!("schedule:{}:{tick}", self.id)
    }

    fn period_ms(&self) -> u64 {
        u64::try_from(self.period.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    fn check(&self) -> Result<(), InvalidInput> {
        if self.id.is_empty() {
            return Err(InvalidInput::Empty { field: "id" });
        }
        limits::duration("period", self.period, Duration::from_millis(1))?;
        limits::whole_millis("period", self.period)?;
        limits::lease(self.lease())?;
        Ok(())
    }
}

/// How one tick went on this node.
#[derive(Debug)]
pub enum TickOutcome<T> {
    /// The job ran here.
    Ran {
        /// What the job returned.
        output: T,
        /// Whether it ran under the tick's lock (false: node-locally).
        locked: bool,
        /// How long it ran.
        ran_for: Duration,
        /// Whether it ran longer than its lease (expected run plus margin): a schedule to fix.
        overran: bool,
        /// Whether the lock was lost while it ran: a renewal found it taken or gone, or none
        /// succeeded before its lease ran out (a renewal that fails is tried again at the next
        /// one). Another node may have run the tick too.
        lock_lost: bool,
    },
    /// Another node holds the tick's lock: skipped here.
    Skipped,
    /// The backend failed to answer: logged, and the tick skipped.
    BackendFailed(BackendError),
    /// This node came to the tick later than a lease after its start: skipped, since a node that
    /// ran it may have let its lock expire already.
    Missed,
}

/// Runs scheduled jobs, locking their ticks through a [`LockBackend`] when the hint asks for it.
///
/// # Examples
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use ddb_lock::{LockingHint, MemoryBackend, ScheduledJob, Scheduler, TickOutcome};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let scheduler = Scheduler::new(Some(Arc::new(MemoryBackend::new())));
/// // A lease as long as the period, so that the tick under way is never too late to run.
/// let hour = Duration::from_secs(3600);
/// let job = ScheduledJob::every("report", hour).expected_run(hour);
/// let tick = scheduler.current_tick(&job);
/// let first = scheduler.run_tick(&job, tick, || async { "done" }).await?;
/// assert!(matches!(first, TickOutcome::Ran { output: "done", locked: true, .. }));
/// let again = scheduler.run_tick(&job, tick, || async { "twice?" }).await?;
/// assert!(matches!(again, TickOutcome::Skipped), "each tick runs once");
/// # Ok::<(), ddb_lock::InvalidInput>(()) }).unwrap();
/// ```
#[derive(Clone)]
pub struct Scheduler {
    backend: Option<Arc<dyn LockBackend>>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field(
                "backend",
                &self.backend.as_ref().map(|b| b.name().to_owned()),
            )
            .finish()
    }
}

impl Scheduler {
    /// A scheduler locking through `backend` (`None`: no distributed backend is configured).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn run(client: ddb_lock::LockClient) {
    /// use ddb_lock::{DynamoDbBackend, Scheduler};
    /// use std::sync::Arc;
    /// let scheduler = Scheduler::new(Some(Arc::new(DynamoDbBackend::new(client))));
    /// # }
    /// ```
    pub fn new(backend: Option<Arc<dyn LockBackend>>) -> Self {
        Scheduler {
            backend,
            clock: Arc::new(SystemClock),
        }
    }

    /// The clock that decides ticks and lateness (default: the system clock).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// let scheduler = ddb_lock::Scheduler::new(None).with_clock(Arc::new(ddb_lock::SystemClock));
    /// ```
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The number of `job`'s tick under way now.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let scheduler = ddb_lock::Scheduler::new(None);
    /// let job = ddb_lock::ScheduledJob::every("gc", Duration::from_secs(60));
    /// assert!(scheduler.current_tick(&job) > 0);
    /// ```
    pub fn current_tick(&self, job: &ScheduledJob) -> u64 {
        job.tick_at(self.clock.now())
    }

    /// Runs tick `tick` of `job` here, unless the hint's lock says another node runs it. Refuses
    /// an invalid job, or one that requires a backend this scheduler has not.
    ///
    /// # Examples
    ///
    /// See [`Scheduler`].
    pub async fn run_tick<T, F, Fut>(
        &self,
        job: &ScheduledJob,
        tick: u64,
        work: F,
    ) -> Result<TickOutcome<T>, InvalidInput>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        job.check()?;
        let backend = match (job.hint, &self.backend) {
            (LockingHint::NodeLocal, _) | (LockingHint::PreferGlobal, None) => None,
            (_, Some(backend)) => Some(backend.as_ref()),
            (LockingHint::RequireGlobal, None) => return Err(InvalidInput::NeedsBackend),
        };
        let Some(backend) = backend else {
            return Ok(ran_for(job, work, false, false).await);
        };
        let since_start = self.clock.now() - job.tick_start(tick);
        let late = since_start.to_std().unwrap_or_default();
        if late > job.lease() {
            info!(job = %job.id, tick, late_ms = late.as_millis(), "tick missed: too late to run it");
            return Ok(TickOutcome::Missed);
        }
        // A tick run before its start (a caller ahead of it, a timer woken early by a clock
        // slewed back) is locked until a lease past its start, as one run at its start is: a
        // lock of a lease from now ran out within a lease of the start, and a node arriving then
        // ran the tick again.
        let early = (-since_start).to_std().unwrap_or_default();
        let ttl = job
            .lease()
            .saturating_add(crate::time::whole_millis_up(early));
        // A tick further ahead than the longest lease a lock takes is refused, by name: locked
        // for less, it could run again at its start.
        if ttl > crate::limits::MAX_DURATION {
            return Err(InvalidInput::DurationTooLong {
                field: "tick",
                value: ttl,
                max: crate::limits::MAX_DURATION,
            });
        }
        let sent = Instant::now();
        let lock = match backend.try_lock(&job.key(tick), ttl).await {
            // Never released: kept out of a release of everything for shutdown too, unless such
            // a release took it first (on another thread, as it was acquired): it is being
            // released, and another node may run the tick.
            Ok(Some(lock)) if backend.keep_until_expiry(&lock) => lock,
            Ok(Some(_) | None) => return Ok(TickOutcome::Skipped),
            Err(BackendError::Invalid(invalid)) => return Err(invalid),
            Err(failed) => {
                warn!(job = %job.id, tick, error = %failed, "tick skipped: the lock backend failed");
                return Ok(TickOutcome::BackendFailed(failed));
            }
        };
        // Taken more than a lease after the tick's start, by the reading its condition compared:
        // the lock it found had lapsed, and its holder may have run the tick (a node held up
        // between the check above and its request ran the tick again; found by review). The
        // lock is kept until its expiry, as a tick's lock always is. (Read on the backend's
        // clock, which the scheduler's must agree with to within a lease, as both reading the
        // system clock do: one behind by more would find every tick missed.)
        let late_at_lock = (lock.acquired_at() - job.tick_start(tick)).to_std();
        if late_at_lock.is_ok_and(|late| late > job.lease()) {
            info!(job = %job.id, tick, "tick missed: its lock was taken after a lease past its start");
            return Ok(TickOutcome::Missed);
        }
        // Renew every third of the lease while the job runs, beside it (the job is never held up
        // by a renewal); a failed renewal is tried again at the next one. The lock is lost when a
        // renewal finds it not held, or when none succeeded before the lease, counted on this
        // node's monotonic clock from the last successful request's send, ran out. (A renewal
        // asks for the lock's TTL again: for a tick run early, longer than needed, never less.)
        let mut held_until = sent + ttl;
        let run = ran_for(job, work, true, false);
        tokio::pin!(run);
        let mut renewals = tokio::time::interval(job.lease() / 3);
        renewals.set_missed_tick_behavior(MissedTickBehavior::Delay);
        renewals.tick().await;
        let mut renewal: Option<(Instant, BackendFuture<'_, ()>)> = None;
        let mut lock_lost = false;
        let outcome = loop {
            tokio::select! {
                outcome = &mut run => break outcome,
                () = tokio::time::sleep_until(held_until), if !lock_lost => {
                    warn!(job = %job.id, tick, "the tick's lock was lost while the job ran: no renewal succeeded within its lease");
                    lock_lost = true;
                    renewal = None;
                }
                _ = renewals.tick(), if !lock_lost && renewal.is_none() => {
                    renewal = Some((Instant::now(), backend.renew(&lock)));
                }
                renewed = async {
                    match renewal.as_mut() {
                        Some((_, renew)) => renew.as_mut().await,
                        None => std::future::pending().await,
                    }
                }, if renewal.is_some() => {
                    let sent = renewal.take().map_or(held_until, |(sent, _)| sent);
                    match renewed {
                        Ok(()) => held_until = held_until.max(sent + ttl),
                        Err(error @ BackendError::NotHeld { .. }) => {
                            warn!(job = %job.id, tick, %error, "the tick's lock was lost while the job ran");
                            lock_lost = true;
                        }
                        Err(error) => {
                            warn!(job = %job.id, tick, %error, "a renewal of the tick's lock failed; trying again at the next one");
                        }
                    }
                }
            }
        };
        // The job may end in the poll in which a renewal's answer came, before that branch is
        // polled (the job's was first, or the job blocked its thread as the answer came): read
        // now if it is in (a renewal that found the lock gone was dropped unread, and the tick
        // said its lock held throughout; found by review). One still on its way is not waited
        // for: the job's outcome does not wait on a renewal.
        if let Some((sent, renew)) = renewal.as_mut() {
            match renew.as_mut().now_or_never() {
                // Renewed: the lease counts from its send (unread, a renewal that had kept the
                // lock held said it lost once the first lease was over; found by review).
                Some(Ok(())) => held_until = held_until.max(*sent + ttl),
                Some(Err(error @ BackendError::NotHeld { .. })) => {
                    warn!(job = %job.id, tick, %error, "the tick's lock was lost while the job ran");
                    lock_lost = true;
                }
                Some(Err(_)) | None => {}
            }
        }
        // The job may end in the poll in which the lease ran out, before the timer's branch is
        // picked (a job that blocked its thread, a busy runtime): the lease is over all the same
        // (it said the lock held throughout; found by review).
        lock_lost |= Instant::now() >= held_until;
        Ok(match outcome {
            TickOutcome::Ran {
                output,
                locked,
                ran_for,
                overran,
                ..
            } => TickOutcome::Ran {
                output,
                locked,
                ran_for,
                overran,
                lock_lost,
            },
            other => other,
        })
    }

    /// Runs `job` at every tick, forever: sleeps until each tick's start, then
    /// [`run_tick`](Self::run_tick)s it. Each tick once, and in order, even when the clock steps
    /// back (the next tick is the one after the last run). Returns only if the job is invalid.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(scheduler: ddb_lock::Scheduler) -> Result<(), ddb_lock::InvalidInput> {
    /// use std::time::Duration;
    /// let job = ddb_lock::ScheduledJob::every("report", Duration::from_secs(3600));
    /// scheduler.run_every(&job, || async { println!("report") }).await
    /// # }
    /// ```
    pub async fn run_every<T, F, Fut>(
        &self,
        job: &ScheduledJob,
        mut work: F,
    ) -> Result<(), InvalidInput>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = T>,
    {
        job.check()?;
        // The tick after the last one run, even if the clock stepped back since: a tick runs at
        // most once on this node.
        let mut last: Option<u64> = None;
        loop {
            let current = self.current_tick(job);
            let next = last.map_or(current, |last| last.max(current)) + 1;
            let wait = (job.tick_start(next) - self.clock.now())
                .to_std()
                .unwrap_or_default();
            tokio::time::sleep(wait).await;
            self.run_tick(job, next, &mut work).await?;
            last = Some(next);
        }
    }
}

/// Runs `work`, timing it against the job's lease.
async fn ran_for<T, F, Fut>(
    job: &ScheduledJob,
    work: F,
    locked: bool,
    lock_lost: bool,
) -> TickOutcome<T>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = T>,
{
    let started = tokio::time::Instant::now();
    let output = work().await;
    let ran_for = started.elapsed();
    let overran = ran_for > job.lease();
    if overran {
        warn!(job = %job.id, ran_ms = ran_for.as_millis(), lease_ms = job.lease().as_millis(), "the job ran longer than its lease: raise expected_run or margin");
    }
    TickOutcome::Ran {
        output,
        locked,
        ran_for,
        overran,
        lock_lost,
    }
}
