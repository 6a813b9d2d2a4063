//! The event's ops as serde reads them (`Event`, one variant per op, strict), and their
//! conversion into a [`Request`]: the checks that span fields (one of `resource`, `resources`
//! and `path`; a Step Functions execution's input naming the resource), which serde alone cannot
//! make.

use super::fields::{
    answered_instant, cursor, duration, epoch_millis, flag, json_text, lock_id, mode,
    optional_lock_id, replacement,
};
use super::set::{self, Held, SetLock, SetMember, Target};
use super::{kind, HeldLock, NewLock, NewSet, Request, RequestError};
use chrono::{DateTime, Utc};
use ddb_lock::{CleanupCursor, LockId, Mode};
use serde::Deserialize;
use serde_json::Value;
use std::time::Duration;

/// The event as serde reads it: one variant per op, the op's fields named as in the event.
/// Strict: a field the op does not take is refused, so a typo (`leaseMs`) fails loudly instead of
/// silently taking a default. Absent and `null` optional fields alike take the default.
///
/// Not `#[serde(tag = "op")]`: an internally tagged enum buffers the event before it picks the
/// variant, and the path of an error in a field is lost, so a wrong type could not name its
/// field. [`parse`] moves the op outside instead.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(super) enum Event {
    Acquire(Acquisition),
    /// As `acquire`, without `wait_ms` and `fair` (refused by name: it never waits).
    TryAcquire(Acquisition),
    Release {
        #[serde(default)]
        resource: Option<String>,
        owner: String,
        #[serde(default, deserialize_with = "optional_lock_id")]
        lock_id: Option<LockId>,
        #[serde(default)]
        locks: Option<Vec<SetLock>>,
        #[serde(default, deserialize_with = "mode")]
        mode: Option<Mode>,
        /// Absent: keep the data; `null`: remove it.
        #[serde(default, deserialize_with = "replacement")]
        data: Option<Option<String>>,
        #[serde(default, deserialize_with = "answered_instant")]
        expires_at: Option<DateTime<Utc>>,
        #[serde(default)]
        retry_count: Option<u32>,
    },
    ReleaseExecution {
        owner: String,
        execution_input: String,
        resource_field: String,
        #[serde(default, deserialize_with = "epoch_millis")]
        stopped_at: Option<DateTime<Utc>>,
    },
    Extend {
        resource: String,
        owner: String,
        #[serde(deserialize_with = "lock_id")]
        lock_id: LockId,
        #[serde(default, deserialize_with = "mode")]
        mode: Option<Mode>,
        #[serde(default, deserialize_with = "duration")]
        lease_ms: Option<Duration>,
        /// Absent: keep the data; `null`: remove it.
        #[serde(default, deserialize_with = "replacement")]
        data: Option<Option<String>>,
    },
    Status {
        #[serde(default)]
        resource: Option<String>,
        #[serde(default)]
        path: Option<Vec<String>>,
    },
    ForceRelease {
        resource: String,
    },
    Cleanup {
        #[serde(default, deserialize_with = "cursor")]
        cursor: Option<CleanupCursor>,
    },
    List {},
}

/// The fields of `acquire` and `try_acquire`, strict as [`Event`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Acquisition {
    #[serde(default)]
    resource: Option<String>,
    #[serde(default)]
    resources: Option<Vec<SetMember>>,
    #[serde(default)]
    path: Option<Vec<String>>,
    owner: String,
    #[serde(default, deserialize_with = "duration")]
    lease_ms: Option<Duration>,
    #[serde(default, deserialize_with = "duration")]
    wait_ms: Option<Duration>,
    #[serde(default, deserialize_with = "json_text")]
    data: Option<String>,
    #[serde(default, deserialize_with = "flag")]
    fencing: bool,
    #[serde(default, deserialize_with = "flag")]
    only_if_exists: bool,
    #[serde(default, deserialize_with = "mode")]
    mode: Option<Mode>,
    #[serde(default)]
    permits: Option<u32>,
    #[serde(default, deserialize_with = "flag")]
    fair: bool,
}

/// What an acquisition event asks for: one lock or a set.
enum Acquired {
    One(NewLock),
    Set(NewSet),
}

impl Acquisition {
    /// The lock or the set asked for, and how long to wait for it.
    fn into_target(self) -> Result<(Acquired, Option<Duration>), RequestError> {
        let Acquisition {
            resource,
            resources,
            path,
            owner,
            lease_ms,
            wait_ms,
            data,
            fencing,
            only_if_exists,
            mode,
            permits,
            fair,
        } = self;
        let acquired = match set::members(resource, resources, path, mode, permits)? {
            Target::One(resource) => Acquired::One(NewLock {
                resource,
                owner,
                lease: lease_ms,
                data,
                fencing,
                only_if_exists,
                mode: acquired_mode(mode, permits),
                permits,
                fair,
            }),
            Target::Set(_, field) if fair => return Err(set::not_with("fair", field)),
            Target::Set(members, field) => Acquired::Set(NewSet::new(
                (members, field),
                owner,
                lease_ms,
                data,
                fencing,
                only_if_exists,
            )?),
        };
        Ok((acquired, wait_ms))
    }

    /// As [`Acquisition::into_target`], for `try_acquire`: `wait_ms` and `fair` are refused.
    fn into_try_target(self) -> Result<Acquired, RequestError> {
        if self.wait_ms.is_some() {
            return Err(RequestError::new(
                "wait_ms",
                "is not taken by try_acquire, which never waits (use acquire)",
            ));
        }
        if self.fair {
            return Err(RequestError::new(
                "fair",
                "is not taken by try_acquire, which never joins a line (use acquire)",
            ));
        }
        self.into_target().map(|(acquired, _)| acquired)
    }
}

impl Event {
    pub(super) fn into_request(self) -> Result<Request, RequestError> {
        Ok(match self {
            Event::Acquire(acquisition) => match acquisition.into_target()? {
                (Acquired::One(lock), wait) => Request::Acquire { lock, wait },
                (Acquired::Set(set), wait) => Request::AcquireSet { set, wait },
            },
            Event::TryAcquire(acquisition) => match acquisition.into_try_target()? {
                Acquired::One(lock) => Request::TryAcquire { lock },
                Acquired::Set(set) => Request::TryAcquireSet { set },
            },
            Event::Release {
                resource,
                owner,
                lock_id,
                locks,
                mode,
                data,
                expires_at,
                retry_count,
            } => match set::held(resource, lock_id, mode, locks, data.is_some())? {
                Held::One(resource, lock_id) => Request::Release {
                    lock: HeldLock {
                        resource,
                        owner,
                        lock_id,
                        mode: mode.unwrap_or_default(),
                    },
                    data,
                    expires_at,
                    retried: retry_count.is_some_and(|count| count > 0),
                },
                Held::Set(_) if expires_at.is_some() => {
                    return Err(set::not_with("expires_at", "locks"))
                }
                Held::Set(locks) => Request::ReleaseSet {
                    locks: locks.into_iter().map(|l| l.held(&owner)).collect(),
                    owner,
                },
            },
            Event::ReleaseExecution {
                owner,
                execution_input,
                resource_field,
                stopped_at,
            } => Request::ReleaseExecution {
                resource: execution_resource(&execution_input, &resource_field)?,
                owner,
                stopped_at,
            },
            Event::Extend {
                resource,
                owner,
                lock_id,
                mode,
                lease_ms,
                data,
            } => Request::Extend {
                lock: HeldLock {
                    resource,
                    owner,
                    lock_id,
                    mode: mode.unwrap_or_default(),
                },
                lease: lease_ms,
                data,
            },
            Event::Status { resource, path } => Request::Status {
                named_in: if path.is_some() { "path" } else { "resource" },
                resource: set::one_resource(resource, path)?,
            },
            Event::ForceRelease { resource } => Request::ForceRelease { resource },
            Event::Cleanup { cursor } => Request::Cleanup { cursor },
            Event::List {} => Request::List,
        })
    }
}

/// The resource named by `field` inside `input`, the execution's input as Step Functions reports
/// it: a JSON document in a string. By hand: it reads the string as JSON after serde.
fn execution_resource(input: &str, field: &str) -> Result<String, RequestError> {
    let input: Value = serde_json::from_str(input).map_err(|e| {
        RequestError::new("execution_input", format!("is not a JSON document: {e}"))
    })?;
    match input.get(field) {
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

/// The mode of an acquisition: as the event says, else shared for a semaphore (`permits`),
/// else exclusive. An explicit `exclusive` with `permits` is refused by the library.
fn acquired_mode(mode: Option<Mode>, permits: Option<u32>) -> Mode {
    mode.unwrap_or(if permits.is_some() {
        Mode::Shared
    } else {
        Mode::Exclusive
    })
}
