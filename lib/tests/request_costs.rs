//! The mutex keeps its cost on every schema and either release mode: one request to acquire and
//! one to release, uncontended, counted by a proxy in front of the local endpoint.

use ddb_lock::{AcquireOptions, ReleaseOutcome, TableSchema};
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::schemas::schema_client;
use ddb_lock_test_kit::{builder, dynamodb_at, endpoint, unique};

/// Tables and schemas, as the schema tests name them.
fn schemas() -> Vec<(&'static str, TableSchema)> {
    vec![
        ("ddb-lock-integration", TableSchema::new()),
        (
            "ddb-lock-schema-lowercase",
            TableSchema::new()
                .partition_key("pk")
                .sort_key("sk", "META#LOCK")
                .fence_sort_key_value("META#FENCE")
                .key_prefix("RESOURCE#")
                .ttl_attribute("expires"),
        ),
        (
            "ddb-lock-schema-id-only",
            TableSchema::new().partition_key("id").without_sort_key(),
        ),
        ("ddb-lock-schema-no-ttl", TableSchema::new().without_ttl()),
    ]
}

#[tokio::test]
async fn acquire_and_release_cost_one_request_each_on_every_schema_and_release_mode() {
    let proxy = Proxy::start(&endpoint()).await;
    for (table, schema) in schemas() {
        schema_client(table, schema.clone()).await; // the table, made and checked directly
        for delete_on_release in [true, false] {
            let client = builder(dynamodb_at(&proxy.endpoint()))
                .table_name(table)
                .schema(schema.clone())
                .delete_on_release(delete_on_release)
                .build()
                .unwrap();
            let resource = unique("costs/mutex");
            for round in 0..3 {
                let before = proxy.total_requests();
                let lock = client
                    .try_acquire(&resource, &AcquireOptions::new())
                    .await
                    .unwrap()
                    .expect("free");
                let acquired = proxy.total_requests();
                assert_eq!(
                    client.release(&lock).await.unwrap(),
                    ReleaseOutcome::Released
                );
                let released = proxy.total_requests();
                let case =
                    format!("{table}, delete_on_release({delete_on_release}), round {round}");
                assert_eq!(acquired - before, 1, "{case}: acquire");
                assert_eq!(released - acquired, 1, "{case}: release");
            }
        }
    }
}
