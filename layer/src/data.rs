//! The lock an invocation runs under, as the seed's response data describes it (`key`,
//! `acquired`, `owner`, `scope`, `expires_at`), and how the wrapped handler reads it
//! ([`current_lock`]) and, with auto-release, watches it ([`current_watch`]).
//!
//! The handler reads it from a task-local set around its future, so that no handler signature
//! changes: it is there in the handler's own task, not in tasks it spawns (pass it on).

use crate::key::Scope;
use chrono::{DateTime, Utc};
use ddb_lock::LockWatch;
use serde::Serialize;

/// The lock an invocation ran under: the seed's response data, plus `full_key`, the key the system
/// functions take (`lock:{function}:{key}` or `lock:{key}`).
///
/// Serialized as `{"key", "acquired", "owner", "scope", "expires_at", "full_key"}`, `expires_at`
/// in ISO 8601 (UTC, milliseconds).
///
/// # Examples
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use ddb_lock_layer::{LockData, Scope};
///
/// let data = LockData {
///     key: "user:123".into(),
///     acquired: true,
///     owner: "550e8400-e29b-41d4-a716-446655440000".into(),
///     scope: Scope::Function,
///     expires_at: Utc.with_ymd_and_hms(2024, 3, 15, 10, 30, 30).unwrap(),
///     full_key: "lock:payments.charge:user:123".into(),
/// };
/// let json = serde_json::to_value(&data).unwrap();
/// assert_eq!(json["scope"], "function");
/// assert_eq!(json["expires_at"], "2024-03-15T10:30:30.000Z");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LockData {
    /// The key read from the event, as given (without scope prefix).
    pub key: String,
    /// Whether the lock was acquired: always `true` for an invocation that ran.
    pub acquired: bool,
    /// The owner token, for a release from another process (`auto_release(false)`).
    pub owner: String,
    /// The scope applied.
    pub scope: Scope,
    /// When the lease ends, as acquired. With auto-release the lease is extended while the
    /// handler runs, and the lock released when it ends.
    #[serde(serialize_with = "iso8601")]
    pub expires_at: DateTime<Utc>,
    /// The lock's full key, with its scope prefix: what the system functions take.
    pub full_key: String,
}

fn iso8601<S: serde::Serializer>(t: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&ddb_lock::timestamp::format(*t))
}

/// What the handler's task-local holds.
struct Current {
    data: LockData,
    watch: Option<LockWatch>,
}

tokio::task_local! {
    static CURRENT: Current;
}

/// The lock the current invocation runs under, inside a handler wrapped by
/// [`LockLayer`](crate::LockLayer); `None` elsewhere (outside a layer, or in a task the handler
/// spawned).
///
/// # Examples
///
/// ```
/// use ddb_lock_layer::current_lock;
/// use lambda_runtime::{Error, LambdaEvent};
/// use serde_json::{json, Value};
///
/// async fn handler(event: LambdaEvent<Value>) -> Result<Value, Error> {
///     let lock = current_lock().ok_or("not under a LockLayer")?;
///     Ok(json!({"processed_under": lock.full_key}))
/// }
/// ```
pub fn current_lock() -> Option<LockData> {
    CURRENT.try_with(|current| current.data.clone()).ok()
}

/// A watch of the current invocation's lock, with auto-release (the lock is then a guard that
/// extends it): whether it is still held, and a future that completes when it is lost (forced
/// away, or no extension answered for a whole `ttl`). The layer does not stop a handler whose lock
/// is lost; a handler with side effects outside DynamoDB checks
/// [`is_held`](LockWatch::is_held) before each. `None` without auto-release (the lock is not
/// extended: it stands until `expires_at`) and outside a layer.
///
/// # Examples
///
/// ```
/// use ddb_lock_layer::current_watch;
/// use lambda_runtime::{Error, LambdaEvent};
/// use serde_json::Value;
///
/// async fn handler(event: LambdaEvent<Value>) -> Result<Value, Error> {
///     let watch = current_watch().ok_or("not under an auto-releasing LockLayer")?;
///     if !watch.is_held() {
///         return Err("lost the lock; not writing".into());
///     }
///     Ok(event.payload)
/// }
/// ```
pub fn current_watch() -> Option<LockWatch> {
    CURRENT
        .try_with(|current| current.watch.clone())
        .ok()
        .flatten()
}

/// Runs `future` with `data` as its [`current_lock`] and `watch` as its [`current_watch`].
pub(crate) async fn with_current<F: std::future::Future>(
    data: LockData,
    watch: Option<LockWatch>,
    future: F,
) -> F::Output {
    CURRENT.scope(Current { data, watch }, future).await
}
