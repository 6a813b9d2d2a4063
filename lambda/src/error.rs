//! The one place where outcomes become the `errorType` names a state machine retries and catches
//! on: the library's errors (`From<ddb_lock::Error>`), its outcomes that fail a call
//! (`HandlerError::from_try_acquire`, `from_release`, `from_extend`), and malformed events
//! ([`RequestError`]). The names are a stable API: see [`name`].

use crate::event::{HeldLock, RequestError};
use ddb_lock::{timestamp, AcquireAttempt, ExtendOutcome, Holder, Lock, ReleaseOutcome};
use lambda_runtime::Diagnostic;

/// The `errorType` names, stable across releases.
pub mod name {
    /// `try_acquire` found the lock held.
    pub const LOCK_HELD: &str = "LockHeld";
    /// `acquire` waited `wait_ms` (or until the invocation's deadline) without getting the lock.
    pub const LOCK_TIMEOUT: &str = "LockTimeout";
    /// `extend` found no lock of this acquisition: released, or expired and taken.
    pub const LOCK_NOT_FOUND: &str = "LockNotFound";
    /// `release` or `extend` found the lock held by another acquisition or owner.
    pub const LOCK_OWNERSHIP_MISMATCH: &str = "LockOwnershipMismatch";
    /// `extend` arrived after the lease ended (nobody took the lock, but it lapsed; released by
    /// the function if an earlier extension of it through the same instance may still land).
    pub const LOCK_EXPIRED: &str = "LockExpired";
    /// The event is malformed; the message names the field.
    pub const INVALID_REQUEST: &str = "InvalidRequest";
    /// `force_release` is not enabled in this deployment.
    pub const FORCE_RELEASE_DISABLED: &str = "ForceReleaseDisabled";
    /// The item under the lock's key is a lock item this library cannot read.
    pub const MALFORMED_LOCK_ITEM: &str = "MalformedLockItem";
    /// The item under the lock's key is the application's own (a table shared with application
    /// items), not a lock item: it was left untouched.
    pub const NOT_A_LOCK_ITEM: &str = "NotALockItem";
    /// `acquire` or `try_acquire` with `only_if_exists` found no lock item to take.
    pub const LOCK_ITEM_MISSING: &str = "LockItemMissing";
    /// DynamoDB failed (throttling, network, permissions, missing table) after the SDK's retries.
    pub const BACKEND_UNAVAILABLE: &str = "BackendUnavailable";
}

/// Why a release released nothing, as its answer's `reason` says (not errors: a saga's
/// compensation may release a lock gone already).
pub mod reason {
    /// Nothing of this acquisition was found: released already by a function whose table
    /// deletes released items, or expired.
    pub const NOT_FOUND: &str = "not_found: already released, or expired";
    /// This acquisition (or, by owner, a lock of this owner) was released already, and nobody has
    /// taken the lock since: the table keeps released items (`DDB_LOCK_DELETE_ON_RELEASE=false`
    /// or `DDB_LOCK_KEEP_RELEASED_FOR_MS`).
    pub const ALREADY_RELEASED: &str = "already_released";
    /// The release was sent again after its answer was lost and found the lock gone: the first
    /// send released it, or it was gone already. Not held either way.
    pub const UNCONFIRMED: &str =
        "unconfirmed: sent again after a lost answer, and the lock was gone";
    /// `release_execution`: another owner holds the lock, and this execution holds nothing on the
    /// resource to release (it never took the lock, or its lock ended and another was taken).
    pub const NOT_HELD: &str = "not_held: another owner holds the lock";
}

/// A failed invocation; becomes a [`Diagnostic`] whose `error_type` is one of [`name`].
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    /// See [`name::LOCK_HELD`].
    #[error("lock `{resource}` is held by `{}` until {}", .holder.owner, timestamp::format(.holder.expires_at))]
    Held {
        /// The resource.
        resource: String,
        /// Its holder.
        holder: Box<Holder>,
    },
    /// See [`name::LOCK_TIMEOUT`]; the message names the resource, the wait and the holder.
    #[error("{0}")]
    Timeout(ddb_lock::Error),
    /// See [`name::LOCK_NOT_FOUND`].
    #[error(
        "no lock `{resource}` of owner `{owner}` with that lock_id: released, or expired and taken"
    )]
    NotFound {
        /// The resource.
        resource: String,
        /// The owner given.
        owner: String,
    },
    /// See [`name::LOCK_OWNERSHIP_MISMATCH`].
    #[error("lock `{resource}` is held by `{}` until {}, not by `{owner}` with that lock_id", .holder.owner, timestamp::format(.holder.expires_at))]
    OwnershipMismatch {
        /// The resource.
        resource: String,
        /// The owner given.
        owner: String,
        /// The current holder.
        holder: Box<Holder>,
    },
    /// See [`name::LOCK_EXPIRED`].
    #[error("the lease of lock `{resource}` ended at {}; it was not extended", timestamp::format(*.expired_at))]
    Expired {
        /// The resource.
        resource: String,
        /// When the lease ended.
        expired_at: chrono::DateTime<chrono::Utc>,
    },
    /// See [`name::INVALID_REQUEST`].
    #[error("invalid request: {0}")]
    InvalidRequest(RequestError),
    /// See [`name::FORCE_RELEASE_DISABLED`].
    #[error("force_release is disabled in this deployment; enable it (DDB_LOCK_ALLOW_FORCE_RELEASE=true) only on a separately permissioned function")]
    ForceReleaseDisabled,
    /// See [`name::MALFORMED_LOCK_ITEM`].
    #[error("{0}")]
    MalformedItem(ddb_lock::Error),
    /// See [`name::NOT_A_LOCK_ITEM`].
    #[error("{0}")]
    NotALockItem(ddb_lock::Error),
    /// See [`name::LOCK_ITEM_MISSING`].
    #[error("{0}")]
    LockItemMissing(ddb_lock::Error),
    /// See [`name::BACKEND_UNAVAILABLE`].
    #[error("{0}")]
    Backend(ddb_lock::Error),
    /// See [`name::BACKEND_UNAVAILABLE`]: DynamoDB had not answered the operation when the
    /// invocation's deadline drew near.
    #[error("DynamoDB had not answered when the invocation's deadline drew near; the operation's outcome is unknown (an acquire is cleaned up; try again)")]
    Unanswered,
}

impl HandlerError {
    /// The stable `errorType` of this error.
    pub fn name(&self) -> &'static str {
        match self {
            HandlerError::Held { .. } => name::LOCK_HELD,
            HandlerError::Timeout(_) => name::LOCK_TIMEOUT,
            HandlerError::NotFound { .. } => name::LOCK_NOT_FOUND,
            HandlerError::OwnershipMismatch { .. } => name::LOCK_OWNERSHIP_MISMATCH,
            HandlerError::Expired { .. } => name::LOCK_EXPIRED,
            HandlerError::InvalidRequest(_) => name::INVALID_REQUEST,
            HandlerError::ForceReleaseDisabled => name::FORCE_RELEASE_DISABLED,
            HandlerError::MalformedItem(_) => name::MALFORMED_LOCK_ITEM,
            HandlerError::NotALockItem(_) => name::NOT_A_LOCK_ITEM,
            HandlerError::LockItemMissing(_) => name::LOCK_ITEM_MISSING,
            HandlerError::Backend(_) | HandlerError::Unanswered => name::BACKEND_UNAVAILABLE,
        }
    }

    /// The lock `try_acquire` took on `resource`, or [`name::LOCK_HELD`].
    pub(crate) fn from_try_acquire(
        resource: &str,
        attempt: AcquireAttempt,
    ) -> Result<Lock, HandlerError> {
        match attempt {
            AcquireAttempt::Acquired(lock) => Ok(lock),
            AcquireAttempt::Held(holder) => Err(HandlerError::Held {
                resource: resource.to_owned(),
                holder: Box::new(holder),
            }),
        }
    }

    /// Why a release of `owner`'s lock on `resource` released nothing (`Ok(None)`: it released
    /// it), or [`name::LOCK_OWNERSHIP_MISMATCH`]. A lock gone already is a reason, not an error,
    /// so that a saga's compensation can always release.
    pub(crate) fn from_release(
        resource: &str,
        owner: &str,
        outcome: ReleaseOutcome,
    ) -> Result<Option<&'static str>, HandlerError> {
        match outcome {
            ReleaseOutcome::Released => Ok(None),
            ReleaseOutcome::NotFound => Ok(Some(reason::NOT_FOUND)),
            ReleaseOutcome::AlreadyReleased { .. } => Ok(Some(reason::ALREADY_RELEASED)),
            ReleaseOutcome::Unconfirmed => Ok(Some(reason::UNCONFIRMED)),
            ReleaseOutcome::NotOwner { holder } => Err(HandlerError::OwnershipMismatch {
                resource: resource.to_owned(),
                owner: owner.to_owned(),
                holder: Box::new(holder),
            }),
        }
    }

    /// The extended `lock`, or why it was not: [`name::LOCK_NOT_FOUND`], [`name::LOCK_EXPIRED`],
    /// [`name::LOCK_OWNERSHIP_MISMATCH`].
    pub(crate) fn from_extend(
        lock: HeldLock,
        outcome: ExtendOutcome,
    ) -> Result<Lock, HandlerError> {
        match outcome {
            ExtendOutcome::Extended(extended) => Ok(extended),
            ExtendOutcome::NotFound => Err(HandlerError::NotFound {
                resource: lock.resource,
                owner: lock.owner,
            }),
            ExtendOutcome::Expired { expired_at } => Err(HandlerError::Expired {
                resource: lock.resource,
                expired_at,
            }),
            ExtendOutcome::NotOwner { holder } => Err(HandlerError::OwnershipMismatch {
                resource: lock.resource,
                owner: lock.owner,
                holder: Box::new(holder),
            }),
        }
    }
}

impl HandlerError {
    /// This error, from a request on the resource the event's `field` named (the execution's
    /// input, a path): a resource the library refused by its name is reported on that field, not
    /// on a `resource` the event does not have (found by review).
    pub(crate) fn of_resource_in(self, field: &'static str) -> Self {
        match self {
            HandlerError::InvalidRequest(invalid)
                if invalid.field == "resource" && field != "resource" =>
            {
                HandlerError::InvalidRequest(RequestError::new(
                    field,
                    format!("names an invalid resource: {}", invalid.problem),
                ))
            }
            other => other,
        }
    }

    /// This error, from a request on the set the event's `field` lists: a member the library
    /// refused by its resource name, or the set by its size, is reported on that field (a path
    /// event has neither `resource` nor `resources`).
    pub(crate) fn of_member_in(self, field: &'static str) -> Self {
        match self {
            // (The library names a set's own limits on `resources`: a path's too.)
            HandlerError::InvalidRequest(invalid)
                if invalid.field == "resource" || invalid.field == "resources" =>
            {
                let problem = if invalid.field == "resource" {
                    format!("a member's resource {}", invalid.problem)
                } else {
                    invalid.problem
                };
                HandlerError::InvalidRequest(RequestError::new(field, problem))
            }
            other => other,
        }
    }
}

impl From<ddb_lock::Error> for HandlerError {
    fn from(err: ddb_lock::Error) -> Self {
        match err {
            ddb_lock::Error::InvalidInput(invalid) => {
                let field = match invalid.field() {
                    "lease" => "lease_ms",
                    "timeout" => "wait_ms",
                    other => other,
                };
                HandlerError::InvalidRequest(RequestError::new(field, invalid.to_string()))
            }
            timeout @ ddb_lock::Error::Timeout { .. } => HandlerError::Timeout(timeout),
            malformed @ ddb_lock::Error::MalformedItem { .. } => {
                HandlerError::MalformedItem(malformed)
            }
            foreign @ ddb_lock::Error::NotALockItem { .. } => HandlerError::NotALockItem(foreign),
            missing @ ddb_lock::Error::NoLockItem { .. } => HandlerError::LockItemMissing(missing),
            other => HandlerError::Backend(other),
        }
    }
}

impl From<RequestError> for HandlerError {
    fn from(invalid: RequestError) -> Self {
        HandlerError::InvalidRequest(invalid)
    }
}

impl From<HandlerError> for Diagnostic {
    fn from(err: HandlerError) -> Self {
        Diagnostic {
            error_type: err.name().to_owned(),
            error_message: err.to_string(),
        }
    }
}
