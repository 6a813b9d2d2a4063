//! Hierarchical paths against the local endpoint: which path locks conflict (an ancestor, a
//! descendant, the path itself, in conflicting modes) and which do not (siblings, shared with
//! shared), unambiguous segment names, the cost of one, and crashed holders' intentions cleared.

use ddb_lock::{AcquireOptions, LockClient, LockPath, LockStatus, Mode, SetAttempt};
use ddb_lock_test_kit::clocks::AdjustableClock;
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{builder, dynamodb, dynamodb_at, endpoint, lock_client, unique};
use std::time::Duration;

fn opts(owner: &str) -> AcquireOptions {
    AcquireOptions::new()
        .owner(owner)
        .lease(Duration::from_secs(60))
}

/// A path under a root segment of its own, so that tests do not share items.
fn path(root: &str, rest: &[&str]) -> LockPath {
    LockPath::new(std::iter::once(root).chain(rest.iter().copied()))
}

async fn try_path(client: &LockClient, path: &LockPath, mode: Mode, owner: &str) -> SetAttempt {
    client
        .try_acquire_paths(&[(path.clone(), mode)], &opts(owner))
        .await
        .unwrap()
}

fn blocked_at(attempt: &SetAttempt) -> LockPath {
    match attempt {
        SetAttempt::Held { resource, .. } => LockPath::from_resource(resource).expect("a path"),
        SetAttempt::Acquired(set) => panic!("acquired {set:?}"),
    }
}

#[tokio::test]
async fn an_exclusive_path_conflicts_with_its_ancestors_and_descendants_not_its_siblings() {
    let client = lock_client().await;
    let root = unique("tree");
    let ab = path(&root, &["A", "B"]);
    let SetAttempt::Acquired(held) = try_path(&client, &ab, Mode::Exclusive, "x").await else {
        panic!("free");
    };
    assert_eq!(
        held.locks().len(),
        4,
        "[], [root], [root, A] as intentions, then the path"
    );

    let a = path(&root, &["A"]);
    for mode in [Mode::Shared, Mode::Exclusive] {
        let refused = try_path(&client, &a, mode, "y").await;
        assert_eq!(
            blocked_at(&refused),
            a,
            "the ancestor's item holds an intention-exclusive holder"
        );
    }
    let abc = path(&root, &["A", "B", "C"]);
    for mode in [Mode::Shared, Mode::Exclusive] {
        let refused = try_path(&client, &abc, mode, "y").await;
        assert_eq!(
            blocked_at(&refused),
            ab,
            "the exclusive holder refuses intentions below it"
        );
    }
    assert_eq!(
        blocked_at(&try_path(&client, &ab, Mode::Shared, "y").await),
        ab
    );
    let root_path = LockPath::root();
    assert_eq!(
        blocked_at(&try_path(&client, &root_path, Mode::Shared, "y").await),
        root_path
    );

    let ac = path(&root, &["A", "C"]);
    let SetAttempt::Acquired(sibling) = try_path(&client, &ac, Mode::Exclusive, "y").await else {
        panic!("a sibling does not conflict");
    };
    match client.status(&a.resource()).await.unwrap() {
        LockStatus::Shared {
            holders, intents, ..
        } => {
            assert!(holders.is_empty());
            assert_eq!(
                intents.len(),
                2,
                "both paths below hold an intention on [root, A]"
            );
        }
        other => panic!("{other:?}"),
    }
    client.release_set(&held).await;
    client.release_set(&sibling).await;
    let SetAttempt::Acquired(whole) = try_path(&client, &a, Mode::Exclusive, "z").await else {
        panic!("free once both are released");
    };
    client.release_set(&whole).await;
}

#[tokio::test]
async fn shared_paths_coexist_along_one_branch_and_exclude_writers_below_and_above() {
    let client = lock_client().await;
    let root = unique("tree-shared");
    let a = path(&root, &["A"]);
    let ab = path(&root, &["A", "B"]);
    let SetAttempt::Acquired(r1) = try_path(&client, &a, Mode::Shared, "r1").await else {
        panic!("free");
    };
    let SetAttempt::Acquired(r2) = try_path(&client, &ab, Mode::Shared, "r2").await else {
        panic!("readers of an ancestor and a descendant share");
    };
    let abc = path(&root, &["A", "B", "C"]);
    assert_eq!(
        blocked_at(&try_path(&client, &abc, Mode::Exclusive, "w").await),
        a,
        "a writer below needs an intention-exclusive holder on [root, A], which the reader of A refuses"
    );
    let top = path(&root, &[]);
    assert_eq!(
        blocked_at(&try_path(&client, &top, Mode::Exclusive, "w").await),
        top
    );
    client.release_set(&r1).await;
    client.release_set(&r2).await;
}

#[tokio::test]
async fn segments_with_the_separator_or_empty_are_paths_of_their_own() {
    let client = lock_client().await;
    let root = unique("tree-names");
    let joined = path(&root, &["a/b"]);
    let split = path(&root, &["a", "b"]);
    let empty = path(&root, &["", "b"]);
    let mut sets = Vec::new();
    for p in [&joined, &split, &empty] {
        match try_path(&client, p, Mode::Exclusive, "x").await {
            SetAttempt::Acquired(set) => sets.push(set),
            other => panic!("{p} is a path of its own: {other:?}"),
        }
    }
    for set in &sets {
        client.release_set(set).await;
    }
}

#[tokio::test]
async fn a_path_lock_is_one_transaction_of_its_depth_plus_one_items() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = builder(dynamodb_at(&proxy.endpoint())).build().unwrap();
    let root = unique("tree-cost");
    let set = client
        .acquire_paths(
            &[(path(&root, &["a", "b", "c"]), Mode::Exclusive)],
            &opts("x"),
        )
        .await
        .unwrap();
    assert_eq!(proxy.total_requests(), 1);
    assert_eq!(set.locks().len(), 5);
    client.release_set(&set).await;
    assert_eq!(
        proxy.counts("UpdateItem").requests,
        4,
        "each intention holder leaves with one UpdateItem…"
    );
    // …and the path's own item and each item the release left empty are deleted: all but the
    // root's, perhaps, which other tests' paths share.
    let deletes = proxy.counts("DeleteItem").requests;
    assert!((1 + 3..=1 + 4).contains(&deletes), "{deletes} DeleteItems");
}

#[tokio::test]
async fn a_crashed_path_holders_intentions_are_cleared_when_their_leases_end() {
    lock_client().await;
    let clock = AdjustableClock::new();
    let early = builder(dynamodb()).build().unwrap();
    let late = builder(dynamodb()).clock(clock.clone()).build().unwrap();
    let root = unique("tree-crash");
    early
        .acquire_paths(
            &[(path(&root, &["a", "b"]), Mode::Exclusive)],
            &opts("crashed").lease(Duration::from_secs(5)),
        )
        .await
        .unwrap();
    clock.advance(Duration::from_secs(6));
    let set = late
        .acquire_paths(&[(path(&root, &["a"]), Mode::Exclusive)], &opts("next"))
        .await
        .unwrap();
    late.release_set(&set).await;
}

#[tokio::test]
async fn a_fenced_exclusive_path_gets_a_token_and_its_ancestors_intentions_none() {
    let client = lock_client().await;
    let root = unique("fenced-tree");
    let ab = path(&root, &["A", "B"]);
    let set = client
        .acquire_paths(&[(ab.clone(), Mode::Exclusive)], &opts("x").fencing(true))
        .await
        .unwrap();
    for lock in set.locks() {
        let is_path = lock.resource() == ab.resource();
        assert_eq!(lock.fencing_token().is_some(), is_path, "{lock:?}");
    }
    client.release_set(&set).await;
}

/// Exclusive locks of a path and of its descendant exclude each other, so their fencing tokens
/// follow the order of their holds: each drew its tokens from its own path's fence, and a holder
/// of the descendant, whose fence a clock ahead had raised, held a higher token than the holder of
/// the path who took over once its lease was over; its fenced writes went through after the newer
/// holder's (found by review).
#[tokio::test]
async fn fenced_locks_of_a_path_and_its_descendant_get_tokens_in_the_order_of_their_holds() {
    lock_client().await;
    let namespace = ddb_lock::Namespace::new(unique("fenced-paths")).unwrap();
    let client_on = |clock: std::sync::Arc<AdjustableClock>| {
        builder(dynamodb())
            .clock(clock)
            .build()
            .unwrap()
            .in_namespace(namespace.clone())
            .unwrap()
    };
    let ahead_clock = AdjustableClock::new();
    ahead_clock.advance(Duration::from_secs(3600));
    let later_clock = AdjustableClock::new();
    let (ahead, earlier, later) = (
        client_on(ahead_clock),
        client_on(AdjustableClock::new()),
        client_on(later_clock.clone()),
    );
    let (account, one) = (LockPath::new(["acct"]), LockPath::new(["acct", "42"]));
    let fenced = |owner: &str| opts(owner).fencing(true);
    let skewed = ahead
        .acquire_paths(&[(one.clone(), Mode::Exclusive)], &fenced("skewed"))
        .await
        .unwrap();
    ahead.release_set(&skewed).await;
    let superseded = earlier
        .acquire_paths(
            &[(one.clone(), Mode::Exclusive)],
            &fenced("superseded").lease(Duration::from_secs(1)),
        )
        .await
        .unwrap();
    later_clock.advance(Duration::from_secs(2));
    let newer = later
        .acquire_paths(&[(account.clone(), Mode::Exclusive)], &fenced("newer"))
        .await
        .unwrap();
    let token = |set: &ddb_lock::LockSet, path: &LockPath| {
        set.get(&path.resource())
            .and_then(ddb_lock::Lock::fencing_token)
            .expect("a fenced member")
    };
    assert!(
        token(&newer, &account) > token(&superseded, &one),
        "{newer:?} after {superseded:?}"
    );
}

/// A path's resource name locked alone and fenced is refused: its tokens would come from the
/// path's own fence, unordered with those of its ancestors' and descendants' fenced locks, which
/// it excludes (found by review). The root alone draws from the root's fence, as path locks do.
#[tokio::test]
async fn a_fenced_lock_of_a_paths_name_alone_is_refused() {
    let client = lock_client().await;
    let name = path(&unique("fenced-name"), &["acct"]).resource();
    let refused = client
        .try_acquire(&name, &opts("alone").fencing(true))
        .await
        .unwrap_err();
    assert!(
        matches!(
            &refused,
            ddb_lock::Error::InvalidInput(ddb_lock::InvalidInput::FencedPathName { .. })
        ),
        "{refused:?}"
    );
    assert_eq!(
        ddb_lock_test_kit::raw_item(&name).await,
        None,
        "nothing was written"
    );
}

/// Every path lock writes an intention on the root: a namespace holds at most 100 live path locks
/// of one intention mode, and the 101st, on a path that conflicts with none of them, is refused at
/// the root (a documented limit, pinned here).
#[tokio::test]
async fn a_namespace_holds_at_most_100_path_locks_of_one_intention_mode() {
    let plain = lock_client().await;
    let namespace = ddb_lock::Namespace::new(unique("paths-limit")).unwrap();
    let client = plain.in_namespace(namespace).unwrap();
    let mut sets = Vec::new();
    for i in 0..100 {
        match try_path(
            &client,
            &LockPath::new([format!("p{i}")]),
            Mode::Exclusive,
            "x",
        )
        .await
        {
            SetAttempt::Acquired(set) => sets.push(set),
            held => panic!("path {i}: {held:?}"),
        }
    }
    let refused = try_path(&client, &LockPath::new(["p100"]), Mode::Exclusive, "x").await;
    assert_eq!(blocked_at(&refused), LockPath::root());
    for set in &sets {
        client.release_set(set).await;
    }
    let SetAttempt::Acquired(set) =
        try_path(&client, &LockPath::new(["p100"]), Mode::Exclusive, "x").await
    else {
        panic!("the root has room again");
    };
    client.release_set(&set).await;
}

/// A holder of a path lock takes another below the same ancestor while an exclusive acquirer of
/// that ancestor waits for it: the waiter places no marker over intentions, which would hold the
/// second path lock until the waiter's deadline while the waiter waits for the first (tried and
/// reverted: a review found it; the waiter is not preferred over path locks below).
#[tokio::test]
async fn a_path_holder_takes_a_sibling_while_a_writer_waits_for_their_ancestor() {
    let direct = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let writer = ddb_lock_test_kit::client_at(&proxy.endpoint());
    let root = unique("nested");
    let (ab, ac) = (path(&root, &["B"]), path(&root, &["C"]));
    let SetAttempt::Acquired(first) = try_path(&direct, &ab, Mode::Exclusive, "r1").await else {
        panic!("a free path is taken");
    };
    let ancestor = path(&root, &[]).resource();
    let waiting = tokio::spawn({
        let (writer, ancestor) = (writer.clone(), ancestor.clone());
        async move {
            writer
                .acquire(&ancestor, &opts("w").timeout(Duration::from_secs(60)))
                .await
        }
    });
    // Its announce answered (refused, for intentions alone).
    proxy
        .wait_for("UpdateItem", |counts| counts.answered >= 1)
        .await;
    let SetAttempt::Acquired(second) = try_path(&direct, &ac, Mode::Exclusive, "r1").await else {
        panic!("the sibling waited behind the writer that waits for its holder");
    };
    direct.release_set(&first).await;
    direct.release_set(&second).await;
    let w = waiting
        .await
        .unwrap()
        .expect("the writer gets the ancestor");
    assert_eq!(w.owner(), "w");
}

/// As above with a reader of the ancestor itself when the writer comes: its marker is placed over
/// that reader, and it refused the path holder's sibling (an intention on the ancestor), so the
/// holder waited behind the writer, which waited for the holder. A marker stops new readers of
/// the item only, never intentions (path locks below it).
#[tokio::test]
async fn a_path_holder_takes_a_sibling_while_a_writer_waits_behind_a_reader_of_their_ancestor() {
    let direct = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let writer = ddb_lock_test_kit::client_at(&proxy.endpoint());
    let root = unique("nested-reader");
    let (ab, ac) = (path(&root, &["B"]), path(&root, &["C"]));
    let ancestor = path(&root, &[]);
    let SetAttempt::Acquired(reader) = try_path(&direct, &ancestor, Mode::Shared, "r0").await
    else {
        panic!("a free path is read");
    };
    let SetAttempt::Acquired(first) = try_path(&direct, &ab, Mode::Shared, "r1").await else {
        panic!("a path under a reader is read");
    };
    let waiting = tokio::spawn({
        let (writer, ancestor) = (writer.clone(), ancestor.resource());
        async move {
            writer
                .acquire(&ancestor, &opts("w").timeout(Duration::from_secs(60)))
                .await
        }
    });
    // Its announce answered (placed, over the reader).
    proxy
        .wait_for("UpdateItem", |counts| counts.answered >= 1)
        .await;
    direct.release_set(&reader).await;
    let SetAttempt::Acquired(second) = try_path(&direct, &ac, Mode::Shared, "r1").await else {
        panic!("the sibling waited behind the writer that waits for its holder");
    };
    // A new reader of the ancestor itself still waits behind the writer.
    let SetAttempt::Held { holder, .. } = try_path(&direct, &ancestor, Mode::Shared, "r2").await
    else {
        panic!("a reader overtook the waiting writer");
    };
    assert_eq!(holder.owner, "w");
    direct.release_set(&first).await;
    direct.release_set(&second).await;
    let w = waiting
        .await
        .unwrap()
        .expect("the writer gets the ancestor");
    assert_eq!(w.owner(), "w");
}
