//! State-transition task claims (seed 004): task items with a status, and workers that claim up
//! to `limit` of them whose status allows it, each with a lease, so that a crashed worker's task
//! becomes claimable again by condition, with no sweeper.
//!
//! A task is the item of resource `task:<queue>/<id>` in the lock table (no `LockID`: lock
//! operations never mistake it for a lock). It carries `TaskQueue`, `TaskStatus`, and while it
//! may be claimed, `ClaimableAt`: when its status was set (a claimable status), or when its
//! claim's lease ends (`in_progress`). The global secondary index `Tasks` (partition `TaskQueue`,
//! sort `ClaimableAt`) is sparse on `ClaimableAt`: finding candidates is one Query
//! (`TaskQueue = :queue AND ClaimableAt <= :now`), never a Scan. Each candidate is then claimed by
//! a conditional UpdateItem that checks the same rule on the item itself
//! (`ClaimableAt <= :now`), so two workers never claim one task: the index only proposes.

use crate::client::LockClient;
use crate::conditional::{answer, update_refused, Answer};
use crate::error::{Error, InvalidInput};
use crate::item::{s, Item};
use crate::lock_table::LockTable;
use crate::namespace::Namespace;
use crate::timestamp;
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use chrono::{DateTime, Utc};
pub use status::TaskStatus;
use std::time::Duration;
use tracing::{debug, warn};
use unsettled::{Claim, UnsettledClaims};

mod status;
mod unsettled;

/// The task's queue name (the index's partition key).
pub const TASK_QUEUE: &str = "TaskQueue";
/// The task's status.
pub const TASK_STATUS: &str = "TaskStatus";
/// When the task may be claimed (the index's sort key); absent when it may not.
pub const CLAIMABLE_AT: &str = "ClaimableAt";
/// The claimant of an `in_progress` task.
pub const CLAIMED_BY: &str = "ClaimedBy";
/// The random token of the current claim, which completes and renewals compare.
pub const CLAIM_TOKEN: &str = "ClaimToken";
/// The last completed claim, `<status>:<token>` (`done:…`, `failed:…`): a completion's retry
/// recognises its own there, even after another worker claimed the task again (which changes
/// `ClaimToken`).
pub const COMPLETED_CLAIM: &str = "CompletedClaim";
/// When the task's last claim was made, in milliseconds since the Unix epoch (by the claimant's
/// clock, or just after the claim before it), which completions, status writes and give-backs
/// leave: a copy of any earlier claim delivered late is refused by it, whatever was written since.
pub const CLAIM_AT: &str = "ClaimAt";
/// The id of the task's last status write ([`TaskQueue::set_status`]): a resend of that write
/// (the SDK's, after its answer was lost) finds its own id, and is refused.
pub const STATUS_WRITE: &str = "StatusWrite";
/// When the task's last status write was made, in milliseconds since the Unix epoch (by the
/// writer's clock, or just after the write before it): a copy of an earlier status write
/// delivered late, after a claim or a later status write, is refused.
pub const STATUS_WRITE_AT: &str = "StatusWriteAt";
/// The id of the status write that the task's last status write replaced: a write sent again by
/// the SDK and refused by a later one finds there whether its first attempt was applied.
pub const REPLACED_STATUS_WRITE: &str = "ReplacedStatusWrite";
/// The default name of the tasks index.
pub const DEFAULT_TASKS_INDEX: &str = "Tasks";
/// The most tasks one claim takes.
pub const MAX_CLAIM: usize = 100;

/// Names of the attributes the expressions use.
const NAMES: [(&str, &str); 10] = [
    ("#task_queue", TASK_QUEUE),
    ("#claim_at", CLAIM_AT),
    ("#status_write", STATUS_WRITE),
    ("#status_write_at", STATUS_WRITE_AT),
    ("#replaced_status_write", REPLACED_STATUS_WRITE),
    ("#task_status", TASK_STATUS),
    ("#claimable_at", CLAIMABLE_AT),
    ("#claimed_by", CLAIMED_BY),
    ("#claim_token", CLAIM_TOKEN),
    ("#completed_claim", COMPLETED_CLAIM),
];

/// A claim: the task exists in this queue and may be claimed now, this claim's token has not
/// completed it, and it comes after the task's last claim (`ClaimAt`): a copy of a claim
/// delivered late finds its own time or a later one there. (With `ClaimableAt` no later than the
/// copy's `:now`, a completer's or an administrator's clock behind, a copy delivered after the
/// claim's completion, or after a status write, took the task again, for a lease, for a worker
/// done with it; found by review. Remembering only the last claim's token, a copy delivered after
/// one more claim still did.)
const CLAIM_CONDITION: &str = "attribute_exists(#pk) AND #task_queue = :queue AND #claimable_at <= :now AND NOT contains(#completed_claim, :token) AND (attribute_not_exists(#claim_at) OR #claim_at < :at)";
const CLAIM_UPDATE: &str = "SET #task_status = :in_progress, #claimed_by = :owner, #claim_token = :token, #claim_at = :at, #claimable_at = :lease_end";
/// How many times a claim is sent at most, when the task's last claim was made later by its
/// claimant's clock (a clock ahead) and this one goes just after it.
const CLAIM_TRIES: usize = 3;
/// A completion or renewal: the claim is still this one.
const OWN_CLAIM: &str = "#claim_token = :token AND #task_status = :in_progress";
/// A renewal also moves the lease end only later: a late copy of an earlier renewal (an SDK
/// retry, a duplicate, a request delayed past a later one) must not shorten the claim another
/// worker would then take while this one still holds it.
const RENEW_CONDITION: &str = "#claim_token = :token AND #task_status = :in_progress AND #claimable_at >= :now AND #claimable_at < :lease_end";
/// How many times a renewal is sent at most, when a renewal sent earlier keeps making its
/// refusal out of date.
const RENEW_TRIES: usize = 3;

/// A task a worker claimed: run it, then [`complete`](TaskQueue::complete) it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedTask {
    /// The task's id.
    pub id: String,
    /// The claim's token.
    pub token: String,
    /// When the claim's lease ends (by this worker's clock): renew before.
    pub lease_end: DateTime<Utc>,
}

/// The tasks of one queue, in a client's lock table.
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
/// use ddb_lock::{TaskQueue, TaskStatus};
/// use std::time::Duration;
///
/// let emails = TaskQueue::new(client, "emails".parse()?);
/// emails.set_status("welcome-42", TaskStatus::Pending).await?;
/// for task in emails.claim(10, Duration::from_secs(60)).await? {
///     // ... send it ...
///     emails.complete(&task, TaskStatus::Done).await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct TaskQueue {
    client: LockClient,
    queue: Namespace,
    index: String,
}

impl TaskQueue {
    /// The queue `queue` (named as a [`Namespace`] is: 1 to 64 of `a-z A-Z 0-9 _ - .`) in
    /// `client`'s table, found through the index `Tasks`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::InvalidInput> {
    /// let queue = ddb_lock::TaskQueue::new(client, "emails".parse()?);
    /// # Ok(()) }
    /// ```
    pub fn new(client: LockClient, queue: Namespace) -> Self {
        TaskQueue {
            client,
            queue,
            index: DEFAULT_TASKS_INDEX.to_owned(),
        }
    }

    /// Another name for the tasks index (on a table of your own).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn run(queue: ddb_lock::TaskQueue) {
    /// let queue = queue.index("tasks-by-queue");
    /// # }
    /// ```
    pub fn index(mut self, name: impl Into<String>) -> Self {
        self.index = name.into();
        self
    }

    fn table(&self) -> &LockTable {
        &self.client.settings.table
    }

    fn resource(&self, id: &str) -> Result<String, InvalidInput> {
        if id.is_empty() {
            return Err(InvalidInput::Empty { field: "id" });
        }
        let resource = format!("task:{}/{id}", self.queue);
        self.table().check_resource(&resource)?;
        Ok(resource)
    }

    fn names(&self, expressions: &[&str]) -> std::collections::HashMap<String, String> {
        let mut names = self.table().names_for(expressions);
        names.extend(
            NAMES
                .iter()
                .filter(|(placeholder, _)| expressions.iter().any(|e| e.contains(placeholder)))
                .map(|(p, a)| ((*p).to_owned(), (*a).to_owned())),
        );
        names
    }

    /// Claims up to `limit` (1 to 100) tasks that may be claimed now, each for `lease`: one
    /// Query of the index (a page more while candidates were taken by others), then one
    /// conditional UpdateItem per candidate. Fewer (or none) when fewer are claimable; the index
    /// is eventually consistent, so a task set a moment ago may only be found by the next claim.
    /// A request that fails after some tasks were claimed ends the claim with those tasks (the
    /// error is logged); with none claimed, it is the answer.
    ///
    /// # Examples
    ///
    /// See [`TaskQueue`].
    pub async fn claim(&self, limit: usize, lease: Duration) -> Result<Vec<ClaimedTask>, Error> {
        if !(1..=MAX_CLAIM).contains(&limit) {
            return Err(InvalidInput::ClaimLimit { limit }.into());
        }
        let lease = crate::limits::lease(lease)?;
        let table = self.table();
        let now = table.now();
        crate::time::after(now, lease, "lease")?;
        let condition = "#task_queue = :queue AND #claimable_at <= :now";
        let mut pages = table
            .dynamodb
            .query()
            .table_name(&table.name)
            .index_name(&self.index)
            .key_condition_expression(condition)
            .set_expression_attribute_names(Some(self.names(&[condition])))
            .expression_attribute_values(":queue", s(self.queue.as_str()))
            .expression_attribute_values(":now", s(timestamp::format(now)))
            .limit(i32::try_from(limit).unwrap_or(i32::MAX))
            .into_paginator()
            .send();
        let mut claimed = Vec::new();
        // Until they are answered, the tasks taken are given back if this future is dropped.
        let mut unsettled = UnsettledClaims::new(self);
        while let Some(page) = pages.next().await {
            let page = match page {
                Ok(page) => page,
                Err(e) => {
                    unsettled.settled();
                    return partial(claimed, Error::backend("Query", e));
                }
            };
            for key in page.items() {
                let Some(id) = self.id_of(key) else { continue };
                // Each candidate's `now` is read when it is claimed: a claim that went on for
                // longer than a lease gave its last candidates leases that had ended already,
                // and another worker claimed them at once.
                let claim = Claim {
                    id,
                    token: uuid::Uuid::new_v4().to_string(),
                    now: table.now(),
                };
                unsettled.sending(&claim);
                match self.claim_one(&claim, lease).await {
                    Ok(Some(task)) => claimed.push(task),
                    Ok(None) => unsettled.refused(&claim),
                    Err(e) => {
                        // It may have landed: given back (from the background).
                        unsettled.give_back_last();
                        return partial(claimed, e);
                    }
                }
                if claimed.len() == limit {
                    unsettled.settled();
                    return Ok(claimed);
                }
            }
        }
        unsettled.settled();
        Ok(claimed)
    }

    /// The id of the task whose item (or index entry) is `item`.
    fn id_of(&self, item: &Item) -> Option<String> {
        let key = self.table().schema.key_attributes(item)?;
        let resource = self.table().schema.resource_of(&key)?;
        resource
            .strip_prefix(&format!("task:{}/", self.queue))
            .map(str::to_owned)
    }

    /// A conditional UpdateItem of task `id`'s item, with the names its expressions use, asking
    /// for the refused item (`ALL_OLD`). The caller adds the values.
    fn update_item(
        &self,
        id: &str,
        update: &str,
        condition: &str,
    ) -> Result<UpdateItemFluentBuilder, InvalidInput> {
        let table = self.table();
        let resource = self.resource(id)?;
        Ok(table
            .dynamodb
            .update_item()
            .table_name(&table.name)
            .set_key(Some(table.key(&resource)))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(Some(self.names(&[update, condition])))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld))
    }

    /// Sends `claim`: its task, if it may be claimed at the claim's `now`, for `lease` from then.
    async fn claim_one(
        &self,
        claim: &Claim,
        lease: Duration,
    ) -> Result<Option<ClaimedTask>, Error> {
        let (id, token, now) = (claim.id.as_str(), claim.token.clone(), claim.now);
        let lease_end = crate::time::after(now, lease, "lease")?;
        let claimed = ClaimedTask {
            id: id.to_owned(),
            token: token.clone(),
            lease_end,
        };
        let mut at = now.timestamp_millis();
        for _ in 0..CLAIM_TRIES {
            let sent = self
                .update_item(id, CLAIM_UPDATE, CLAIM_CONDITION)?
                .expression_attribute_values(":queue", s(self.queue.as_str()))
                .expression_attribute_values(":now", s(timestamp::format(now)))
                .expression_attribute_values(":at", AttributeValue::N(at.to_string()))
                .expression_attribute_values(":in_progress", s(TaskStatus::InProgress.as_str()))
                .expression_attribute_values(":owner", s(self.client.default_owner()))
                .expression_attribute_values(":token", s(token.as_str()))
                .expression_attribute_values(":lease_end", s(timestamp::format(lease_end)))
                .send();
            let item = match answer("UpdateItem", sent.await, update_refused)? {
                Answer::Applied(_) => return Ok(Some(claimed)),
                Answer::Refused(item) => item.unwrap_or_default(),
            };
            // Our own claim, applied by an attempt whose answer was lost: the SDK's retry finds
            // its token there.
            if token_of(&item) == Some(token.as_str()) {
                return Ok(Some(claimed));
            }
            // Claimable, but claimed last at a later time by its claimant's clock (one ahead of
            // this worker's): this claim goes just after it.
            match claimed_at(&item) {
                Some(last) if last >= at && self.claimable(&item, now) => at = last + 1,
                _ => break,
            }
        }
        debug!(task = id, "a candidate was claimed by another worker first");
        Ok(None)
    }

    /// Whether `item`, a task's, may be claimed at `now` but for the order of claims.
    fn claimable(&self, item: &Item, now: DateTime<Utc>) -> bool {
        let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok());
        text(TASK_QUEUE).map(String::as_str) == Some(self.queue.as_str())
            && text(CLAIMABLE_AT).is_some_and(|at| *at <= timestamp::format(now))
    }

    /// Ends `task`'s claim with `status` (`Done`, `Failed`, …): true, or false if the claim was
    /// lost (its lease ended and another worker claimed the task, or an administrator set its
    /// status), and nothing was written. Sent again (a retry after a lost answer), it answers
    /// true again, even if another worker claimed the task since; false only if another claim
    /// was also completed in between (the task's last completion is the one recorded).
    ///
    /// # Examples
    ///
    /// See [`TaskQueue`].
    pub async fn complete(&self, task: &ClaimedTask, status: TaskStatus) -> Result<bool, Error> {
        if status == TaskStatus::InProgress {
            return Err(InvalidInput::ClaimOnly.into());
        }
        // The completion is recorded as `<status>:<token>` in an attribute claims leave, so
        // that a retry after a lost answer recognises it as its own, even once another worker
        // claimed the task again.
        let update = if status.claimable() {
            "SET #task_status = :status, #claimable_at = :now, #completed_claim = :done REMOVE #claimed_by, #claim_token"
        } else {
            "SET #task_status = :status, #completed_claim = :done REMOVE #claimable_at, #claimed_by, #claim_token"
        };
        // Sent from a task of the client (`flush` waits for it), as a lock's release is: awaited
        // in place, a completion dropped before its request left (a timeout, a `select!`) sent
        // nothing, and the task stayed claimed by nobody until its lease ended (found by review).
        let resource = self.resource(&task.id)?;
        let (queue, spawned_task) = (self.clone(), task.clone());
        let (answer, answered) = tokio::sync::oneshot::channel();
        let spawned = self.table().release_in_background(async move {
            let written = queue
                .own_write(&spawned_task, update, OWN_CLAIM, Some(status), None)
                .await;
            let _ = answer.send(written);
        });
        if !spawned {
            return self
                .own_write(task, update, OWN_CLAIM, Some(status), None)
                .await;
        }
        answered
            .await
            .unwrap_or_else(|_| Err(Error::ReleaseAbandoned { resource }))
    }

    /// Extends `task`'s claim by `lease` from now, while its lease stands; false if it was lost.
    /// A renewal that finds the claim's lease over gives the claim back (one UpdateItem more,
    /// from a task of the client): a renewal sent earlier, held in the network, then finds no
    /// claim to hold, and [`complete`](Self::complete) answers false.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(queue: ddb_lock::TaskQueue, task: ddb_lock::ClaimedTask) -> Result<(), ddb_lock::Error> {
    /// assert!(queue.renew(&task, std::time::Duration::from_secs(60)).await?);
    /// # Ok(()) }
    /// ```
    pub async fn renew(&self, task: &ClaimedTask, lease: Duration) -> Result<bool, Error> {
        let lease = crate::limits::lease(lease)?;
        let lease_end = crate::time::after(self.table().now(), lease, "lease")?;
        self.own_write(
            task,
            "SET #claimable_at = :lease_end",
            RENEW_CONDITION,
            None,
            Some(lease_end),
        )
        .await
    }

    /// A write conditional on `task`'s claim; whether it applied. A renewal (`lease_end`) whose
    /// refusal a renewal sent earlier made out of date (see [`unsettled::give_back_lapsed`]) is
    /// sent again, [`RENEW_TRIES`] times in all at most.
    async fn own_write(
        &self,
        task: &ClaimedTask,
        update: &str,
        condition: &str,
        status: Option<TaskStatus>,
        lease_end: Option<DateTime<Utc>>,
    ) -> Result<bool, Error> {
        for tries in 1.. {
            let written = self
                .own_write_once(task, update, condition, status, lease_end)
                .await?;
            match written {
                Some(written) => return Ok(written),
                None if tries >= RENEW_TRIES => break,
                None => {}
            }
        }
        Ok(false)
    }

    /// [`own_write`](Self::own_write), sent once; `None` if it is to be sent again.
    async fn own_write_once(
        &self,
        task: &ClaimedTask,
        update: &str,
        condition: &str,
        status: Option<TaskStatus>,
        lease_end: Option<DateTime<Utc>>,
    ) -> Result<Option<bool>, Error> {
        let now = s(timestamp::format(self.table().now()));
        let mut request = self
            .update_item(&task.id, update, condition)?
            .expression_attribute_values(":token", s(task.token.as_str()))
            .expression_attribute_values(":in_progress", s(TaskStatus::InProgress.as_str()));
        if update.contains(":now") || condition.contains(":now") {
            request = request.expression_attribute_values(":now", now);
        }
        if let Some(status) = status {
            request = request.expression_attribute_values(":status", s(status.as_str()));
        }
        // A completion's record, `<status>:<token>`.
        let done = status.map(|status| format!("{status}:{}", task.token));
        if let Some(done) = &done {
            request = request.expression_attribute_values(":done", s(done.as_str()));
        }
        if let Some(lease_end) = lease_end {
            request =
                request.expression_attribute_values(":lease_end", s(timestamp::format(lease_end)));
        }
        let answer = answer("UpdateItem", request.send().await, update_refused)?;
        Ok(Some(match answer {
            Answer::Applied(_) => true,
            // A completion applied by an attempt whose answer was lost (or this same completion
            // sent again): the recorded completion marks it ours, whatever happened since.
            Answer::Refused(Some(item)) => {
                let status_now = item.get(TASK_STATUS).and_then(|v| v.as_s().ok());
                let completed = done.is_some()
                    && item.get(COMPLETED_CLAIM).and_then(|v| v.as_s().ok()) == done.as_ref();
                // A renewal refused by a lease end of this claim as late or later (stored by a
                // later renewal, or by this one's earlier attempt): the claim stands that long.
                let renewed = lease_end.is_some_and(|end| {
                    token_of(&item) == Some(task.token.as_str())
                        && status_now.map(String::as_str) == Some(TaskStatus::InProgress.as_str())
                        && item
                            .get(CLAIMABLE_AT)
                            .and_then(|v| v.as_s().ok())
                            .is_some_and(|stored| *stored >= timestamp::format(end))
                });
                // A renewal that finds its own claim's lease over: an earlier renewal sent while
                // it stood (held in the network, its caller gone) may land yet and hold the task
                // for its lease, claimed by a worker told it lost it. The claim is given back
                // (its token removed), so that no late renewal applies (found by review).
                let lapsed = lease_end.is_some()
                    && !renewed
                    && token_of(&item) == Some(task.token.as_str())
                    && status_now.map(String::as_str) == Some(TaskStatus::InProgress.as_str());
                let seen_end = item.get(CLAIMABLE_AT).and_then(|v| v.as_s().ok());
                if let (true, Some(seen_end)) = (lapsed, seen_end) {
                    let claim = Claim {
                        id: task.id.clone(),
                        token: task.token.clone(),
                        now: self.table().now(),
                    };
                    if unsettled::give_back_lapsed(self, claim, seen_end.clone()).await {
                        return Ok(None);
                    }
                }
                completed || renewed
            }
            Answer::Refused(None) => false,
        }))
    }
}

/// What a claim that failed answers: the tasks it took before the error (whose worker must run
/// them: nobody else may until their leases end), or the error when it took none. The error comes
/// back with the next claim if it lasts.
fn partial(claimed: Vec<ClaimedTask>, error: Error) -> Result<Vec<ClaimedTask>, Error> {
    if claimed.is_empty() {
        return Err(error);
    }
    warn!(%error, claimed = claimed.len(), "a claim answers the tasks it took before an error");
    Ok(claimed)
}

/// The claim token an item carries.
/// When `item`'s task was claimed last (`ClaimAt`), in milliseconds since the Unix epoch.
fn claimed_at(item: &Item) -> Option<i64> {
    item.get(CLAIM_AT)
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse().ok())
}

fn token_of(item: &Item) -> Option<&str> {
    item.get(CLAIM_TOKEN)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_read_as_the_seed_names_them() {
        let names: Vec<String> = [
            TaskStatus::Pending,
            TaskStatus::InProgress,
            TaskStatus::Done,
            TaskStatus::Failed,
            TaskStatus::Cancelled,
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            names,
            ["pending", "in_progress", "done", "failed", "cancelled"]
        );
        assert!(!TaskStatus::InProgress.claimable() && !TaskStatus::Cancelled.claimable());
        assert!(TaskStatus::Done.claimable() && TaskStatus::Failed.claimable());
    }
}
