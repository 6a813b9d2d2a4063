//! Shared holds (readers of a read-write lock, permits of a semaphore) against the local
//! endpoint: who excludes whom and what it costs, counted by a proxy ([`readers`]); the permits of
//! a semaphore and the reclaim of crashed holders in the same write ([`semaphores`]); the writer
//! waiting among readers, whose marker stops new ones ([`waiting_writers`]).

mod readers;
mod semaphores;
mod waiting_writers;

use ddb_lock::{
    AcquireAttempt, AcquireOptions, Error, ExtendOutcome, InvalidInput, LockClient, LockStatus,
    Mode, ReleaseOutcome,
};
use ddb_lock_test_kit::clocks::AdjustableClock;
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{
    builder, dynamodb, dynamodb_at, endpoint, lock_client, quickly_retrying_client, raw_item,
    reader_options as reader, unique, writer_options as writer,
};
use std::sync::Arc;
use std::time::Duration;

fn permit(owner: &str, permits: u32) -> AcquireOptions {
    AcquireOptions::new()
        .owner(owner)
        .permits(permits)
        .lease(Duration::from_secs(60))
}

/// A client whose clock is `clock`, talking to `endpoint`.
fn client_with_clock(endpoint: &str, clock: Arc<AdjustableClock>) -> LockClient {
    builder(dynamodb_at(endpoint))
        .clock(clock)
        .build()
        .expect("valid settings")
}

fn shared_owners(status: &LockStatus) -> Vec<String> {
    match status {
        LockStatus::Shared { holders, .. } => holders.iter().map(|h| h.owner.clone()).collect(),
        other => panic!("expected shared holders, found {other:?}"),
    }
}

/// Runs `call` and checks it made exactly `requests` requests.
async fn before_and_after<F, Fut, T>(proxy: &Proxy, call: F, requests: usize) -> T
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
    T: std::fmt::Debug,
{
    let before = proxy.total_requests();
    let out = call().await.unwrap();
    assert_eq!(proxy.total_requests() - before, requests, "{out:?}");
    out
}
