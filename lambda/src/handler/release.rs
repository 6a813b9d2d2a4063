//! The handler's releases: of one lock, of a set, of an ended execution's lock, and how their
//! outcomes are answered.

use super::{handle, Done, Handler};
use crate::error::{reason, HandlerError};
use crate::event::HeldLock;
use crate::response::{ReleaseResponse, ReleaseSetResponse, Response};
use chrono::{DateTime, Utc};
use ddb_lock::{LockClient, LockHandle, ReleaseOutcome};

impl Handler {
    /// Releases every member of a set, each on its own: a member gone already is
    /// `released: false`; one of another owner fails the whole answer, as a single release does,
    /// unless DynamoDB failed another member's release: then the answer is that retryable error,
    /// whatever the members' order, so that a retry releases that member (a mismatch, which a
    /// saga does not retry, left it held for its lease).
    pub(super) async fn release_set(
        &self,
        client: &LockClient,
        owner: String,
        locks: Vec<HeldLock>,
        attempts: &mut u32,
    ) -> Result<Done, HandlerError> {
        *attempts = u32::try_from(locks.len()).unwrap_or(u32::MAX);
        let handles: Vec<LockHandle> = locks.iter().map(handle).collect();
        // Every member checked before any is released (a bad one is named on `locks`).
        let outcomes = client
            .release_handles(&handles)
            .await
            .map_err(|err| HandlerError::from(err).of_member_in("locks"))?;
        let mut released = Vec::new();
        let mut failures = Vec::new();
        for ((lock, outcome), held) in locks.into_iter().zip(outcomes).zip(&handles) {
            let outcome = outcome.map(|outcome| released_before(client, held, None, outcome));
            let answer = outcome.map_err(HandlerError::from).and_then(|outcome| {
                release_answer(
                    lock.resource,
                    owner.clone(),
                    Some(lock.lock_id.to_string()),
                    outcome,
                )
            });
            match answer {
                Ok(done) => {
                    if let Response::Release(answer) = done.answer {
                        released.push(answer);
                    }
                }
                Err(err) => failures.push(err),
            }
        }
        // The retryable error if there is one, else the first.
        let retryable = failures
            .iter()
            .position(|err| matches!(err, HandlerError::Backend(_)));
        if let Some(at) = retryable.or((!failures.is_empty()).then_some(0)) {
            return Err(failures.swap_remove(at));
        }
        Ok(Done::new(
            ReleaseSetResponse { owner, released },
            "released",
        ))
    }

    /// Releases `lock`; with `data`, leaving it (or, for `Some(None)`, no payload) in the kept
    /// item for the next holder.
    pub(super) async fn release(
        &self,
        client: &LockClient,
        lock: HeldLock,
        data: Option<Option<String>>,
        expires_at: Option<DateTime<Utc>>,
        attempts: &mut u32,
    ) -> Result<Done, HandlerError> {
        *attempts = 1;
        let held = handle(&lock);
        let outcome = match data {
            None => client.release(&held).await?,
            Some(data) => {
                let data = data.map(String::into_bytes);
                client.release_and_replace_data(&held, data).await?
            }
        };
        let lock_id = Some(lock.lock_id.to_string());
        let outcome = released_before(client, &held, expires_at, outcome);
        release_answer(lock.resource, lock.owner, lock_id, outcome)
    }

    /// Releases `owner`'s lock on `resource` whatever its lock id; with `stopped_at`, only a lock
    /// acquired no later.
    pub(super) async fn release_execution(
        &self,
        client: &LockClient,
        resource: String,
        owner: String,
        stopped_at: Option<DateTime<Utc>>,
        attempts: &mut u32,
    ) -> Result<Done, HandlerError> {
        *attempts = 1;
        let outcome = match stopped_at {
            Some(stopped_at) => {
                client
                    .release_owned_acquired_by(&resource, &owner, stopped_at)
                    .await
            }
            None => client.release_owned(&resource, &owner).await,
        };
        // The resource came from the execution's input: a bad one is that field's.
        let outcome =
            outcome.map_err(|err| HandlerError::from(err).of_resource_in("execution_input"))?;
        // Another execution holds the lock: this one has nothing there to release, which is no
        // failure of the clean-up (an error made EventBridge invoke it again, twice, for nothing).
        // The same execution's later lock (a redrive's) stays an ownership mismatch.
        if let ReleaseOutcome::NotOwner { holder } = &outcome {
            if holder.owner != owner {
                let answer = ReleaseResponse {
                    resource,
                    owner,
                    lock_id: None,
                    released: false,
                    reason: Some(reason::NOT_HELD),
                };
                return Ok(Done::new(answer, "not_found"));
            }
        }
        release_answer(resource, owner, None, outcome)
    }
}

/// `outcome`, of a release of `held` through `client`: one that finds the lock another's, where
/// this client released the acquisition before (Step Functions retried a release whose answer it
/// never got, in this warm instance, and another execution took the lock meanwhile), is
/// unconfirmed, not the mismatch a saga takes for a lock lost during its work (found by review);
/// so is one whose holder acquired the lock by `expires_at`, the lease end a retried release's
/// event gives (the same retry on another instance, found by review): a takeover of a lease that
/// ended writes a later time (see [`LockClient::may_have_taken_over`]), so the acquisition was
/// released, by the release's earlier attempt or by another hand, which this cannot tell apart;
/// nor a takeover, early by a clock ahead, whose holder has passed the lock on since.
fn released_before(
    client: &LockClient,
    held: &LockHandle,
    expires_at: Option<DateTime<Utc>>,
    outcome: ReleaseOutcome,
) -> ReleaseOutcome {
    match outcome {
        ReleaseOutcome::NotOwner { .. } if client.released_here(held) => {
            ReleaseOutcome::Unconfirmed
        }
        ReleaseOutcome::NotOwner { holder }
            if expires_at.is_some_and(|end| !client.may_have_taken_over(&holder, end)) =>
        {
            ReleaseOutcome::Unconfirmed
        }
        outcome => outcome,
    }
}

/// The answer to a release (see [`ReleaseResponse::of`]) and its metrics outcome.
fn release_answer(
    resource: String,
    owner: String,
    lock_id: Option<String>,
    outcome: ReleaseOutcome,
) -> Result<Done, HandlerError> {
    let answer = ReleaseResponse::of(resource, owner, lock_id, outcome)?;
    let outcome = match answer.reason {
        None => "released",
        Some(reason::ALREADY_RELEASED) => "already_released",
        Some(reason::UNCONFIRMED) => "unconfirmed",
        Some(_) => "not_found",
    };
    Ok(Done::new(answer, outcome))
}
