//! Creating the lock table and checking an existing one.

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
    TimeToLiveStatus,
};
use ddb_lock::{AcquireOptions, Error, LockClient, TableProblem};
use ddb_lock_test_kit::{builder, dynamodb};

fn client_for(table: &str) -> LockClient {
    builder(dynamodb()).table_name(table).build().unwrap()
}

fn fresh_table() -> String {
    format!("t-{}", uuid::Uuid::new_v4())
}

/// Creates a table with the given string keys (HASH first), and no TTL.
async fn create_raw_table(table: &str, keys: &[(&str, KeyType)]) {
    let mut request = dynamodb()
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest);
    for (name, key_type) in keys {
        request = request
            .attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name(*name)
                    .attribute_type(ScalarAttributeType::S)
                    .build()
                    .unwrap(),
            )
            .key_schema(
                KeySchemaElement::builder()
                    .attribute_name(*name)
                    .key_type(key_type.clone())
                    .build()
                    .unwrap(),
            );
    }
    request.send().await.unwrap();
}

/// The table's TTL attribute and whether TTL is on (enabled or enabling).
async fn ttl_of(table: &str) -> (Option<String>, bool) {
    let out = dynamodb()
        .describe_time_to_live()
        .table_name(table)
        .send()
        .await
        .unwrap();
    let description = out.time_to_live_description();
    let on = matches!(
        description.and_then(|d| d.time_to_live_status()),
        Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling)
    );
    (
        description
            .and_then(|d| d.attribute_name())
            .map(str::to_owned),
        on,
    )
}

fn problem(result: Result<(), Error>) -> TableProblem {
    match result {
        Err(Error::Table { problem, .. }) => problem,
        other => panic!("expected a table problem, got {other:?}"),
    }
}

#[tokio::test]
async fn create_table_makes_an_on_demand_table_with_ttl_that_passes_the_check() {
    let table = fresh_table();
    let client = client_for(&table);
    client.create_table().await.unwrap();
    client.check_table().await.unwrap();

    let described = dynamodb()
        .describe_table()
        .table_name(&table)
        .send()
        .await
        .unwrap();
    let description = described.table().unwrap();
    assert_eq!(
        description
            .billing_mode_summary()
            .and_then(|b| b.billing_mode()),
        Some(&BillingMode::PayPerRequest)
    );
    assert_eq!(ttl_of(&table).await, (Some("TTL".to_owned()), true));
    assert!(client
        .try_acquire("r", &AcquireOptions::new())
        .await
        .unwrap()
        .is_some());
}

#[tokio::test]
async fn create_table_is_safe_from_several_processes_at_once() {
    let table = fresh_table();
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let client = client_for(&table);
            tokio::spawn(async move { client.create_table().await })
        })
        .collect();
    for task in tasks {
        task.await
            .unwrap()
            .expect("every concurrent create_table succeeds");
    }
}

#[tokio::test]
async fn check_table_reports_a_missing_table() {
    let client = client_for(&fresh_table());
    assert_eq!(problem(client.check_table().await), TableProblem::Missing);
}

#[tokio::test]
async fn check_table_reports_a_wrong_key_schema_and_create_table_leaves_it_alone() {
    let table = fresh_table();
    create_raw_table(&table, &[("id", KeyType::Hash)]).await;
    let client = client_for(&table);
    let found = problem(client.check_table().await);
    assert_eq!(
        found,
        TableProblem::KeySchema {
            found: "id (HASH, S)".into()
        }
    );
    assert!(found
        .to_string()
        .contains("expected PK (HASH, S) + SK (RANGE, S)"));
    assert!(matches!(
        problem(client.create_table().await),
        TableProblem::KeySchema { .. }
    ));
    assert!(
        !ttl_of(&table).await.1,
        "a foreign table's TTL must not be touched"
    );
}

#[tokio::test]
async fn check_table_reports_disabled_ttl_and_create_table_enables_it() {
    let table = fresh_table();
    create_raw_table(&table, &[("PK", KeyType::Hash), ("SK", KeyType::Range)]).await;
    let client = client_for(&table);
    assert!(matches!(
        problem(client.check_table().await),
        TableProblem::TtlDisabled { .. }
    ));
    client.create_table().await.unwrap();
    client.check_table().await.unwrap();
}
