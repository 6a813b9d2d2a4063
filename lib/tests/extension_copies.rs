//! Extensions that arrive twice or late, against the local endpoint: a copy of an applied
//! extension changes nothing, even after a data change was written again at the lease end it had
//! stored; that rewrite keeps the stored lease (`LeaseMs`) when it is the longer, which the
//! observed-lease takeover rule counts by; and a guard's extensions end their leases in the
//! order it sends them, so a late one changes nothing even after its clock stepped back.

use aws_sdk_dynamodb::types::AttributeValue;
use ddb_lock::{AcquireOptions, ExtendOutcome};
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{client_through, endpoint, lock_client, raw_item, string_attr, unique};
use std::collections::HashMap;
use std::time::Duration;

fn data(item: &HashMap<String, AttributeValue>) -> Vec<u8> {
    match item.get("Data") {
        Some(AttributeValue::B(blob)) => blob.as_ref().to_vec(),
        other => panic!("no Data blob: {other:?}"),
    }
}

fn lease_ms(item: &HashMap<String, AttributeValue>) -> &str {
    match item.get("LeaseMs") {
        Some(AttributeValue::N(ms)) => ms,
        other => panic!("no LeaseMs: {other:?}"),
    }
}

/// A data change with a long lease is applied and arrives a second time after a shorter one,
/// which was refused by the longer stored lease and written again at that lease end. The copy
/// must not put the older data back (with `#expires_at <= :expires_at` it met its own lease end
/// and applied again).
#[tokio::test]
async fn a_copy_of_an_applied_data_change_does_not_undo_a_later_one() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let resource = unique("extension-copy");
    let opts = AcquireOptions::new()
        .owner("alice")
        .lease(Duration::from_secs(30));
    let lock = client.try_acquire(&resource, &opts).await.unwrap().unwrap();

    let copy = proxy.duplicate_next_request_containing("UpdateItem", "#data = :data");
    let long = client
        .extend_and_replace_data(&lock, Duration::from_secs(60), Some(b"old".to_vec()))
        .await
        .unwrap();
    assert!(matches!(long, ExtendOutcome::Extended(_)), "{long:?}");
    let stored_end = string_attr(&raw_item(&resource).await.unwrap(), "ExpiresAt").to_owned();
    // From another client (a handle from elsewhere): the lock's own client asks for an end past
    // every one it sent, and is never refused by its own longer lease.
    let elsewhere = lock_client().await;
    let short = elsewhere
        .extend_and_replace_data(&lock, Duration::from_secs(5), Some(b"new".to_vec()))
        .await
        .unwrap();
    assert!(matches!(short, ExtendOutcome::Extended(_)), "{short:?}");
    let item = raw_item(&resource).await.unwrap();
    assert_eq!(data(&item), b"new");
    assert_eq!(
        string_attr(&item, "ExpiresAt"),
        stored_end,
        "never shortened"
    );
    let version = string_attr(&item, "Version").to_owned();

    assert!(copy.deliver().await, "the copy reached the endpoint");

    let item = raw_item(&resource).await.unwrap();
    assert_eq!(data(&item), b"new", "the copy put the older data back");
    assert_eq!(string_attr(&item, "Version"), version);
    client.release(&lock).await.unwrap();
}

/// A data change refused by a longer stored lease is written again at that lease end, and keeps
/// the longer `LeaseMs` with it: a waiter under the observed-lease rule takes over a version it saw
/// unchanged for that version's `LeaseMs`, and the shorter one let it take the lock while the
/// caller of the long extension still held it.
#[tokio::test]
async fn a_data_change_written_again_keeps_the_longer_stored_lease() {
    let client = lock_client().await;
    let resource = unique("extension-rewrite-lease");
    let opts = AcquireOptions::new()
        .owner("alice")
        .lease(Duration::from_secs(3));
    let lock = client.try_acquire(&resource, &opts).await.unwrap().unwrap();

    let long = client.extend(&lock, Duration::from_secs(60)).await.unwrap();
    assert!(matches!(long, ExtendOutcome::Extended(_)), "{long:?}");
    let before = raw_item(&resource).await.unwrap();
    assert_eq!(lease_ms(&before), "60000");
    // From another client (a handle from elsewhere), which does not know of the longer lease.
    let elsewhere = ddb_lock_test_kit::builder(ddb_lock_test_kit::dynamodb())
        .build()
        .unwrap();
    let short = elsewhere
        .extend_and_replace_data(&lock, Duration::from_secs(3), Some(b"step 2".to_vec()))
        .await
        .unwrap();
    let ExtendOutcome::Extended(short) = short else {
        panic!("{short:?}");
    };

    let after = raw_item(&resource).await.unwrap();
    assert_eq!(data(&after), b"step 2");
    assert_ne!(
        string_attr(&after, "Version"),
        string_attr(&before, "Version")
    );
    assert_eq!(
        string_attr(&after, "ExpiresAt"),
        string_attr(&before, "ExpiresAt")
    );
    assert_eq!(lease_ms(&after), "60000", "the rewrite shortened LeaseMs");
    // Its caller is promised its own, shorter lease only.
    assert!(short.valid_until() <= std::time::Instant::now() + Duration::from_secs(3));
    client.release(&lock).await.unwrap();
}

/// A data replacement whose request is held in the network (its caller gave up on it), then a
/// later one after the client's clock stepped back, then the first arrives: the later data
/// stays. The later replacement computed an earlier lease end than the first from the stepped
/// clock, was written again at the stored one, and the late request, to a later end than that,
/// applied its older data under a guard that said it held the newer.
#[tokio::test]
async fn a_late_data_change_does_not_undo_one_sent_after_the_clock_stepped_back() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let clock = ddb_lock_test_kit::AdjustableClock::new();
    let client = client_through(&proxy, Some(clock.clone()));
    let resource = unique("extension-step-back");
    let guard = client
        .lock(
            &resource,
            &ddb_lock_test_kit::guard_options("alice", 60_000, 20_000),
        )
        .await
        .unwrap();
    let mut late = proxy.delay_next_request_containing("UpdateItem", "#data = :data");
    tokio::select! {
        answer = guard.replace_data(Some(b"first".to_vec())) => panic!("answered while held: {answer:?}"),
        () = late.captured() => {}
    }
    clock.set_back(Duration::from_secs(2));
    guard.replace_data(Some(b"second".to_vec())).await.unwrap();
    assert!(
        late.deliver().await,
        "the late request reached the endpoint"
    );
    assert!(guard.is_held());
    assert_eq!(data(&raw_item(&resource).await.unwrap()), b"second");
    guard.release().await.unwrap();
}

/// A data replacement asking for a long lease is held in the network (its caller gave up on it),
/// then a later one asks for a shorter lease, then the first arrives: the later data stays. The
/// later one ended before the first, was refused by the stored lease and written again at it,
/// and the late request, to a later end, applied its older data.
#[tokio::test]
async fn a_late_data_change_does_not_undo_a_later_one_that_asked_for_a_shorter_lease() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let resource = unique("extension-shorter-later");
    let opts = AcquireOptions::new()
        .owner("alice")
        .lease(Duration::from_secs(30));
    let lock = client.try_acquire(&resource, &opts).await.unwrap().unwrap();
    let mut late = proxy.delay_next_request_containing("UpdateItem", "#data = :data");
    tokio::select! {
        answer = client.extend_and_replace_data(&lock, Duration::from_secs(120), Some(b"first".to_vec())) => {
            panic!("answered while held: {answer:?}")
        }
        () = late.captured() => {}
    }
    let later = client
        .extend_and_replace_data(&lock, Duration::from_secs(10), Some(b"second".to_vec()))
        .await
        .unwrap();
    assert!(matches!(later, ExtendOutcome::Extended(_)), "{later:?}");
    assert!(
        late.deliver().await,
        "the late request reached the endpoint"
    );
    assert_eq!(data(&raw_item(&resource).await.unwrap()), b"second");
    client.release(&lock).await.unwrap();
}

/// An extension answered after its own client released the lock: applied before the release's
/// delete, it was answered `Extended`, a lease the caller counted on for a lock already gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_answered_after_its_clients_release_is_not_found() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_through(&proxy, None);
    let resource = unique("extension-after-release");
    let lock = client
        .try_acquire(&resource, &AcquireOptions::new().owner("alice"))
        .await
        .unwrap()
        .unwrap();

    let mut answer = proxy.withhold_next_answer("UpdateItem");
    let extending = tokio::spawn({
        let (client, lock) = (client.clone(), lock.clone());
        async move { client.extend(&lock, Duration::from_secs(60)).await }
    });
    answer.applied().await;
    assert_eq!(
        client.release(&lock).await.unwrap(),
        ddb_lock::ReleaseOutcome::Released
    );
    answer.deliver();
    let late = extending.await.unwrap().unwrap();
    assert_eq!(late, ExtendOutcome::NotFound, "{late:?}");

    assert!(raw_item(&resource).await.is_none());
}

/// An extension of `lock` through `client` held in the network by `proxy` (its caller gave up on
/// it), then the clock moved past the lease (10 s) and a later extension through `client`
/// answered `Expired`; then the held one delivered.
async fn late_extension_after_expired(
    proxy: &Proxy,
    clock: &ddb_lock_test_kit::AdjustableClock,
    client: &ddb_lock::LockClient,
    lock: &ddb_lock::Lock,
) {
    late_extension_after_expired_through(proxy, clock, [client, client], lock).await;
}

/// [`late_extension_after_expired`], the held extension sent through `late`, the one that
/// answers `Expired` through `finder`.
async fn late_extension_after_expired_through(
    proxy: &Proxy,
    clock: &ddb_lock_test_kit::AdjustableClock,
    [late_client, finder]: [&ddb_lock::LockClient; 2],
    lock: &ddb_lock::Lock,
) {
    let mut late = proxy.delay_next_request("UpdateItem");
    tokio::select! {
        answer = late_client.extend(lock, Duration::from_secs(60)) => panic!("answered while held: {answer:?}"),
        () = late.captured() => {}
    }
    clock.advance(Duration::from_secs(11));
    let found = finder.extend(lock, Duration::from_secs(60)).await.unwrap();
    assert!(matches!(found, ExtendOutcome::Expired { .. }), "{found:?}");
    assert!(
        late.deliver().await,
        "the late request reached the endpoint"
    );
}

/// A ten-second lock of alice's on `resource`, taken through `client`.
async fn alices(client: &ddb_lock::LockClient, resource: &str) -> ddb_lock::Lock {
    let opts = AcquireOptions::new()
        .owner("alice")
        .lease(Duration::from_secs(10));
    client.try_acquire(resource, &opts).await.unwrap().unwrap()
}

/// An extension held in the network, then a later one that finds the lease over (the clock moved
/// past it): answered `Expired`, the lock is not held, yet the late request, sent while the lease
/// stood, landed after and held the lock for a lease nobody used (the next acquirer, on the same
/// clock, was refused until it ran out). The client now releases the lock it finds expired while
/// an earlier extension of it may land.
#[tokio::test]
async fn a_late_extension_after_one_found_the_lease_over_holds_nothing() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let clock = ddb_lock_test_kit::AdjustableClock::new();
    let client = client_through(&proxy, Some(clock.clone()));
    let resource = unique("extension-late-after-expired");
    let lock = alices(&client, &resource).await;
    late_extension_after_expired(&proxy, &clock, &client, &lock).await;

    let bob = client_through(&proxy, Some(clock));
    let taken = bob
        .try_acquire(&resource, &AcquireOptions::new().owner("bob"))
        .await
        .unwrap();
    assert!(
        taken.is_some(),
        "a lock answered expired is held: {:?}",
        raw_item(&resource).await
    );
    client.flush().await;
}

/// As above, for a lock taken by another client (a saga's, extended by a worker): the client
/// remembered no lease end its extensions of it sent, and let the late one hold it again.
#[tokio::test]
async fn a_late_extension_of_a_lock_taken_elsewhere_holds_nothing_after_it_expired() {
    let elsewhere = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let clock = ddb_lock_test_kit::AdjustableClock::new();
    let client = client_through(&proxy, Some(clock.clone()));
    let resource = unique("extension-late-elsewhere");
    let lock = alices(&elsewhere, &resource).await;
    late_extension_after_expired(&proxy, &clock, &client, &lock).await;
    assert_eq!(
        raw_item(&resource).await,
        None,
        "a lock answered expired is held"
    );
}

/// An extension through the holder's client on its way while another client's extension of the
/// same lock finds the lease over: that client knows of no extension of its own that may land,
/// and leaves the lock as it is. Released there, the holder's extension, landing between that
/// answer and the release, was answered `Extended` for a lock the release then deleted: its
/// caller went on holding a free lock. (A late extension of a caller that gave up on it holds
/// the lock for a lease nobody uses: the lesser harm, which only the client that sent it can
/// end.)
#[tokio::test]
async fn another_clients_expired_extension_leaves_the_lock_to_its_holders_extension() {
    let _ = lock_client().await;
    let (holders, others) = (
        Proxy::start(&endpoint()).await,
        Proxy::start(&endpoint()).await,
    );
    let clock = ddb_lock_test_kit::AdjustableClock::new();
    let holder = client_through(&holders, Some(clock.clone()));
    let other = client_through(&others, Some(clock.clone()));
    let resource = unique("extension-expired-elsewhere");
    let lock = alices(&holder, &resource).await;
    let mut on_its_way = holders.delay_next_request("UpdateItem");
    let extending = tokio::spawn({
        let (holder, lock) = (holder.clone(), lock.clone());
        async move { holder.extend(&lock, Duration::from_secs(60)).await }
    });
    on_its_way.captured().await;
    clock.advance(Duration::from_secs(11));
    let mut release = others.delay_next_request("DeleteItem");
    let mut finding = tokio::spawn({
        let (other, lock) = (other.clone(), lock.clone());
        async move { other.extend(&lock, Duration::from_secs(60)).await }
    });
    // The other's answer, or a release it sends first.
    let found = tokio::select! {
        found = &mut finding => Some(found),
        () = release.captured() => None,
    };
    assert!(on_its_way.deliver().await, "the holder's extension landed");
    let extended = extending.await.unwrap().unwrap();
    if release.is_captured() {
        assert!(release.deliver().await);
    }
    let found = match found {
        Some(found) => found,
        None => finding.await,
    };
    assert!(
        matches!(found.unwrap().unwrap(), ExtendOutcome::Expired { .. }),
        "the other client found the lease over"
    );
    let ExtendOutcome::Extended(extended) = extended else {
        panic!("the holder's extension: {extended:?}");
    };
    let item = raw_item(&resource)
        .await
        .expect("the lock its holder was told is extended");
    assert_eq!(string_attr(&item, "LockID"), lock.lock_id().to_string());
    assert_eq!(
        string_attr(&item, "ExpiresAt"),
        ddb_lock_test_kit::stored(extended.expires_at())
    );
}

/// Under the observed-lease rule an extension refused by a later stored lease end is written
/// again over the stored version (a new version restarts the waiters' count). That rewrite, held
/// in the network (its caller gave up on it), then an extension that finds the lease over: the
/// rewrite landed after and wrote a new version, which made every waiter count a whole lease
/// again for a lock its holder was told had expired.
#[tokio::test]
async fn a_late_rewrite_under_the_observed_lease_rule_holds_nothing_after_it_expired() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let clock = ddb_lock_test_kit::AdjustableClock::new();
    let client = ddb_lock_test_kit::builder(ddb_lock_test_kit::quickly_retrying_dynamodb(
        &proxy.endpoint(),
    ))
    .clock(clock.clone())
    .takeover(ddb_lock::TakeoverRule::ObservedLease)
    .build()
    .unwrap();
    let resource = unique("extension-late-rewrite");
    let opts = AcquireOptions::new()
        .owner("alice")
        .lease(Duration::from_secs(10));
    let lock = client.try_acquire(&resource, &opts).await.unwrap().unwrap();
    let mut rewrite = proxy.delay_next_request_containing("UpdateItem", ":stored_version");
    tokio::select! {
        answer = client.extend(&lock, Duration::from_secs(1)) => panic!("answered while held: {answer:?}"),
        () = rewrite.captured() => {}
    }
    clock.advance(Duration::from_secs(11));
    let found = client.extend(&lock, Duration::from_secs(60)).await.unwrap();
    assert!(matches!(found, ExtendOutcome::Expired { .. }), "{found:?}");
    assert!(rewrite.deliver().await, "the rewrite reached the endpoint");
    assert_eq!(
        raw_item(&resource).await,
        None,
        "a lock answered expired is held"
    );
}

/// A release that DynamoDB failed on every try, then an extension of the same lock: applied (the
/// lock was still there), it was answered `NotFound` as the extension of a lock whose release
/// had started, and the lock stood extended for nobody for its new lease.
#[tokio::test]
async fn an_extension_applied_after_its_clients_release_failed_is_released() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::client_without_retries(&proxy.endpoint());
    let resource = unique("extension-after-failed-release");
    let lock = alices(&client, &resource).await;
    for _ in 0..4 {
        proxy.refuse_next("DeleteItem", "ThrottlingException");
    }
    let released = client.release(&lock).await;
    assert!(released.is_err(), "{released:?}");
    let extended = client.extend(&lock, Duration::from_secs(60)).await.unwrap();
    assert_eq!(extended, ExtendOutcome::NotFound);
    client.flush().await;
    assert_eq!(
        raw_item(&resource).await,
        None,
        "a lock answered not found is held"
    );
}

/// Two extensions of alice's lock through one client: the first held in the network, the clock
/// past the lease, the second refused (`Expired`), its answer held; then the first lands, and is
/// answered `Extended`. The second's answer, read after, told of an earlier extension that may
/// land, released the lock the first one's caller was told it held for a minute more (bob took
/// it: two holders; found by review). Read after an applied extension with a later lease end,
/// the refusal is out of date: the second is sent again, and extends the lock too.
#[tokio::test]
async fn an_expired_answer_read_after_an_earlier_extension_applied_releases_nothing() {
    let _ = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let clock = ddb_lock_test_kit::AdjustableClock::new();
    let client = client_through(&proxy, Some(clock.clone()));
    let resource = unique("expired-answer-after-applied");
    let lock = alices(&client, &resource).await;
    let mut late = proxy.delay_next_request("UpdateItem");
    let first = tokio::spawn({
        let (client, lock) = (client.clone(), lock.clone());
        async move { client.extend(&lock, Duration::from_secs(60)).await }
    });
    late.captured().await;
    clock.advance(Duration::from_secs(11));
    let mut refusal = proxy.withhold_next_answer("UpdateItem");
    let second = tokio::spawn({
        let (client, lock) = (client.clone(), lock.clone());
        async move { client.extend(&lock, Duration::from_secs(60)).await }
    });
    refusal.applied().await;
    assert!(late.deliver().await, "the first extension landed");
    let first = first.await.unwrap().unwrap();
    assert!(matches!(first, ExtendOutcome::Extended(_)), "{first:?}");
    refusal.deliver();
    let second = second.await.unwrap().unwrap();
    assert!(matches!(second, ExtendOutcome::Extended(_)), "{second:?}");
    client.flush().await;

    let bob = client_through(&proxy, Some(clock));
    let taken = bob
        .try_acquire(&resource, &AcquireOptions::new().owner("bob"))
        .await
        .unwrap();
    assert!(taken.is_none(), "bob took alice's extended lock");
    client.release(&lock).await.unwrap();
}
