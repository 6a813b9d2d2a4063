//! The lock-set forms of `acquire`, `try_acquire` and `release`: `resources` in place of
//! `resource` (each member a name, taken exclusive, or `{"resource", "mode"}`), and `locks` in
//! place of `resource` and `lock_id` (each member as acquire returned it).

use super::fields::{lock_id, mode};
use super::{HeldLock, RequestError};
use ddb_lock::{LockId, LockPath, Mode};
use serde::de::IgnoredAny;
use serde::Deserialize;
use std::time::Duration;

/// One member of `resources`: a name (exclusive), or a name and a mode.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum SetMember {
    Name(String),
    Member(Member),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Member {
    resource: String,
    #[serde(default, deserialize_with = "mode")]
    mode: Option<Mode>,
}

/// One member of `locks` in a release: as acquire returned it (its other fields are accepted
/// and ignored, so that a state machine passes the acquire's `locks` back unchanged), or just
/// `resource`, `lock_id` and `mode`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SetLock {
    resource: String,
    #[serde(deserialize_with = "lock_id")]
    lock_id: LockId,
    #[serde(default, deserialize_with = "mode")]
    mode: Option<Mode>,
    #[serde(default, rename = "owner")]
    _owner: Option<IgnoredAny>,
    #[serde(default, rename = "acquired_at")]
    _acquired_at: Option<IgnoredAny>,
    #[serde(default, rename = "expires_at")]
    _expires_at: Option<IgnoredAny>,
    #[serde(default, rename = "fencing_token")]
    _fencing_token: Option<IgnoredAny>,
    #[serde(default, rename = "data")]
    _data: Option<IgnoredAny>,
}

impl SetLock {
    /// The member as a held lock of `owner`.
    pub(super) fn held(self, owner: &str) -> HeldLock {
        HeldLock {
            resource: self.resource,
            owner: owner.to_owned(),
            lock_id: self.lock_id,
            mode: self.mode.unwrap_or_default(),
        }
    }
}

/// What an acquire names: one resource, or a set.
pub(super) enum Target {
    One(String),
    /// The members, and the event's field they came from (`resources` or `path`).
    Set(Vec<(String, Mode)>, &'static str),
}

/// What a release names: one lock, or a set's.
pub(super) enum Held {
    One(String, LockId),
    Set(Vec<SetLock>),
}

/// Fields of a lock set to acquire.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSet {
    /// The members: resource and mode.
    pub members: Vec<(String, Mode)>,
    /// The owner of every member.
    pub owner: String,
    /// The lease of every member.
    pub lease: Option<Duration>,
    /// Whether each exclusive member gets a fencing token.
    pub fencing: bool,
    /// The event's field the members came from (`resources` or `path`): a member the library
    /// refuses is reported on it.
    pub field: &'static str,
}

impl NewSet {
    /// The set, refusing the fields a set does not take.
    pub(super) fn new(
        (members, field): (Vec<(String, Mode)>, &'static str),
        owner: String,
        lease: Option<Duration>,
        data: Option<String>,
        fencing: bool,
        only_if_exists: bool,
    ) -> Result<Self, RequestError> {
        for (refused, given) in [("data", data.is_some()), ("only_if_exists", only_if_exists)] {
            if given {
                return Err(not_with(refused, field));
            }
        }
        Ok(NewSet {
            members,
            owner,
            lease,
            fencing,
            field,
        })
    }
}

/// The target of an acquire: exactly one of `resource`, `resources` and `path`. A set's mode is
/// per member, so `mode` goes with `resource` and `path`; `permits` with `resource` only. A path
/// is the lock set of its ancestors' intentions and itself.
pub(super) fn members(
    resource: Option<String>,
    resources: Option<Vec<SetMember>>,
    path: Option<Vec<String>>,
    mode: Option<Mode>,
    permits: Option<u32>,
) -> Result<Target, RequestError> {
    if let Some(path) = path {
        if resource.is_some() || resources.is_some() {
            return Err(not_with(
                "path",
                if resource.is_some() {
                    "resource"
                } else {
                    "resources"
                },
            ));
        }
        if permits.is_some() {
            return Err(not_with("permits", "path"));
        }
        let mode = mode.unwrap_or_default();
        if !matches!(mode, Mode::Exclusive | Mode::Shared) {
            return Err(RequestError::new(
                "mode",
                "of a path is `exclusive` or `shared`",
            ));
        }
        return Ok(Target::Set(LockPath::new(path).members(mode), "path"));
    }
    match (resource, resources) {
        (Some(resource), None) => Ok(Target::One(resource)),
        (None, Some(members)) => {
            if mode.is_some() {
                return Err(RequestError::new(
                    "mode",
                    "cannot be used with `resources`: give each member its mode",
                ));
            }
            if permits.is_some() {
                return Err(not_with("permits", "resources"));
            }
            Ok(Target::Set(
                members
                    .into_iter()
                    .map(|member| match member {
                        SetMember::Name(resource) => (resource, Mode::Exclusive),
                        SetMember::Member(Member { resource, mode }) => {
                            (resource, mode.unwrap_or_default())
                        }
                    })
                    .collect(),
                "resources",
            ))
        }
        (Some(_), Some(_)) => Err(not_with("resources", "resource")),
        (None, None) => Err(resource_required("`resources` or `path`")),
    }
}

/// The target of a release: `locks`, or `resource` with `lock_id`.
pub(super) fn held(
    resource: Option<String>,
    lock_id: Option<LockId>,
    mode: Option<Mode>,
    locks: Option<Vec<SetLock>>,
    data: bool,
) -> Result<Held, RequestError> {
    match (locks, resource, lock_id) {
        (Some(locks), None, None) => {
            if mode.is_some() {
                return Err(RequestError::new(
                    "mode",
                    "cannot be used with `locks`: give each member its mode",
                ));
            }
            if data {
                return Err(not_with("data", "locks"));
            }
            Ok(Held::Set(locks))
        }
        (Some(_), Some(_), _) => Err(not_with("locks", "resource")),
        (Some(_), _, Some(_)) => Err(not_with("locks", "lock_id")),
        (None, Some(resource), Some(lock_id)) => Ok(Held::One(resource, lock_id)),
        (None, None, _) => Err(resource_required("`locks`")),
        (None, Some(_), None) => Err(RequestError::new("lock_id", "is required")),
    }
}

/// The resource a `status` names: `resource`, or `path`'s.
pub(super) fn one_resource(
    resource: Option<String>,
    path: Option<Vec<String>>,
) -> Result<String, RequestError> {
    match (resource, path) {
        (Some(resource), None) => Ok(resource),
        (None, Some(path)) => Ok(LockPath::new(path).resource()),
        (Some(_), Some(_)) => Err(not_with("path", "resource")),
        (None, None) => Err(resource_required("`path`")),
    }
}

/// `resource` is missing (absent or `null`) and so are its alternatives.
fn resource_required(alternatives: &str) -> RequestError {
    RequestError::new(
        "resource",
        format!("is required, or {alternatives} in its place (null is absent, not a name)"),
    )
}

pub(super) fn not_with(field: &str, other: &str) -> RequestError {
    RequestError::new(field, format!("cannot be used with `{other}`"))
}
