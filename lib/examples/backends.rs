//! One job written against `LockBackend`, run on both backends: three "nodes" (tasks) start the
//! same nightly job at once and only one runs it, first on the in-memory backend, then on
//! DynamoDB.
//!
//! ```text
//! cargo run -p ddb-lock --example backends
//! ```
//!
//! With `DYNAMODB_ENDPOINT` set (as `scripts/demo.sh` does) the DynamoDB part talks to that
//! endpoint with dummy credentials; otherwise to DynamoDB with your AWS configuration. The table is
//! `ddb-lock-demo` (created if missing; override with `DDB_LOCK_TABLE`).

use ddb_lock::{BackendError, DynamoDbBackend, LockBackend, LockClient, MemoryBackend};
use std::sync::Arc;
use std::time::Duration;

/// Runs the job unless another node holds its lock; whether this node ran it.
async fn run_once(locks: &dyn LockBackend, job: &str, node: usize) -> Result<bool, BackendError> {
    let Some(lock) = locks.try_lock(job, Duration::from_secs(30)).await? else {
        println!("  node {node}: `{job}` is running elsewhere, skipped");
        return Ok(false);
    };
    println!(
        "  node {node}: runs `{job}` (fencing token {:?})",
        lock.fencing_token().map(|t| t.value())
    );
    tokio::time::sleep(Duration::from_millis(100)).await; // the job
    locks.renew(&lock).await?; // a long job renews while it runs
    locks.release(lock).await?;
    Ok(true)
}

/// Three nodes start `job` at once on `locks`; how many ran it.
async fn three_nodes(locks: Arc<dyn LockBackend>, job: &str) -> Result<usize, BackendError> {
    let nodes: Vec<_> = (1..=3)
        .map(|node| {
            let (locks, job) = (Arc::clone(&locks), job.to_owned());
            tokio::spawn(async move { run_once(locks.as_ref(), &job, node).await })
        })
        .collect();
    let mut ran = 0;
    for node in nodes {
        ran += usize::from(node.await.expect("node task")?);
    }
    Ok(ran)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let job = format!("nightly-report-{}", uuid::Uuid::new_v4().simple());

    println!("in-memory backend:");
    let ran = three_nodes(Arc::new(MemoryBackend::new()), &job).await?;
    println!("  ran {ran} time(s)\n");

    let table = std::env::var("DDB_LOCK_TABLE").unwrap_or_else(|_| "ddb-lock-demo".into());
    let dynamodb = match std::env::var("DYNAMODB_ENDPOINT") {
        Ok(endpoint) => ddb_lock_test_kit::dynamodb_at(&endpoint),
        Err(_) => aws_sdk_dynamodb::Client::new(&aws_config::load_from_env().await),
    };
    let client = LockClient::builder(dynamodb).table_name(&table).build()?;
    client.create_table().await?;
    println!("DynamoDB backend (table `{table}`):");
    let ran = three_nodes(Arc::new(DynamoDbBackend::new(client).fencing(true)), &job).await?;
    println!("  ran {ran} time(s)");
    Ok(())
}
