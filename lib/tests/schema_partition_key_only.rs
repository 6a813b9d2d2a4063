//! A table keyed by its partition key alone, `id`: fence items get keys of their own.

use ddb_lock::TableSchema;
use ddb_lock_test_kit::schemas::every_operation_on;

#[tokio::test]
async fn every_operation_works_on_a_table_keyed_by_id_alone() {
    let schema = TableSchema::new().partition_key("id").without_sort_key();
    every_operation_on("ddb-lock-schema-id-only", schema).await;
}

#[tokio::test]
async fn every_operation_works_with_the_resource_name_first_in_the_key() {
    let schema = TableSchema::new()
        .partition_key("id")
        .without_sort_key()
        .key_prefix("")
        .key_suffix("#LOCK")
        .fence_key_format("", "#FENCE");
    every_operation_on("ddb-lock-schema-id-suffix", schema).await;
}
