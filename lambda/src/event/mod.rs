//! The invocation event: a JSON object with `op` and the fields that op takes, parsed into a
//! [`Request`] or a [`RequestError`] naming the offending field.
//!
//! Parsing is strict: an unknown or inapplicable field is an error, so a typo (`leaseMs`) fails
//! loudly instead of silently taking a default. Serde reads the fields (see `ops`); the readers
//! of `fields` give durations, instants, lock ids and cursors their checks and messages, and `set`
//! reads the targets of lock sets and paths.

use chrono::{DateTime, Utc};
use ddb_lock::{CleanupCursor, LockId, Mode, Namespace, MAX_NAMESPACE_BYTES};
use serde_json::{Map, Value};
use serde_path_to_error::Segment;
use std::time::Duration;

mod fields;
mod ops;
mod set;

use ops::Event;
pub use set::NewSet;

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
    /// Wait up to `wait` for every member of a lock set, all or nothing.
    AcquireSet {
        /// The members and their owner and lease.
        set: NewSet,
        /// How long to wait.
        wait: Option<Duration>,
    },
    /// One attempt at a lock set, no wait.
    TryAcquireSet {
        /// The members and their owner and lease.
        set: NewSet,
    },
    /// Release every member of a lock set.
    ReleaseSet {
        /// The owner they were acquired for.
        owner: String,
        /// The members, as acquire returned them.
        locks: Vec<HeldLock>,
    },
    /// Release a held lock.
    Release {
        /// The lock.
        lock: HeldLock,
        /// A payload to leave in the kept item for the next holder, as JSON text: `Some(None)`
        /// (the event's `"data": null`) removes it, `None` (no `data`) keeps it. Only where
        /// items are kept on release (`DDB_LOCK_DELETE_ON_RELEASE=false`).
        data: Option<Option<String>>,
        /// The lease end its acquire (or last extend) answered, if the event gives it: where
        /// the release is `retried`, a lock found another's that was acquired by then was
        /// released, perhaps by an earlier attempt of this release, not taken over at its expiry
        /// (a release sent again after its answer was lost, on another warm instance).
        expires_at: Option<DateTime<Utc>>,
        /// Whether the release is sent again (the event's `retry_count`, Step Functions'
        /// `$$.State.RetryCount`, above zero).
        retried: bool,
    },
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
        /// The event's field that named it: `resource`, or `path`.
        named_in: &'static str,
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
    /// The live locks of the event's namespace (see [`namespace`]).
    List,
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
    /// Whether the lock is taken only on a lock item that exists already.
    pub only_if_exists: bool,
    /// Exclusive (the default) or shared.
    pub mode: Mode,
    /// A semaphore's permits (shared).
    pub permits: Option<u32>,
    /// Whether a waiting acquisition takes a place in the lock's line (exclusive only).
    pub fair: bool,
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
    /// The `mode` returned by acquire (exclusive when absent).
    pub mode: Mode,
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

/// The field naming the namespace an op works in.
const NAMESPACE: &str = "namespace";

/// The namespace an event's op works in (its `namespace` field), if any; `list` needs one.
///
/// # Examples
///
/// ```
/// use ddb_lock_lambda::event::namespace;
/// use serde_json::json;
///
/// let ns = namespace(&json!({"op": "status", "resource": "r", "namespace": "billing"})).unwrap();
/// assert_eq!(ns.unwrap().as_str(), "billing");
/// assert_eq!(namespace(&json!({"op": "status", "resource": "r"})).unwrap(), None);
/// assert_eq!(namespace(&json!({"op": "list", "namespace": "a#b"})).unwrap_err().field, "namespace");
/// ```
pub fn namespace(event: &Value) -> Result<Option<Namespace>, RequestError> {
    match event.get(NAMESPACE) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(name)) => Namespace::new(name.as_str()).map(Some).map_err(|_| {
            RequestError::new(
                NAMESPACE,
                format!("{name:?} must be 1 to {MAX_NAMESPACE_BYTES} characters of a-z, A-Z, 0-9, '_', '-', '.'"),
            )
        }),
        Some(other) => Err(RequestError::new(
            NAMESPACE,
            format!("must be a string, not {}", kind(other)),
        )),
    }
}

/// Parses an invocation event (its `namespace` aside: see [`namespace`]).
///
/// # Examples
///
/// ```
/// use ddb_lock_lambda::event::{parse, Request};
/// use serde_json::json;
///
/// let request = parse(&json!({"op": "status", "resource": "orders/42"})).unwrap();
/// assert_eq!(
///     request,
///     Request::Status { resource: "orders/42".into(), named_in: "resource" }
/// );
///
/// let err = parse(&json!({"op": "acquire", "resource": "r", "owner": "o", "lease_ms": -1}))
///     .unwrap_err();
/// assert_eq!(err.field, "lease_ms");
/// ```
pub fn parse(event: &Value) -> Result<Request, RequestError> {
    // By hand up to the op: serde would call an array "a sequence" and a wrong op "a variant
    // identifier", and the op must be a string to become the variant's name below.
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
    let mut fields = fields.clone();
    // Every op takes it; `namespace` reads it.
    fields.remove(NAMESPACE);
    let op = match fields.remove("op") {
        Some(Value::String(op)) => op,
        Some(other) => {
            return Err(RequestError::new(
                "op",
                format!("must be a string, not {}", kind(&other)),
            ))
        }
        None => return Err(RequestError::new("op", "is required")),
    };
    // `{"op": op, fields…}` becomes serde's externally tagged form `{op: {fields…}}`.
    let tagged = Value::Object(Map::from_iter([(op, Value::Object(fields))]));
    serde_path_to_error::deserialize::<_, Event>(tagged)
        .map_err(RequestError::from_serde)?
        .into_request()
}

impl RequestError {
    /// The field and problem of a serde error: the field is the last key on the error's path,
    /// except for a missing field, whose path ends at the op and whose name only serde's message
    /// ("missing field `owner`") gives; an error outside the fields is an unknown op.
    fn from_serde(err: serde_path_to_error::Error<serde_json::Error>) -> Self {
        let problem = err.inner().to_string();
        let missing = problem
            .strip_prefix("missing field `")
            .and_then(|field| field.strip_suffix('`'));
        if let Some(field) = missing {
            return RequestError::new(field, "is required");
        }
        // The last key on the path below the op (whose key comes first): an error inside an
        // array (`resources[0]`, `path[1]`) names the array's field, not the op.
        let field = err
            .path()
            .iter()
            .skip(1)
            .filter_map(|segment| match segment {
                Segment::Map { key } => Some(key.as_str()),
                _ => None,
            })
            .next_back()
            .unwrap_or("op");
        RequestError::new(field, format!("is not accepted: {problem}"))
    }
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

    /// An error inside an array names the array's field; it named the op.
    #[test]
    fn an_error_inside_an_array_names_its_field() {
        assert_eq!(
            field_of(json!({"op": "acquire", "owner": "o",
                "resources": [{"resource": "a", "mdoe": "shared"}]})),
            "resources"
        );
        assert_eq!(
            field_of(json!({"op": "acquire", "owner": "o", "resources": [5]})),
            "resources"
        );
        assert_eq!(
            field_of(json!({"op": "acquire", "owner": "o", "path": ["a", 5]})),
            "path"
        );
        assert_eq!(
            field_of(json!({"op": "release", "owner": "o", "locks": ["x"]})),
            "locks"
        );
    }

    #[test]
    fn parses_every_op() {
        let id = "67e55044-10b1-426f-9247-bb680e5fe0c8";
        let acquire = parse(&json!({"op": "acquire", "resource": "r", "owner": "o",
            "lease_ms": 1500, "wait_ms": 0, "data": {"step": 1}, "fencing": true,
            "only_if_exists": true, "mode": "shared", "permits": 3}))
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
                    only_if_exists: true,
                    mode: Mode::Shared,
                    permits: Some(3),
                    fair: false,
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
            field_of(json!({"op": "try_acquire", "resource": "r", "owner": "o", "fair": true})),
            "fair"
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

    #[test]
    fn null_is_the_default_of_an_optional_field_and_wrong_for_a_required_one() {
        let acquire = parse(&json!({"op": "acquire", "resource": "r", "owner": "o",
            "lease_ms": null, "wait_ms": null, "data": null, "fencing": null}))
        .unwrap();
        let Request::Acquire { lock, wait } = acquire else {
            panic!("parsed as {acquire:?}")
        };
        assert_eq!(
            (lock.lease, wait, lock.data, lock.fencing),
            (None, None, None, false)
        );
        let cleanup = parse(&json!({"op": "cleanup", "cursor": null})).unwrap();
        assert_eq!(cleanup, Request::Cleanup { cursor: None });
        let release = parse(&json!({"op": "release", "resource": "r", "owner": "o",
            "lock_id": "67e55044-10b1-426f-9247-bb680e5fe0c8", "expires_at": null,
            "retry_count": null}))
        .unwrap();
        let Request::Release {
            expires_at,
            retried,
            ..
        } = release
        else {
            panic!("parsed as {release:?}")
        };
        assert_eq!((expires_at, retried), (None, false));
        let err = parse(&json!({"op": "status", "resource": null})).unwrap_err();
        assert_eq!(err.field, "resource");
        assert!(err.problem.contains("null"), "{err}");
    }

    #[test]
    fn numbers_that_are_not_whole_milliseconds_in_range_name_the_field() {
        let acquire = |wait: &str| {
            let event =
                format!(r#"{{"op": "acquire", "resource": "r", "owner": "o", "wait_ms": {wait}}}"#);
            parse(&serde_json::from_str(&event).unwrap())
        };
        assert!(
            acquire("9223372036854775807").is_ok(),
            "i64::MAX ms is accepted"
        );
        for wait in [
            "9223372036854775808",
            "18446744073709551616",
            "1e3",
            "1.0",
            "-0.5",
        ] {
            let err = acquire(wait).unwrap_err();
            assert_eq!(err.field, "wait_ms", "{wait}");
            assert!(
                err.problem.contains("whole number of milliseconds"),
                "{err}"
            );
        }
        let release = |stopped_at: Value| {
            parse(
                &json!({"op": "release_execution", "owner": "o", "resource_field": "id",
                "execution_input": r#"{"id": "r"}"#, "stopped_at": stopped_at}),
            )
        };
        assert!(release(json!(1_795_000_000_000_i64)).is_ok());
        assert_eq!(release(json!(i64::MAX)).unwrap_err().field, "stopped_at");
        assert_eq!(release(json!(1.5)).unwrap_err().field, "stopped_at");
    }

    #[test]
    fn strings_are_not_read_as_booleans_or_numbers() {
        let event = |field: &str, value: &str| {
            let mut event = json!({"op": "acquire", "resource": "r", "owner": "o"});
            event[field] = json!(value);
            parse(&event).unwrap_err()
        };
        for (field, value) in [("fencing", "true"), ("lease_ms", "5"), ("wait_ms", "0")] {
            let err = event(field, value);
            assert_eq!(err.field, field);
            assert!(err.problem.contains("string"), "{err}");
        }
        let err = parse(&json!({"op": "cleanup", "cursor": 5})).unwrap_err();
        assert_eq!(err.field, "cursor");
    }

    #[test]
    fn messages_say_what_is_wrong() {
        let problem = |event: Value| parse(&event).unwrap_err().to_string();
        assert_eq!(
            problem(json!({"op": "acquire", "owner": "o"})),
            "`resource` is required, or `resources` or `path` in its place (null is absent, not a name)"
        );
        assert_eq!(problem(json!({"resource": "r"})), "`op` is required");
        assert!(
            problem(json!({"op": "lock"})).contains("expected one of `acquire`, `try_acquire`"),
            "the ops are listed"
        );
        assert!(
            problem(json!({"op": "status", "resource": "r", "owner": "o"}))
                .contains("unknown field `owner`, expected `resource`"),
            "the op's fields are listed"
        );
        assert!(
            problem(json!({"op": "release", "resource": "r", "owner": "o", "lock_id": "x"}))
                .contains("a lock id returned by acquire")
        );
        assert!(problem(json!({"op": "cleanup", "cursor": "x"}))
            .contains("the next_cursor of an earlier cleanup"));
    }
}
