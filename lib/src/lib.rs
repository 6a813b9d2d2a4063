//! Distributed locks for serverless systems on Amazon DynamoDB.
//!
//! A lock is one item per resource (`PK = LOCK#<resource>`, `SK = LOCK`). Acquiring is one
//! conditional PutItem that succeeds only if no live lock exists; releasing is one conditional
//! DeleteItem that succeeds only for the same acquisition. Expiry is decided by the item's
//! `ExpiresAt`, never by DynamoDB's (late) TTL deletion. `lib/DESIGN.md` gives every request with its
//! exact condition and every failure case.
//!
//! - [`LockClient::try_acquire`]: one attempt; `Ok(None)` if someone else holds the lock.
//! - [`LockClient::acquire`]: retries with jittered backoff until a timeout.
//! - [`LockClient::release`], [`LockClient::extend`]: typed outcomes when the lock was lost.
//! - [`LockClient::status`], [`LockClient::force_release`], [`LockClient::delete_expired`]:
//!   inspection and administration.
//! - [`LockClient::create_table`], [`LockClient::check_table`]: the table, whose key and TTL
//!   attributes a [`TableSchema`] chooses (lock items can share an application's table).
//!
//! # Examples
//!
//! ```no_run
//! use ddb_lock::{AcquireOptions, LockClient};
//! use std::time::Duration;
//!
//! # async fn run() -> Result<(), ddb_lock::Error> {
//! let config = aws_config::load_from_env().await;
//! let client = LockClient::builder(aws_sdk_dynamodb::Client::new(&config))
//!     .table_name("locks")
//!     .build()?;
//! client.create_table().await?;
//!
//! let opts = AcquireOptions::new()
//!     .owner("worker-1")
//!     .lease(Duration::from_secs(30))
//!     .timeout(Duration::from_secs(5));
//! let lock = client.acquire("user/42/default-graph", &opts).await?;
//! // ... the critical section: re-check state, mutate, commit ...
//! client.release(&lock).await?;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

// The façade: the client, its builder, and the guard built on it.
mod builder;
mod client;
mod guard;

// The waiting loop, above the operations it repeats.
mod wait;

// The requests, one module per family.
mod ops;

// Shared pieces the operations build on.
mod backend;
mod background;
mod clock;
mod conditional;
mod conflict_retry;
mod deadline;
mod error;
mod fair;
mod fencing;
mod global_tables;
mod holds;
pub mod item;
pub mod limits;
mod lines_seen;
mod lock;
mod lock_set;
mod lock_table;
mod mode;
mod namespace;
mod options;
mod outcome;
mod path;
mod pending_by_key;
mod record;
pub mod request_timeouts;
mod schedule;
mod schema;
mod shared;
mod takeover;
mod tasks;
mod time;
pub mod timestamp;
mod wait_queues;
mod window;

pub use backend::{
    BackendError, BackendFuture, BackendLock, DynamoDbBackend, LockBackend, MemoryBackend,
};
pub use builder::LockClientBuilder;
pub use client::LockClient;
pub use clock::{Clock, SystemClock};
pub use deadline::wait_budget;
pub use error::{Error, InvalidInput, TableDifference, TableProblem};
pub use fair::QueuedWaiter;
pub use fencing::{
    FencedOutcome, FencedWrite, FencingToken, TombstonePurge, FENCE_ATTRIBUTE, TOMBSTONE_ATTRIBUTE,
};
pub use global_tables::GlobalTables;
pub use guard::{LockGuard, LockWatch};
pub use limits::duration_from_millis;
pub use lock::{Holder, Lock, LockHandle, LockId};
pub use lock_set::{LockSet, SetAttempt};
pub use mode::{Mode, UnknownMode};
pub use namespace::{ListedLock, Namespace, MAX_NAMESPACE_BYTES, NAMESPACE_KEY_PREFIX};
pub use ops::cleanup::{CleanupCursor, CleanupReport, InvalidCleanupCursor};
pub use options::AcquireOptions;
pub use outcome::{
    AcquireAttempt, AcquireStats, ExtendOutcome, LockLost, LockStatus, ReleaseOutcome,
};
pub use path::LockPath;
pub use request_timeouts::with_request_timeouts;
pub use schedule::{LockingHint, ScheduledJob, Scheduler, TickOutcome};
pub use schema::{
    TableSchema, DEFAULT_FENCE_KEY_PREFIX, DEFAULT_KEY_PREFIX, DEFAULT_NAMESPACE_INDEX,
};
pub use takeover::TakeoverRule;
pub use tasks::{
    ClaimedTask, TaskQueue, TaskStatus, CLAIMABLE_AT, CLAIMED_BY, CLAIM_AT, CLAIM_TOKEN,
    COMPLETED_CLAIM, DEFAULT_TASKS_INDEX, MAX_CLAIM, REPLACED_STATUS_WRITE, STATUS_WRITE,
    STATUS_WRITE_AT, TASK_QUEUE, TASK_STATUS,
};
pub use wait::backoff::BackoffBounds;
pub use window::{Window, WindowClaim, WINDOW_RESOURCE_PREFIX};
