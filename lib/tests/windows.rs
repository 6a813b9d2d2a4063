//! Once-per-window locks against the local endpoint: the first caller of a window wins and later
//! ones are refused, the next window is won again with nothing released, one request per claim,
//! a caller whose clock is behind cannot take a window already passed, callers racing for one
//! window get one winner, and what clocks at a window boundary do, with and without the
//! skew-safe variant.

use chrono::{DateTime, TimeZone, Utc};
use ddb_lock::{Error, InvalidInput, LockClient, LockStatus, Window, WindowClaim};
use ddb_lock_test_kit::clocks::{AdjustableClock, FixedClock, OffsetClock};
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{builder, dynamodb, dynamodb_at, endpoint, lock_client, unique};
use std::sync::Arc;
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);

fn client_with(clock: Arc<dyn ddb_lock::Clock>, owner: &str) -> LockClient {
    builder(dynamodb())
        .clock(clock)
        .owner(owner)
        .build()
        .unwrap()
}

fn at(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).unwrap()
}

#[tokio::test]
async fn the_first_caller_of_each_window_wins_and_nothing_is_released() {
    lock_client().await;
    let clock = AdjustableClock::new();
    let a = client_with(clock.clone(), "node-a");
    let b = client_with(clock.clone(), "node-b");
    let key = unique("window/report");
    let hourly = Window::every(HOUR);

    let WindowClaim::Claimed { window, ends_at } = a.claim_window(&key, &hourly).await.unwrap()
    else {
        panic!("the first caller wins");
    };
    match b.claim_window(&key, &hourly).await.unwrap() {
        WindowClaim::Taken {
            window: taken,
            holder,
        } => {
            assert_eq!((taken, holder.owner.as_str()), (Some(window), "node-a"));
            assert_eq!(
                holder.expires_at, ends_at,
                "the claim lasts until its window ends"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(
            a.claim_window(&key, &hourly).await.unwrap(),
            WindowClaim::Taken { .. }
        ),
        "the winner too is refused a second run in its window"
    );
    // The claim reads as a lock held until the window ends.
    let resource = format!("window:{key}");
    assert!(matches!(
        a.status(&resource).await.unwrap(),
        LockStatus::Held { .. }
    ));

    clock.advance(HOUR);
    match b.claim_window(&key, &hourly).await.unwrap() {
        WindowClaim::Claimed { window: next, .. } => assert_eq!(next, window + 1),
        other => panic!("the next window is won again: {other:?}"),
    }
}

#[tokio::test]
async fn a_claim_is_one_request() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = builder(dynamodb_at(&proxy.endpoint())).build().unwrap();
    let key = unique("window/cost");
    let minute = Window::every(Duration::from_secs(60));
    client.claim_window(&key, &minute).await.unwrap();
    client.claim_window(&key, &minute).await.unwrap();
    assert_eq!(
        proxy.total_requests(),
        2,
        "one PutItem per claim, won or refused"
    );
}

#[tokio::test]
async fn a_caller_whose_clock_is_behind_cannot_take_a_window_already_passed() {
    lock_client().await;
    let key = unique("window/behind");
    let hourly = Window::every(HOUR);
    let ahead = client_with(Arc::new(ddb_lock::SystemClock), "on-time");
    let WindowClaim::Claimed { window, .. } = ahead.claim_window(&key, &hourly).await.unwrap()
    else {
        panic!("free");
    };
    let behind = client_with(OffsetClock::shared(chrono::TimeDelta::hours(-1)), "behind");
    match behind.claim_window(&key, &hourly).await.unwrap() {
        WindowClaim::Taken { window: taken, .. } => assert_eq!(taken, Some(window)),
        other => panic!("window {} is past: {other:?}", window - 1),
    }
}

#[tokio::test]
async fn callers_racing_for_one_window_get_one_winner() {
    lock_client().await;
    let key = unique("window/race");
    let clients: Vec<LockClient> = (0..16)
        .map(|i| client_with(Arc::new(ddb_lock::SystemClock), &format!("node-{i}")))
        .collect();
    let hourly = Window::every(HOUR);
    let claims =
        futures_util::future::join_all(clients.iter().map(|c| c.claim_window(&key, &hourly))).await;
    let winners = claims
        .iter()
        .filter(|c| matches!(c, Ok(WindowClaim::Claimed { .. })))
        .count();
    assert_eq!(winners, 1, "{claims:?}");
}

#[tokio::test]
async fn clocks_at_a_boundary_run_twice_unless_the_skew_safe_variant_waits() {
    lock_client().await;
    let hourly = Window::every(HOUR);
    let boundary = 1_795_521_600_000_i64; // a whole hour, in Unix milliseconds
    assert_eq!(boundary % 3_600_000, 0);
    // Two callers 2 ms apart across the boundary: each its own window, both run.
    let key = unique("window/boundary");
    let early = client_with(FixedClock::shared(at(boundary - 1)), "early");
    let late = client_with(FixedClock::shared(at(boundary + 1)), "late");
    assert!(matches!(
        early.claim_window(&key, &hourly).await.unwrap(),
        WindowClaim::Claimed { .. }
    ));
    assert!(matches!(
        late.claim_window(&key, &hourly).await.unwrap(),
        WindowClaim::Claimed { .. }
    ));

    // The skew-safe variant: within max_skew of the window's start, too early…
    let safe = hourly.clone().max_skew(Duration::from_millis(5));
    let key = unique("window/skew-safe");
    assert!(matches!(
        early.claim_window(&key, &safe).await.unwrap(),
        WindowClaim::Claimed { .. }
    ));
    match late.claim_window(&key, &safe).await.unwrap() {
        WindowClaim::TooEarly { retry_at, .. } => assert_eq!(retry_at, at(boundary + 5)),
        other => panic!("{other:?}"),
    }
    // …and once past it, the window is won.
    let later = client_with(FixedClock::shared(at(boundary + 5)), "later");
    assert!(matches!(
        later.claim_window(&key, &safe).await.unwrap(),
        WindowClaim::Claimed { .. }
    ));
}

#[tokio::test]
async fn bad_windows_are_refused_naming_the_field() {
    let client = lock_client().await;
    let cases = [
        ("k", Window::every(Duration::ZERO), "period"),
        ("k", Window::every(HOUR).max_skew(HOUR), "max_skew"),
        ("", Window::every(HOUR), "key"),
    ];
    for (key, window, field) in cases {
        match client.claim_window(key, &window).await {
            Err(Error::InvalidInput(invalid)) => assert_eq!(invalid.field(), field),
            other => panic!("{field}: {other:?}"),
        }
    }
    assert!(matches!(
        client
            .claim_window(&"k".repeat(4096), &Window::every(HOUR))
            .await,
        Err(Error::InvalidInput(InvalidInput::TooLarge {
            field: "resource",
            ..
        }))
    ));
}

#[tokio::test]
async fn a_claim_whose_answer_was_lost_is_still_won() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::quickly_retrying_client(&proxy.endpoint());
    let key = unique("window/lost");
    proxy.drop_next_answer("PutItem");
    let claim = client
        .claim_window(&key, &Window::every(HOUR))
        .await
        .unwrap();
    assert!(matches!(claim, WindowClaim::Claimed { .. }), "{claim:?}");
    assert_eq!(
        proxy.counts("PutItem").requests,
        2,
        "the claim and its retry"
    );
}

/// A claim whose every answer was lost is an error, and gives its window back before it returns:
/// a retry (or another caller) claims the window. The claim had landed, and the window was run by
/// nobody: its caller, told of an error, did not run the job, and every later caller was refused.
/// An earlier window stays refused.
#[tokio::test]
async fn a_claim_whose_every_answer_was_lost_gives_its_window_back() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::quickly_retrying_client(&proxy.endpoint());
    let key = unique("window/all-lost");
    let hourly = Window::every(HOUR);
    for _ in 0..3 {
        proxy.drop_next_answer("PutItem");
    }
    let lost = client.claim_window(&key, &hourly).await;
    assert!(matches!(lost, Err(Error::Backend { .. })), "{lost:?}");
    let retried = client.claim_window(&key, &hourly).await.unwrap();
    assert!(
        matches!(retried, WindowClaim::Claimed { .. }),
        "{retried:?}"
    );
    let an_hour_behind = client_with(OffsetClock::shared(chrono::TimeDelta::hours(-1)), "behind");
    assert!(matches!(
        an_hour_behind.claim_window(&key, &hourly).await.unwrap(),
        WindowClaim::Taken { .. }
    ));
}

/// `client` claims `key`'s window through `proxy`, and the claim's future is dropped once its
/// write has landed, before its answer came; then the client's background work is done.
async fn claim_dropped_after_it_landed(
    proxy: &Proxy,
    client: &LockClient,
    key: &str,
    window: &Window,
) {
    let mut answer = proxy.withhold_next_answer("PutItem");
    let claim = {
        let (client, key, window) = (client.clone(), key.to_owned(), window.clone());
        tokio::spawn(async move { client.claim_window(&key, &window).await })
    };
    answer.applied().await;
    claim.abort();
    assert!(claim.await.unwrap_err().is_cancelled());
    answer.drop_it();
    client.flush().await;
}

/// A claim whose future is dropped after its write landed gives its window back from the
/// background (`flush` waits for it): nobody was left to run the job.
#[tokio::test]
async fn a_claim_dropped_after_its_write_landed_gives_its_window_back() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::quickly_retrying_client(&proxy.endpoint());
    let key = unique("window/dropped");
    let hourly = Window::every(HOUR);
    claim_dropped_after_it_landed(&proxy, &client, &key, &hourly).await;
    // Given back, the window is free, and `status` says so (it said held by the gone claimant).
    let status = client.status(&format!("window:{key}")).await.unwrap();
    assert_eq!(status, ddb_lock::LockStatus::Free);
    let again = client.claim_window(&key, &hourly).await.unwrap();
    assert!(matches!(again, WindowClaim::Claimed { .. }), "{again:?}");
}

/// A caller at the very first millisecond of a window wins it: the previous window's claim ends
/// there (its lease end is exclusive), and its lease did not refuse the new window's claim then.
#[tokio::test]
async fn the_first_millisecond_of_a_window_claims_it() {
    lock_client().await;
    let hourly = Window::every(HOUR);
    let boundary = 1_795_525_200_000_i64; // a whole hour, in Unix milliseconds
    assert_eq!(boundary % 3_600_000, 0);
    let key = unique("window/first-millisecond");
    let before = client_with(FixedClock::shared(at(boundary - 1)), "before");
    let at_start = client_with(FixedClock::shared(at(boundary)), "at-start");
    assert!(matches!(
        before.claim_window(&key, &hourly).await.unwrap(),
        WindowClaim::Claimed { .. }
    ));
    match at_start.claim_window(&key, &hourly).await.unwrap() {
        WindowClaim::Claimed { window, .. } => assert_eq!(window, (boundary / 3_600_000) as u64),
        other => panic!("{other:?}"),
    }
}

/// A copy of a claim (the network's, or an SDK resend slow on the wire) delivered after the
/// dropped claim gave its window back: it claimed the window again for a claimant that had gone,
/// and nobody ran the job that window.
#[tokio::test]
async fn a_late_copy_of_a_claim_given_back_does_not_take_the_window_again() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::quickly_retrying_client(&proxy.endpoint());
    let key = unique("window/late-copy");
    let hourly = Window::every(HOUR);
    let copy = proxy.duplicate_next_request_containing("PutItem", "#window");
    claim_dropped_after_it_landed(&proxy, &client, &key, &hourly).await;

    assert!(copy.deliver().await, "the copy reached the endpoint");
    let again = client.claim_window(&key, &hourly).await.unwrap();
    assert!(matches!(again, WindowClaim::Claimed { .. }), "{again:?}");
}

/// A claim whose first attempt is held in the network (the SDK sends it again after the attempt's
/// timeout) is refused by another caller's claim, and told the window taken; that claim is given
/// back (its caller gone), and the first attempt lands after it: it claimed the window for a
/// caller told it was taken, and nobody ran the job that window (found by review). The claim
/// gives its window back, as a dropped claim does.
#[tokio::test]
async fn a_first_attempt_landing_after_its_refused_resend_gives_the_window_back() {
    lock_client().await;
    let key = unique("window/first-attempt-late");
    let hourly = Window::every(HOUR);
    // Bob's claim lands, his caller gone before its answer; his give-back is held.
    let bobs_proxy = Proxy::start(&endpoint()).await;
    let bob = ddb_lock_test_kit::quickly_retrying_client(&bobs_proxy.endpoint());
    let mut bobs_give_back = bobs_proxy.delay_next_request_containing("UpdateItem", ":previous");
    let mut answer = bobs_proxy.withhold_next_answer("PutItem");
    let claim = {
        let (bob, key, hourly) = (bob.clone(), key.clone(), hourly.clone());
        tokio::spawn(async move { bob.claim_window(&key, &hourly).await })
    };
    answer.applied().await;
    claim.abort();
    assert!(claim.await.unwrap_err().is_cancelled());
    answer.drop_it();
    bobs_give_back.captured().await;
    // Alice's first attempt is held; the SDK's resend is refused by Bob's claim.
    let alices_proxy = Proxy::start(&endpoint()).await;
    let alice = ddb_lock_test_kit::client_with_attempt_timeout(
        &alices_proxy.endpoint(),
        Duration::from_millis(500),
    );
    let first = alices_proxy.delay_next_request_containing("PutItem", "#window");
    let mut alices_give_back =
        alices_proxy.delay_next_request_containing("UpdateItem", ":previous");
    let taken = alice.claim_window(&key, &hourly).await.unwrap();
    assert!(matches!(taken, WindowClaim::Taken { .. }), "{taken:?}");

    assert!(bobs_give_back.deliver().await, "Bob's give-back landed");
    bob.flush().await;
    assert!(first.deliver().await, "Alice's first attempt landed");
    tokio::time::timeout(Duration::from_secs(20), alices_give_back.captured())
        .await
        .expect("the claim told the window taken gives it back");
    assert!(alices_give_back.deliver().await, "Alice's give-back landed");
    alice.flush().await;
    let carol = builder(dynamodb()).owner("carol").build().unwrap();
    let claimed = carol.claim_window(&key, &hourly).await.unwrap();
    assert!(
        matches!(claimed, WindowClaim::Claimed { .. }),
        "{claimed:?}"
    );
}

/// A claim made at once after a dropped claim of the same client landed, while that one's
/// give-back is held in the network: refused by the dropped claim, it said the window was taken
/// by this very caller, and the give-back then left the window to nobody. It waits for the
/// give-back and claims the window.
#[tokio::test]
async fn a_claim_refused_by_a_dropped_claim_being_given_back_claims_the_window() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::quickly_retrying_client(&proxy.endpoint());
    let key = unique("window/retried-at-once");
    let hourly = Window::every(HOUR);
    let mut give_back = proxy.delay_next_request_containing("UpdateItem", ":previous");
    let mut answer = proxy.withhold_next_answer("PutItem");
    let claim = {
        let (client, key, hourly) = (client.clone(), key.clone(), hourly.clone());
        tokio::spawn(async move { client.claim_window(&key, &hourly).await })
    };
    answer.applied().await;
    claim.abort();
    assert!(claim.await.unwrap_err().is_cancelled());
    answer.drop_it();
    give_back.captured().await;

    let again = {
        let (client, key, hourly) = (client.clone(), key.clone(), hourly.clone());
        tokio::spawn(async move { client.claim_window(&key, &hourly).await })
    };
    proxy
        .wait_for("PutItem", |counts| counts.answered >= 1)
        .await;
    assert!(
        give_back.deliver().await,
        "the give-back reached the endpoint"
    );
    let again = again.await.unwrap().unwrap();
    assert!(matches!(again, WindowClaim::Claimed { .. }), "{again:?}");
    client.flush().await;
    let status = client.status(&format!("window:{key}")).await.unwrap();
    assert!(matches!(status, LockStatus::Held { .. }), "{status:?}");
}

/// A claim refused by a claim of the same client still unanswered, whose caller then gives up:
/// it said the window was taken by this very caller, and the give-back then left the window to
/// nobody. It waits for that claim to be settled (here given back) and claims the window.
#[tokio::test]
async fn a_claim_refused_by_an_unanswered_claim_of_its_client_claims_the_window_given_back() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::quickly_retrying_client(&proxy.endpoint());
    let key = unique("window/refused-by-unanswered");
    let hourly = Window::every(HOUR);
    let claim = |client: &LockClient| {
        let (client, key, hourly) = (client.clone(), key.clone(), hourly.clone());
        tokio::spawn(async move { client.claim_window(&key, &hourly).await })
    };
    let mut answer = proxy.withhold_next_answer("PutItem");
    let first = claim(&client);
    answer.applied().await;
    let second = claim(&client);
    proxy
        .wait_for("PutItem", |counts| counts.answered >= 1)
        .await;
    first.abort();
    assert!(first.await.unwrap_err().is_cancelled());
    answer.drop_it();
    let second = second.await.unwrap().unwrap();
    assert!(matches!(second, WindowClaim::Claimed { .. }), "{second:?}");
}

/// A claim refused by an unanswered claim of its client whose answer is then lost and whose resend
/// fails (its caller, told of the error, claims again at once): the waiting claim's retry is
/// refused by that second claim, unanswered too, which fails the same way. The waiting claim
/// waits for that one too, and claims the window. (It waited once only, and answered `Taken` at
/// the second refusal: both claims given back, the window was claimed by nobody; found by
/// review.)
#[tokio::test]
async fn a_claim_refused_again_by_a_retry_of_its_clients_claim_waits_for_that_one_too() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::quickly_retrying_client(&proxy.endpoint());
    let key = unique("window/refused-twice");
    let hourly = Window::every(HOUR);
    let claim = |client: &LockClient| {
        let (client, key, hourly) = (client.clone(), key.clone(), hourly.clone());
        tokio::spawn(async move { client.claim_window(&key, &hourly).await })
    };
    // Each claim of the caller's lands, its answer lost, and its resend fails.
    let fails = |mut answer: ddb_lock_test_kit::proxy::WithheldAnswer| {
        proxy.refuse_next("PutItem", "ValidationException");
        answer.drop_it();
    };
    let mut first_answer = proxy.withhold_next_answer("PutItem");
    let first = claim(&client);
    first_answer.applied().await;
    let waiting = claim(&client);
    proxy
        .wait_for("PutItem", |counts| counts.answered >= 1)
        .await;
    let mut retry = proxy.delay_next_request("PutItem");
    fails(first_answer);
    assert!(first.await.unwrap().is_err(), "its resend failed");
    retry.captured().await;

    let mut again_answer = proxy.withhold_next_answer("PutItem");
    let again = claim(&client);
    again_answer.applied().await;
    assert!(retry.deliver().await, "the retry reached the endpoint");
    fails(again_answer);
    assert!(again.await.unwrap().is_err(), "its resend failed");
    let waited = waiting.await.unwrap().unwrap();
    assert!(matches!(waited, WindowClaim::Claimed { .. }), "{waited:?}");
}

/// A claim refused by a claim of the same client whose caller gave up, the refusal's answer read
/// only once that claim was given back: it said the window was taken by this very caller, though
/// the window was free again (found by review). It claims the window.
#[tokio::test]
async fn a_claim_whose_refusal_is_read_after_the_refusing_claim_was_given_back_claims_the_window() {
    refused_by_a_claim_given_back(false).await;
}

/// The same, the give-back's answer lost: the SDK's resend, refused by the give-back itself, was
/// taken for a claim that never landed, and the claim it refused said the window taken by this
/// very caller (found by review).
#[tokio::test]
async fn a_claim_refused_by_a_claim_given_back_with_its_answer_lost_claims_the_window() {
    refused_by_a_claim_given_back(true).await;
}

/// A claim of `client`'s refused by another of its claims, whose caller gave up while the refusal
/// was on its way, the give-back's answer lost if `give_back_answer_lost`.
async fn refused_by_a_claim_given_back(give_back_answer_lost: bool) {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = ddb_lock_test_kit::quickly_retrying_client(&proxy.endpoint());
    let key = unique(&format!(
        "window/refused-then-given-back-{give_back_answer_lost}"
    ));
    let hourly = Window::every(HOUR);
    let claim = |client: &LockClient| {
        let (client, key, hourly) = (client.clone(), key.clone(), hourly.clone());
        tokio::spawn(async move { client.claim_window(&key, &hourly).await })
    };
    let mut first_answer = proxy.withhold_next_answer("PutItem");
    let first = claim(&client);
    first_answer.applied().await;
    let mut second_answer = proxy.withhold_next_answer("PutItem");
    let second = claim(&client);
    second_answer.applied().await;
    if give_back_answer_lost {
        proxy.drop_next_answer("UpdateItem");
    }
    first.abort();
    assert!(first.await.unwrap_err().is_cancelled());
    first_answer.drop_it();
    client.flush().await;
    let status = client.status(&format!("window:{key}")).await.unwrap();
    assert!(matches!(status, LockStatus::Free), "given back: {status:?}");

    second_answer.deliver();
    let second = second.await.unwrap().unwrap();
    assert!(matches!(second, WindowClaim::Claimed { .. }), "{second:?}");
}
