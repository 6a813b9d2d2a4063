//! Lock clients of the shared table ([`TABLE`]), unique resource names, and taking a free lock.

use crate::clocks::AdjustableClock;
use crate::endpoint::{dynamodb, quickly_retrying_dynamodb};
use crate::proxy::Proxy;
use crate::tables::{ensure_table, TableKind, TABLE};
use ddb_lock::{AcquireOptions, Lock, LockClient, LockClientBuilder, LockLost, LockWatch};
use std::sync::Arc;
use std::time::Duration;

/// A builder for a client of the shared table; also shows the library's tracing output in the
/// output of a failing test (`RUST_LOG=ddb_lock=debug`).
pub fn builder(dynamodb: aws_sdk_dynamodb::Client) -> LockClientBuilder {
    init_tracing();
    LockClient::builder(dynamodb).table_name(TABLE)
}

/// A client of the shared table (created if missing), talking to the endpoint directly.
pub async fn lock_client() -> LockClient {
    ensure_table(&dynamodb(), TABLE, TableKind::Locks).await;
    builder(dynamodb()).build().expect("valid settings")
}

/// A lock client of the shared table whose requests go to `endpoint` (a fault-injecting proxy)
/// and are retried quickly by the SDK ([`quickly_retrying_dynamodb`]).
pub fn quickly_retrying_client(endpoint: &str) -> LockClient {
    quickly_retrying_builder(endpoint)
        .build()
        .expect("valid settings")
}

/// A lock client of the shared table whose requests go to `endpoint` (a fault-injecting proxy)
/// and whose SDK gives an attempt up after `attempt_timeout` and sends it again at once (three
/// attempts in all): a request the proxy holds is then sent again, and the held one, delivered
/// later, lands late.
pub fn client_with_attempt_timeout(endpoint: &str, attempt_timeout: Duration) -> LockClient {
    use aws_sdk_dynamodb::config::retry::RetryConfig;
    use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
    let dynamodb = crate::endpoint::dynamodb_with(endpoint, |config| {
        config
            .retry_config(RetryConfig::standard().with_max_attempts(3))
            .timeout_config(
                TimeoutConfig::builder()
                    .operation_attempt_timeout(attempt_timeout)
                    .build(),
            )
    });
    builder(dynamodb).build().expect("valid settings")
}

/// A lock client of the shared table whose requests go to `endpoint` (a fault-injecting proxy)
/// and are never retried by the SDK: a failed request is the call's error.
pub fn client_without_retries(endpoint: &str) -> LockClient {
    let dynamodb = crate::endpoint::dynamodb_with(endpoint, |config| {
        config.retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
    });
    builder(dynamodb).build().expect("valid settings")
}

/// A builder for a client of the shared table whose requests go to `endpoint` and are retried
/// quickly by the SDK ([`quickly_retrying_dynamodb`]).
fn quickly_retrying_builder(endpoint: &str) -> LockClientBuilder {
    builder(quickly_retrying_dynamodb(endpoint))
}

/// A client of the shared table at `endpoint` (a proxy's, say), with the SDK's default retries.
pub fn client_at(endpoint: &str) -> LockClient {
    builder(crate::endpoint::dynamodb_at(endpoint))
        .build()
        .expect("a client")
}

/// [`client_at`], keeping lock items on release (`delete_on_release(false)`).
pub fn keeping_client_at(endpoint: &str) -> LockClient {
    builder(crate::endpoint::dynamodb_at(endpoint))
        .delete_on_release(false)
        .build()
        .expect("a client")
}

/// A lock client of the shared table through `proxy`, whose requests the SDK retries quickly,
/// on `clock` if given.
pub fn client_through(proxy: &Proxy, clock: Option<Arc<AdjustableClock>>) -> LockClient {
    let builder = quickly_retrying_builder(&proxy.endpoint());
    match clock {
        Some(clock) => builder.clock(clock),
        None => builder,
    }
    .build()
    .expect("valid settings")
}

/// Options of a guard's acquisition: `owner`, a lease of `lease_ms` and a heartbeat every
/// `heartbeat_ms`.
pub fn guard_options(owner: &str, lease_ms: u64, heartbeat_ms: u64) -> AcquireOptions {
    AcquireOptions::new()
        .owner(owner)
        .lease(Duration::from_millis(lease_ms))
        .heartbeat(Duration::from_millis(heartbeat_ms))
}

/// Options of a reader: a shared hold for `owner`, with a lease of a minute.
pub fn reader_options(owner: &str) -> AcquireOptions {
    writer_options(owner).mode(ddb_lock::Mode::Shared)
}

/// Options of a writer: an exclusive acquisition for `owner`, with a lease of a minute.
pub fn writer_options(owner: &str) -> AcquireOptions {
    AcquireOptions::new()
        .owner(owner)
        .lease(Duration::from_secs(60))
}

/// What `watch.lost()` answers right now, without waiting: `None` if it would wait.
pub async fn lost_now(watch: &LockWatch) -> Option<LockLost> {
    tokio::select! {
        biased;
        lost = watch.lost() => Some(lost),
        () = std::future::ready(()) => None,
    }
}

/// Takes the free lock on `resource` for `owner` with `lease`, failing the test if it is held.
pub async fn hold(client: &LockClient, resource: &str, owner: &str, lease: Duration) -> Lock {
    client
        .try_acquire(resource, &AcquireOptions::new().owner(owner).lease(lease))
        .await
        .expect("try_acquire")
        .unwrap_or_else(|| panic!("{resource} should have been free for {owner}"))
}

/// Releases everything `client` holds ([`LockClient::release_all`]) and asserts that it released
/// the lock `lock_id` (`context` names the case in a failure).
pub async fn assert_release_all_releases(
    client: &LockClient,
    lock_id: ddb_lock::LockId,
    context: &str,
) {
    let ended = client.release_all().await;
    assert!(
        ended
            .iter()
            .any(|(handle, outcome)| handle.lock_id() == lock_id
                && matches!(outcome, Ok(ddb_lock::ReleaseOutcome::Released))),
        "{context}: release_all did not end the hold: {ended:?}"
    );
}

/// A resource name no other test uses.
pub fn unique(name: &str) -> String {
    format!("{name}-{}", uuid::Uuid::new_v4())
}

/// Shows the library's tracing output for failing tests (`RUST_LOG=ddb_lock=debug`).
fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}
