//! Claims a `claim` call made but has not handed to its caller: given back when the call fails
//! with a claim's outcome unknown, or is dropped.
//!
//! A claim whose answer was lost (an error after the SDK's retries, a deadline) may have landed,
//! and a `claim` future dropped mid-way (a timeout, a `select!`) never hands its caller the tasks
//! it took: either way those tasks stayed claimed by nobody who knew, and no worker could take
//! them until their leases ended (found by review). They are given back: `ClaimableAt` set to
//! now (after the claim's own `:now`, so that a late copy of the claim finds the task not
//! claimable), the claimant and token removed, on the condition that the token is still the
//! claim's. The task is then as a crashed worker's whose lease ended: claimable, `in_progress`.

use super::TaskQueue;
use crate::background::{looking_again, retrying};
use crate::conditional::{answer, update_refused, Answer};
use crate::error::Error;
use crate::item::s;
use crate::timestamp;
use chrono::{DateTime, TimeDelta, Utc};
use tracing::{debug, warn};

/// A give-back: the claim's lease ends now, and it is nobody's.
const GIVE_BACK_UPDATE: &str = "SET #claimable_at = :now REMOVE #claimed_by, #claim_token";
const GIVE_BACK_CONDITION: &str = "#claim_token = :token AND #task_status = :in_progress";

/// One claim sent: the task, the claim's token and the time its condition was evaluated at.
#[derive(Debug, Clone)]
pub(super) struct Claim {
    pub(super) id: String,
    pub(super) token: String,
    pub(super) now: DateTime<Utc>,
}

/// The claims of one `claim` call not yet handed to its caller. Dropped with any left (the call
/// failed or was dropped), they are given back from a task of the client's (`flush` waits).
pub(super) struct UnsettledClaims {
    queue: TaskQueue,
    claims: Vec<Claim>,
}

impl UnsettledClaims {
    pub(super) fn new(queue: &TaskQueue) -> Self {
        UnsettledClaims {
            queue: queue.clone(),
            claims: Vec::new(),
        }
    }

    /// `claim` is about to be sent.
    pub(super) fn sending(&mut self, claim: &Claim) {
        self.claims.push(claim.clone());
    }

    /// `claim` was refused: nothing to give back.
    pub(super) fn refused(&mut self, claim: &Claim) {
        self.claims.retain(|c| c.token != claim.token);
    }

    /// The claim last sent failed, its outcome unknown: given back from the background, and
    /// every other claim is the caller's. Not awaited: the tasks claimed before it are answered
    /// at once (their leases run meanwhile, and a give-back that looks again takes a quarter
    /// second at least, more under throttling).
    pub(super) fn give_back_last(mut self) {
        let last = self.claims.pop();
        self.claims.clear();
        self.claims.extend(last);
    }

    /// Every claim left is the caller's now.
    pub(super) fn settled(mut self) {
        self.claims.clear();
    }
}

impl Drop for UnsettledClaims {
    fn drop(&mut self) {
        if self.claims.is_empty() {
            return;
        }
        let (queue, claims) = (self.queue.clone(), std::mem::take(&mut self.claims));
        let spawned = self.queue.table().release_in_background(async move {
            for claim in &claims {
                give_back(&queue, claim).await;
            }
        });
        if !spawned {
            warn!("task claims dropped outside a runtime stay claimed until their leases end");
        }
    }
}

/// Gives `claim` back if the task still carries its token. Logged, not returned: the caller
/// already has its answer.
async fn give_back(queue: &TaskQueue, claim: &Claim) {
    // The claim may still be on its way (two connections, either order): a give-back that finds
    // nothing of its own looks again, as a dropped acquisition's clean-up does.
    let sent = looking_again(
        || send_give_back(queue, claim, None),
        |sent: &Result<Answer<_, _>, Error>| matches!(sent, Ok(Answer::Refused(_))),
    )
    .await;
    match sent {
        Ok(Answer::Applied(_)) => {
            debug!(
                task = claim.id,
                "gave back a task whose claim's outcome was unknown"
            )
        }
        Ok(Answer::Refused(_)) => {
            debug!(task = claim.id, "the unsettled task claim had not landed")
        }
        Err(err) => {
            warn!(task = claim.id, %err, "could not give back a task whose claim's outcome was unknown; it stays claimed until its lease ends")
        }
    }
}

/// Gives back a claim whose lease a renewal found over (the task still carries its token, its
/// status `in_progress`, and the lease end `seen_end` the renewal's refusal showed), so that no
/// renewal sent earlier lands on it. Only at that lease end: a renewal of the same claim that
/// landed since (sent earlier by another task of the worker, and answered `true`) keeps the
/// claim; given back under it, another worker claimed the task while this one held it. From a
/// task of the client (`flush` waits for it): a renewal dropped after its answer still gives the
/// claim back.
///
/// True if the give-back was refused by a later lease end of the same claim: a renewal sent
/// earlier landed between the refusal that found the lease over and the give-back, and the claim
/// stands (answered lost, the task stayed claimed by nobody who knew for that renewal's lease;
/// found by review). The renewal that found the lease over is then out of date, and is sent
/// again.
pub(super) async fn give_back_lapsed(queue: &TaskQueue, claim: Claim, seen_end: String) -> bool {
    let (spawned_queue, (done, given_back)) = (queue.clone(), tokio::sync::oneshot::channel());
    let spawned = queue.table().release_in_background(async move {
        let sent = send_give_back(&spawned_queue, &claim, Some(&seen_end)).await;
        let moved = match sent {
            Ok(Answer::Applied(_)) => {
                debug!(task = claim.id, "gave back a claim whose lease was over");
                false
            }
            Ok(Answer::Refused(item)) => item.is_some_and(|item| {
                super::token_of(&item) == Some(claim.token.as_str())
                    && item
                        .get(super::TASK_STATUS)
                        .and_then(|v| v.as_s().ok())
                        .map(String::as_str)
                        == Some(super::TaskStatus::InProgress.as_str())
                    && item
                        .get(super::CLAIMABLE_AT)
                        .and_then(|v| v.as_s().ok())
                        .is_some_and(|stored| *stored > seen_end)
            }),
            Err(err) => {
                warn!(task = claim.id, %err, "could not give back a claim whose lease was over; a renewal sent earlier may still hold it");
                false
            }
        };
        let _ = done.send(moved);
    });
    spawned && given_back.await.unwrap_or(false)
}

/// One give-back of `claim` (only at the lease end `seen_end`, if given), tried again when
/// DynamoDB fails it.
async fn send_give_back(
    queue: &TaskQueue,
    claim: &Claim,
    seen_end: Option<&str>,
) -> Result<
    Answer<aws_sdk_dynamodb::operation::update_item::UpdateItemOutput, Option<crate::item::Item>>,
    Error,
> {
    // Later than the claim's own `:now`, so that a copy of it arriving later is refused.
    let now = queue
        .table()
        .now()
        .max(claim.now + TimeDelta::milliseconds(1));
    let condition = match seen_end {
        Some(_) => format!("{GIVE_BACK_CONDITION} AND #claimable_at = :seen_end"),
        None => GIVE_BACK_CONDITION.to_owned(),
    };
    retrying(|| async {
        let mut request = queue
            .update_item(&claim.id, GIVE_BACK_UPDATE, &condition)?
            .expression_attribute_values(":now", s(timestamp::format(now)))
            .expression_attribute_values(":token", s(claim.token.as_str()))
            .expression_attribute_values(":in_progress", s(super::TaskStatus::InProgress.as_str()));
        if let Some(seen_end) = seen_end {
            request = request.expression_attribute_values(":seen_end", s(seen_end));
        }
        answer("UpdateItem", request.send().await, update_refused)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_give_back_names_only_task_attributes() {
        for expression in [GIVE_BACK_UPDATE, GIVE_BACK_CONDITION] {
            for placeholder in expression
                .split(|c: char| !(c == '#' || c == '_' || c.is_ascii_alphanumeric()))
                .filter(|word| word.starts_with('#'))
            {
                assert!(
                    super::super::NAMES
                        .iter()
                        .any(|(name, _)| *name == placeholder),
                    "{placeholder} in {expression:?}"
                );
            }
        }
    }
}
