//! Namespaces against the local endpoint: the same resource name in two namespaces and outside
//! any is three locks; `list` finds a namespace's live locks (exclusive and shared, nothing free,
//! nothing of another namespace) through the namespace index; where the items live; a schema
//! that leaves no room for namespaces is refused; a table keyed by `id` alone keeps its fences
//! apart per namespace.

use ddb_lock::{
    AcquireOptions, InvalidInput, ListedLock, LockClient, LockStatus, Mode, Namespace,
    ReleaseOutcome, TableSchema,
};
use ddb_lock_test_kit::clocks::AdjustableClock;
use ddb_lock_test_kit::schemas::{self, raw_item_at, schema_client};
use ddb_lock_test_kit::{builder, dynamodb, hold, lock_client, unique, TABLE};
use std::time::{Duration, Instant};

const LEASE: Duration = Duration::from_secs(60);

fn namespace() -> Namespace {
    unique("ns").parse().expect("a valid namespace")
}

fn opts(owner: &str) -> AcquireOptions {
    AcquireOptions::new().owner(owner).lease(LEASE)
}

/// How long the namespace index may lag the table before a test gives up on it.
const INDEX_LAG: Duration = Duration::from_secs(30);

/// `client.list(namespace)` once the index shows `expected` resources: the index is eventually
/// consistent, so a lock just taken may not be listed yet.
async fn listed(client: &LockClient, namespace: &Namespace, expected: &[&str]) -> Vec<ListedLock> {
    let started = Instant::now();
    loop {
        let found = client.list(namespace).await.expect("list");
        let names: Vec<&str> = found.iter().map(|l| l.resource.as_str()).collect();
        if names == expected || started.elapsed() > INDEX_LAG {
            assert_eq!(names, expected, "the namespace's live locks");
            return found;
        }
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn one_name_in_two_namespaces_and_in_none_is_three_locks() {
    let plain = lock_client().await;
    let (a, b) = (namespace(), namespace());
    let in_a = plain.in_namespace(a.clone()).unwrap();
    let in_b = plain.in_namespace(b.clone()).unwrap();
    let resource = unique("orders");

    let held_a = hold(&in_a, &resource, "a", LEASE).await;
    let held_b = hold(&in_b, &resource, "b", LEASE).await;
    let held_plain = hold(&plain, &resource, "plain", LEASE).await;

    // Each is held in its own namespace only.
    let other_a = builder(dynamodb()).namespace(a.clone()).build().unwrap();
    assert!(other_a
        .try_acquire(&resource, &opts("a2"))
        .await
        .unwrap()
        .is_none());
    match other_a.status(&resource).await.unwrap() {
        LockStatus::Held { holder, .. } => assert_eq!(holder.owner, "a"),
        other => panic!("{other:?}"),
    }
    match in_b.status(&resource).await.unwrap() {
        LockStatus::Held { holder, .. } => assert_eq!(holder.owner, "b"),
        other => panic!("{other:?}"),
    }
    assert_eq!(in_a.namespace(), Some(&a));
    assert_eq!(plain.namespace(), None);

    // Releasing one leaves the others held.
    assert_eq!(
        in_a.release(&held_a).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert_eq!(other_a.status(&resource).await.unwrap(), LockStatus::Free);
    assert!(matches!(
        in_b.status(&resource).await.unwrap(),
        LockStatus::Held { .. }
    ));
    assert!(matches!(
        plain.status(&resource).await.unwrap(),
        LockStatus::Held { .. }
    ));
    // A handle of one namespace releases nothing in another.
    assert_ne!(
        in_b.release(&held_plain).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert_eq!(
        in_b.release(&held_b).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert_eq!(
        plain.release(&held_plain).await.unwrap(),
        ReleaseOutcome::Released
    );
}

#[tokio::test]
async fn list_finds_the_live_locks_of_a_namespace_and_nothing_else() {
    let plain = lock_client().await;
    let ns = namespace();
    let client = plain.in_namespace(ns.clone()).unwrap();
    let other = plain.in_namespace(namespace()).unwrap();
    let (x, r, released, lapsed) = (unique("x"), unique("r"), unique("gone"), unique("lapsed"));

    let x_lock = hold(&client, &x, "writer", LEASE).await;
    let x_expires = x_lock.expires_at();
    for reader in ["reader-1", "reader-2"] {
        client
            .acquire(&r, &opts(reader).mode(Mode::Shared))
            .await
            .unwrap();
    }
    let gone = hold(&client, &released, "done", LEASE).await;
    client.release(&gone).await.unwrap();
    // A lock whose holder's lease has run out, by the clock of the client that lists.
    let clock = AdjustableClock::new();
    let late = builder(dynamodb())
        .namespace(ns.clone())
        .clock(clock.clone())
        .build()
        .unwrap();
    hold(&client, &lapsed, "crashed", Duration::from_secs(2)).await;
    clock.advance(Duration::from_secs(3));
    // Outside the namespace: another namespace's lock and a plain one.
    hold(&other, &x, "elsewhere", LEASE).await;
    hold(&plain, &x, "plain", LEASE).await;

    let mut expected = [x.as_str(), r.as_str()];
    expected.sort();
    let found = listed(&late, &ns, &expected).await;
    for lock in &found {
        match &lock.status {
            LockStatus::Held { holder, .. } => {
                assert_eq!(lock.resource, x);
                assert_eq!(
                    (holder.owner.as_str(), holder.expires_at),
                    ("writer", x_expires)
                );
            }
            LockStatus::Shared { holders, .. } => {
                assert_eq!(lock.resource, r);
                let mut owners: Vec<&str> = holders.iter().map(|h| h.owner.as_str()).collect();
                owners.sort();
                assert_eq!(owners, ["reader-1", "reader-2"]);
            }
            LockStatus::Free => panic!("a free lock listed: {lock:?}"),
        }
    }
    // The plain client lists the namespace as well: list names the namespace.
    listed(&plain, &ns, &expected).await;
}

#[tokio::test]
async fn namespaced_items_carry_their_namespace_and_plain_ones_do_not() {
    let plain = lock_client().await;
    let ns = namespace();
    let client = plain.in_namespace(ns.clone()).unwrap();
    let resource = unique("item");
    hold(&client, &resource, "a", LEASE).await;
    hold(&plain, &resource, "b", LEASE).await;
    let key = TableSchema::new()
        .in_namespace(ns.clone())
        .lock_key(&resource);
    assert_eq!(
        key["PK"].as_s().unwrap(),
        &format!("NS#{ns}#LOCK#{resource}")
    );
    let item = raw_item_at(TABLE, key).await.expect("the namespaced item");
    assert_eq!(item["Namespace"].as_s().unwrap(), ns.as_str());
    assert_eq!(item["Owner"].as_s().unwrap(), "a");
    let plain_item = raw_item_at(TABLE, TableSchema::new().lock_key(&resource))
        .await
        .expect("the plain item");
    assert!(
        !plain_item.contains_key("Namespace"),
        "outside namespaces the index holds nothing"
    );
}

#[tokio::test]
async fn a_shared_hold_creates_its_item_in_the_namespace() {
    let ns = namespace();
    let client = lock_client().await.in_namespace(ns.clone()).unwrap();
    let resource = unique("readers");
    client
        .acquire(&resource, &opts("reader").mode(Mode::Shared))
        .await
        .unwrap();
    let key = TableSchema::new().in_namespace(ns).lock_key(&resource);
    let item = raw_item_at(TABLE, key).await.expect("the namespaced item");
    assert!(item.contains_key("Namespace"));
}

#[tokio::test]
async fn a_kept_item_lists_while_held_and_not_once_released() {
    let ns = namespace();
    let client = builder(dynamodb())
        .namespace(ns.clone())
        .delete_on_release(false)
        .build()
        .unwrap();
    lock_client().await;
    let resource = unique("kept");
    let lock = hold(&client, &resource, "a", LEASE).await;
    listed(&client, &ns, &[resource.as_str()]).await;
    client.release(&lock).await.unwrap();
    listed(&client, &ns, &[]).await;
}

#[tokio::test]
async fn fences_of_a_table_keyed_by_id_alone_stay_apart_per_namespace() {
    let table = "ddb-lock-namespaces-id-only";
    let plain = schema_client(table, schemas::id_only()).await;
    let (a, b) = (namespace(), namespace());
    let in_a = plain.in_namespace(a).unwrap();
    let in_b = plain.in_namespace(b).unwrap();
    let resource = unique("fenced");
    let fenced = |owner: &str| opts(owner).fencing(true);
    let first_a = in_a.acquire(&resource, &fenced("a")).await.unwrap();
    let first_b = in_b.acquire(&resource, &fenced("b")).await.unwrap();
    in_a.release(&first_a).await.unwrap();
    let second_a = in_a.acquire(&resource, &fenced("a")).await.unwrap();
    assert!(
        second_a.fencing_token() > first_a.fencing_token(),
        "a namespace's tokens grow"
    );
    assert!(first_b.fencing_token().is_some());
    assert!(matches!(
        in_b.status(&resource).await.unwrap(),
        LockStatus::Held { .. }
    ));
}

#[test]
fn a_schema_without_room_for_namespaces_is_refused() {
    let no_prefix = TableSchema::new().key_prefix("");
    let err = builder(dynamodb())
        .schema(no_prefix)
        .namespace("a".parse().unwrap())
        .build()
        .unwrap_err();
    assert!(
        matches!(
            err,
            ddb_lock::Error::InvalidInput(InvalidInput::NamespaceOverlap)
        ),
        "{err}"
    );
    let clashing = TableSchema::new().key_prefix("NS#a#");
    assert!(clashing
        .clone()
        .in_namespace("a".parse().unwrap())
        .validate()
        .is_err());
    // The default schema, and the id-only one, have room.
    assert!(TableSchema::new()
        .in_namespace("a".parse().unwrap())
        .validate()
        .is_ok());
    assert!(schemas::id_only()
        .in_namespace("a".parse().unwrap())
        .validate()
        .is_ok());
}
