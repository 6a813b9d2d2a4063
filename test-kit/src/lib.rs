//! The shared test kit of ddb-lock: what the library's integration tests (`lib/tests/`), the
//! Lambda crate's tests and demo, the fault suite and the benchmark harness need to run against a
//! local DynamoDB endpoint.
//!
//! - [`endpoint`](mod@endpoint): the endpoint under test (`DYNAMODB_ENDPOINT`) and SDK clients for it;
//! - [`tables`]: the tables the tests use, [`ensure_table`] to create one, and raw item reads;
//! - [`locks`]: lock clients of the shared table, unique resource names, taking a free lock;
//! - [`clocks`]: clocks to hand the library (fixed, offset, adjustable) and the monotonic clock;
//! - [`events`]: capture of the library's `tracing` events;
//! - [`proxy`]: a fault-injecting TCP proxy between a client and the endpoint;
//! - [`schemas`]: lock tables of non-default schemas, and every operation run on one;
//! - [`runtime_api`]: a local Lambda Runtime API and the function processes behind it.
//!
//! The items of the first four modules are re-exported at the crate root.

pub mod clocks;
pub mod endpoint;
pub mod events;
pub mod locks;
pub mod proxy;
pub mod runtime_api;
pub mod schemas;
pub mod seeds;
pub mod tables;

pub use clocks::{monotonic_ns, AdjustableClock, FixedClock, OffsetClock, StoppedClock};
pub use endpoint::{dynamodb, dynamodb_at, dynamodb_with, endpoint, quickly_retrying_dynamodb};
pub use locks::{
    assert_release_all_releases, builder, client_at, client_through, client_with_attempt_timeout,
    client_without_retries, guard_options, hold, keeping_client_at, lock_client, lost_now,
    quickly_retrying_client, reader_options, unique, writer_options,
};
pub use tables::{
    ensure_table, fenced_table, raw_item, stored, string_attr, TableKind, FENCED_TABLE, TABLE,
};
