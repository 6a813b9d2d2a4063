//! The seed's system functions, over a lock table: release (with the owner token), force-release
//! (an administrative override) and status, each answering the seed's result shape, or a
//! [`LockError`] with its code. [`SystemFunctions::call`] dispatches a request
//! `{"function": <urn>, "arguments": {...}}` by the function's URN, for a Lambda that serves them.
//!
//! Every function takes the lock's full key (`lock:{function}:{key}` or `lock:{key}`), as
//! [`LockData::full_key`](crate::LockData::full_key) gives it.
//!
//! A release of a lock released already answers
//! [`LOCK_ALREADY_RELEASED`](crate::code::LOCK_ALREADY_RELEASED) when the lock client keeps released
//! items for a while ([`keep_released_for`](ddb_lock::LockClientBuilder::keep_released_for)), whose
//! record says so; a client that deletes them cannot tell a released lock from one that never
//! existed or expired, and answers [`LOCK_NOT_FOUND`](crate::code::LOCK_NOT_FOUND) for both.

use crate::error::LockError;
use chrono::{DateTime, Utc};
use ddb_lock::{Holder, LockClient, LockStatus, ReleaseOutcome};
use serde::Serialize;
use serde_json::Value;

/// The URN of the release function.
pub const RELEASE: &str = "urn:cline:forrst:ext:atomic-lock:fn:release";
/// The URN of the force-release function.
pub const FORCE_RELEASE: &str = "urn:cline:forrst:ext:atomic-lock:fn:force-release";
/// The URN of the status function.
pub const STATUS: &str = "urn:cline:forrst:ext:atomic-lock:fn:status";

/// The result of a release: `{"released": true, "key": …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Released {
    /// Always `true`: a release that did not happen is an error.
    pub released: bool,
    /// The full key.
    pub key: String,
}

/// The result of a force-release: `{"released": true, "key": …, "forced": true}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ForceReleased {
    /// Always `true`.
    pub released: bool,
    /// The full key.
    pub key: String,
    /// Always `true`.
    pub forced: bool,
}

/// The result of status: `{"key", "locked"}`, and while locked `"owner"`, `"acquired_at"`,
/// `"expires_at"` (ISO 8601) and `"ttl_remaining"` (whole seconds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LockState {
    /// The full key.
    pub key: String,
    /// Whether a live lock is held under it.
    pub locked: bool,
    /// Its owner token (of the first lease to end, for a lock held shared).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// When it was acquired.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acquired_at: Option<String>,
    /// When its lease ends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// Whole seconds left on the lease.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_remaining: Option<u64>,
}

/// The system functions over `client`'s lock table.
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock_layer::LockError> {
/// use ddb_lock_layer::SystemFunctions;
///
/// let system = SystemFunctions::new(client);
/// let state = system.status("lock:billing:report").await?;
/// if state.locked {
///     system.release("lock:billing:report", state.owner.as_deref().unwrap_or_default()).await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct SystemFunctions {
    client: LockClient,
}

impl SystemFunctions {
    /// The functions over `client`'s table.
    pub fn new(client: LockClient) -> Self {
        SystemFunctions { client }
    }

    /// Whether `request` calls a system function: its `function` is one of this module's URNs'
    /// family (`urn:cline:forrst:ext:atomic-lock:fn:…`).
    ///
    /// # Examples
    ///
    /// ```
    /// use ddb_lock_layer::SystemFunctions;
    /// use serde_json::json;
    ///
    /// assert!(SystemFunctions::is_call(&json!({"function": ddb_lock_layer::system::STATUS})));
    /// assert!(!SystemFunctions::is_call(&json!({"order_id": "o-1"})));
    /// ```
    pub fn is_call(request: &Value) -> bool {
        request
            .get("function")
            .and_then(Value::as_str)
            .is_some_and(|f| f.starts_with("urn:cline:forrst:ext:atomic-lock:fn:"))
    }

    /// Answers `{"function": <urn>, "arguments": {...}}` with the function's result as JSON. An
    /// unknown function, or a missing or non-string argument, is
    /// [`LockError::InvalidArgument`] naming it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(system: ddb_lock_layer::SystemFunctions) -> Result<(), ddb_lock_layer::LockError> {
    /// use serde_json::json;
    ///
    /// let answer = system
    ///     .call(&json!({"function": ddb_lock_layer::system::FORCE_RELEASE,
    ///                   "arguments": {"key": "lock:billing:report"}}))
    ///     .await?;
    /// assert_eq!(answer["forced"], true);
    /// # Ok(()) }
    /// ```
    pub async fn call(&self, request: &Value) -> Result<Value, LockError> {
        let function = string(request, "function")?;
        let arguments = request.get("arguments").unwrap_or(&Value::Null);
        let key = || string(arguments, "key");
        let answer = match function {
            RELEASE => to_json(self.release(key()?, string(arguments, "owner")?).await?),
            FORCE_RELEASE => to_json(self.force_release(key()?).await?),
            STATUS => to_json(self.status(key()?).await?),
            other => {
                return Err(LockError::InvalidArgument {
                    field: "function",
                    problem: format!("`{other}` is not a system function of the atomic lock"),
                })
            }
        };
        Ok(answer)
    }

    /// Releases the lock under `key` if `owner` holds it: [`LockError::NotFound`] if there is no
    /// live lock, [`LockError::OwnershipMismatch`] if another owner holds it (left untouched),
    /// [`LockError::AlreadyReleased`] if `owner`'s lock was released already (a client that keeps
    /// released items only).
    pub async fn release(&self, key: &str, owner: &str) -> Result<Released, LockError> {
        match self.client.release_owned(key, owner).await? {
            // Sent again after a lost answer, it found the lock gone: released by its first send,
            // or gone already; not held either way.
            ReleaseOutcome::Released | ReleaseOutcome::Unconfirmed => Ok(Released {
                released: true,
                key: key.to_owned(),
            }),
            ReleaseOutcome::NotFound => Err(LockError::NotFound {
                key: key.to_owned(),
            }),
            ReleaseOutcome::NotOwner { .. } => Err(LockError::OwnershipMismatch {
                key: key.to_owned(),
            }),
            ReleaseOutcome::AlreadyReleased { .. } => Err(LockError::AlreadyReleased {
                key: key.to_owned(),
            }),
        }
    }

    /// Releases the lock under `key` whoever holds it; [`LockError::NotFound`] if there is no live
    /// lock. The holder is not told.
    pub async fn force_release(&self, key: &str) -> Result<ForceReleased, LockError> {
        match self.client.force_release(key).await? {
            Some(_) => Ok(ForceReleased {
                released: true,
                key: key.to_owned(),
                forced: true,
            }),
            None => Err(LockError::NotFound {
                key: key.to_owned(),
            }),
        }
    }

    /// Reads the lock under `key`.
    pub async fn status(&self, key: &str) -> Result<LockState, LockError> {
        let held = match self.client.status(key).await? {
            LockStatus::Free => None,
            LockStatus::Held { holder, .. } => Some(holder),
            LockStatus::Shared {
                holders, intents, ..
            } => holders.into_iter().chain(intents).next(),
        };
        Ok(state(key, held, Utc::now()))
    }
}

/// The status result of `holder` (none: not locked) at `now`.
fn state(key: &str, holder: Option<Holder>, now: DateTime<Utc>) -> LockState {
    let format = ddb_lock::timestamp::format;
    LockState {
        key: key.to_owned(),
        locked: holder.is_some(),
        ttl_remaining: holder
            .as_ref()
            .map(|h| u64::try_from((h.expires_at - now).num_seconds()).unwrap_or(0)),
        acquired_at: holder.as_ref().map(|h| format(h.acquired_at)),
        expires_at: holder.as_ref().map(|h| format(h.expires_at)),
        owner: holder.map(|h| h.owner),
    }
}

/// The string `field` of `object`, or an error naming it.
fn string<'a>(object: &'a Value, field: &'static str) -> Result<&'a str, LockError> {
    match object.get(field) {
        Some(Value::String(s)) => Ok(s),
        None | Some(Value::Null) => Err(LockError::InvalidArgument {
            field,
            problem: "missing".into(),
        }),
        Some(_) => Err(LockError::InvalidArgument {
            field,
            problem: "must be a string".into(),
        }),
    }
}

/// A result as JSON: plain structs of strings, booleans and integers always serialize.
fn to_json(result: impl Serialize) -> Value {
    serde_json::to_value(result).unwrap_or(Value::Null)
}
