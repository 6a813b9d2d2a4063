//! Two nodes run the same scheduled job, every 2 seconds, for 3 ticks: each tick runs once, on
//! whichever node takes its lock first.
//!
//! ```text
//! cargo run -p ddb-lock --example scheduled_job            # two nodes in this process
//! cargo run -p ddb-lock --example scheduled_job -- node-a  # one node: run it in two shells
//! ```
//!
//! With `DYNAMODB_ENDPOINT` set (as `scripts/demo.sh` does) it talks to that endpoint with dummy
//! credentials; otherwise to DynamoDB with your AWS configuration. The table is `ddb-lock-demo`
//! (created if missing; override with `DDB_LOCK_TABLE`).

use ddb_lock::{DynamoDbBackend, LockClient, ScheduledJob, Scheduler, TickOutcome};
use std::sync::Arc;
use std::time::Duration;

const PERIOD: Duration = Duration::from_secs(2);
const TICKS: u64 = 3;

/// One node: its own lock client (as a process of its own has), running TICKS ticks.
async fn node(name: String, table: String) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let dynamodb = match std::env::var("DYNAMODB_ENDPOINT") {
        Ok(endpoint) => ddb_lock_test_kit::dynamodb_at(&endpoint),
        Err(_) => aws_sdk_dynamodb::Client::new(&aws_config::load_from_env().await),
    };
    let client = LockClient::builder(dynamodb)
        .table_name(&table)
        .owner(&name)
        .build()?;
    client.create_table().await?;
    let scheduler = Scheduler::new(Some(Arc::new(DynamoDbBackend::new(client))));
    let job = ScheduledJob::every("demo-report", PERIOD).expected_run(Duration::from_millis(200));
    let first = scheduler.current_tick(&job) + 1;
    for tick in first..first + TICKS {
        let start = job.tick_start(tick);
        let wait = (start - chrono::Utc::now()).to_std().unwrap_or_default();
        tokio::time::sleep(wait).await;
        let outcome = scheduler
            .run_tick(&job, tick, || {
                tokio::time::sleep(Duration::from_millis(100))
            })
            .await?;
        match outcome {
            TickOutcome::Ran { ran_for, .. } => {
                println!("{name}: tick {tick} ran here ({} ms)", ran_for.as_millis())
            }
            TickOutcome::Skipped => println!("{name}: tick {tick} runs on another node"),
            other => println!("{name}: tick {tick}: {other:?}"),
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let table = std::env::var("DDB_LOCK_TABLE").unwrap_or_else(|_| "ddb-lock-demo".into());
    match std::env::args().nth(1) {
        Some(name) => node(name, table).await,
        None => {
            let (a, b) = tokio::join!(
                node("node-a".into(), table.clone()),
                node("node-b".into(), table)
            );
            a.and(b)
        }
    }
}
