//! [`Locked`]: a handler's response with the data of the lock it ran under, serialized in the
//! seed's response shape: the handler's answer under `result`, the lock's data in the atomic lock
//! extension's entry of `extensions`.

use crate::data::LockData;
use serde::ser::{SerializeStruct, Serializer};
use serde::Serialize;
use serde_json::json;

/// The seed's extension URN, naming the lock's entry in a response's `extensions`.
pub const EXTENSION_URN: &str = "urn:forrst:ext:atomicLock";

/// A wrapped handler's response and the lock it ran under. Serialized as
/// `{"result": <response>, "extensions": [{"urn": "urn:forrst:ext:atomicLock", "data": <lock>}]}`.
///
/// A caller that wants the handler's response alone maps it away:
/// `layer.layer(handler).map_response(|locked| locked.result)` (tower's `ServiceExt`).
///
/// # Examples
///
/// ```
/// use chrono::Utc;
/// use ddb_lock_layer::{LockData, Locked, Scope};
/// use serde_json::json;
///
/// let lock = LockData {
///     key: "user:123".into(),
///     acquired: true,
///     owner: "worker-1".into(),
///     scope: Scope::Global,
///     expires_at: Utc::now(),
///     full_key: "lock:user:123".into(),
/// };
/// let answer = serde_json::to_value(Locked { result: json!({"charge_id": "ch_abc"}), lock }).unwrap();
/// assert_eq!(answer["result"]["charge_id"], "ch_abc");
/// assert_eq!(answer["extensions"][0]["urn"], "urn:forrst:ext:atomicLock");
/// assert_eq!(answer["extensions"][0]["data"]["acquired"], true);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Locked<R> {
    /// The handler's response.
    pub result: R,
    /// The lock it ran under.
    pub lock: LockData,
}

impl<R: Serialize> Serialize for Locked<R> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut answer = serializer.serialize_struct("Locked", 2)?;
        answer.serialize_field("result", &self.result)?;
        answer.serialize_field(
            "extensions",
            &[json!({"urn": EXTENSION_URN, "data": self.lock})],
        )?;
        answer.end()
    }
}
