//! Arbitrary and near-valid events: parsing never panics and names a field the event has (or
//! `event` / `op`); through the handler, no event changes a lock it has no credential for, and every
//! error carries one of the stable error names.

mod common;

use ddb_lock_lambda::event::parse;
use ddb_lock_test_kit::{hold, lock_client, raw_item, unique};
use lambda_runtime::{Context, LambdaEvent};
use proptest::prelude::*;
use serde_json::{json, Map, Value};
use std::time::Duration;

const OPS: [&str; 9] = [
    "acquire",
    "try_acquire",
    "release",
    "release_execution",
    "extend",
    "status",
    "force_release",
    "cleanup",
    "unlock",
];

const FIELDS: [&str; 12] = [
    "resource",
    "owner",
    "lock_id",
    "lease_ms",
    "wait_ms",
    "data",
    "fencing",
    "execution_input",
    "resource_field",
    "leaseMs",
    "",
    "op",
];

/// Any JSON value, nested a little.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|n| json!(n)),
        ".{0,40}".prop_map(Value::String),
        "[a-z/#-]{1,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(".{0,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// An event with a real (or almost real) op and a few of its fields, of any type.
fn near_valid_event(resource: String) -> impl Strategy<Value = Value> {
    (
        prop::sample::select(OPS.to_vec()),
        prop::collection::vec((prop::sample::select(FIELDS.to_vec()), any_json()), 0..6),
        any::<bool>(),
    )
        .prop_map(move |(op, fields, targets_the_lock)| {
            let mut event = Map::new();
            event.insert("op".into(), json!(op));
            for (field, value) in fields {
                event.insert(field.into(), value);
            }
            if targets_the_lock {
                event.insert("resource".into(), json!(resource.clone()));
            }
            Value::Object(event)
        })
}

/// The error names the event, the op, one of the event's fields, or a field the op requires.
fn field_is_named_by_the_event(field: &str, event: &Value) -> bool {
    field == "event" || field == "op" || event.get(field).is_some() || FIELDS[..9].contains(&field)
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn parsing_any_json_never_panics_and_names_a_field(event in any_json()) {
        if let Err(err) = parse(&event) {
            prop_assert!(field_is_named_by_the_event(&err.field, &event), "{err:?} for {event}");
        }
    }

    #[test]
    fn parsing_near_valid_events_names_the_offending_field(event in near_valid_event("r".into())) {
        if let Err(err) = parse(&event) {
            prop_assert!(field_is_named_by_the_event(&err.field, &event), "{err:?} for {event}");
            prop_assert!(!err.problem.is_empty());
        }
    }
}

#[test]
fn no_event_changes_a_lock_it_has_no_credential_for() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let resource = unique("guarded");
    let (handler, before) = runtime.block_on(async {
        let client = lock_client().await;
        hold(&client, &resource, "the-guardian", Duration::from_secs(600)).await;
        (common::handler().await, raw_item(&resource).await.unwrap())
    });
    let names = [
        "LockHeld",
        "LockTimeout",
        "LockNotFound",
        "LockOwnershipMismatch",
        "LockExpired",
        "InvalidRequest",
        "ForceReleaseDisabled",
        "MalformedLockItem",
        "NotALockItem",
        "LockItemMissing",
    ];
    let mut runner = proptest::test_runner::TestRunner::new(config(96));
    runner
        .run(&near_valid_event(resource.clone()), |mut event| {
            // Waits would only slow the test down (a zero wait is one attempt), and cleanup would
            // delete other tests' expired items.
            match event["op"].as_str() {
                Some("acquire") => event["wait_ms"] = json!(0),
                Some("cleanup") => event["op"] = json!("status"),
                _ => {}
            }
            let answer = runtime
                .block_on(handler.handle(LambdaEvent::new(event.clone(), Context::default())));
            if let Err(err) = &answer {
                prop_assert!(names.contains(&err.name()), "{} for {event}", err.name());
            }
            let after = runtime.block_on(raw_item(&resource));
            prop_assert_eq!(
                after.as_ref(),
                Some(&before),
                "the guarded lock changed after {}",
                event
            );
            Ok(())
        })
        .unwrap();
}
