//! Semaphores: at most their permits, crashed holders' slots reclaimed in the same write, and a
//! reclaim gone stale (a holder left meanwhile) not written again as it was.

use super::*;

#[tokio::test]
async fn a_semaphore_admits_its_permits_and_reclaims_crashed_slots_in_the_same_write() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let clock = AdjustableClock::new();
    let early = builder(dynamodb()).build().unwrap();
    let late = client_with_clock(&proxy.endpoint(), clock.clone());
    let resource = unique("semaphore/reclaim");

    let a = early
        .try_acquire(&resource, &permit("a", 2).lease(Duration::from_secs(5)))
        .await
        .unwrap()
        .expect("permit 1");
    let b = early
        .try_acquire(&resource, &permit("b", 2).lease(Duration::from_secs(5)))
        .await
        .unwrap()
        .expect("permit 2");
    match late
        .try_acquire_with_holder(&resource, &permit("c", 2))
        .await
        .unwrap()
    {
        AcquireAttempt::Held(holder) => assert!(["a", "b"].contains(&holder.owner.as_str())),
        AcquireAttempt::Acquired(lock) => panic!("a third permit of two: {lock:?}"),
    }
    // a and b crash: their leases end, for the late client's clock.
    clock.advance(Duration::from_secs(6));
    let before = proxy.total_requests();
    let c = late
        .try_acquire(&resource, &permit("c", 2))
        .await
        .unwrap()
        .expect("crashed slots reclaimed");
    assert_eq!(
        proxy.total_requests() - before,
        2,
        "refused, then reclaimed in one write: no sweeper"
    );
    assert_eq!(shared_owners(&late.status(&resource).await.unwrap()), ["c"]);
    let d = late
        .try_acquire(&resource, &permit("d", 2))
        .await
        .unwrap()
        .expect("the second slot is free");

    // The crashed holders come back: their slots are gone, and they change nothing.
    assert_eq!(early.release(&a).await.unwrap(), ReleaseOutcome::NotFound);
    assert_eq!(
        early.extend(&b, Duration::from_secs(60)).await.unwrap(),
        ExtendOutcome::NotFound
    );
    let mut owners = shared_owners(&late.status(&resource).await.unwrap());
    owners.sort();
    assert_eq!(owners, ["c", "d"]);
    late.release(&c).await.unwrap();
    late.release(&d).await.unwrap();
    assert!(raw_item(&resource).await.is_none());
}

/// A semaphore's reclaim of a crashed holder, refused because another holder left meanwhile, is
/// not written again as it was (certain to fail): the permit that was freed is taken.
#[tokio::test]
async fn a_reclaim_refused_by_a_holder_leaving_takes_the_freed_permit() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let clock = AdjustableClock::new();
    let early = builder(dynamodb()).build().unwrap();
    let late = client_with_clock(&proxy.endpoint(), clock.clone());
    let resource = unique("semaphore/stale-reclaim");
    let a = early
        .try_acquire(&resource, &permit("a", 3).lease(Duration::from_secs(5)))
        .await
        .unwrap()
        .expect("permit 1");
    let b = early
        .try_acquire(&resource, &permit("b", 3))
        .await
        .unwrap()
        .expect("permit 2");
    let c = early
        .try_acquire(&resource, &permit("c", 3))
        .await
        .unwrap()
        .expect("permit 3");
    // a crashes: its lease ends, for the late client's clock.
    clock.advance(Duration::from_secs(6));

    let reclaim = proxy.delay_next_request_containing("UpdateItem", "size(#shared) = :seen");
    let acquiring = {
        let (late, resource) = (late.clone(), resource.clone());
        tokio::spawn(async move {
            late.try_acquire_with_holder(&resource, &permit("d", 3))
                .await
        })
    };
    let mut reclaim = reclaim;
    reclaim.captured().await;
    early.release(&c).await.unwrap();
    assert!(reclaim.deliver().await);
    let d = match acquiring.await.unwrap().unwrap() {
        AcquireAttempt::Acquired(lock) => lock,
        AcquireAttempt::Held(holder) => panic!("held by {holder:?} with a permit free"),
    };

    let mut owners = shared_owners(&late.status(&resource).await.unwrap());
    owners.sort();
    assert!(
        owners.contains(&"d".to_owned()) && owners.contains(&"b".to_owned()),
        "{owners:?}"
    );
    for lock in [&a, &b] {
        let _ = early.release(lock).await.unwrap();
    }
    late.release(&d).await.unwrap();
}

/// A semaphore of the most permits, every holder lapsed: the next acquirer reclaims a permit in
/// one write whose condition names all 100 holders, within DynamoDB's 4 KB for an expression.
#[tokio::test]
async fn a_full_semaphore_of_lapsed_holders_is_reclaimed() {
    lock_client().await;
    let clock = AdjustableClock::new();
    let client = client_with_clock(&endpoint(), clock.clone());
    let resource = unique("semaphore/full-lapsed");
    for i in 0..100 {
        client
            .try_acquire(
                &resource,
                &permit(&format!("p{i}"), 100).lease(Duration::from_secs(5)),
            )
            .await
            .unwrap()
            .expect("a permit free");
    }
    assert!(
        client
            .try_acquire(&resource, &permit("late", 100))
            .await
            .unwrap()
            .is_none(),
        "every permit is taken"
    );
    clock.advance(Duration::from_secs(6));
    let lock = client
        .try_acquire(&resource, &permit("next", 100))
        .await
        .unwrap()
        .expect("a lapsed permit reclaimed");
    assert_eq!(lock.owner(), "next");
}
