//! The tables of the tests, one way to create them ([`ensure_table`]), and raw reads of the items
//! the library stores.

use crate::endpoint::dynamodb;
use aws_sdk_dynamodb::client::Waiters;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType,
    ScalarAttributeType,
};
use chrono::{DateTime, Utc};
use ddb_lock::LockClient;
use std::collections::HashMap;
use std::time::Duration;

/// The lock table every lock test shares; tests stay apart by resource name.
pub const TABLE: &str = "ddb-lock-integration";

/// The table of items written with fences by the tests (not a lock table): string hash key `id`.
pub const FENCED_TABLE: &str = "ddb-lock-fenced-writes";

/// How long [`ensure_table`] waits for a table it created to become active.
const ACTIVE_WAIT: Duration = Duration::from_secs(30);

/// What a table holds, which decides its key schema.
#[derive(Debug, Clone, Copy)]
pub enum TableKind<'a> {
    /// Locks: the schema and TTL of the library's own `LockClient::create_table`.
    Locks,
    /// Plain items with one string partition key, the attribute `key`; on demand, no TTL.
    Items {
        /// The name of the partition key attribute.
        key: &'a str,
    },
}

/// Creates `table` of `kind` through `dynamodb` if it is missing, and waits until it is active.
/// Safe to call from several tests and processes at once. Panics if it cannot.
pub async fn ensure_table(dynamodb: &aws_sdk_dynamodb::Client, table: &str, kind: TableKind<'_>) {
    match kind {
        TableKind::Locks => LockClient::builder(dynamodb.clone())
            .table_name(table)
            .build()
            .expect("valid lock client settings")
            .create_table()
            .await
            .unwrap_or_else(|e| panic!("lock table {table}: {e}")),
        TableKind::Items { key } => {
            let created = dynamodb
                .create_table()
                .table_name(table)
                .billing_mode(BillingMode::PayPerRequest)
                .attribute_definitions(
                    AttributeDefinition::builder()
                        .attribute_name(key)
                        .attribute_type(ScalarAttributeType::S)
                        .build()
                        .expect("attribute definition"),
                )
                .key_schema(
                    KeySchemaElement::builder()
                        .attribute_name(key)
                        .key_type(KeyType::Hash)
                        .build()
                        .expect("key schema"),
                )
                .send()
                .await;
            if let Err(err) = created {
                let exists = err
                    .as_service_error()
                    .is_some_and(|e| e.is_resource_in_use_exception());
                assert!(exists, "CreateTable {table}: {err:?}");
            }
            dynamodb
                .wait_until_table_exists()
                .table_name(table)
                .wait(ACTIVE_WAIT)
                .await
                .unwrap_or_else(|e| panic!("{table} did not become active: {e:?}"));
        }
    }
}

/// Creates [`FENCED_TABLE`] if missing and waits until it is active.
pub async fn fenced_table() {
    ensure_table(&dynamodb(), FENCED_TABLE, TableKind::Items { key: "id" }).await;
}

/// The raw lock item of `resource` in the shared table, read strongly consistently.
pub async fn raw_item(resource: &str) -> Option<HashMap<String, AttributeValue>> {
    dynamodb()
        .get_item()
        .table_name(TABLE)
        .key("PK", AttributeValue::S(format!("LOCK#{resource}")))
        .key("SK", AttributeValue::S("LOCK".into()))
        .consistent_read(true)
        .send()
        .await
        .expect("GetItem")
        .item
}

/// A string attribute of an item.
pub fn string_attr<'a>(item: &'a HashMap<String, AttributeValue>, name: &str) -> &'a str {
    match item.get(name) {
        Some(AttributeValue::S(s)) => s,
        other => panic!("attribute {name} is {other:?}, expected a string"),
    }
}

/// A timestamp as the lock item stores it.
pub fn stored(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
