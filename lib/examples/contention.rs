//! N workers contend for one resource: each takes the lock, holds it for a while, releases it.
//! Prints who waited, who held, for how long, and checks that no two holds overlapped.
//!
//! ```text
//! cargo run -p ddb-lock --example contention -- [WORKERS] [HOLD_MS]
//! ```
//!
//! With `DYNAMODB_ENDPOINT` set (as `scripts/demo.sh` does) it talks to that endpoint with dummy
//! credentials (the test kit's SDK client for a local endpoint); otherwise to DynamoDB with your AWS
//! configuration. The table is `ddb-lock-demo` (created if missing; override with `DDB_LOCK_TABLE`).

use ddb_lock::{AcquireOptions, LockClient, ReleaseOutcome};
use std::time::Duration;
use tokio::time::Instant;

struct Turn {
    worker: String,
    waited: Duration,
    entered: Duration,
    left: Duration,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let workers: usize = args.next().map_or(Ok(5), |a| a.parse())?;
    let hold = Duration::from_millis(args.next().map_or(Ok(200), |a| a.parse())?);
    let table = std::env::var("DDB_LOCK_TABLE").unwrap_or_else(|_| "ddb-lock-demo".into());

    // A local endpoint (dummy credentials) if DYNAMODB_ENDPOINT names one, else your AWS setup.
    let dynamodb = match std::env::var("DYNAMODB_ENDPOINT") {
        Ok(endpoint) => ddb_lock_test_kit::dynamodb_at(&endpoint),
        Err(_) => aws_sdk_dynamodb::Client::new(&aws_config::load_from_env().await),
    };
    let client = LockClient::builder(dynamodb).table_name(&table).build()?;
    client.create_table().await?;

    let resource = format!("demo/report-{}", uuid::Uuid::new_v4().simple());
    println!(
        "{workers} workers contend for `{resource}` in table `{table}`, each holding it {hold:?}\n"
    );
    let start = Instant::now();
    let tasks: Vec<_> = (1..=workers)
        .map(|n| {
            let (client, resource) = (client.clone(), resource.clone());
            tokio::spawn(async move {
                let worker = format!("worker-{n}");
                let opts = AcquireOptions::new()
                    .owner(&worker)
                    .lease(Duration::from_secs(10))
                    .timeout(Duration::from_secs(60));
                let asked = start.elapsed();
                let lock = client.acquire(&resource, &opts).await?;
                let entered = start.elapsed();
                println!(
                    "  {:>7.3}s  {worker:<10} acquired after waiting {:>5} ms",
                    entered.as_secs_f64(),
                    (entered - asked).as_millis()
                );
                tokio::time::sleep(hold).await; // the critical section's work
                let left = start.elapsed();
                let outcome = client.release(&lock).await?;
                println!(
                    "  {:>7.3}s  {worker:<10} released after holding {:>5} ms",
                    left.as_secs_f64(),
                    (left - entered).as_millis()
                );
                if outcome != ReleaseOutcome::Released {
                    return Err(format!("{worker}: release found {outcome:?}").into());
                }
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(Turn {
                    worker,
                    waited: entered - asked,
                    entered,
                    left,
                })
            })
        })
        .collect();

    let mut turns = Vec::new();
    for task in tasks {
        turns.push(task.await?.map_err(|e| e.to_string())?);
    }
    turns.sort_by_key(|t| t.entered);
    println!("\n  order  worker      waited ms  held ms");
    for (i, t) in turns.iter().enumerate() {
        println!(
            "  {:>5}  {:<10} {:>10} {:>8}",
            i + 1,
            t.worker,
            t.waited.as_millis(),
            (t.left - t.entered).as_millis()
        );
    }
    let overlaps = turns
        .windows(2)
        .filter(|w| w[0].left >= w[1].entered)
        .count();
    let total = start.elapsed();
    let busy: Duration = turns.iter().map(|t| t.left - t.entered).sum();
    println!(
        "\n{} acquisitions in {:.2}s, lock busy {:.0}% of the time, overlapping holds: {overlaps}",
        turns.len(),
        total.as_secs_f64(),
        100.0 * busy.as_secs_f64() / total.as_secs_f64()
    );
    if overlaps > 0 {
        return Err("mutual exclusion violated".into());
    }
    Ok(())
}
