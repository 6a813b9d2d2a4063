//! What can go wrong: bad input, a timeout, a misconfigured table, a malformed item, or DynamoDB.
//!
//! Contention is not an error: a lock held by someone else is `Ok(None)` from
//! [`try_acquire`](crate::LockClient::try_acquire) and a typed outcome from release and extend.
//! `Err` means the input, the table or the backend is wrong, or a wait ran out.

use crate::lock::Holder;
use crate::outcome::LockLost;
use crate::timestamp;
use std::time::Duration;

/// Errors returned by [`LockClient`](crate::LockClient).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A caller-supplied value is out of bounds; nothing was sent to DynamoDB.
    #[error("invalid input: {0}")]
    InvalidInput(#[from] InvalidInput),

    /// [`acquire`](crate::LockClient::acquire) gave up after its timeout.
    #[error(
        "timed out after {waited:?} waiting for lock `{resource}`: held by `{}` until {}",
        holder.owner,
        timestamp::format(holder.expires_at)
    )]
    Timeout {
        /// The resource that could not be locked.
        resource: String,
        /// How long the caller waited.
        waited: Duration,
        /// The holder seen on the last attempt (acquire always makes at least one).
        holder: Box<Holder>,
    },

    /// A guarded lock was lost while its holder worked (see
    /// [`with_lock`](crate::LockClient::with_lock)).
    #[error("lock `{resource}` was lost: {reason}")]
    Lost {
        /// The resource whose lock was lost.
        resource: String,
        /// How it was lost.
        reason: Box<LockLost>,
    },

    /// The lock table does not have the shape the library needs.
    #[error("table `{table}`: {problem}")]
    Table {
        /// The table name.
        table: String,
        /// What is wrong with it.
        problem: TableProblem,
    },

    /// The item stored under a resource's key is not a lock item this library can read. It is left
    /// untouched; [`force_release`](crate::LockClient::force_release) removes it.
    #[error("lock item for `{resource}` is malformed: attribute `{attribute}` {problem}")]
    MalformedItem {
        /// The resource whose item is malformed.
        resource: String,
        /// The attribute at fault.
        attribute: &'static str,
        /// What is wrong with it.
        problem: &'static str,
    },

    /// The item at a lock's key (or at a resource's fence key) was not written by this library: an
    /// application item sharing the table. No lock request writes, updates or deletes such an
    /// item; it is left exactly as it was.
    #[error("table `{table}`: the item at {key} is not a lock item; it was left untouched")]
    NotALockItem {
        /// The table name.
        table: String,
        /// The item's key as the table's schema names it, e.g. `pk=ORDER#1, sk=LOCK`.
        key: String,
    },

    /// An acquisition with [`AcquireOptions::only_if_exists`](crate::AcquireOptions::only_if_exists)
    /// found no lock item to take: nobody created one (with
    /// [`create_lock_item`](crate::LockClient::create_lock_item), or by a release that keeps the
    /// item), or it was deleted.
    #[error(
        "table `{table}`: no lock item at {key}, and the acquisition takes only an existing one"
    )]
    NoLockItem {
        /// The table name.
        table: String,
        /// The key it looked at, as the table's schema names it, e.g. `pk=ORDER#1, sk=LOCK`.
        key: String,
    },

    /// A release that [`release_all`](crate::LockClient::release_all) sent from a task of its own
    /// ended without an answer: the runtime shut down under it. It may or may not have been
    /// applied; if not, the lock expires with its lease.
    #[error("the release of `{resource}` ended without an answer (its runtime shut down); if it was not applied, the lock expires with its lease")]
    ReleaseAbandoned {
        /// The resource whose release was abandoned.
        resource: String,
    },

    /// The endpoint answered in a way the DynamoDB API does not allow (for example a failed
    /// condition without the item that `ReturnValuesOnConditionCheckFailure = ALL_OLD` asks for).
    #[error("DynamoDB {operation} answered unexpectedly: {detail}")]
    UnexpectedResponse {
        /// The DynamoDB operation.
        operation: &'static str,
        /// What was missing or wrong.
        detail: &'static str,
    },

    /// DynamoDB (or the network, or credentials) failed the request.
    #[error("DynamoDB {operation} failed: {source}")]
    Backend {
        /// The DynamoDB operation, e.g. `PutItem`.
        operation: &'static str,
        /// The cause: for a request DynamoDB answered, an [`aws_sdk_dynamodb::Error`] (downcast to
        /// match on its error code, e.g. throttling).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl Error {
    /// A failed SDK request, converted to [`aws_sdk_dynamodb::Error`] whose message carries the
    /// service's error code (the SDK's own `SdkError` displays only "service error").
    pub(crate) fn backend<E>(operation: &'static str, err: E) -> Self
    where
        aws_sdk_dynamodb::Error: From<E>,
    {
        Self::backend_other(operation, aws_sdk_dynamodb::Error::from(err))
    }

    /// A failure outside a service answer: building a request, waiting for a table.
    pub(crate) fn backend_other(
        operation: &'static str,
        err: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Backend {
            operation,
            source: Box::new(err),
        }
    }
}

/// A value rejected before any request: each variant names the field and the limit it broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidInput {
    /// The field must not be empty.
    #[error("`{field}` must not be empty")]
    Empty {
        /// The field.
        field: &'static str,
    },
    /// The field is longer than its limit, in bytes of UTF-8.
    #[error("`{field}` is {bytes} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// The field.
        field: &'static str,
        /// Its size.
        bytes: usize,
        /// The largest size allowed.
        limit: usize,
    },
    /// The duration is shorter than allowed (for a lease: zero).
    #[error("`{field}` is {value:?}, under the minimum of {min:?}")]
    DurationTooShort {
        /// The field.
        field: &'static str,
        /// The value given.
        value: Duration,
        /// The shortest allowed.
        min: Duration,
    },
    /// The duration is longer than [`MAX_DURATION`](crate::limits::MAX_DURATION).
    #[error("`{field}` is {value:?}, over the maximum of {max:?}")]
    DurationTooLong {
        /// The field.
        field: &'static str,
        /// The value given.
        value: Duration,
        /// The longest allowed.
        max: Duration,
    },
    /// A period counted in whole milliseconds (a window's, a scheduled job's) was given with a
    /// fraction of a millisecond, which the count would drop.
    #[error("`{field}` is {value:?}; it must be a whole number of milliseconds")]
    NotWholeMillis {
        /// The field.
        field: &'static str,
        /// The value given.
        value: Duration,
    },
    /// A duration given as signed milliseconds was negative.
    #[error("`{field}` is {millis} ms; durations cannot be negative")]
    NegativeDuration {
        /// The field.
        field: &'static str,
        /// The value given.
        millis: i64,
    },
    /// The backoff's initial delay exceeds its maximum.
    #[error("`backoff`: initial delay {initial:?} exceeds the maximum delay {max:?}")]
    BackoffOrder {
        /// The initial delay.
        initial: Duration,
        /// The maximum delay.
        max: Duration,
    },
    /// A payload was given to a release on a client that deletes the item on release, where it
    /// would be lost with the item.
    #[error("`data` on release needs a client that keeps the item (`delete_on_release(false)`); a release that deletes the item keeps no data")]
    DataNotKept,
    /// A lock id is not a UUID.
    #[error("`lock_id` is not a lock id (a UUID such as 67e55044-10b1-426f-9247-bb680e5fe0c8)")]
    MalformedLockId,
    /// A key or TTL attribute of the [`TableSchema`](crate::TableSchema) has the name of another
    /// attribute of the lock item.
    #[error("`{field}` {name:?} is already the name of another attribute of the lock item")]
    NameTaken {
        /// The schema setting.
        field: &'static str,
        /// The name given.
        name: String,
    },
    /// The [`TableSchema`](crate::TableSchema)'s fence items could have the key of a lock item:
    /// the same sort-key value, or, without a sort key, key formats whose prefixes are prefixes
    /// of one another and whose suffixes are suffixes of one another.
    #[error(
        "`{field}` lets a fence item's key equal a lock item's key; make the two formats differ"
    )]
    KeysOverlap {
        /// The schema setting.
        field: &'static str,
    },
    /// A semaphore's permits are out of range.
    #[error("`permits` is {permits}, not within 1 to {max}", max = crate::limits::MAX_SHARED_HOLDERS)]
    Permits {
        /// The value given.
        permits: u32,
    },
    /// An option that the lock's mode does not take: `permits` with exclusive mode, or, in shared
    /// mode, an option shared holds do not offer yet (`fencing`, `idempotent`, `data`, the
    /// observed-lease takeover rule).
    #[error("`{field}` cannot be used with {mode} mode")]
    NotForMode {
        /// The option.
        field: &'static str,
        /// The mode asked for.
        mode: crate::Mode,
    },
    /// A handle names a hold in another mode than the one it is held in.
    #[error("`mode` is {given}, but this lock id holds the lock in {held} mode")]
    ModeMismatch {
        /// The mode the handle says.
        given: crate::Mode,
        /// The mode the hold is in.
        held: crate::Mode,
    },
    /// A lock set without members.
    #[error("`resources` must name at least one resource")]
    EmptySet,
    /// A lock set with more distinct resources than one transaction can write.
    #[error("`resources` names {count} distinct resources, over the limit of {max} (one DynamoDB transaction)")]
    TooManyMembers {
        /// Distinct resources named.
        count: usize,
        /// The most a set can hold.
        max: usize,
    },
    /// A fenced lock set whose members and fence items (one per exclusive member, and the root
    /// path's for fenced path locks) are more writes than one transaction takes.
    #[error("`resources`: {members} members and {fences} fence items are {total} writes, over the limit of {max} (one DynamoDB transaction)", total = members + fences)]
    TooManyWrites {
        /// Distinct resources named.
        members: usize,
        /// Fence items: each exclusive member's, and the root path's for fenced path locks.
        fences: usize,
        /// The most writes of one transaction.
        max: usize,
    },
    /// An option lock sets do not offer yet.
    #[error("`{field}` cannot be used with a lock set")]
    NotForSets {
        /// The option.
        field: &'static str,
    },
    /// A fenced acquisition of a path's resource name alone (`path:/…`, not the root): fenced
    /// path locks draw their tokens from a counter shared with the path's ancestors and
    /// descendants, which only [`acquire_paths`](crate::LockClient::acquire_paths) and the other
    /// path calls raise (alone, it drew from the path's own, and a holder of a descendant could
    /// hold a higher token than this newer, excluding holder; found by review).
    #[error("`fencing` cannot be used on the path resource {resource:?} alone: lock the path with acquire_paths, whose tokens follow those of its ancestors and descendants")]
    FencedPathName {
        /// The resource name.
        resource: String,
    },
    /// An option a fair acquisition ([`AcquireOptions::fair`](crate::AcquireOptions::fair))
    /// does not offer.
    #[error("`{field}` cannot be used with a fair acquisition")]
    NotForFair {
        /// The option.
        field: &'static str,
    },
    /// A [`Namespace`](crate::Namespace) name breaks its rules.
    #[error("`namespace` {name:?} must be 1 to 64 characters of a-z, A-Z, 0-9, '_', '-', '.'")]
    Namespace {
        /// The name given.
        name: String,
    },
    /// The [`TableSchema`](crate::TableSchema)'s key formats leave no room for namespaces: a
    /// namespaced key (`NS#<namespace>#` before the lock key format) could equal the key of a
    /// lock or fence item without a namespace, as with an empty key prefix.
    #[error("`namespace` keys could equal other lock keys under this schema's key formats (an empty key prefix, or one starting with `NS#`); give the schema another key prefix")]
    NamespaceOverlap,
    /// A scheduled job requires the tick's lock ([`LockingHint::RequireGlobal`](crate::LockingHint::RequireGlobal))
    /// and the [`Scheduler`](crate::Scheduler) has no lock backend.
    #[error(
        "`hint` RequireGlobal needs a lock backend: give the scheduler one, or use PreferGlobal"
    )]
    NeedsBackend,
    /// A task's status `in_progress` is set by a claim only.
    #[error("`status` in_progress is set by a claim; set pending, done, failed or cancelled")]
    ClaimOnly,
    /// A task claim's limit is out of range.
    #[error("`limit` is {limit}, not within 1 to 100")]
    ClaimLimit {
        /// The value given.
        limit: usize,
    },
    /// A setting that needs the schema's TTL attribute, on a schema without one.
    #[error("`{field}` needs the schema's TTL attribute, which deletes what it keeps; without one, keep items for good with delete_on_release(false)")]
    NeedsTtl {
        /// The setting.
        field: &'static str,
    },
    /// A table name breaks DynamoDB's rules.
    #[error("`table_name` {name:?} must be 3 to 255 characters of a-z, A-Z, 0-9, '_', '-', '.'")]
    TableName {
        /// The name given.
        name: String,
    },
}

impl InvalidInput {
    /// The name of the field at fault, as the builder and options spell it.
    ///
    /// # Examples
    ///
    /// ```
    /// use ddb_lock::InvalidInput;
    ///
    /// assert_eq!(InvalidInput::Empty { field: "owner" }.field(), "owner");
    /// assert_eq!(InvalidInput::MalformedLockId.field(), "lock_id");
    /// ```
    pub fn field(&self) -> &'static str {
        match self {
            InvalidInput::Empty { field }
            | InvalidInput::TooLarge { field, .. }
            | InvalidInput::DurationTooShort { field, .. }
            | InvalidInput::DurationTooLong { field, .. }
            | InvalidInput::NegativeDuration { field, .. }
            | InvalidInput::NotWholeMillis { field, .. }
            | InvalidInput::NameTaken { field, .. }
            | InvalidInput::KeysOverlap { field }
            | InvalidInput::NotForMode { field, .. }
            | InvalidInput::NotForSets { field }
            | InvalidInput::NotForFair { field }
            | InvalidInput::NeedsTtl { field } => field,
            InvalidInput::EmptySet
            | InvalidInput::TooManyMembers { .. }
            | InvalidInput::TooManyWrites { .. } => "resources",
            InvalidInput::Permits { .. } => "permits",
            InvalidInput::ModeMismatch { .. } => "mode",
            InvalidInput::BackoffOrder { .. } => "backoff",
            InvalidInput::MalformedLockId => "lock_id",
            InvalidInput::DataNotKept => "data",
            InvalidInput::TableName { .. } => "table_name",
            InvalidInput::Namespace { .. } | InvalidInput::NamespaceOverlap => "namespace",
            InvalidInput::NeedsBackend => "hint",
            InvalidInput::ClaimOnly => "status",
            InvalidInput::ClaimLimit { .. } => "limit",
            InvalidInput::FencedPathName { .. } => "fencing",
        }
    }
}

/// What is wrong with a lock table, found by [`check_table`](crate::LockClient::check_table).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TableProblem {
    /// The table does not exist.
    #[error("does not exist (create it with LockClient::create_table)")]
    Missing,
    /// The key schema is not `PK` (HASH, string) and `SK` (RANGE, string).
    #[deprecated(note = "check_table reports every difference at once: TableProblem::Mismatch")]
    #[error("key schema is {found}, expected PK (HASH, S) + SK (RANGE, S)")]
    KeySchema {
        /// The schema found, e.g. `id (HASH, S)`.
        found: String,
    },
    /// Time to live is not enabled, so expired lock items are never cleaned up.
    #[deprecated(note = "check_table reports every difference at once: TableProblem::Mismatch")]
    #[error("time to live is {status}, expected ENABLED on attribute `TTL`")]
    TtlDisabled {
        /// The TTL status DynamoDB reported.
        status: String,
    },
    /// Time to live is enabled on another attribute.
    #[deprecated(note = "check_table reports every difference at once: TableProblem::Mismatch")]
    #[error("time to live is enabled on `{attribute}`, expected `TTL`")]
    TtlAttribute {
        /// The attribute TTL is enabled on.
        attribute: String,
    },
    /// The table is a global table, with replicas in these Regions, and the client was not told
    /// that every client writes through one Region
    /// ([`GlobalTables`](crate::GlobalTables)): conditional writes are not serialized across
    /// Regions, so two Regions could each grant the same lock.
    #[error("is a global table (replicas in {}): conditional writes are not serialized across Regions, so two Regions can each grant the same lock and the last writer wins; use a table without replicas, or, if every client writes through one Region, say so with LockClientBuilder::global_tables(GlobalTables::WritesThroughOneRegion)", regions.join(", "))]
    GlobalTable {
        /// The Regions of the table's replicas.
        regions: Vec<String>,
    },
    /// The table differs from the client's [`TableSchema`](crate::TableSchema): its key
    /// schema, or its time to live. Every difference found is listed, so that one start-up names
    /// them all.
    #[error("differs from the lock schema: {}", list(differences))]
    Mismatch {
        /// Each difference, with what the schema expects and what the table has.
        differences: Vec<TableDifference>,
    },
}

/// One way a table differs from the client's [`TableSchema`](crate::TableSchema), found by
/// [`check_table`](crate::LockClient::check_table).
///
/// # Examples
///
/// ```
/// use ddb_lock::TableDifference;
///
/// let difference = TableDifference {
///     setting: "sort key",
///     expected: "`SK` (S)".into(),
///     found: "none".into(),
/// };
/// assert_eq!(difference.to_string(), "sort key: expected `SK` (S), found none");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting}: expected {expected}, found {found}")]
pub struct TableDifference {
    /// What differs: `partition key`, `sort key` or `time to live`.
    pub setting: &'static str,
    /// What the schema needs, e.g. `` `pk` (S) `` or `` enabled on `ttl` ``.
    pub expected: String,
    /// What the table has, e.g. `` `PK` (S) ``, `none` or `DISABLED`.
    pub found: String,
}

/// The differences, one after another.
fn list(differences: &[TableDifference]) -> String {
    differences
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
