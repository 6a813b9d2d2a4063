//! What a guard knows (the lock as last extended, or why it was lost) and how an extension's
//! answer or a loss moves it.

use crate::lock::Lock;
use crate::outcome::{ExtendOutcome, LockLost};
use chrono::{DateTime, Utc};
use tokio::sync::{watch, Mutex, MutexGuard};
use tokio::time::Instant;
use tracing::{debug, warn};

/// What a guard knows: the lock as last extended, or why it was lost. Once lost, always lost.
#[derive(Debug, Clone)]
pub(super) enum State {
    Held(Lock),
    Lost { lock: Lock, lost: LockLost },
}

/// Records an extension's outcome: a later lease replaces an earlier one; a loss is final. An
/// extension answered after the guard's lease ran out on the monotonic clock loses the guard
/// (`LeaseRanOut`) instead of reviving it: `is_held` has said false and `lost` has completed.
/// Returns why the guard is lost, if it is.
pub(super) fn settle(
    state: &watch::Sender<State>,
    outcome: &ExtendOutcome,
) -> Result<(), LockLost> {
    let lost = match outcome.lock_or_lost() {
        Ok(extended) => {
            let mut ran_out = false;
            // The time read under the state's lock (see `raise_lease`).
            state.send_if_modified(|current| match current {
                State::Held(lock) if Instant::now() >= lock.valid_until_instant() => {
                    ran_out = true;
                    false
                }
                // Every stored lease end an answer tells was stored at some point, and while the
                // item is ours it never moves back (an extension never shortens it): the latest
                // one known is not after the stored one. The lease counted on is the later one: an
                // answer with no later lease (a lock handed back with more lease than this guard
                // asks for) still brings the item as it tells it, the latest this guard knows (its
                // answers settle in the order it sent them): the payload a data replacement
                // wrote, the stored end.
                State::Held(lock) => {
                    let told = Lock::new(
                        extended.handle().clone(),
                        extended.acquired_at(),
                        lock.expires_at().max(extended.expires_at()),
                        lock.valid_until_instant()
                            .max(extended.valid_until_instant()),
                    )
                    .with_fencing_token(extended.fencing_token())
                    .with_data(extended.data().map(<[u8]>::to_vec));
                    let changed = told != *lock;
                    *lock = told;
                    changed
                }
                State::Lost { .. } => false,
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

/// An extension of the guard's lock through its client (its `extend`, a twin guard's heartbeat)
/// was applied with the lease end `until` (`stored_end` as stored): a later lease than the
/// guard's own is counted on while the guard holds, never once its lease ran out (`is_held` has
/// said false, and `lost` has completed).
pub(super) fn raise_lease(state: &watch::Sender<State>, until: Instant, stored_end: DateTime<Utc>) {
    // Read under the state's lock: read before it, a thread delayed between the two raised a lease
    // that had run out meanwhile (found by review).
    state.send_if_modified(|current| match current {
        State::Held(lock)
            if Instant::now() < lock.valid_until_instant()
                && until > lock.valid_until_instant() =>
        {
            *lock = Lock::new(
                lock.handle().clone(),
                lock.acquired_at(),
                lock.expires_at().max(stored_end),
                until,
            )
            .with_fencing_token(lock.fencing_token())
            .with_data(lock.data().map(<[u8]>::to_vec));
            true
        }
        _ => false,
    });
}

/// Moves the guard to lost for `lost`, unless it is lost already (the first reason stays).
pub(super) fn lose(state: &watch::Sender<State>, lost: LockLost) {
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
pub(super) fn why_lost(state: &watch::Sender<State>) -> LockLost {
    match &*state.borrow() {
        State::Lost { lost, .. } => lost.clone(),
        State::Held(_) => LockLost::LeaseRanOut { last_error: None },
    }
}

/// The lock while the guard holds it.
pub(super) fn held(state: &watch::Sender<State>) -> Option<Lock> {
    match &*state.borrow() {
        State::Held(lock) => Some(lock.clone()),
        State::Lost { .. } => None,
    }
}

/// The guard's lease end as it knows it (held or lost).
fn lease_end(state: &watch::Sender<State>) -> Instant {
    match &*state.borrow() {
        State::Held(lock) | State::Lost { lock, .. } => lock.valid_until_instant(),
    }
}

/// Completes `work` (an extension of the guard's lock), or gives up on it once the guard's lease
/// has run out: `None`. A lease raised meanwhile (an extension through the client, see
/// [`raise_lease`]) is waited for to its new end (a data replacement whose answer was held gave up
/// at the first end, and released the lock its client had just answered extended; found by
/// review).
pub(super) async fn within_lease<F: std::future::Future>(
    state: &watch::Sender<State>,
    work: F,
) -> Option<F::Output> {
    let mut work = std::pin::pin!(work);
    loop {
        let until = lease_end(state);
        if let Ok(output) = tokio::time::timeout_at(until, &mut work).await {
            return Some(output);
        }
        if lease_end(state) <= until {
            return None;
        }
    }
}

/// Waits for the turn to extend the guard's lock (`extending`, held by whichever extension is in
/// flight), at most until its lease runs out: a lease that the extension holding the turn
/// lengthened meanwhile is waited for to its new end (waiting to the end read before, the
/// heartbeat behind a data replacement gave up a lease that had been extended, and released a
/// lock still held). `None` if the lease ran out first, or the guard is lost.
pub(super) async fn wait_for_turn<'a>(
    state: &watch::Sender<State>,
    extending: &'a Mutex<()>,
) -> Option<MutexGuard<'a, ()>> {
    loop {
        let until = held(state)?.valid_until_instant();
        if let Ok(turn) = tokio::time::timeout_at(until, extending.lock()).await {
            return Some(turn);
        }
        if held(state)?.valid_until_instant() <= until {
            return None;
        }
    }
}
