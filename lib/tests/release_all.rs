//! `LockClient::release_all`: every lock the client holds, whichever call took it, released for
//! shutdown; guards say released before their release is sent; the call survives being dropped;
//! and, raced against acquisitions of the client's own tasks, no guard ever says held for a lock
//! it does not hold.

use ddb_lock::{AcquireOptions, LockClient, LockStatus, ReleaseOutcome};
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{builder, dynamodb_at, endpoint, lock_client, unique};
use std::time::Duration;

async fn is_free(client: &LockClient, resource: &str) -> bool {
    client.status(resource).await.unwrap() == LockStatus::Free
}

#[tokio::test]
async fn release_all_releases_every_lock_the_client_holds_and_its_guards_say_released() {
    let client = lock_client().await;
    let clone = client.clone();
    let [a, b, c, d, done] =
        ["a", "b", "c", "d", "done"].map(|name| unique(&format!("all/{name}")));
    let opts = AcquireOptions::new().lease(Duration::from_secs(60));

    let _a = client.acquire(&a, &opts).await.unwrap();
    let _b = client.try_acquire(&b, &opts).await.unwrap().expect("free");
    let guard = client.lock(&c, &opts).await.unwrap();
    let _d = clone.acquire(&d, &opts).await.unwrap(); // a clone shares the client's holds
    let released = client.acquire(&done, &opts).await.unwrap();
    client.release(&released).await.unwrap();

    let mut outcomes: Vec<(String, ReleaseOutcome)> = client
        .release_all()
        .await
        .into_iter()
        .map(|(lock, outcome)| (lock.resource().to_owned(), outcome.unwrap()))
        .collect();
    outcomes.sort_by(|x, y| x.0.cmp(&y.0));
    let mut expected: Vec<(String, ReleaseOutcome)> = [&a, &b, &c, &d]
        .into_iter()
        .map(|resource| (resource.clone(), ReleaseOutcome::Released))
        .collect();
    expected.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(outcomes, expected, "every held lock, and only those");
    assert!(!guard.is_held());
    assert_eq!(guard.lost().await, ddb_lock::LockLost::Released);
    for resource in [&a, &b, &c, &d] {
        assert!(is_free(&client, resource).await, "{resource}");
    }
    assert!(client.release_all().await.is_empty(), "nothing left");
    assert_eq!(
        guard.release().await.unwrap(),
        ReleaseOutcome::Unconfirmed,
        "released by `release_all`, not lost"
    );
}

#[tokio::test]
async fn a_lock_lost_meanwhile_is_reported_and_left_to_its_new_holder() {
    let client = lock_client().await;
    let other = lock_client().await;
    let resource = unique("all/lost");
    let lock = client
        .acquire(&resource, &AcquireOptions::new())
        .await
        .unwrap();
    other.force_release(&resource).await.unwrap();
    let theirs = other
        .acquire(&resource, &AcquireOptions::new())
        .await
        .unwrap();

    let outcomes = client.release_all().await;
    assert_eq!(outcomes.len(), 1);
    assert_eq!(outcomes[0].0, *lock.handle());
    assert!(matches!(outcomes[0].1, Ok(ReleaseOutcome::NotOwner { .. })));
    assert!(
        !is_free(&client, &resource).await,
        "the new holder keeps it"
    );
    other.release(&theirs).await.unwrap();
}

/// A shutdown deadline that drops `release_all` mid-flight cancels none of its releases: they run
/// in tasks of their own, which `flush` waits for.
#[tokio::test]
async fn a_dropped_release_all_still_releases_every_lock() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = builder(dynamodb_at(&proxy.endpoint())).build().unwrap();
    let resources: Vec<String> = (0..3)
        .map(|i| unique(&format!("all/dropped-{i}")))
        .collect();
    let opts = AcquireOptions::new().lease(Duration::from_secs(60));
    for resource in &resources {
        client.acquire(resource, &opts).await.unwrap();
    }
    let mut withheld = proxy.withhold_next_answer("DeleteItem");
    tokio::select! {
        outcomes = client.release_all() => panic!("answered despite a withheld answer: {outcomes:?}"),
        () = withheld.applied() => {} // the deadline strikes here
    }
    withheld.drop_it(); // the SDK retries that one release
    client.flush().await;
    for resource in &resources {
        assert!(is_free(&client, resource).await, "{resource}");
    }
    assert!(client.release_all().await.is_empty());
}

/// An extension of a guard in flight when `release_all` runs: it is applied before the release
/// (the release then removes it) or refused after it; either way the lock ends free and the guard
/// released.
#[tokio::test]
async fn an_extension_in_flight_does_not_outlive_release_all() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = builder(dynamodb_at(&proxy.endpoint())).build().unwrap();
    let resource = unique("all/extension");
    let opts = AcquireOptions::new()
        .lease(Duration::from_secs(3))
        .heartbeat(Duration::from_millis(50));
    let mut withheld = proxy.withhold_next_answer("UpdateItem");
    let guard = client.lock(&resource, &opts).await.unwrap();
    withheld.applied().await; // the heartbeat's extension is applied, its answer held back
    let outcomes = client.release_all().await;
    assert!(
        matches!(outcomes[..], [(_, Ok(ReleaseOutcome::Released))]),
        "{outcomes:?}"
    );
    assert!(!guard.is_held());
    withheld.drop_it();
    client.flush().await;
    assert!(is_free(&client, &resource).await);
    assert!(!guard.is_held());
}

/// Tasks of one client take and release guards on a few resources while `release_all` runs
/// again and again. At every quiet point, a guard that says held holds the lock in the table
/// (status names its lock id), and after a last `release_all` every resource is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_guard_says_held_for_a_lock_release_all_took() {
    let client = lock_client().await;
    let resources: Vec<String> = (0..4).map(|i| unique(&format!("all/race-{i}"))).collect();
    let opts = AcquireOptions::new()
        .lease(Duration::from_secs(30))
        .timeout(Duration::from_secs(20));
    for round in 0..15 {
        let tasks: Vec<_> = resources
            .iter()
            .cycle()
            .take(8)
            .cloned()
            .map(|resource| {
                let (client, opts) = (client.clone(), opts.clone());
                tokio::spawn(async move { client.try_lock(&resource, &opts).await.unwrap() })
            })
            .collect();
        let releaser = {
            let client = client.clone();
            tokio::spawn(async move { client.release_all().await })
        };
        let mut guards = Vec::new();
        for task in tasks {
            guards.extend(task.await.unwrap());
        }
        for (lock, outcome) in releaser.await.unwrap() {
            outcome.unwrap_or_else(|err| panic!("round {round}: {}: {err}", lock.resource()));
        }
        for guard in &guards {
            let Some(lock) = guard.lock() else { continue };
            match client.status(lock.resource()).await.unwrap() {
                LockStatus::Held { holder, .. } => assert_eq!(
                    holder.acquired_at,
                    lock.acquired_at(),
                    "round {round}: a guard says held for another acquisition"
                ),
                other => panic!("round {round}: a guard says held for {other:?}"),
            }
        }
        client.release_all().await;
        assert!(guards.iter().all(|guard| !guard.is_held()), "round {round}");
        drop(guards);
        client.flush().await;
        for resource in &resources {
            assert!(
                is_free(&client, resource).await,
                "round {round}: {resource}"
            );
        }
    }
}

/// A worker extends a lock another process took (a saga's step extending the saga's lock with
/// the handle it was given), then releases everything for its own shutdown: the lock it only
/// extended stays with its holder (it was released as the worker's own).
#[tokio::test]
async fn a_lock_only_extended_here_is_left_to_its_holder() {
    let holder = lock_client().await;
    let worker = lock_client().await;
    let resource = unique("all/extended-elsewhere");
    let lock = holder
        .try_acquire(&resource, &AcquireOptions::new().owner("saga"))
        .await
        .unwrap()
        .expect("free");
    let extended = worker
        .extend(lock.handle(), Duration::from_secs(60))
        .await
        .unwrap();
    assert!(matches!(extended, ddb_lock::ExtendOutcome::Extended(_)));
    assert!(worker.release_all().await.is_empty());
    assert!(!is_free(&holder, &resource).await, "the holder keeps it");
    assert_eq!(
        holder.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
}

/// `release_all` while a release of one of the client's locks is on its way (`with_lock`'s, held
/// in the network): it sent a second release of the lock, which landed first; the first, refused,
/// found the lock gone, and `with_lock` answered that its work had lost the lock. The lock is now
/// left to the release on its way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_all_leaves_a_lock_to_its_release_on_the_way() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::client_through(&proxy, None);
    let resource = unique("all/release-on-its-way");
    let mut held = proxy.delay_next_request("DeleteItem");
    let job = tokio::spawn({
        let (client, resource) = (client.clone(), resource.clone());
        async move {
            client
                .with_lock(&resource, &AcquireOptions::new(), |_| async {
                    Ok::<_, ddb_lock::Error>(7)
                })
                .await
        }
    });
    held.captured().await;
    let mut all = Box::pin(client.release_all());
    // Polled once: it takes the client's locks at its first poll.
    tokio::select! {
        biased;
        ended = &mut all => panic!("answered with a release held back: {ended:?}"),
        () = std::future::ready(()) => {}
    }
    assert!(held.deliver().await, "the release reached the endpoint");
    let ended = all.await;
    assert!(ended.is_empty(), "released twice: {ended:?}");
    assert_eq!(job.await.unwrap().unwrap(), 7);
    assert!(is_free(&client, &resource).await);
}

/// A lock whose release by `release_all` DynamoDB failed every try is remembered again, and a
/// release of its resource by another owner, refused, leaves it so: the next `release_all`
/// releases it. (The refused release freed every hold on the resource that had been marked
/// released, the one remembered again included: the next `release_all` missed it, and the lock
/// stayed held for nobody for its lease.)
#[tokio::test]
async fn a_lock_remembered_again_after_its_release_failed_is_released_by_the_next_call() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = builder(dynamodb_at(&proxy.endpoint())).build().unwrap();
    let resource = unique("all/remembered-again");
    let opts = AcquireOptions::new().lease(Duration::from_secs(60));
    client.acquire(&resource, &opts).await.unwrap();
    for _ in 0..4 {
        proxy.refuse_next("DeleteItem", "ValidationException");
    }
    let outcomes = client.release_all().await;
    assert!(matches!(outcomes[..], [(_, Err(_))]), "{outcomes:?}");
    assert_eq!(proxy.counts("DeleteItem").throttled, 4, "every try failed");

    let other = client
        .release_owned(&resource, "someone else")
        .await
        .unwrap();
    assert!(
        matches!(other, ReleaseOutcome::NotOwner { .. }),
        "{other:?}"
    );
    let outcomes = client.release_all().await;
    assert!(
        matches!(outcomes[..], [(_, Ok(ReleaseOutcome::Released))]),
        "{outcomes:?}"
    );
    assert!(is_free(&client, &resource).await);
}

/// Two extensions of a lock applied, the client's release of it failed every try, and then the
/// first extension answered (`NotFound`: its lock was being released), the second's answer never
/// read: the first's release, only of the version it wrote, is on its way when `release_all`
/// runs, and is refused by the second's newer version. `release_all` releases the lock all the
/// same. (It left the lock to that release, which ended nothing: held for nobody for the second
/// extension's lease.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_all_releases_a_lock_a_late_extensions_refused_release_was_on_its_way_for() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::client_through(&proxy, None);
    let resource = unique("all/late-extension");
    let lock = client
        .acquire(
            &resource,
            &AcquireOptions::new().lease(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    let extending = |lease: u64| {
        let (client, handle) = (client.clone(), lock.handle().clone());
        tokio::spawn(async move { client.extend(&handle, Duration::from_secs(lease)).await })
    };
    let mut first = proxy.withhold_next_answer("UpdateItem");
    let first_extension = extending(120);
    first.applied().await;
    let mut second = proxy.withhold_next_answer("UpdateItem");
    let second_extension = extending(180);
    second.applied().await;
    second_extension.abort(); // its answer is never read
    for _ in 0..4 {
        proxy.refuse_next("DeleteItem", "ValidationException");
    }
    assert!(client.release(&lock).await.is_err(), "every try failed");

    let mut late_release = proxy.delay_next_request_containing("DeleteItem", ":version");
    first.deliver();
    assert_eq!(
        first_extension.await.unwrap().unwrap(),
        ddb_lock::ExtendOutcome::NotFound
    );
    late_release.captured().await;
    let mut all = Box::pin(client.release_all());
    // Polled once: it takes the client's locks at its first poll.
    tokio::select! {
        biased;
        ended = &mut all => panic!("answered with a release held back: {ended:?}"),
        () = std::future::ready(()) => {}
    }
    assert!(
        late_release.deliver().await,
        "the release reached the endpoint"
    );
    let outcomes = all.await;
    assert!(
        matches!(outcomes[..], [(_, Ok(ReleaseOutcome::Released))]),
        "{outcomes:?}"
    );
    client.flush().await;
    assert!(is_free(&client, &resource).await);
}

/// A lock whose acquisition was answered only after a release by its owner started (and removed
/// it): the release's answer, naming the lock it removed, frees it in the client, and
/// `release_all` finds nothing to release. (It released it again, and reported it `NotFound`: a
/// loss of a lock its own client had released.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_a_release_by_owner_removed_before_its_acquisition_answered_is_not_held() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::client_through(&proxy, None);
    let resource = unique("all/removed-before-answered");
    let mut acquisition = proxy.withhold_next_answer("PutItem");
    let acquiring = {
        let (client, resource) = (client.clone(), resource.clone());
        tokio::spawn(async move {
            client
                .try_acquire(&resource, &AcquireOptions::new().owner("alice"))
                .await
        })
    };
    acquisition.applied().await;
    let mut release = proxy.delay_next_request("DeleteItem");
    let releasing = {
        let (client, resource) = (client.clone(), resource.clone());
        tokio::spawn(async move { client.release_owned(&resource, "alice").await })
    };
    release.captured().await;
    acquisition.deliver();
    assert!(acquiring.await.unwrap().unwrap().is_some(), "acquired");
    assert!(release.deliver().await, "the release reached the endpoint");
    assert_eq!(releasing.await.unwrap().unwrap(), ReleaseOutcome::Released);
    let outcomes = client.release_all().await;
    assert!(outcomes.is_empty(), "{outcomes:?}");
}
