//! Creating the lock table and checking an existing one.

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
    TimeToLiveSpecification, TimeToLiveStatus,
};
use ddb_lock::{AcquireOptions, Error, LockClient, TableProblem, TableSchema};
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

/// Enables TTL on `attribute`.
async fn enable_ttl(table: &str, attribute: &str) {
    dynamodb()
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .enabled(true)
                .attribute_name(attribute)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
}

/// The differences a mismatch lists, as text.
fn differences(problem: &TableProblem) -> Vec<String> {
    match problem {
        TableProblem::Mismatch { differences } => {
            differences.iter().map(ToString::to_string).collect()
        }
        other => panic!("expected a mismatch, got {other:?}"),
    }
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
        differences(&found),
        [
            "partition key: expected `PK` (S), found `id` (S)",
            "sort key: expected `SK` (S), found none",
            "time to live: expected enabled on `TTL`, found DISABLED",
        ],
        "{found}"
    );
    assert!(matches!(
        problem(client.create_table().await),
        TableProblem::Mismatch { .. }
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
    assert_eq!(
        differences(&problem(client.check_table().await)),
        ["time to live: expected enabled on `TTL`, found DISABLED"]
    );
    client.create_table().await.unwrap();
    client.check_table().await.unwrap();
}

#[tokio::test]
async fn check_table_names_every_difference_from_a_custom_schema() {
    let table = fresh_table();
    create_raw_table(&table, &[("PK", KeyType::Hash), ("SK", KeyType::Range)]).await;
    enable_ttl(&table, "TTL").await;
    let schema = TableSchema::new()
        .partition_key("pk")
        .sort_key("sk", "LOCK")
        .ttl_attribute("expires");
    let client = builder(dynamodb())
        .table_name(&table)
        .schema(schema)
        .build()
        .unwrap();
    assert_eq!(
        differences(&problem(client.check_table().await)),
        [
            "partition key: expected `pk` (S), found `PK` (S)",
            "sort key: expected `sk` (S), found `SK` (S)",
            "time to live: expected enabled on `expires`, found enabled on `TTL`",
        ]
    );
}

#[tokio::test]
async fn a_table_with_a_sort_key_is_not_a_partition_key_only_table() {
    let table = fresh_table();
    create_raw_table(&table, &[("id", KeyType::Hash), ("sk", KeyType::Range)]).await;
    let client = builder(dynamodb())
        .table_name(&table)
        .schema(
            TableSchema::new()
                .partition_key("id")
                .without_sort_key()
                .without_ttl(),
        )
        .build()
        .unwrap();
    assert_eq!(
        differences(&problem(client.check_table().await)),
        ["sort key: expected none, found `sk` (S)"]
    );
}

#[tokio::test]
async fn create_table_makes_what_a_custom_schema_describes() {
    let schemas = [
        TableSchema::new()
            .partition_key("pk")
            .sort_key("sk", "LOCK")
            .ttl_attribute("ttl"),
        TableSchema::new()
            .partition_key("id")
            .without_sort_key()
            .without_ttl(),
    ];
    for schema in schemas {
        let table = fresh_table();
        let client = builder(dynamodb())
            .table_name(&table)
            .schema(schema.clone())
            .build()
            .unwrap();
        client.create_table().await.unwrap();
        client.check_table().await.unwrap();
        let described = dynamodb()
            .describe_table()
            .table_name(&table)
            .send()
            .await
            .unwrap();
        let keys: Vec<(String, KeyType)> = described
            .table()
            .unwrap()
            .key_schema()
            .iter()
            .map(|k| (k.attribute_name().to_owned(), k.key_type().clone()))
            .collect();
        let mut expected = vec![(schema.partition_key_name().to_owned(), KeyType::Hash)];
        expected.extend(
            schema
                .sort_key_name()
                .map(|sk| (sk.to_owned(), KeyType::Range)),
        );
        assert_eq!(keys, expected);
        let ttl = ttl_of(&table).await;
        match schema.ttl_attribute_name() {
            Some(name) => assert_eq!(ttl, (Some(name.to_owned()), true)),
            None => assert!(!ttl.1, "no TTL asked for, none enabled: {ttl:?}"),
        }
    }
}

/// The local engine cannot make a global table: `UpdateTable` with `ReplicaUpdates` is refused as
/// "Nothing to update" and DescribeTable reports no replicas. So the refusal of a table with
/// replicas is tested on DescribeTable's answer (unit tests of `ops/table.rs`), and here only that
/// a table without replicas passes under either policy. If this test fails, the engine has learnt
/// replicas: test the refusal against it.
#[tokio::test]
async fn the_local_engine_makes_no_replicas_and_a_plain_table_passes_under_either_policy() {
    use aws_sdk_dynamodb::types::{CreateReplicationGroupMemberAction, ReplicationGroupUpdate};
    use ddb_lock::GlobalTables;

    let table = fresh_table();
    client_for(&table).create_table().await.unwrap();
    let replica = ReplicationGroupUpdate::builder()
        .create(
            CreateReplicationGroupMemberAction::builder()
                .region_name("eu-west-1")
                .build()
                .unwrap(),
        )
        .build();
    let update = dynamodb()
        .update_table()
        .table_name(&table)
        .replica_updates(replica)
        .send()
        .await;
    let refused = update.expect_err("the local engine adds no replica");
    assert_eq!(
        refused.as_service_error().and_then(|e| e.meta().message()),
        Some("Nothing to update"),
        "{refused:?}"
    );
    let described = dynamodb()
        .describe_table()
        .table_name(&table)
        .send()
        .await
        .unwrap();
    assert!(described.table().unwrap().replicas().is_empty());

    for policy in [GlobalTables::Refuse, GlobalTables::WritesThroughOneRegion] {
        let client = builder(dynamodb())
            .table_name(&table)
            .global_tables(policy)
            .build()
            .unwrap();
        client.check_table().await.unwrap();
    }
}
