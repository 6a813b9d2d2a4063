//! The invocation event: a JSON object with `op` and the fields that op takes, parsed into a
//! [`Request`] or a [`RequestError`] naming the offending field.
//!
//! Parsing is strict: an unknown or inapplicable field is an error, so a typo (`leaseMs`) fails
//! loudly instead of silently taking a default.

use chrono::{DateTime, TimeZone, Utc};
use ddb_lock::{duration_from_millis, CleanupCursor, InvalidCleanupCursor, LockId};
use serde_json::{Map, Value};
use std::time::Duration;

/// The key under which [`JsonGuard`](crate::JsonGuard) hands on a body that was not JSON.
pub(crate) const NOT_JSON_MARKER: &str = "__ddb_lock_not_json";

/// A parsed request; durations are `None` where the event leaves the default.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Wait up to `wait` for the lock.
    Acquire {
        /// The lock's identity and settings.
        lock: NewLock,
        /// How long to wait.
        wait: Option<Duration>,
    },
    /// One attempt, no wait.
    TryAcquire {
        /// The lock's identity and settings.
        lock: NewLock,
    },
    /// Release a held lock.
    Release(HeldLock),
    /// Release the lock an ended Step Functions execution holds on the resource named in its
    /// input, whatever the lock id (sent by an EventBridge rule on failed, timed-out or aborted
    /// executions).
    ReleaseExecution {
        /// The resource, read from the execution's input.
        resource: String,
        /// The execution ARN, the lock's owner.
        owner: String,
        /// When the execution stopped (the event's `detail.stopDate`): only a lock acquired no
        /// later is released, so that a redriven execution's new lock is spared.
        stopped_at: Option<DateTime<Utc>>,
    },
    /// Extend a held lock.
    Extend {
        /// The lock.
        lock: HeldLock,
        /// The new lease, from now.
        lease: Option<Duration>,
        /// A payload to store instead of the current one, as JSON text: `Some(None)` (the event's
        /// `"data": null`) removes it, `None` (no `data`) keeps it.
        data: Option<Option<String>>,
    },
    /// Read a lock.
    Status {
        /// The resource.
        resource: String,
    },
    /// Delete a lock whoever holds it.
    ForceRelease {
        /// The resource.
        resource: String,
    },
    /// Delete long-expired lock items.
    Cleanup {
        /// Where an earlier cleanup stopped (its `next_cursor`); `None`: from the start.
        cursor: Option<CleanupCursor>,
    },
}

/// Fields of a lock to acquire.
#[derive(Debug, Clone, PartialEq)]
pub struct NewLock {
    /// The resource.
    pub resource: String,
    /// The owner (a Step Functions execution passes `$$.Execution.Id`).
    pub owner: String,
    /// The lease.
    pub lease: Option<Duration>,
    /// The optional payload, as JSON text.
    pub data: Option<String>,
    /// Whether the acquisition gets a fencing token.
    pub fencing: bool,
}

/// Fields identifying a held lock.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldLock {
    /// The resource.
    pub resource: String,
    /// The owner it was acquired for.
    pub owner: String,
    /// The `lock_id` returned by acquire.
    pub lock_id: LockId,
}

/// What is wrong with an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{field}` {problem}")]
pub struct RequestError {
    /// The offending field (`event` for the event as a whole).
    pub field: String,
    /// What is wrong with it.
    pub problem: String,
}

impl RequestError {
    pub(crate) fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        RequestError {
            field: field.into(),
            problem: problem.into(),
        }
    }
}

/// The operations, and the fields each accepts besides `op`.
const OPS: [(&str, &[&str]); 8] = [
    (
        "acquire",
        &[
            "resource", "owner", "lease_ms", "wait_ms", "data", "fencing",
        ],
    ),
    (
        "try_acquire",
        &["resource", "owner", "lease_ms", "data", "fencing"],
    ),
    ("release", &["resource", "owner", "lock_id"]),
    (
        "release_execution",
        &["owner", "execution_input", "resource_field", "stopped_at"],
    ),
    (
        "extend",
        &["resource", "owner", "lock_id", "lease_ms", "data"],
    ),
    ("status", &["resource"]),
    ("force_release", &["resource"]),
    ("cleanup", &["cursor"]),
];

/// Parses an invocation event.
///
/// # Examples
///
/// ```
/// use ddb_lock_lambda::event::{parse, Request};
/// use serde_json::json;
///
/// let request = parse(&json!({"op": "status", "resource": "orders/42"})).unwrap();
/// assert_eq!(request, Request::Status { resource: "orders/42".into() });
///
/// let err = parse(&json!({"op": "acquire", "resource": "r", "owner": "o", "lease_ms": -1}))
///     .unwrap_err();
/// assert_eq!(err.field, "lease_ms");
/// ```
pub fn parse(event: &Value) -> Result<Request, RequestError> {
    let Value::Object(fields) = event else {
        return Err(RequestError::new(
            "event",
            format!("must be a JSON object, not {}", kind(event)),
        ));
    };
    if let Some(Value::String(problem)) = fields.get(NOT_JSON_MARKER) {
        return Err(RequestError::new(
            "event",
            format!("is not JSON: {problem}"),
        ));
    }
    let op = match fields.get("op") {
        Some(Value::String(op)) => op.as_str(),
        Some(other) => {
            return Err(RequestError::new(
                "op",
                format!("must be a string, not {}", kind(other)),
            ))
        }
        None => {
            return Err(RequestError::new(
                "op",
                format!("is required: one of {}", op_names()),
            ))
        }
    };
    let Some((op, accepted)) = OPS.iter().find(|(name, _)| *name == op) else {
        return Err(RequestError::new(
            "op",
            format!("{op:?} is not one of {}", op_names()),
        ));
    };
    if let Some(field) = fields
        .keys()
        .find(|k| *k != "op" && !accepted.contains(&k.as_str()))
    {
        return Err(RequestError::new(
            field.as_str(),
            format!(
                "is not a field of `{op}` (its fields: {})",
                accepted.join(", ")
            ),
        ));
    }
    let event = Fields(fields);
    Ok(match *op {
        "acquire" => Request::Acquire {
            lock: event.new_lock()?,
            wait: event.millis("wait_ms")?,
        },
        "try_acquire" => Request::TryAcquire {
            lock: event.new_lock()?,
        },
        "release" => Request::Release(event.held_lock()?),
        "release_execution" => Request::ReleaseExecution {
            resource: event.execution_resource()?,
            owner: event.string("owner")?,
            stopped_at: event.epoch_millis("stopped_at")?,
        },
        "extend" => Request::Extend {
            lock: event.held_lock()?,
            lease: event.millis("lease_ms")?,
            data: fields
                .get("data")
                .map(|d| Some(d).filter(|d| !d.is_null()).map(Value::to_string)),
        },
        "status" => Request::Status {
            resource: event.string("resource")?,
        },
        "force_release" => Request::ForceRelease {
            resource: event.string("resource")?,
        },
        _ => Request::Cleanup {
            cursor: event.cleanup_cursor()?,
        },
    })
}

struct Fields<'a>(&'a Map<String, Value>);

impl Fields<'_> {
    fn string(&self, field: &str) -> Result<String, RequestError> {
        match self.0.get(field) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(RequestError::new(
                field,
                format!("must be a string, not {}", kind(other)),
            )),
            None => Err(RequestError::new(field, "is required")),
        }
    }

    fn millis(&self, field: &'static str) -> Result<Option<Duration>, RequestError> {
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => {
                let ms = n.as_i64().ok_or_else(|| {
                    RequestError::new(
                        field,
                        format!("must be a whole number of milliseconds, not {n}"),
                    )
                })?;
                duration_from_millis(field, ms).map(Some).map_err(|_| {
                    RequestError::new(field, format!("is {ms} ms; durations cannot be negative"))
                })
            }
            Some(other) => Err(RequestError::new(
                field,
                format!("must be a number of milliseconds, not {}", kind(other)),
            )),
        }
    }

    fn new_lock(&self) -> Result<NewLock, RequestError> {
        Ok(NewLock {
            resource: self.string("resource")?,
            owner: self.string("owner")?,
            lease: self.millis("lease_ms")?,
            data: self
                .0
                .get("data")
                .filter(|d| !d.is_null())
                .map(Value::to_string),
            fencing: self.flag("fencing")?,
        })
    }

    fn flag(&self, field: &str) -> Result<bool, RequestError> {
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(RequestError::new(
                field,
                format!("must be true or false, not {}", kind(other)),
            )),
        }
    }

    /// The resource named by `resource_field` inside `execution_input`, the execution's input
    /// as Step Functions reports it: a JSON document in a string.
    fn cleanup_cursor(&self) -> Result<Option<CleanupCursor>, RequestError> {
        match self.0.get("cursor") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(cursor)) => cursor
                .parse()
                .map(Some)
                .map_err(|e: InvalidCleanupCursor| RequestError::new("cursor", e.to_string())),
            Some(other) => Err(RequestError::new(
                "cursor",
                format!(
                    "must be the next_cursor string of an earlier cleanup, not {}",
                    kind(other)
                ),
            )),
        }
    }

    /// An instant given as epoch milliseconds (as EventBridge's Step Functions events carry it).
    fn epoch_millis(&self, field: &'static str) -> Result<Option<DateTime<Utc>>, RequestError> {
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => n
                .as_i64()
                .and_then(|ms| Utc.timestamp_millis_opt(ms).single())
                .map(Some)
                .ok_or_else(|| {
                    RequestError::new(
                        field,
                        format!("must be a whole number of milliseconds since the epoch, not {n}"),
                    )
                }),
            Some(other) => Err(RequestError::new(
                field,
                format!(
                    "must be a number of milliseconds since the epoch, not {}",
                    kind(other)
                ),
            )),
        }
    }

    fn execution_resource(&self) -> Result<String, RequestError> {
        let field = self.string("resource_field")?;
        let input: Value = serde_json::from_str(&self.string("execution_input")?).map_err(|e| {
            RequestError::new("execution_input", format!("is not a JSON document: {e}"))
        })?;
        match input.get(&field) {
            Some(Value::String(resource)) => Ok(resource.clone()),
            Some(other) => Err(RequestError::new(
                "execution_input",
                format!("field `{field}` must be a string, not {}", kind(other)),
            )),
            None => Err(RequestError::new(
                "execution_input",
                format!("has no field `{field}` (named by resource_field)"),
            )),
        }
    }

    fn held_lock(&self) -> Result<HeldLock, RequestError> {
        let lock_id = self.string("lock_id")?;
        Ok(HeldLock {
            resource: self.string("resource")?,
            owner: self.string("owner")?,
            lock_id: LockId::parse(&lock_id).map_err(|_| {
                RequestError::new("lock_id", "is not a lock id returned by acquire (a UUID)")
            })?,
        })
    }
}

fn op_names() -> String {
    OPS.iter()
        .map(|(name, _)| *name)
        .collect::<Vec<_>>()
        .join(", ")
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field_of(event: Value) -> String {
        parse(&event).unwrap_err().field
    }

    #[test]
    fn parses_every_op() {
        let id = "67e55044-10b1-426f-9247-bb680e5fe0c8";
        let acquire = parse(&json!({"op": "acquire", "resource": "r", "owner": "o",
            "lease_ms": 1500, "wait_ms": 0, "data": {"step": 1}, "fencing": true}))
        .unwrap();
        assert_eq!(
            acquire,
            Request::Acquire {
                lock: NewLock {
                    resource: "r".into(),
                    owner: "o".into(),
                    lease: Some(Duration::from_millis(1500)),
                    data: Some(r#"{"step":1}"#.into()),
                    fencing: true,
                },
                wait: Some(Duration::ZERO),
            }
        );
        for event in [
            json!({"op": "try_acquire", "resource": "r", "owner": "o"}),
            json!({"op": "release", "resource": "r", "owner": "o", "lock_id": id}),
            json!({"op": "release_execution", "owner": "arn", "resource_field": "invoiceId",
                "execution_input": r#"{"invoiceId": "r"}"#}),
            json!({"op": "extend", "resource": "r", "owner": "o", "lock_id": id, "lease_ms": 10}),
            json!({"op": "status", "resource": "r"}),
            json!({"op": "force_release", "resource": "r"}),
            json!({"op": "cleanup"}),
        ] {
            assert!(parse(&event).is_ok(), "{event}");
        }
    }

    #[test]
    fn extend_tells_keeping_replacing_and_removing_data_apart() {
        let id = "67e55044-10b1-426f-9247-bb680e5fe0c8";
        let data_of = |event: Value| match parse(&event).unwrap() {
            Request::Extend { data, .. } => data,
            other => panic!("parsed as {other:?}"),
        };
        let base = json!({"op": "extend", "resource": "r", "owner": "o", "lock_id": id});
        let with = |data: Value| {
            let mut event = base.clone();
            event["data"] = data;
            event
        };
        assert_eq!(data_of(base.clone()), None);
        assert_eq!(data_of(with(Value::Null)), Some(None));
        assert_eq!(
            data_of(with(json!({"step": 2}))),
            Some(Some(r#"{"step":2}"#.into()))
        );
    }

    #[test]
    fn fencing_must_be_a_boolean() {
        assert_eq!(
            field_of(json!({"op": "acquire", "resource": "r", "owner": "o", "fencing": "yes"})),
            "fencing"
        );
    }

    #[test]
    fn malformed_events_name_the_field() {
        assert_eq!(field_of(json!([1, 2])), "event");
        assert_eq!(field_of(json!({"resource": "r"})), "op");
        assert_eq!(field_of(json!({"op": 7})), "op");
        assert_eq!(field_of(json!({"op": "lock"})), "op");
        assert_eq!(field_of(json!({"op": "acquire", "owner": "o"})), "resource");
        assert_eq!(
            field_of(json!({"op": "acquire", "resource": 5, "owner": "o"})),
            "resource"
        );
        assert_eq!(field_of(json!({"op": "acquire", "resource": "r"})), "owner");
        assert_eq!(
            field_of(json!({"op": "acquire", "resource": "r", "owner": "o", "leaseMs": 5})),
            "leaseMs"
        );
        assert_eq!(
            field_of(json!({"op": "try_acquire", "resource": "r", "owner": "o", "wait_ms": 5})),
            "wait_ms"
        );
        assert_eq!(
            field_of(json!({"op": "acquire", "resource": "r", "owner": "o", "wait_ms": -1})),
            "wait_ms"
        );
        assert_eq!(
            field_of(json!({"op": "acquire", "resource": "r", "owner": "o", "wait_ms": 1.5})),
            "wait_ms"
        );
        assert_eq!(
            field_of(json!({"op": "acquire", "resource": "r", "owner": "o", "lease_ms": "5"})),
            "lease_ms"
        );
        assert_eq!(
            field_of(json!({"op": "release", "resource": "r", "owner": "o", "lock_id": "x"})),
            "lock_id"
        );
        assert_eq!(
            field_of(json!({NOT_JSON_MARKER: "expected value at line 1"})),
            "event"
        );
    }

    #[test]
    fn negative_durations_say_so() {
        let err = parse(&json!({"op": "acquire", "resource": "r", "owner": "o", "lease_ms": -5}))
            .unwrap_err();
        assert!(err.to_string().contains("negative"), "{err}");
    }
}
