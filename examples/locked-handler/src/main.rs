//! An order-fulfilment Lambda whose handler runs under a lock per order: two invocations for the
//! same `order_id` never run at once; the second one fails with `LOCK_ACQUISITION_FAILED`.
//!
//! Event: `{"order_id": "o-17", "work_ms": 200}` (`work_ms`, optional, stands for the time the
//! fulfilment takes). Answer: `{"result": {...}, "extensions": [{"urn": "urn:forrst:ext:atomicLock",
//! "data": {"key", "acquired", "owner", "scope", "expires_at", "full_key"}}]}`.
//!
//! The same function answers the atomic lock's system functions,
//! `{"function": "urn:cline:forrst:ext:atomic-lock:fn:status", "arguments": {"key": "lock:<function>:o-17"}}`
//! (release and force-release too; a release of a lock released already answers
//! `LOCK_ALREADY_RELEASED` for a day). A real deployment would serve force-release from a
//! separately permissioned function.
//!
//! Configuration: `DDB_LOCK_TABLE` names the lock table; the DynamoDB endpoint, region and
//! credentials come from the AWS SDK's usual sources.

// The runtime's future nests the layer's, the handler's and the AWS SDK's deep futures.
#![recursion_limit = "256"]

use ddb_lock::LockClient;
use ddb_lock_layer::{current_lock, LockLayer, SystemFunctions};
use lambda_runtime::{service_fn, Diagnostic, Error, LambdaEvent};
use serde_json::{json, Value};
use std::time::Duration;
use tower::{Layer, ServiceExt};

/// The business handler: knows nothing of locks but what `current_lock` tells it.
async fn fulfil(event: LambdaEvent<Value>) -> Result<Value, Error> {
    let work = event.payload["work_ms"].as_u64().unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(work)).await;
    let lock = current_lock().ok_or("fulfil runs under the order's lock")?;
    Ok(json!({"order_id": event.payload["order_id"], "fulfilled": true, "lock_owner": lock.owner}))
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let table =
        std::env::var("DDB_LOCK_TABLE").map_err(|_| "DDB_LOCK_TABLE must name the lock table")?;
    let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    // A released order lock is remembered for a day (then the table's TTL deletes it), so that a
    // release that comes late answers LOCK_ALREADY_RELEASED rather than LOCK_NOT_FOUND.
    let client = LockClient::builder(aws_sdk_dynamodb::Client::new(&aws))
        .table_name(table)
        .keep_released_for(Duration::from_secs(24 * 3600))
        .build()?;
    let orders = LockLayer::builder(client.clone())
        .key_pointer("/order_id")
        .ttl(Duration::from_secs(30))
        .build()?
        .layer(service_fn(fulfil));
    let system = SystemFunctions::new(client);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| {
        let (orders, system) = (orders.clone(), system.clone());
        async move {
            if SystemFunctions::is_call(&event.payload) {
                return system.call(&event.payload).await.map_err(Diagnostic::from);
            }
            let locked = orders.oneshot(event).await.map_err(Diagnostic::from)?;
            serde_json::to_value(locked).map_err(|err| Diagnostic::from(err.to_string()))
        }
    }))
    .await
}
