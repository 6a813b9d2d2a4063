//! Key and TTL attributes named with DynamoDB reserved words: every request names them through
//! placeholders.

use ddb_lock::TableSchema;
use ddb_lock_test_kit::schemas::every_operation_on;

#[tokio::test]
async fn every_operation_works_with_reserved_words_as_attribute_names() {
    let schema = TableSchema::new()
        .partition_key("key")
        .sort_key("name", "lock")
        .fence_sort_key_value("owner")
        .ttl_attribute("ttl");
    every_operation_on("ddb-lock-schema-reserved", schema).await;
}
