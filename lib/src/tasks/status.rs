//! A task's status, and the administrative write that sets it ([`TaskQueue::set_status`]).

use super::{TaskQueue, REPLACED_STATUS_WRITE, STATUS_WRITE, STATUS_WRITE_AT};
use crate::conditional::{answer, update_refused, Answer, Transmissions};
use crate::error::{Error, InvalidInput};
use crate::item::s;
use crate::timestamp;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use std::fmt;

/// A status write, unless one made as late or later was applied: an earlier attempt of the same
/// write (the SDK's resend after a lost answer), or a later write. With the last write's id alone
/// in the condition, a copy of an earlier write delivered after a later one was applied: a task
/// cancelled since was claimable again, and run (found by review).
const STATUS_WRITE_CONDITION: &str =
    "attribute_not_exists(#status_write_at) OR #status_write_at < :at";

/// How many times a status write is sent at most, when status writes made meanwhile by other
/// writers (clocks ahead) keep refusing it.
const STATUS_WRITE_TRIES: usize = 3;

/// A task's status. `InProgress` is set by a claim only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskStatus {
    /// Waiting for its first run (claimable).
    Pending,
    /// Claimed by a worker, until its lease ends.
    InProgress,
    /// Ran to the end (claimable again, as in the seed: done is also the initial state).
    Done,
    /// Its run failed (claimable again).
    Failed,
    /// Set aside: never claimed (out of the index).
    Cancelled,
}

impl TaskStatus {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::InProgress => "in_progress",
            TaskStatus::Done => "done",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    pub(super) fn claimable(self) -> bool {
        !matches!(self, TaskStatus::InProgress | TaskStatus::Cancelled)
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl TaskQueue {
    /// Sets task `id`'s status (creating the task), whoever claimed it: an administrative write,
    /// applied after every status write applied before it (one refused by a write made at a later
    /// time, by a clock ahead, is sent again just after it). `InProgress` is a claim's to set
    /// ([`InvalidInput::ClaimOnly`]).
    ///
    /// # Examples
    ///
    /// See [`TaskQueue`].
    pub async fn set_status(&self, id: &str, status: TaskStatus) -> Result<(), Error> {
        if status == TaskStatus::InProgress {
            return Err(InvalidInput::ClaimOnly.into());
        }
        let resource = self.resource(id)?;
        let table = self.table();
        let now = table.now();
        let claimable = status.claimable();
        let update = if claimable {
            "SET #task_queue = :queue, #task_status = :status, #replaced_status_write = if_not_exists(#status_write, :none), #status_write = :write, #status_write_at = :at, #claimable_at = :now REMOVE #claimed_by, #claim_token"
        } else {
            "SET #task_queue = :queue, #task_status = :status, #replaced_status_write = if_not_exists(#status_write, :none), #status_write = :write, #status_write_at = :at REMOVE #claimable_at, #claimed_by, #claim_token"
        };
        let write = uuid::Uuid::new_v4().to_string();
        let mut at = now.timestamp_millis();
        for _ in 0..STATUS_WRITE_TRIES {
            let mut request = table
                .dynamodb
                .update_item()
                .table_name(&table.name)
                .set_key(Some(table.key(&resource)))
                .update_expression(update)
                .condition_expression(STATUS_WRITE_CONDITION)
                .set_expression_attribute_names(Some(self.names(&[update, STATUS_WRITE_CONDITION])))
                .expression_attribute_values(":queue", s(self.queue.as_str()))
                .expression_attribute_values(":status", s(status.as_str()))
                .expression_attribute_values(":write", s(write.as_str()))
                .expression_attribute_values(":none", s(""))
                .expression_attribute_values(":at", AttributeValue::N(at.to_string()))
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                );
            if claimable {
                request = request.expression_attribute_values(":now", s(timestamp::format(now)));
            }
            let transmissions = Transmissions::default();
            let sent = request
                .customize()
                .interceptor(transmissions.clone())
                .send()
                .await;
            let item = match answer("UpdateItem", sent, update_refused)? {
                Answer::Applied(_) => return Ok(()),
                Answer::Refused(item) => item.unwrap_or_default(),
            };
            // An earlier attempt of this write was applied (its answer lost).
            if item.get(STATUS_WRITE).and_then(|v| v.as_s().ok()) == Some(&write) {
                return Ok(());
            }
            // Sent again by the SDK, and refused by the write that replaced an earlier attempt of
            // this one: that attempt was applied, and stands as overwritten by it. Written again,
            // it was applied twice, the second time over the later write (a cancelled task set
            // pending again; found by review). (Refused by a write it never replaced, a clock
            // ahead's, it is not applied: sent again just after it, as below; said applied, a
            // status never written was answered `Ok`; found by review.)
            if transmissions.retried()
                && item.get(REPLACED_STATUS_WRITE).and_then(|v| v.as_s().ok()) == Some(&write)
            {
                return Ok(());
            }
            // A write made later by its writer's clock: this one goes just after it.
            let stored = item
                .get(STATUS_WRITE_AT)
                .and_then(|v| v.as_n().ok())
                .and_then(|n| n.parse::<i64>().ok())
                .unwrap_or(at);
            at = at.max(stored.saturating_add(1));
        }
        Err(Error::UnexpectedResponse {
            operation: "UpdateItem",
            detail:
                "the task's status kept being written by others; this status write was not applied",
        })
    }
}
