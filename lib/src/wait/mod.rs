//! Waiting for a lock: the acquire attempt repeated until it wins or its deadline passes, and the
//! single try of `try_acquire`.
//!
//! Between attempts a waiter sleeps a full-jitter backoff ([`backoff`]), cut short to the moment
//! the takeover rule would allow a takeover (the refused attempt's answer gives it) and to the
//! deadline, at which one last attempt is made. Tasks of one client waiting for the same resource
//! line up ([`WaitQueues`](crate::wait_queues::WaitQueues)): only the first in line makes requests,
//! a release through the client wakes it, and while this very client holds the lock it polls only
//! once per backoff maximum. The line only decides who tries when; every acquisition is the
//! waiter's own conditional write, so a waiter that leaves (timeout, dropped future) leaves nothing
//! behind.

pub(crate) mod backoff;
pub(crate) mod writer_marker;

use crate::error::Error;
use crate::lock::{Holder, Lock};
use crate::lock_table::LockTable;
use crate::ops::acquire::{Attempt, Request};
use crate::ops::attempt_acquire;
use crate::ops::fenced_acquire::{TransactionConflicts, MAX_FENCE_TRIES};
use crate::outcome::{AcquireAttempt, AcquireStats};
use crate::time::{millis, span};
use crate::wait_queues::Place;
use backoff::{Backoff, BackoffBounds};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tracing::{debug, info};
use writer_marker::WriterMarker;

/// Tries once; a fenced attempt cancelled by concurrent writes is tried again after a backoff
/// step, up to [`MAX_FENCE_TRIES`] in all.
pub(crate) async fn try_once(
    table: &Arc<LockTable>,
    request: &Request<'_>,
    bounds: BackoffBounds,
) -> Result<AcquireAttempt, Error> {
    let mut backoff = Backoff::new(bounds);
    for tries in 1..=MAX_FENCE_TRIES {
        match attempt_acquire(table, request, None).await? {
            Attempt::Acquired(lock) => {
                log_acquired(&lock, Duration::ZERO, tries);
                return Ok(AcquireAttempt::Acquired(lock));
            }
            Attempt::Held { holder, .. } => {
                debug!(resource = request.resource, owner = request.owner, holder = %holder.owner, "lock held by another owner");
                return Ok(AcquireAttempt::Held(holder));
            }
            Attempt::Conflict => tokio::time::sleep(backoff.next_delay()).await,
            Attempt::Cleared => {}
        }
    }
    Err(Error::backend_other(
        "TransactWriteItems",
        TransactionConflicts(MAX_FENCE_TRIES),
    ))
}

/// One `acquire` call: its request, backoff and deadline.
pub(crate) struct Wait<'a> {
    pub(crate) table: &'a Arc<LockTable>,
    pub(crate) request: &'a Request<'a>,
    pub(crate) bounds: BackoffBounds,
    pub(crate) started: Instant,
    pub(crate) deadline: Instant,
}

impl Wait<'_> {
    /// Attempts until the lock is taken or the deadline passes, counting attempts in `stats`.
    pub(crate) async fn run(&self, stats: &mut AcquireStats) -> Result<Lock, Error> {
        if self.request.fair {
            return crate::fair::wait::run(self, stats).await;
        }
        let resource = self.request.resource;
        let queues = &self.table.queues;
        let mut backoff = Backoff::new(self.bounds);
        let mut last_holder: Option<Holder> = None;
        let mut marker = WriterMarker::new(self.table, resource, self.request.owner);
        // An idempotent request whose owner holds the lock through this client takes it back at
        // once, ahead of the client's line: the tasks waiting there wait for that very lock, and
        // waiting behind them took the whole timeout (or the lease, and then the lock went to one
        // of them, and the request timed out for a lock its owner held when it asked).
        if self.request.idempotent
            && queues.held_by_here(resource, Instant::now(), self.request.owner)
        {
            stats.attempts += 1;
            if let Attempt::Acquired(lock) = attempt_acquire(self.table, self.request, None).await?
            {
                log_acquired(&lock, self.started.elapsed(), stats.attempts);
                return Ok(lock);
            }
        }
        let place = queues.join(resource);
        // Behind other tasks of this client: wait for our turn. If the deadline comes first, the
        // one last attempt below is still made.
        let first = tokio::time::timeout_at(self.deadline, place.first())
            .await
            .ok();
        let waits_for_release_here = first.is_some();
        loop {
            if waits_for_release_here {
                self.wait_while_held_here(&place).await;
            }
            // Registered before the attempt, so that a release during it is not missed.
            let freed = place.freed();
            tokio::pin!(freed);
            freed.as_mut().enable();
            stats.attempts += 1;
            let floor = last_holder.as_ref().and_then(|h| h.fencing_token);
            let retry_at = match attempt_acquire(self.table, self.request, floor).await? {
                Attempt::Acquired(lock) => {
                    marker.acquired();
                    log_acquired(&lock, self.started.elapsed(), stats.attempts);
                    return Ok(lock);
                }
                Attempt::Held {
                    holder,
                    retry_at,
                    readers,
                } => {
                    if readers {
                        marker.refused_by_readers(&holder, self.deadline).await;
                    }
                    last_holder = Some(holder);
                    retry_at
                }
                Attempt::Conflict => Instant::now() + self.bounds.max(),
                Attempt::Cleared => Instant::now(),
            };
            let now = Instant::now();
            if now >= self.deadline {
                marker.withdraw().await;
                return Err(self.timed_out(last_holder, now, stats.attempts));
            }
            if waits_for_release_here && self.held_here(now).is_some() {
                continue;
            }
            let delay = backoff
                .next_delay()
                .min(retry_at.saturating_duration_since(now))
                .min(self.deadline - now);
            debug!(resource, delay_ms = millis(delay), "lock held; backing off");
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = &mut freed, if first.is_some() => {}
            }
        }
    }

    /// The error at the deadline: a timeout naming the last holder seen, or, if every attempt was
    /// cancelled by concurrent writes (so no holder was ever seen), that failure.
    pub(crate) fn timed_out(
        &self,
        last_holder: Option<Holder>,
        now: Instant,
        attempts: u32,
    ) -> Error {
        let Some(holder) = last_holder else {
            return Error::backend_other("TransactWriteItems", TransactionConflicts(attempts));
        };
        let resource = self.request.resource;
        let waited = now - self.started;
        info!(
            resource,
            owner = self.request.owner,
            holder = %holder.owner,
            waited_ms = millis(waited),
            attempts,
            "lock acquire timed out"
        );
        Error::Timeout {
            resource: resource.to_owned(),
            waited,
            holder: Box::new(holder),
        }
    }

    /// The lease end of a live lock this client holds on the resource, unless the request is
    /// idempotent and the lock its owner's: that one it takes back at once instead of waiting
    /// for its release (a saga step retried in the same Lambda instance).
    fn held_here(&self, now: Instant) -> Option<Instant> {
        let own = self.request.idempotent.then_some(self.request.owner);
        self.table.queues.held_here(self.request.resource, now, own)
    }

    /// While this client holds the lock on the resource (taken by another of its tasks), waits for
    /// its release through this client, its lease end, the deadline, or the backoff's largest
    /// delay, whichever comes first: the last, in case it is released elsewhere.
    async fn wait_while_held_here(&self, place: &Place<'_>) {
        let resource = self.request.resource;
        let freed = place.freed();
        tokio::pin!(freed);
        freed.as_mut().enable();
        let now = Instant::now();
        let Some(lease_end) = self.held_here(now) else {
            return;
        };
        let wake = lease_end.min(now + self.bounds.max()).min(self.deadline);
        debug!(
            resource,
            "lock held by this client; waiting for its release"
        );
        tokio::select! {
            () = tokio::time::sleep_until(wake) => {}
            () = freed => {}
        }
    }
}

/// Logs an acquisition.
pub(crate) fn log_acquired(lock: &Lock, waited: Duration, attempts: u32) {
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
