//! A guard's background task: extend the lock every heartbeat until it is released or lost.

use super::state::{held, lose, settle, wait_for_turn, State};
use crate::client::LockClient;
use crate::outcome::LockLost;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Mutex};
use tokio::time::Instant;
use tracing::warn;

/// The end of the guard's lease, while it holds and the lease has not run out.
fn lease_left(state: &watch::Sender<State>) -> Option<Instant> {
    held(state)
        .map(|lock| lock.valid_until_instant())
        .filter(|until| Instant::now() < *until)
}

/// The guard's background task: extend every `heartbeat`, retry failures until the lease runs
/// out, stop at the first loss.
pub(super) async fn extend_until_lost(
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
        let turn = wait_for_turn(&state, &extending).await;
        let Some(lock) = held(&state) else { return };
        let Some(_turn) = turn else { break };
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
                // Expired (a wall clock that jumped past the lease end): released by the guard's
                // stop, which the client calls with the answer (an extension of ours given up on
                // may still land with its earlier `:now` and lengthen the lease). Gone or taken:
                // nothing to release.
                Err(_) => return,
            },
            Ok(Err(err)) => {
                last_error = Some(err.to_string());
                // Until the lease ends: the one sent within, or a later one the client extended.
                let until = lease_left(&state).unwrap_or(valid_until);
                if Instant::now() >= until {
                    break;
                }
                warn!(resource = lock.resource(), %err, "lock extension failed; retrying");
                retry_at = Some((Instant::now() + heartbeat / 4).min(until));
            }
            // Unanswered at the lease end it was sent within: given up, unless the lock was
            // extended through the client meanwhile (its `extend`, a twin guard's heartbeat),
            // which the guard counts on (it gave up, and released a lock its client had just
            // answered extended; found by review).
            Err(_elapsed) if lease_left(&state).is_some() => retry_at = None,
            Err(_elapsed) => break,
        }
    }
    // (No-op if lost already: the first reason stands.)
    lose(&state, LockLost::LeaseRanOut { last_error });
    // An extension may still land after its answer was given up on: release, so that the lock
    // does not stay taken for a lease nobody is using. From a task of its own: the release stops
    // this guard, which aborts this task, and would cancel a release sent from it.
    let lock = match &*state.borrow() {
        State::Held(lock) | State::Lost { lock, .. } => lock.clone(),
    };
    if !super::release_unattended(&client, lock, None, "guard whose lease ran out") {
        warn!("a guard whose lease ran out could not release outside a runtime; its lock ends with its lease");
    }
}
