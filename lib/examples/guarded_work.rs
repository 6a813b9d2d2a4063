//! Long work under a guard, a scoped lock, and fenced writes: the three ways to hold a lock safely.
//!
//! ```text
//! cargo run -p ddb-lock --example guarded_work
//! ```
//!
//! With `DYNAMODB_ENDPOINT` set (as `scripts/demo.sh` does) it talks to that endpoint with dummy
//! credentials (the test kit's SDK client for a local endpoint); otherwise to DynamoDB with your AWS
//! configuration. The table is `ddb-lock-demo` (created if missing; override with `DDB_LOCK_TABLE`).
//! The fenced writes go to an item of the same table (`PK = ACCOUNT#<id>`, `SK = DATA`), standing
//! in for your own data.

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use ddb_lock::{AcquireOptions, Error, FencedWrite, LockClient};
use std::time::Duration;

/// Work longer than the lease: the guard extends it, and the loop stops if the lock is lost.
async fn reindex(client: &LockClient, resource: &str) -> Result<(), Error> {
    let opts = AcquireOptions::new()
        .lease(Duration::from_secs(3))
        .heartbeat(Duration::from_secs(1));
    let guard = client.lock(resource, &opts).await?;
    for batch in 1..=5 {
        if !guard.is_held() {
            let reason = Box::new(guard.lost().await);
            return Err(Error::Lost {
                resource: resource.to_owned(),
                reason,
            });
        }
        tokio::time::sleep(Duration::from_secs(1)).await; // one batch of work
        let progress = format!("{{\"batch\":{batch}}}");
        guard.replace_data(Some(progress.into_bytes())).await?; // visible in status
        println!(
            "  batch {batch} done, lock held until {}",
            guard.lock().map(|l| l.expires_at()).unwrap_or_default()
        );
    }
    println!("  released: {:?}", guard.release().await?);
    Ok(())
}

/// A scoped lock: released after Ok, after Err and after a panic.
async fn settle(client: &LockClient, resource: &str) -> Result<u32, Error> {
    client
        .with_lock(resource, &AcquireOptions::new(), |watch| async move {
            assert!(watch.is_held());
            Ok(42)
        })
        .await
}

/// A fenced write: the item refuses a token lower than the highest that has written it.
async fn deposit(
    dynamodb: &aws_sdk_dynamodb::Client,
    table: &str,
    account: &str,
    lock: &ddb_lock::Lock,
    amount: u32,
) -> Result<bool, Box<dyn std::error::Error>> {
    let token = lock.fencing_token().ok_or("acquire with fencing(true)")?;
    let written = FencedWrite::new(token)
        .update(
            dynamodb
                .update_item()
                .table_name(table)
                .key("PK", AttributeValue::S(format!("ACCOUNT#{account}")))
                .key("SK", AttributeValue::S("DATA".into()))
                .update_expression("SET Balance = :amount")
                .expression_attribute_values(":amount", AttributeValue::N(amount.to_string())),
        )
        .send()
        .await;
    match written {
        Ok(_) => Ok(true),
        Err(err)
            if matches!(
                err.as_service_error(),
                Some(UpdateItemError::ConditionalCheckFailedException(_))
            ) =>
        {
            Ok(false) // a newer holder has written: we were fenced out
        }
        Err(err) => Err(err.into()),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let table = std::env::var("DDB_LOCK_TABLE").unwrap_or_else(|_| "ddb-lock-demo".into());
    // A local endpoint (dummy credentials) if DYNAMODB_ENDPOINT names one, else your AWS setup.
    let dynamodb = match std::env::var("DYNAMODB_ENDPOINT") {
        Ok(endpoint) => ddb_lock_test_kit::dynamodb_at(&endpoint),
        Err(_) => aws_sdk_dynamodb::Client::new(&aws_config::load_from_env().await),
    };
    let client = LockClient::builder(dynamodb.clone())
        .table_name(&table)
        .build()?;
    client.create_table().await?;
    let run = uuid::Uuid::new_v4().simple().to_string();

    println!("A guard holds a 3 s lease through 5 s of work:");
    reindex(&client, &format!("demo/reindex-{run}")).await?;

    println!(
        "with_lock: {}",
        settle(&client, &format!("demo/ledger-{run}")).await?
    );

    println!("Fencing:");
    let resource = format!("demo/account-{run}");
    let fenced = AcquireOptions::new()
        .fencing(true)
        .lease(Duration::from_secs(60));
    let old = client.acquire(&resource, &fenced).await?;
    println!(
        "  old holder, token {:?}: write accepted = {}",
        old.fencing_token(),
        deposit(&dynamodb, &table, &run, &old, 10).await?
    );
    client.force_release(&resource).await?; // the old holder is paused, say, and loses the lock
    let new = client.acquire(&resource, &fenced).await?;
    println!(
        "  new holder, token {:?}: write accepted = {}",
        new.fencing_token(),
        deposit(&dynamodb, &table, &run, &new, 20).await?
    );
    println!(
        "  old holder, late:         write accepted = {}",
        deposit(&dynamodb, &table, &run, &old, 30).await?
    );
    client.release(&new).await?;
    Ok(())
}
