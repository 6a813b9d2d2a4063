//! The function on a table of the user's own: the schema from its environment (`id` alone, no
//! TTL, items kept on release), checked and created by the library, and every lock operation
//! through events, with `only_if_exists` and its `LockItemMissing`.

mod common;

use common::{error_name, invoke};
use ddb_lock_lambda::error::name;
use ddb_lock_lambda::{Config, Handler};
use ddb_lock_test_kit::{dynamodb, unique};
use serde_json::{json, Value};

const TABLE: &str = "ddb-lock-lambda-id-only";

fn config() -> Config {
    let vars = [
        ("DDB_LOCK_TABLE", TABLE),
        ("DDB_LOCK_PARTITION_KEY", "id"),
        ("DDB_LOCK_SORT_KEY", ""),
        ("DDB_LOCK_KEY_PREFIX", "mutex:"),
        ("DDB_LOCK_FENCE_KEY_PREFIX", "fence:"),
        ("DDB_LOCK_TTL_ATTRIBUTE", ""),
        ("DDB_LOCK_DELETE_ON_RELEASE", "false"),
    ];
    Config::from_lookup(|var| {
        vars.iter()
            .find(|(name, _)| *name == var)
            .map(|(_, value)| (*value).to_owned())
    })
    .unwrap()
}

async fn handler() -> Handler {
    let config = config();
    let client = config.lock_client(dynamodb()).unwrap();
    client.create_table().await.unwrap();
    client.check_table().await.unwrap();
    Handler::new(client, config)
}

async fn item(
    key: &str,
) -> Option<std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>> {
    dynamodb()
        .get_item()
        .table_name(TABLE)
        .key(
            "id",
            aws_sdk_dynamodb::types::AttributeValue::S(key.to_owned()),
        )
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
}

fn field<'a>(answer: &'a Value, name: &str) -> &'a Value {
    &answer[name]
}

#[tokio::test]
async fn every_operation_works_on_a_table_keyed_by_id_alone_from_the_environment() {
    let handler = handler().await;
    let resource = unique("lambda/id-only");

    let acquired = invoke(
        &handler,
        json!({"op": "acquire", "resource": resource, "owner": "exec-1", "fencing": true,
               "data": {"step": 1}}),
    )
    .await
    .unwrap();
    let lock_id = field(&acquired, "lock_id").clone();
    assert!(item(&format!("mutex:{resource}")).await.is_some());
    assert!(
        item(&format!("fence:{resource}")).await.is_some(),
        "the fence item"
    );
    let held = invoke(
        &handler,
        json!({"op": "try_acquire", "resource": resource, "owner": "exec-2"}),
    )
    .await;
    assert_eq!(error_name(held), name::LOCK_HELD);
    let status = invoke(&handler, json!({"op": "status", "resource": resource}))
        .await
        .unwrap();
    assert_eq!(field(&status, "owner"), "exec-1", "{status}");
    invoke(
        &handler,
        json!({"op": "extend", "resource": resource, "owner": "exec-1", "lock_id": lock_id,
               "data": {"step": 2}}),
    )
    .await
    .unwrap();
    invoke(
        &handler,
        json!({"op": "release", "resource": resource, "owner": "exec-1", "lock_id": lock_id,
               "data": {"step": 3}}),
    )
    .await
    .unwrap();

    // Kept on release, without a TTL attribute: the next holder takes it only if it exists.
    let kept = item(&format!("mutex:{resource}")).await.expect("kept");
    assert!(
        !kept.contains_key("Owner") && !kept.contains_key("TTL"),
        "{kept:?}"
    );
    let again = invoke(
        &handler,
        json!({"op": "try_acquire", "resource": resource, "owner": "exec-2", "only_if_exists": true}),
    )
    .await
    .unwrap();
    assert_eq!(
        field(&again, "data"),
        &json!({"step": 3}),
        "left by the release: {again}"
    );
    let missing = invoke(
        &handler,
        json!({"op": "try_acquire", "resource": unique("lambda/none"), "owner": "exec-3",
               "only_if_exists": true}),
    )
    .await;
    assert_eq!(error_name(missing), name::LOCK_ITEM_MISSING);
}
