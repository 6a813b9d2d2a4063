//! The demo of `scripts/demo.sh`: N instances of the real Lambda function (`bootstrap`) behind a
//! local Runtime API, and N sagas contending for one resource through them. Each saga invokes
//! `try_acquire` (to show `LockHeld`), then `acquire`, works, and `release`s.
//!
//! ```text
//! saga_demo BOOTSTRAP_PATH [SAGAS] [WORK_MS]
//! ```
//! Needs `DYNAMODB_ENDPOINT`; creates the table `ddb-lock-demo` there.

use ddb_lock_test_kit::runtime_api::{FunctionProcess, Outcome, RuntimeApi};
use ddb_lock_test_kit::{dynamodb, endpoint, ensure_table, TableKind};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

const TABLE: &str = "ddb-lock-demo";

struct Hold {
    saga: String,
    asked: Duration,
    entered: Duration,
    left: Duration,
    attempts: u64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let bootstrap = args
        .next()
        .ok_or("usage: saga_demo BOOTSTRAP_PATH [SAGAS] [WORK_MS]")?;
    let sagas: usize = args.next().map_or(Ok(4), |a| a.parse())?;
    let work = Duration::from_millis(args.next().map_or(Ok(200), |a| a.parse())?);

    ensure_table(&dynamodb(), TABLE, TableKind::Locks).await;
    let api = Arc::new(RuntimeApi::start().await);
    let spawned = Instant::now();
    let _instances: Vec<FunctionProcess> = (0..sagas)
        .map(|_| FunctionProcess::spawn(&bootstrap, &api, &endpoint(), TABLE, &[]))
        .collect();
    api.wait_for_polls(sagas).await;
    let ready = spawned.elapsed();
    api.invoke(&json!({"op": "status", "resource": "demo/warm-up"}))
        .await
        .response();
    println!(
        "{sagas} Lambda instances of {bootstrap}: ready {} ms after start, first invocation \
         answered {} ms after start (cold start)",
        ready.as_millis(),
        spawned.elapsed().as_millis()
    );

    let resource = format!("demo/invoice-{}", uuid::Uuid::new_v4().simple());
    println!("{sagas} sagas contend for `{resource}`; each works {work:?} while holding it\n");
    let start = Instant::now();
    let runs: Vec<_> = (1..=sagas)
        .map(|n| {
            let (api, resource) = (Arc::clone(&api), resource.clone());
            tokio::spawn(async move {
                let saga = format!("saga-{n}");
                let event = |op: &str| json!({"op": op, "resource": resource, "owner": saga});
                let tried = match api.invoke(&event("try_acquire")).await {
                    Outcome::Response(_) => "acquired".to_owned(),
                    Outcome::Error { error_type, .. } => error_type,
                };
                let at = start.elapsed().as_secs_f64();
                println!("  {at:>7.3}s  {saga:<8} try_acquire → {tried}");
                // Acquire is idempotent per owner: a saga that already holds the lock gets it back.
                let asked = start.elapsed();
                let mut acquire = event("acquire");
                acquire["wait_ms"] = json!(60_000);
                let lock = match api.invoke(&acquire).await {
                    Outcome::Response(lock) => lock,
                    Outcome::Error { error_type, error_message } => {
                        return Err(format!("{saga}: {error_type}: {error_message}"));
                    }
                };
                let entered = start.elapsed();
                let attempts = lock["attempts"].as_u64().unwrap_or_default();
                println!(
                    "  {:>7.3}s  {saga:<8} acquire     → acquired after {} ms, {attempts} attempt(s)",
                    entered.as_secs_f64(),
                    (entered - asked).as_millis()
                );
                tokio::time::sleep(work).await; // the saga's protected step
                let left = start.elapsed();
                let mut release = event("release");
                release["lock_id"] = lock["lock_id"].clone();
                let released = api.invoke(&release).await;
                println!("  {:>7.3}s  {saga:<8} release     → {}", left.as_secs_f64(), match &released {
                    Outcome::Response(r) => format!("released: {}", r["released"]),
                    Outcome::Error { error_type, .. } => error_type.clone(),
                });
                Ok(Hold { saga, asked, entered, left, attempts })
            })
        })
        .collect();
    let mut holds = Vec::new();
    for run in runs {
        holds.push(run.await??);
    }
    holds.sort_by_key(|h| h.entered);
    println!("\n  holder    asked at  held from → to      waited ms  attempts");
    for h in &holds {
        println!(
            "  {:<8} {:>8.3}s  {:>7.3}s → {:>7.3}s  {:>9}  {:>8}",
            h.saga,
            h.asked.as_secs_f64(),
            h.entered.as_secs_f64(),
            h.left.as_secs_f64(),
            (h.entered - h.asked).as_millis(),
            h.attempts
        );
    }
    let overlaps = holds
        .windows(2)
        .filter(|w| w[0].left >= w[1].entered)
        .count();
    println!(
        "\n{} sagas held `{resource}` one at a time; overlapping holds: {overlaps}",
        holds.len()
    );
    if overlaps > 0 {
        return Err("mutual exclusion violated".into());
    }
    Ok(())
}
