//! Shared holds and semaphores through the handler: `mode` and `permits` on acquire, `mode` on
//! release and extend (as acquire returned it), `status` listing the shared holders, and the
//! error names of a refusal and of options a mode does not take.

mod common;

use common::{error_name, handler, invalid_field, invoke};
use ddb_lock_test_kit::unique;
use serde_json::{json, Value};

async fn acquire_shared(
    handler: &ddb_lock_lambda::Handler,
    resource: &str,
    owner: &str,
    permits: Option<u32>,
) -> Value {
    let mut event =
        json!({"op": "try_acquire", "resource": resource, "owner": owner, "mode": "shared"});
    if let Some(permits) = permits {
        event["permits"] = json!(permits);
    }
    invoke(handler, event).await.unwrap()
}

#[tokio::test]
async fn readers_share_a_lock_status_lists_them_and_a_writer_is_refused_until_they_leave() {
    let handler = handler().await;
    let resource = unique("h-shared");
    let r1 = acquire_shared(&handler, &resource, "r1", None).await;
    let r2 = acquire_shared(&handler, &resource, "r2", None).await;
    assert_eq!(r1["mode"], "shared");
    let status = invoke(&handler, json!({"op": "status", "resource": resource}))
        .await
        .unwrap();
    assert_eq!(status["locked"], true);
    assert_eq!(status["mode"], "shared");
    let mut owners: Vec<&str> = status["holders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["owner"].as_str().unwrap())
        .collect();
    owners.sort_unstable();
    assert_eq!(owners, ["r1", "r2"]);

    let writer = invoke(
        &handler,
        json!({"op": "try_acquire", "resource": resource, "owner": "w"}),
    )
    .await;
    assert_eq!(error_name(writer), "LockHeld");

    let extended = invoke(
        &handler,
        json!({"op": "extend", "resource": resource, "owner": "r1", "lock_id": r1["lock_id"],
            "mode": "shared", "lease_ms": 60000}),
    )
    .await
    .unwrap();
    assert_eq!(extended["mode"], "shared");
    for (owner, lock) in [("r1", &r1), ("r2", &r2)] {
        let released = invoke(
            &handler,
            json!({"op": "release", "resource": resource, "owner": owner,
                "lock_id": lock["lock_id"], "mode": "shared"}),
        )
        .await
        .unwrap();
        assert_eq!(released["released"], true, "{released}");
    }
    let writer = invoke(
        &handler,
        json!({"op": "try_acquire", "resource": resource, "owner": "w"}),
    )
    .await
    .unwrap();
    assert!(
        writer.get("mode").is_none(),
        "exclusive answers are unchanged: {writer}"
    );
}

#[tokio::test]
async fn a_semaphore_admits_its_permits_and_names_the_holder_of_a_refusal() {
    let handler = handler().await;
    let resource = unique("h-semaphore");
    acquire_shared(&handler, &resource, "a", Some(2)).await;
    acquire_shared(&handler, &resource, "b", Some(2)).await;
    let third = invoke(
        &handler,
        json!({"op": "try_acquire", "resource": resource, "owner": "c", "mode": "shared", "permits": 2}),
    )
    .await;
    assert_eq!(error_name(third), "LockHeld");
}

/// A release (or extension) of a shared hold that leaves out its mode is refused on `mode`: it was
/// answered `released: false` for a lock "already released, or expired" (`LockNotFound`), and a
/// saga went on while the hold kept writers out for its lease (found by review).
#[tokio::test]
async fn a_release_or_extension_without_the_shared_mode_is_refused_on_mode() {
    let handler = handler().await;
    let resource = unique("h-shared-release-mode");
    let r = acquire_shared(&handler, &resource, "r", None).await;
    let released = invoke(
        &handler,
        json!({"op": "release", "resource": resource, "owner": "r", "lock_id": r["lock_id"]}),
    )
    .await;
    assert_eq!(invalid_field(released), "mode");
    let extended = invoke(
        &handler,
        json!({"op": "extend", "resource": resource, "owner": "r", "lock_id": r["lock_id"],
            "lease_ms": 60000}),
    )
    .await;
    assert_eq!(invalid_field(extended), "mode");
    let status = invoke(&handler, json!({"op": "status", "resource": resource}))
        .await
        .unwrap();
    assert_eq!(status["mode"], "shared", "the shared hold stands: {status}");
}

#[tokio::test]
async fn modes_and_permits_are_checked_and_named() {
    let handler = handler().await;
    let resource = unique("h-modes-bad");
    let bad = invoke(
        &handler,
        json!({"op": "try_acquire", "resource": resource, "owner": "o", "mode": "read"}),
    )
    .await;
    assert_eq!(invalid_field(bad), "mode");
    let bad = invoke(
        &handler,
        json!({"op": "try_acquire", "resource": resource, "owner": "o", "permits": 0, "mode": "shared"}),
    )
    .await;
    assert_eq!(invalid_field(bad), "permits");
    let bad = invoke(
        &handler,
        json!({"op": "try_acquire", "resource": resource, "owner": "o", "permits": 2, "mode": "exclusive"}),
    )
    .await;
    assert_eq!(invalid_field(bad), "permits");
    let bad = invoke(
        &handler,
        json!({"op": "try_acquire", "resource": resource, "owner": "o", "mode": "shared", "fencing": true}),
    )
    .await;
    assert_eq!(invalid_field(bad), "fencing");
}

#[tokio::test]
async fn a_lock_set_is_taken_all_or_nothing_and_released_with_its_locks() {
    let handler = handler().await;
    let (a, b) = (unique("h-set-a"), unique("h-set-b"));
    let set = invoke(
        &handler,
        json!({"op": "try_acquire", "owner": "s",
            "resources": [a, {"resource": b, "mode": "shared"}]}),
    )
    .await
    .unwrap();
    assert_eq!(set["owner"], "s");
    let locks = set["locks"].as_array().unwrap().clone();
    assert_eq!(locks.len(), 2);
    let shared = locks.iter().find(|l| l["resource"] == json!(b)).unwrap();
    assert_eq!(shared["mode"], "shared");

    let refused = invoke(
        &handler,
        json!({"op": "try_acquire", "owner": "t", "resources": [unique("h-set-c"), a]}),
    )
    .await;
    match refused {
        Err(err) => {
            assert_eq!(err.name(), "LockHeld");
            assert!(
                err.to_string().contains(&a),
                "the refusal names the member: {err}"
            );
        }
        Ok(answer) => panic!("{answer}"),
    }

    let released = invoke(
        &handler,
        json!({"op": "release", "owner": "s", "locks": locks}),
    )
    .await
    .unwrap();
    let released = released["released"].as_array().unwrap();
    assert!(
        released.iter().all(|r| r["released"] == true),
        "{released:?}"
    );
    let again = invoke(
        &handler,
        json!({"op": "acquire", "owner": "t", "resources": [a, b], "wait_ms": 0}),
    )
    .await
    .unwrap();
    assert_eq!(again["locks"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn set_fields_are_checked_and_named() {
    let handler = handler().await;
    for (event, field) in [
        (
            json!({"op": "try_acquire", "owner": "o", "resources": ["a"], "resource": "a"}),
            "resources",
        ),
        (
            json!({"op": "try_acquire", "owner": "o", "resources": ["a"], "mode": "shared"}),
            "mode",
        ),
        (
            json!({"op": "try_acquire", "owner": "o", "resources": ["a"], "data": {"x": 1}}),
            "data",
        ),
        (
            json!({"op": "try_acquire", "owner": "o", "resources": []}),
            "resources",
        ),
        (json!({"op": "try_acquire", "owner": "o"}), "resource"),
        // A member of a set that the library refuses: named as the set's field.
        (
            json!({"op": "try_acquire", "owner": "o", "resources": ["a", ""]}),
            "resources",
        ),
        (
            json!({"op": "try_acquire", "owner": "o", "resources": ["x".repeat(3000)]}),
            "resources",
        ),
        (
            json!({"op": "try_acquire", "owner": "o", "path": ["x".repeat(3000)]}),
            "path",
        ),
        // A path of 100 segments is a set of 101 members, over the limit of 100.
        (
            json!({"op": "try_acquire", "owner": "o", "path": vec!["s"; 100]}),
            "path",
        ),
        (
            json!({"op": "release", "owner": "o", "resource": "a"}),
            "lock_id",
        ),
        (
            json!({"op": "release", "owner": "o", "locks": [], "resource": "a"}),
            "locks",
        ),
    ] {
        assert_eq!(
            invalid_field(invoke(&handler, event.clone()).await),
            field,
            "{event}"
        );
    }
}

/// A set's release with a member the library refuses (an empty name, one over the key limit) or
/// no member: named on `locks`, and nothing released. Checked member by member as each was
/// released, it released the good members and named `resource`, a field the event does not have.
#[tokio::test]
async fn a_set_release_with_a_bad_member_releases_nothing_and_names_locks() {
    let handler = handler().await;
    let resource = unique("h-set-bad-release");
    let taken = invoke(
        &handler,
        json!({"op": "try_acquire", "owner": "o", "resources": [resource]}),
    )
    .await
    .unwrap();
    let good = taken["locks"][0].clone();
    let lock_id = good["lock_id"].clone();
    for bad in [json!(""), json!("x".repeat(3000))] {
        let event = json!({"op": "release", "owner": "o",
            "locks": [good, {"resource": bad, "lock_id": lock_id}]});
        assert_eq!(invalid_field(invoke(&handler, event).await), "locks");
    }
    assert_eq!(
        invalid_field(
            invoke(
                &handler,
                json!({"op": "release", "owner": "o", "locks": []})
            )
            .await
        ),
        "locks"
    );
    let status = invoke(&handler, json!({"op": "status", "resource": resource}))
        .await
        .unwrap();
    assert_eq!(status["locked"], true, "{status}");
}

#[tokio::test]
async fn a_path_is_locked_with_its_ancestors_and_conflicts_as_paths_do() {
    let handler = handler().await;
    let root = unique("h-path");
    let ab = invoke(
        &handler,
        json!({"op": "try_acquire", "owner": "x", "path": [root, "A", "B"]}),
    )
    .await
    .unwrap();
    assert_eq!(ab["locks"].as_array().unwrap().len(), 4);
    let parent = invoke(
        &handler,
        json!({"op": "try_acquire", "owner": "y", "path": [root, "A"], "mode": "shared"}),
    )
    .await;
    assert_eq!(error_name(parent), "LockHeld");
    let sibling = invoke(
        &handler,
        json!({"op": "try_acquire", "owner": "y", "path": [root, "A", "C"]}),
    )
    .await
    .unwrap();
    let status = invoke(&handler, json!({"op": "status", "path": [root, "A"]}))
        .await
        .unwrap();
    assert_eq!(status["intents"].as_array().unwrap().len(), 2, "{status}");
    for (owner, set) in [("x", &ab), ("y", &sibling)] {
        invoke(
            &handler,
            json!({"op": "release", "owner": owner, "locks": set["locks"]}),
        )
        .await
        .unwrap();
    }
    let status = invoke(&handler, json!({"op": "status", "path": [root, "A"]}))
        .await
        .unwrap();
    assert_eq!(status["locked"], false, "{status}");
    let bad = invoke(
        &handler,
        json!({"op": "try_acquire", "owner": "o", "path": ["a"], "resource": "a"}),
    )
    .await;
    assert_eq!(invalid_field(bad), "path");
}

#[tokio::test]
async fn a_fenced_set_answers_a_token_for_each_exclusive_member() {
    let handler = handler().await;
    let (a, b) = (unique("h-fenced-a"), unique("h-fenced-b"));
    let answer = invoke(
        &handler,
        json!({"op": "try_acquire", "owner": "o", "fencing": true,
            "resources": [a, {"resource": b, "mode": "shared"}]}),
    )
    .await
    .unwrap();
    let lock = |resource: &str| {
        answer["locks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["resource"] == resource)
            .cloned()
            .unwrap()
    };
    assert!(lock(&a)["fencing_token"].is_u64(), "{answer}");
    assert!(lock(&b).get("fencing_token").is_none(), "{answer}");
}
