//! A single-table design keyed `pk`/`sk`, lock items under a sort-key value of their own.

use ddb_lock::TableSchema;
use ddb_lock_test_kit::schemas::every_operation_on;

#[tokio::test]
async fn every_operation_works_on_lowercase_pk_and_sk_with_a_custom_sort_value() {
    let schema = TableSchema::new()
        .partition_key("pk")
        .sort_key("sk", "META#LOCK")
        .fence_sort_key_value("META#FENCE")
        .key_prefix("RESOURCE#")
        .ttl_attribute("expires");
    every_operation_on("ddb-lock-schema-lowercase", schema).await;
}
