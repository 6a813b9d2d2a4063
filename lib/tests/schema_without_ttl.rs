//! A table without time to live: lock items carry no TTL attribute and the table needs none.

use ddb_lock::TableSchema;
use ddb_lock_test_kit::schemas::every_operation_on;

#[tokio::test]
async fn every_operation_works_on_a_table_without_ttl() {
    every_operation_on("ddb-lock-schema-no-ttl", TableSchema::new().without_ttl()).await;
}
