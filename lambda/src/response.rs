//! Response bodies, one shape per operation. Timestamps are the stored fixed-width RFC 3339 form.

use crate::error::HandlerError;
use ddb_lock::{
    timestamp, CleanupCursor, CleanupReport, Holder, Lock, LockSet, LockStatus, Mode,
    ReleaseOutcome,
};
use serde::Serialize;
use serde_json::Value;
use std::time::Duration;

/// A lock taken or extended (`acquire`, `try_acquire`, `extend`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LockResponse {
    /// The resource.
    pub resource: String,
    /// The acquisition's id: pass it to `release` and `extend`.
    pub lock_id: String,
    /// The owner.
    pub owner: String,
    /// When it was acquired.
    pub acquired_at: String,
    /// When the lease ends.
    pub expires_at: String,
    /// The fencing token, when the acquisition was fenced: pass it with every protected write.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fencing_token: Option<u64>,
    /// Time spent acquiring (acquire only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waited_ms: Option<u64>,
    /// Conditional writes made (acquire only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// The payload stored with the lock: what the event set, or, with items kept on release
    /// (`DDB_LOCK_DELETE_ON_RELEASE=false`), what the previous holder left.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// The mode of a hold that is not exclusive (`shared`, or for a path's ancestors
    /// `intent_shared` or `intent_exclusive`): pass it back to `release` and `extend`. Absent when
    /// exclusive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<&'static str>,
}

impl LockResponse {
    /// The answer for `lock`, without the acquisition's cost (`waited_ms`, `attempts`).
    pub fn new(lock: &Lock) -> Self {
        LockResponse {
            resource: lock.resource().to_owned(),
            lock_id: lock.lock_id().to_string(),
            owner: lock.owner().to_owned(),
            acquired_at: timestamp::format(lock.acquired_at()),
            expires_at: timestamp::format(lock.expires_at()),
            fencing_token: lock.fencing_token().map(|t| t.value()),
            waited_ms: None,
            attempts: None,
            data: lock.data().map(payload),
            mode: (lock.mode() != Mode::Exclusive).then(|| lock.mode().as_str()),
        }
    }
}

/// The answer to `release`. Releasing a lock that is already gone succeeds with
/// `released: false`, so a saga's compensation can always release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReleaseResponse {
    /// The resource.
    pub resource: String,
    /// The owner given.
    pub owner: String,
    /// The lock id given (absent for `release_execution`, which releases by owner).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lock_id: Option<String>,
    /// Whether this call deleted the lock.
    pub released: bool,
    /// Why not, when `released` is false: one of [`reason`](crate::error::reason).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
}

impl ReleaseResponse {
    /// The answer to a release that found `outcome`: gone already is a success with
    /// `released: false` (safe for a saga's compensation); held by someone else is
    /// [`HandlerError::OwnershipMismatch`].
    ///
    /// # Examples
    ///
    /// ```
    /// use ddb_lock::ReleaseOutcome;
    /// use ddb_lock_lambda::response::ReleaseResponse;
    ///
    /// let answer =
    ///     ReleaseResponse::of("orders/42".into(), "worker-1".into(), None, ReleaseOutcome::NotFound)
    ///         .unwrap();
    /// assert!(!answer.released);
    /// ```
    pub fn of(
        resource: String,
        owner: String,
        lock_id: Option<String>,
        outcome: ReleaseOutcome,
    ) -> Result<ReleaseResponse, HandlerError> {
        let reason = HandlerError::from_release(&resource, &owner, outcome)?;
        Ok(ReleaseResponse {
            resource,
            owner,
            lock_id,
            released: reason.is_none(),
            reason,
        })
    }
}

/// The answer to `acquire` and `try_acquire` of a lock set: every member's lock, in name order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LockSetResponse {
    /// The owner of every member.
    pub owner: String,
    /// Each member's lock (pass them back as `locks` to `release`).
    pub locks: Vec<LockResponse>,
}

impl LockSetResponse {
    pub(crate) fn new(owner: &str, set: &LockSet) -> Self {
        LockSetResponse {
            owner: owner.to_owned(),
            locks: set.locks().iter().map(LockResponse::new).collect(),
        }
    }
}

/// The answer to `release` of a lock set: each member's release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReleaseSetResponse {
    /// The owner given.
    pub owner: String,
    /// Each member's answer.
    pub released: Vec<ReleaseResponse>,
}

/// The answer to `status`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatusResponse {
    /// The resource.
    pub resource: String,
    /// Whether a live lock exists.
    pub locked: bool,
    /// The holder, when locked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// When the holder acquired it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acquired_at: Option<String>,
    /// When its lease ends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// Milliseconds left on the lease.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remaining_ms: Option<u64>,
    /// The holder's fencing token, when its acquisition was fenced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fencing_token: Option<u64>,
    /// The payload stored at acquisition or last replaced by the holder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// `shared` when the lock is held by shared holders (readers, or a semaphore's permits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<&'static str>,
    /// The live shared holders, the first lease to end first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holders: Option<Vec<SharedHolderResponse>>,
    /// The live holders of path locks below this resource, when there are any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intents: Option<Vec<SharedHolderResponse>>,
    /// The owner of an exclusive acquirer waiting for the shared holders to leave (new shared
    /// holders are refused meanwhile).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writer_waiting: Option<String>,
    /// The fair acquirers waiting in line, first first, when there are any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<Vec<QueuedResponse>>,
}

/// One fair acquirer waiting in line, in a `status` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueuedResponse {
    /// Who waits.
    pub owner: String,
    /// When it joined the line.
    pub joined_at: String,
    /// The lease it will be granted, in milliseconds.
    pub lease_ms: u64,
    /// When it stops waiting, if it waits until a deadline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
}

/// The answer to `list`: the live locks of a namespace, each as `status` answers it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ListResponse {
    /// The namespace.
    pub namespace: String,
    /// Its live locks, by resource.
    pub locks: Vec<StatusResponse>,
}

/// One shared holder in a `status` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SharedHolderResponse {
    /// Who holds it.
    pub owner: String,
    /// When it acquired.
    pub acquired_at: String,
    /// When its lease ends.
    pub expires_at: String,
}

impl StatusResponse {
    /// The answer for `resource`'s lock in `status`.
    pub fn of(resource: &str, status: LockStatus) -> Self {
        match status {
            LockStatus::Free => StatusResponse::free(resource),
            LockStatus::Held {
                holder,
                remaining,
                queue,
            } => StatusResponse {
                queue: (!queue.is_empty()).then(|| {
                    queue
                        .into_iter()
                        .map(|waiter| QueuedResponse {
                            joined_at: timestamp::format(waiter.joined_at),
                            lease_ms: u64::try_from(waiter.lease.as_millis()).unwrap_or(u64::MAX),
                            until: waiter.until.map(timestamp::format),
                            owner: waiter.owner,
                        })
                        .collect()
                }),
                ..StatusResponse::held(resource, holder, remaining)
            },
            LockStatus::Shared {
                holders,
                intents,
                writer_waiting,
            } => StatusResponse::shared(resource, holders, intents, writer_waiting),
        }
    }

    pub(crate) fn free(resource: &str) -> Self {
        StatusResponse {
            resource: resource.to_owned(),
            locked: false,
            owner: None,
            acquired_at: None,
            expires_at: None,
            remaining_ms: None,
            fencing_token: None,
            data: None,
            mode: None,
            holders: None,
            intents: None,
            writer_waiting: None,
            queue: None,
        }
    }

    pub(crate) fn shared(
        resource: &str,
        holders: Vec<Holder>,
        intents: Vec<Holder>,
        writer: Option<Holder>,
    ) -> Self {
        let answer = |holders: Vec<Holder>| -> Vec<SharedHolderResponse> {
            holders
                .into_iter()
                .map(|holder| SharedHolderResponse {
                    acquired_at: timestamp::format(holder.acquired_at),
                    expires_at: timestamp::format(holder.expires_at),
                    owner: holder.owner,
                })
                .collect()
        };
        StatusResponse {
            locked: true,
            mode: Some("shared"),
            intents: (!intents.is_empty()).then(|| answer(intents)),
            holders: Some(answer(holders)),
            writer_waiting: writer.map(|writer| writer.owner),
            ..StatusResponse::free(resource)
        }
    }

    pub(crate) fn held(resource: &str, holder: Holder, remaining: Duration) -> Self {
        StatusResponse {
            resource: resource.to_owned(),
            locked: true,
            acquired_at: Some(timestamp::format(holder.acquired_at)),
            expires_at: Some(timestamp::format(holder.expires_at)),
            remaining_ms: Some(u64::try_from(remaining.as_millis()).unwrap_or(u64::MAX)),
            fencing_token: holder.fencing_token.map(|t| t.value()),
            data: holder.data.as_deref().map(payload),
            owner: Some(holder.owner),
            mode: None,
            holders: None,
            intents: None,
            writer_waiting: None,
            queue: None,
        }
    }
}

/// A stored payload as the answers show it: data written through this function is JSON; bytes a
/// library user stored are shown as text.
fn payload(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

/// The answer to `force_release`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ForceReleaseResponse {
    /// The resource.
    pub resource: String,
    /// Whether a live lock was removed.
    pub released: bool,
    /// Whose it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_owner: Option<String>,
}

/// The answer to `cleanup`, summed over the calls of one invocation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CleanupResponse {
    /// Items read by the scan.
    pub scanned: u32,
    /// Long-expired lock items deleted.
    pub deleted: u32,
    /// Expired items left because they were re-acquired meanwhile.
    pub skipped: u32,
    /// Whether the scan reached the end of the table.
    pub complete: bool,
    /// Where the next cleanup should resume (its `cursor`), while not complete.
    #[serde(rename = "next_cursor", skip_serializing_if = "Option::is_none")]
    next: Option<String>,
    #[serde(skip)]
    resume: Option<CleanupCursor>,
}

impl CleanupResponse {
    /// Nothing done yet, resuming at `cursor`.
    pub fn starting_at(cursor: Option<CleanupCursor>) -> Self {
        CleanupResponse {
            scanned: 0,
            deleted: 0,
            skipped: 0,
            complete: false,
            next: cursor.as_ref().map(ToString::to_string),
            resume: cursor,
        }
    }

    /// Where the next call resumes.
    pub fn next_cursor(&self) -> Option<CleanupCursor> {
        self.resume.clone()
    }

    /// Adds what one call did.
    pub fn add(&mut self, report: CleanupReport) {
        self.scanned += report.scanned;
        self.deleted += report.deleted;
        self.skipped += report.skipped;
        self.complete = report.complete;
        self.next = report.next.as_ref().map(ToString::to_string);
        self.resume = report.next;
    }
}

/// Any answer of the function, serialized as the shape of its operation.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Response {
    /// `acquire`, `try_acquire`, `extend`.
    Lock(LockResponse),
    /// `release`, `release_execution`.
    Release(ReleaseResponse),
    /// `acquire` and `try_acquire` of a lock set.
    LockSet(LockSetResponse),
    /// `release` of a lock set.
    ReleaseSet(ReleaseSetResponse),
    /// `status`.
    Status(StatusResponse),
    /// `force_release`.
    ForceRelease(ForceReleaseResponse),
    /// `cleanup`.
    Cleanup(CleanupResponse),
    /// `list`.
    List(ListResponse),
}

impl From<ListResponse> for Response {
    fn from(r: ListResponse) -> Self {
        Response::List(r)
    }
}

impl From<LockResponse> for Response {
    fn from(r: LockResponse) -> Self {
        Response::Lock(r)
    }
}

impl From<LockSetResponse> for Response {
    fn from(r: LockSetResponse) -> Self {
        Response::LockSet(r)
    }
}

impl From<ReleaseSetResponse> for Response {
    fn from(r: ReleaseSetResponse) -> Self {
        Response::ReleaseSet(r)
    }
}

impl From<ReleaseResponse> for Response {
    fn from(r: ReleaseResponse) -> Self {
        Response::Release(r)
    }
}

impl From<StatusResponse> for Response {
    fn from(r: StatusResponse) -> Self {
        Response::Status(r)
    }
}

impl From<ForceReleaseResponse> for Response {
    fn from(r: ForceReleaseResponse) -> Self {
        Response::ForceRelease(r)
    }
}

impl From<CleanupResponse> for Response {
    fn from(r: CleanupResponse) -> Self {
        Response::Cleanup(r)
    }
}
