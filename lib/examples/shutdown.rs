//! A worker that keeps its progress in the lock item and gives every lock back on shutdown.
//!
//! ```text
//! cargo run -p ddb-lock --example shutdown          # stops after its work, or on SIGTERM / Ctrl-C
//! ```
//!
//! The client keeps lock items on release (`delete_on_release(false)`): each run reads the cursor
//! the previous holder left in the item, works from it, and leaves the next one on release. On
//! SIGTERM (what ECS, Kubernetes and a Lambda extension's shutdown send) or Ctrl-C, or when the
//! work is done, `release_all` releases every lock the client holds, guards included, before the
//! process exits, so nobody waits for a lease to run out.
//!
//! With `DYNAMODB_ENDPOINT` set it talks to that endpoint with dummy credentials; otherwise to
//! DynamoDB with your AWS configuration. Table: `ddb-lock-demo` (override with `DDB_LOCK_TABLE`).

use ddb_lock::{AcquireOptions, LockClient, ReleaseOutcome};
use std::time::Duration;
use tokio::signal::unix::{signal, SignalKind};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // First: from here SIGTERM is ours to handle, not the end of the process.
    let mut terminate = signal(SignalKind::terminate())?;
    let table = std::env::var("DDB_LOCK_TABLE").unwrap_or_else(|_| "ddb-lock-demo".into());
    let dynamodb = match std::env::var("DYNAMODB_ENDPOINT") {
        Ok(endpoint) => ddb_lock_test_kit::dynamodb_at(&endpoint),
        Err(_) => aws_sdk_dynamodb::Client::new(&aws_config::load_from_env().await),
    };
    let client = LockClient::builder(dynamodb)
        .table_name(&table)
        .delete_on_release(false)
        .build()?;
    client.create_table().await?;

    // The shard's cursor survives from holder to holder in the kept item.
    let shard = client
        .acquire("demo/shard-7", &AcquireOptions::new())
        .await?;
    let cursor: u64 = shard
        .data()
        .and_then(|data| std::str::from_utf8(data).ok()?.parse().ok())
        .unwrap_or(0);
    println!("shard-7: resuming at row {cursor}");
    // A guard too: release_all stops its heartbeat and marks it released.
    let guard = client
        .lock(
            "demo/compaction",
            &AcquireOptions::new().lease(Duration::from_secs(6)),
        )
        .await?;

    let work = tokio::time::sleep(Duration::from_secs(2)); // stands in for the real work
    tokio::select! {
        _ = terminate.recv() => println!("SIGTERM: giving the locks back"),
        _ = tokio::signal::ctrl_c() => println!("Ctrl-C: giving the locks back"),
        () = work => println!("work done: giving the locks back"),
    }

    // The shard's release leaves the next cursor for the next holder; release_all takes the rest.
    let next = (cursor + 500).to_string();
    let outcome = client
        .release_and_replace_data(&shard, Some(next.into_bytes()))
        .await?;
    println!(
        "shard-7: {outcome:?}, next holder resumes at row {}",
        cursor + 500
    );
    for (lock, outcome) in client.release_all().await {
        let outcome = outcome?;
        println!("{}: {outcome:?}", lock.resource());
        assert_eq!(outcome, ReleaseOutcome::Released);
    }
    println!("guard still held: {}", guard.is_held());
    Ok(())
}
