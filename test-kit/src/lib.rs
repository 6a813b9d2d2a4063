//! Shared fixtures of the integration tests: a DynamoDB client for the local endpoint named by
//! `DYNAMODB_ENDPOINT` (set by `scripts/test.sh`), the lock table, unique resource names, a fixed
//! clock, and a fault-injecting TCP proxy.

pub mod events;
pub mod proxy;
pub mod runtime_api;

use aws_sdk_dynamodb::config::{Credentials, Region};
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use ddb_lock::{AcquireOptions, Clock, Lock, LockClient, LockClientBuilder};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// The lock table every lock test shares; tests stay apart by resource name.
pub const TABLE: &str = "ddb-lock-integration";

/// The endpoint under test.
pub fn endpoint() -> String {
    std::env::var("DYNAMODB_ENDPOINT").expect(
        "DYNAMODB_ENDPOINT is not set: run the tests through scripts/test.sh, or start an endpoint \
         with scripts/dynamodb-local.sh start and export DYNAMODB_ENDPOINT",
    )
}

/// An SDK client for `endpoint` with dummy credentials, and the SDK's default retries.
pub fn dynamodb_at(endpoint: &str) -> aws_sdk_dynamodb::Client {
    dynamodb_with(endpoint, |b| b)
}

/// An SDK client for `endpoint`, further configured by `configure`.
pub fn dynamodb_with(
    endpoint: &str,
    configure: impl FnOnce(aws_sdk_dynamodb::config::Builder) -> aws_sdk_dynamodb::config::Builder,
) -> aws_sdk_dynamodb::Client {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version_latest()
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "tests"))
        .endpoint_url(endpoint);
    aws_sdk_dynamodb::Client::from_conf(configure(config).build())
}

/// A lock client of the shared table whose requests go to `endpoint` (a fault-injecting proxy)
/// and are retried quickly by the SDK: three attempts, 10 ms initial backoff.
pub fn quickly_retrying_client(endpoint: &str) -> LockClient {
    let dynamodb = dynamodb_with(endpoint, |config| {
        config.retry_config(
            aws_sdk_dynamodb::config::retry::RetryConfig::standard()
                .with_max_attempts(3)
                .with_initial_backoff(Duration::from_millis(10)),
        )
    });
    builder(dynamodb).build().expect("valid settings")
}

/// An SDK client for the endpoint under test.
pub fn dynamodb() -> aws_sdk_dynamodb::Client {
    dynamodb_at(&endpoint())
}

/// A builder for a client of the shared table.
pub fn builder(dynamodb: aws_sdk_dynamodb::Client) -> LockClientBuilder {
    init_tracing();
    LockClient::builder(dynamodb).table_name(TABLE)
}

/// A client of the shared table (created if missing), talking to the endpoint directly.
pub async fn lock_client() -> LockClient {
    let client = builder(dynamodb()).build().expect("valid settings");
    client.create_table().await.expect("lock table ready");
    client
}

/// Takes the free lock on `resource` for `owner` with `lease`, failing the test if it is held.
pub async fn hold(client: &LockClient, resource: &str, owner: &str, lease: Duration) -> Lock {
    client
        .try_acquire(resource, &AcquireOptions::new().owner(owner).lease(lease))
        .await
        .expect("try_acquire")
        .unwrap_or_else(|| panic!("{resource} should have been free for {owner}"))
}

/// The table of items written with fences by the tests (not a lock table): string hash key `id`.
pub const FENCED_TABLE: &str = "ddb-lock-fenced-writes";

/// Creates [`FENCED_TABLE`] if missing and waits until it is active.
pub async fn fenced_table() {
    use aws_sdk_dynamodb::operation::create_table::CreateTableError;
    use aws_sdk_dynamodb::types::{
        AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
        TableStatus,
    };
    let created = dynamodb()
        .create_table()
        .table_name(FENCED_TABLE)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("id")
                .attribute_type(ScalarAttributeType::S)
                .build()
                .expect("attribute definition"),
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name("id")
                .key_type(KeyType::Hash)
                .build()
                .expect("key schema"),
        )
        .send()
        .await;
    match created {
        Ok(_) => {}
        Err(err)
            if matches!(
                err.as_service_error(),
                Some(CreateTableError::ResourceInUseException(_))
            ) => {}
        Err(err) => panic!("CreateTable: {err:?}"),
    }
    for _ in 0..300 {
        let described = dynamodb()
            .describe_table()
            .table_name(FENCED_TABLE)
            .send()
            .await
            .expect("DescribeTable");
        if described.table().and_then(|t| t.table_status()) == Some(&TableStatus::Active) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{FENCED_TABLE} did not become active");
}

/// A timestamp as the lock item stores it.
pub fn stored(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A resource name no other test uses.
pub fn unique(name: &str) -> String {
    format!("{name}-{}", uuid::Uuid::new_v4())
}

/// The raw lock item of `resource` in the shared table, read strongly consistently.
pub async fn raw_item(resource: &str) -> Option<HashMap<String, AttributeValue>> {
    dynamodb()
        .get_item()
        .table_name(TABLE)
        .key("PK", AttributeValue::S(format!("LOCK#{resource}")))
        .key("SK", AttributeValue::S("LOCK".into()))
        .consistent_read(true)
        .send()
        .await
        .expect("GetItem")
        .item
}

/// A string attribute of an item.
pub fn string_attr<'a>(item: &'a HashMap<String, AttributeValue>, name: &str) -> &'a str {
    match item.get(name) {
        Some(AttributeValue::S(s)) => s,
        other => panic!("attribute {name} is {other:?}, expected a string"),
    }
}

/// A clock stopped at one instant.
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(pub DateTime<Utc>);

impl FixedClock {
    /// The clock as the trait object the builder takes.
    pub fn shared(at: DateTime<Utc>) -> Arc<dyn Clock> {
        Arc::new(FixedClock(at))
    }
}

impl Clock for FixedClock {
    fn now(&self) -> DateTime<Utc> {
        self.0
    }
}

/// A clock running a fixed offset from the system clock.
#[derive(Debug, Clone, Copy)]
pub struct OffsetClock(pub chrono::TimeDelta);

impl OffsetClock {
    /// The clock as the trait object the builder takes.
    pub fn shared(offset: chrono::TimeDelta) -> Arc<dyn Clock> {
        Arc::new(OffsetClock(offset))
    }
}

impl Clock for OffsetClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now() + self.0
    }
}

/// A clock running an adjustable offset from the system clock, shared by the clients given it:
/// [`advance`](Self::advance) makes time pass for them at once (leases expire with no sleep).
#[derive(Debug, Default)]
pub struct AdjustableClock {
    offset_ms: std::sync::atomic::AtomicI64,
}

impl AdjustableClock {
    /// A clock reading the system clock until advanced.
    pub fn new() -> Arc<AdjustableClock> {
        Arc::new(AdjustableClock::default())
    }

    /// Moves the clock `by` ahead, for every client that reads it.
    pub fn advance(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).expect("a test duration");
        self.offset_ms
            .fetch_add(ms, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Clock for AdjustableClock {
    fn now(&self) -> DateTime<Utc> {
        let offset = self.offset_ms.load(std::sync::atomic::Ordering::SeqCst);
        Utc::now() + chrono::TimeDelta::milliseconds(offset)
    }
}

/// The current `CLOCK_MONOTONIC` reading in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .expect("CLOCK_MONOTONIC is available");
    u64::try_from(now.tv_sec()).unwrap_or(0) * 1_000_000_000
        + u64::try_from(now.tv_nsec()).unwrap_or(0)
}

/// Shows the library's tracing output for failing tests (`RUST_LOG=ddb_lock=debug`).
fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}
