//! The one place where the layer's failures get the seed's error codes ([`code`]): a lock that
//! could not be taken ([`LockError`]), or the wrapped handler's own error passed through
//! ([`LockedError::Handler`]). For a Lambda, each becomes a [`Diagnostic`] whose `errorType` is the
//! code, so callers (a Step Functions `Retry`/`Catch`, an SDK `Invoke`) can tell them apart.

use crate::key::{KeyError, Scope};
use lambda_runtime::Diagnostic;
use serde_json::{json, Value};
use std::time::Duration;

/// The error codes, as the seed names them: stable, and the `errorType` of a failed invocation.
pub mod code {
    /// The lock is held and the layer does not wait (no `block`). Retryable.
    pub const LOCK_ACQUISITION_FAILED: &str = "LOCK_ACQUISITION_FAILED";
    /// The lock stayed held for the whole `block`. Retryable.
    pub const LOCK_TIMEOUT: &str = "LOCK_TIMEOUT";
    /// A release or force-release found no live lock under the key (none, or expired).
    pub const LOCK_NOT_FOUND: &str = "LOCK_NOT_FOUND";
    /// A release named an owner that does not hold the lock.
    pub const LOCK_OWNERSHIP_MISMATCH: &str = "LOCK_OWNERSHIP_MISMATCH";
    /// A release found the lock of that owner released already, and not taken since. Told apart
    /// from [`LOCK_NOT_FOUND`] only by a lock client that keeps released items
    /// ([`keep_released_for`](ddb_lock::LockClientBuilder::keep_released_for)).
    pub const LOCK_ALREADY_RELEASED: &str = "LOCK_ALREADY_RELEASED";
    /// Not in the seed: no lock key could be read from the event, or a system function's
    /// argument is missing or malformed; the message names the field.
    pub const LOCK_INVALID_ARGUMENT: &str = "LOCK_INVALID_ARGUMENT";
    /// Not in the seed: DynamoDB (or the network) failed the lock request. Retryable.
    pub const LOCK_BACKEND_UNAVAILABLE: &str = "LOCK_BACKEND_UNAVAILABLE";
    /// Not in the seed: the item at the lock's key is not a lock item (an application's item in a
    /// shared table) or is one no lock client wrote (an attribute unreadable). Not retryable: every
    /// invocation of that key fails the same way until the item is mended.
    pub const LOCK_ITEM_INVALID: &str = "LOCK_ITEM_INVALID";
    /// Not in the seed: the table does not match the lock client's schema (key attributes, TTL).
    /// Not retryable: the deployment must be mended.
    pub const LOCK_TABLE_INVALID: &str = "LOCK_TABLE_INVALID";
}

/// Why an invocation did not run under its lock, or why a system function failed. Each variant
/// has a [`code`](Self::code) and the seed's error [`details`](Self::details).
///
/// # Examples
///
/// ```
/// use ddb_lock_layer::{code, LockError, Scope};
///
/// let err = LockError::AcquisitionFailed {
///     key: "user:123".into(),
///     scope: Scope::Function,
///     full_key: "lock:payments.charge:user:123".into(),
/// };
/// assert_eq!(err.code(), code::LOCK_ACQUISITION_FAILED);
/// assert_eq!(err.details()["full_key"], "lock:payments.charge:user:123");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// See [`code::LOCK_ACQUISITION_FAILED`].
    #[error("Unable to acquire lock `{full_key}`: it is held")]
    AcquisitionFailed {
        /// The key from the event.
        key: String,
        /// The scope applied.
        scope: Scope,
        /// The lock's full key.
        full_key: String,
    },
    /// See [`code::LOCK_TIMEOUT`].
    #[error("Lock acquisition of `{full_key}` timed out after {waited:?}")]
    Timeout {
        /// The key from the event.
        key: String,
        /// The scope applied.
        scope: Scope,
        /// The lock's full key.
        full_key: String,
        /// The `block` waited.
        waited: Duration,
    },
    /// See [`code::LOCK_NOT_FOUND`].
    #[error("Lock `{key}` does not exist or already expired")]
    NotFound {
        /// The full key given.
        key: String,
    },
    /// See [`code::LOCK_OWNERSHIP_MISMATCH`].
    #[error("Lock `{key}` is owned by a different process")]
    OwnershipMismatch {
        /// The full key given.
        key: String,
    },
    /// See [`code::LOCK_ALREADY_RELEASED`].
    #[error("Lock `{key}` was already released")]
    AlreadyReleased {
        /// The full key given.
        key: String,
    },
    /// No key could be read from the event; see [`code::LOCK_INVALID_ARGUMENT`].
    #[error("invalid lock key: {0}")]
    InvalidKey(#[from] KeyError),
    /// A system function's argument is missing or malformed; see
    /// [`code::LOCK_INVALID_ARGUMENT`].
    #[error("invalid argument `{field}`: {problem}")]
    InvalidArgument {
        /// The argument: `function`, `key`, `owner`, or `function_name` (a function-scoped lock
        /// invoked without a function name in its context).
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// See [`code::LOCK_BACKEND_UNAVAILABLE`].
    #[error("lock backend failed: {0}")]
    Backend(#[source] ddb_lock::Error),
    /// See [`code::LOCK_ITEM_INVALID`].
    #[error("unusable lock item: {0}")]
    ItemInvalid(#[source] ddb_lock::Error),
    /// See [`code::LOCK_TABLE_INVALID`].
    #[error("lock table does not match: {0}")]
    TableInvalid(#[source] ddb_lock::Error),
}

impl LockError {
    /// The seed's error code (or one of ours for bad input and backend failures): see [`code`].
    pub fn code(&self) -> &'static str {
        match self {
            LockError::AcquisitionFailed { .. } => code::LOCK_ACQUISITION_FAILED,
            LockError::Timeout { .. } => code::LOCK_TIMEOUT,
            LockError::NotFound { .. } => code::LOCK_NOT_FOUND,
            LockError::OwnershipMismatch { .. } => code::LOCK_OWNERSHIP_MISMATCH,
            LockError::AlreadyReleased { .. } => code::LOCK_ALREADY_RELEASED,
            LockError::InvalidKey(_) | LockError::InvalidArgument { .. } => {
                code::LOCK_INVALID_ARGUMENT
            }
            LockError::Backend(_) => code::LOCK_BACKEND_UNAVAILABLE,
            LockError::ItemInvalid(_) => code::LOCK_ITEM_INVALID,
            LockError::TableInvalid(_) => code::LOCK_TABLE_INVALID,
        }
    }

    /// The field at fault, for bad input.
    pub fn field(&self) -> Option<&str> {
        match self {
            LockError::InvalidKey(err) => Some(err.field()),
            LockError::InvalidArgument { field, .. } => Some(field),
            _ => None,
        }
    }

    /// The seed's `details` of this error: `key`, `scope`, `full_key` (and `waited` in seconds
    /// for a timeout) for an acquisition; `key` for a release; `field` for bad input.
    pub fn details(&self) -> Value {
        match self {
            LockError::AcquisitionFailed {
                key,
                scope,
                full_key,
            } => json!({"key": key, "scope": scope, "full_key": full_key}),
            LockError::Timeout {
                key,
                scope,
                full_key,
                waited,
            } => json!({"key": key, "scope": scope, "full_key": full_key,
                "waited": {"value": waited.as_secs_f64(), "unit": "second"}}),
            LockError::NotFound { key }
            | LockError::OwnershipMismatch { key }
            | LockError::AlreadyReleased { key } => json!({"key": key}),
            LockError::InvalidKey(_) | LockError::InvalidArgument { .. } => {
                json!({"field": self.field()})
            }
            LockError::Backend(_) | LockError::ItemInvalid(_) | LockError::TableInvalid(_) => {
                json!({})
            }
        }
    }

    /// The seed's error object: `{"code", "message", "details"}`.
    ///
    /// # Examples
    ///
    /// ```
    /// use ddb_lock_layer::LockError;
    ///
    /// let err = LockError::NotFound { key: "lock:billing:report".into() };
    /// assert_eq!(err.to_json()["code"], "LOCK_NOT_FOUND");
    /// ```
    pub fn to_json(&self) -> Value {
        json!({"code": self.code(), "message": self.to_string(), "details": self.details()})
    }
}

impl From<ddb_lock::Error> for LockError {
    /// Bad input the library caught (a full key over its size limit) names the layer's field; an
    /// item at the key that is not a usable lock item, or a table that does not match, is told
    /// apart from the backend's failures, which a caller may retry.
    fn from(err: ddb_lock::Error) -> Self {
        match err {
            ddb_lock::Error::InvalidInput(invalid) => LockError::InvalidArgument {
                field: match invalid.field() {
                    "resource" => "key",
                    "lease" => "ttl",
                    "timeout" => "block",
                    other => other,
                },
                problem: invalid.to_string(),
            },
            item @ (ddb_lock::Error::MalformedItem { .. }
            | ddb_lock::Error::NotALockItem { .. }) => LockError::ItemInvalid(item),
            table @ ddb_lock::Error::Table { .. } => LockError::TableInvalid(table),
            other => LockError::Backend(other),
        }
    }
}

impl From<LockError> for Diagnostic {
    fn from(err: LockError) -> Self {
        Diagnostic {
            error_type: err.code().to_owned(),
            error_message: err.to_string(),
        }
    }
}

/// The error of a handler wrapped by [`LockLayer`](crate::LockLayer): the lock's, or the
/// handler's own, unchanged.
///
/// # Examples
///
/// ```
/// use ddb_lock_layer::{LockError, LockedError};
/// use lambda_runtime::Diagnostic;
///
/// let err: LockedError<&'static str> = LockedError::Lock(LockError::NotFound { key: "lock:k".into() });
/// assert_eq!(Diagnostic::from(err).error_type, "LOCK_NOT_FOUND");
/// let err: LockedError<&'static str> = LockedError::Handler("out of stock");
/// assert_eq!(Diagnostic::from(err).error_message, "out of stock");
/// ```
#[derive(Debug, thiserror::Error)]
pub enum LockedError<E> {
    /// The lock was not taken; the handler did not run.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The handler ran and failed (the lock was released if auto-release is on).
    #[error("{0}")]
    Handler(E),
}

impl<E: Into<Diagnostic>> From<LockedError<E>> for Diagnostic {
    fn from(err: LockedError<E>) -> Self {
        match err {
            LockedError::Lock(err) => err.into(),
            LockedError::Handler(err) => err.into(),
        }
    }
}
