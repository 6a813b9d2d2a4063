//! Lock tables of non-default [`TableSchema`]s, and one run of every lock operation on one,
//! checked against the raw items the schema says the library stores.

use crate::endpoint::dynamodb;
use crate::locks::{builder, hold, unique};
use aws_sdk_dynamodb::types::AttributeValue;
use ddb_lock::{
    AcquireOptions, ExtendOutcome, LockClient, LockStatus, ReleaseOutcome, TableSchema,
};
use std::collections::HashMap;
use std::time::Duration;

/// A table of the user's own keyed by `id` alone: lock items at `lock:<resource>`, fence items at
/// `fence:<resource>`, TTL on the reserved word `ttl` (the model-based test's and the fault
/// suite's second layout).
pub fn id_only() -> TableSchema {
    TableSchema::new()
        .partition_key("id")
        .without_sort_key()
        .key_prefix("lock:")
        .fence_key_format("fence:", "")
        .ttl_attribute("ttl")
}

/// A client of `table` under `schema` (the table created if missing, and checked).
pub async fn schema_client(table: &str, schema: TableSchema) -> LockClient {
    let client = builder(dynamodb())
        .table_name(table)
        .schema(schema)
        .build()
        .expect("valid schema");
    client
        .create_table()
        .await
        .unwrap_or_else(|e| panic!("table {table}: {e}"));
    client.check_table().await.expect("the table matches");
    client
}

/// The raw item at `key` in `table`, read strongly consistently.
pub async fn raw_item_at(
    table: &str,
    key: HashMap<String, AttributeValue>,
) -> Option<HashMap<String, AttributeValue>> {
    dynamodb()
        .get_item()
        .table_name(table)
        .set_key(Some(key))
        .consistent_read(true)
        .send()
        .await
        .expect("GetItem")
        .item
}

/// Acquires (plain and fenced), contends, extends, reads and releases a lock of `table` under
/// `schema`, and checks each stored item where the schema puts it, with the TTL attribute it names
/// (or none).
pub async fn every_operation_on(table: &str, schema: TableSchema) {
    let client = schema_client(table, schema.clone()).await;
    let resource = unique("schema");
    let lease = Duration::from_secs(30);
    let lock = hold(&client, &resource, "a", lease).await;
    let other = AcquireOptions::new().owner("b");
    assert!(
        client
            .try_acquire(&resource, &other)
            .await
            .unwrap()
            .is_none(),
        "held"
    );

    let stored = raw_item_at(table, schema.lock_key(&resource))
        .await
        .expect("the lock item at the schema's key");
    assert_eq!(
        stored.get("LockID"),
        Some(&AttributeValue::S(lock.lock_id().to_string()))
    );
    match schema.ttl_attribute_name() {
        Some(ttl) => assert!(
            matches!(stored.get(ttl), Some(AttributeValue::N(_))),
            "{stored:?}"
        ),
        None => assert!(!stored.contains_key("TTL"), "no TTL attribute: {stored:?}"),
    }

    assert!(matches!(
        client.extend(&lock, lease).await.unwrap(),
        ExtendOutcome::Extended(_)
    ));
    assert!(matches!(
        client.status(&resource).await.unwrap(),
        LockStatus::Held { .. }
    ));
    assert_eq!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert_eq!(raw_item_at(table, schema.lock_key(&resource)).await, None);

    let fenced = AcquireOptions::new().owner("a").fencing(true);
    let first = client
        .try_acquire(&resource, &fenced)
        .await
        .unwrap()
        .expect("free");
    client.release(&first).await.unwrap();
    let second = client
        .try_acquire(&resource, &fenced)
        .await
        .unwrap()
        .expect("free");
    assert!(second.fencing_token() > first.fencing_token());
    let fence = raw_item_at(table, schema.fence_key(&resource))
        .await
        .expect("the fence item at the schema's fence key");
    assert_eq!(
        fence.get("FencingToken"),
        Some(&AttributeValue::N(
            second.fencing_token().unwrap().value().to_string()
        ))
    );
    assert_eq!(
        client
            .force_release(&resource)
            .await
            .unwrap()
            .map(|h| h.owner),
        Some("a".into())
    );
    let report = client
        .delete_expired(Duration::ZERO, 10, None)
        .await
        .unwrap();
    assert_eq!(
        raw_item_at(table, schema.fence_key(&resource)).await,
        Some(fence),
        "{report:?}"
    );
}
