//! Writes the SDK sent more than once whose earlier attempt, held in the network, lands after the
//! lock it was to take was released: a dropped acquisition's clean-up, a refusal after a resend,
//! and the first release of a lock whose write was resent (or whose attempt made a later write
//! after an earlier one was resent) each look for it, and nothing is left held for nobody.

use ddb_lock::{AcquireOptions, LockClient, Mode, ReleaseOutcome, SetAttempt};
use ddb_lock_test_kit::proxy::{HeldRequest, Proxy, WithheldAnswer};
use ddb_lock_test_kit::{
    client_with_attempt_timeout, endpoint, hold, lock_client, quickly_retrying_client, raw_item,
    unique,
};
use std::time::Duration;

/// An acquisition whose write landed with its answer lost, the SDK's resend held in the network,
/// dropped by its caller: its clean-up released the first attempt's lock and looked no more, and
/// the resend, landing just after, took the lock for nobody, for a whole lease (found by review).
/// The clean-up looks again after releasing too.
#[tokio::test]
async fn a_resend_of_a_dropped_acquisitions_write_landing_after_its_clean_up_is_released() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = quickly_retrying_client(&proxy.endpoint());
    let resource = unique("dropped-acquire-resend");
    let mut first = proxy.withhold_next_answer("PutItem");
    let acquiring = alices_try(&client, &resource);
    first.applied().await;
    let mut resend = proxy.delay_next_request_containing("PutItem", &resource);
    first.drop_it();
    resend.captured().await;
    acquiring.abort();
    assert!(acquiring.await.unwrap_err().is_cancelled());
    // The clean-up's first release removes the first attempt's lock; the resend lands after it.
    proxy
        .wait_for("DeleteItem", |counts| counts.answered >= 1)
        .await;
    assert!(raw_item(&resource).await.is_none(), "released");
    assert!(resend.deliver().await, "the resend reached the endpoint");
    client.flush().await;
    assert!(
        raw_item(&resource).await.is_none(),
        "the resend's lock was left to nobody"
    );
}

/// A try whose PutItem's first attempt was held in the network past the SDK's attempt timeout,
/// its resend refused by bob's live lock (the try answers held): the first attempt, landing once
/// bob released, took the lock for nobody, for a whole lease (found by review). A refusal after
/// a resend cleans up after the write, as a dropped acquisition does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_attempt_landing_after_its_refused_resend_is_released() {
    first_attempt_landing_once_the_lock_is_free(
        "refused-resend-late-first",
        Mode::Exclusive,
        Ending::BobsRelease,
        false,
    )
    .await;
}

/// The same try, its resend applied (the try holds the lock), then released: the first attempt,
/// landing once the lock was free, took it for nobody for a whole lease (found by review). The
/// release of a lock whose write was resent looks again for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_attempt_landing_after_its_applied_resend_was_released_is_released() {
    first_attempt_landing_once_the_lock_is_free(
        "applied-resend-late-first",
        Mode::Exclusive,
        Ending::Release,
        false,
    )
    .await;
}

/// The same, the resend applied with its answer lost and the third attempt refused by its write:
/// held, it was not remembered as resent, and its release did not look again (found by review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_attempt_landing_after_a_resend_found_its_own_write_is_released() {
    first_attempt_landing_once_the_lock_is_free(
        "own-write-resend-late-first",
        Mode::Exclusive,
        Ending::Release,
        true,
    )
    .await;
}

/// How the lock of [`first_attempt_landing_once_the_lock_is_free`] ends.
#[derive(Clone, Copy)]
enum Ending {
    /// Bob holds the lock (the try is refused), and releases it.
    BobsRelease,
    /// The try takes the lock, and releases it.
    Release,
    /// The try takes the lock, and its client releases it by owner.
    ReleaseByOwner,
    /// The try takes the lock, and its client force releases it.
    ForceRelease,
}

/// Alice's try in `mode` on a resource of its own (named after `name`), its write's first attempt
/// held in the network past the SDK's attempt timeout (the second's answer lost if
/// `second_answer_lost`): the lock ends as `ending` says, the first attempt is delivered; once
/// the client's background work is done, nobody holds the lock.
async fn first_attempt_landing_once_the_lock_is_free(
    name: &str,
    mode: Mode,
    ending: Ending,
    second_answer_lost: bool,
) {
    let direct = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_with_attempt_timeout(&proxy.endpoint(), Duration::from_secs(1));
    let resource = unique(name);
    let bob = match ending {
        Ending::BobsRelease => Some(hold(&direct, &resource, "bob", Duration::from_secs(60)).await),
        _ => None,
    };
    // An exclusive lock is put, a shared hold's entry written into the item.
    let write = match mode {
        Mode::Exclusive => "PutItem",
        _ => "UpdateItem",
    };
    let first = proxy.delay_next_request_containing(write, &resource);
    if second_answer_lost {
        proxy.drop_next_answer(write);
    }
    let tried = client
        .try_acquire(&resource, &AcquireOptions::new().owner("alice").mode(mode))
        .await
        .unwrap();
    match (bob, tried, ending) {
        (Some(bob), None, _) => {
            assert_eq!(
                direct.release(&bob).await.unwrap(),
                ReleaseOutcome::Released
            );
        }
        (None, Some(taken), Ending::Release) => {
            assert_eq!(
                client.release(&taken).await.unwrap(),
                ReleaseOutcome::Released
            );
        }
        (None, Some(_), Ending::ReleaseByOwner) => {
            remove_alices_lock(&client, &resource, false).await
        }
        (None, Some(_), Ending::ForceRelease) => remove_alices_lock(&client, &resource, true).await,
        (bob, tried, _) => panic!("bob's lock {bob:?}, the try's {tried:?}"),
    }
    lands_for_nobody(first, &client, &resource).await;
}

/// The same try, its resend applied, then its lock released by owner through its client (a
/// saga's clean-up through a warm Lambda instance), or force released: the first attempt, landing
/// once the lock was free, took it for nobody for a whole lease (only a release by lock id
/// looked again; found by review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_attempt_landing_after_its_lock_was_released_by_owner_or_by_force_is_released() {
    for (name, ending) in [
        ("by-owner-late-first", Ending::ReleaseByOwner),
        ("by-force-late-first", Ending::ForceRelease),
    ] {
        first_attempt_landing_once_the_lock_is_free(name, Mode::Exclusive, ending, false).await;
    }
}

/// A reader's try, its resend applied (the reader holds the lock), then released: the first
/// attempt, landing once the item was gone, held a shared entry for nobody for a whole lease (the
/// look again after the release was made for exclusive locks only; found by review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readers_first_attempt_landing_after_its_applied_resend_was_released_is_released() {
    first_attempt_landing_once_the_lock_is_free(
        "applied-resend-late-reader",
        Mode::Shared,
        Ending::Release,
        false,
    )
    .await;
}

/// The same, the reader's resend applied with its answer lost and the third attempt refused by its
/// own entry (found by review, as above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readers_first_attempt_landing_after_a_resend_found_its_own_entry_is_released() {
    first_attempt_landing_once_the_lock_is_free(
        "own-entry-resend-late-reader",
        Mode::Shared,
        Ending::Release,
        true,
    )
    .await;
}

/// As above, for a reader refused by a writer: its first attempt, landing once the writer
/// released, held a shared entry for nobody, for a whole lease (found by review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readers_first_attempt_landing_after_its_refused_resend_is_released() {
    let direct = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_with_attempt_timeout(&proxy.endpoint(), Duration::from_secs(1));
    let resource = unique("refused-resend-late-reader");
    let writer = hold(&direct, &resource, "writer", Duration::from_secs(60)).await;
    let first = proxy.delay_next_request_containing("UpdateItem", &resource);
    let tried = client
        .try_acquire(
            &resource,
            &AcquireOptions::new().owner("reader").mode(Mode::Shared),
        )
        .await
        .unwrap();
    assert!(tried.is_none(), "{tried:?}");
    assert_eq!(
        direct.release(&writer).await.unwrap(),
        ReleaseOutcome::Released
    );
    lands_for_nobody(first, &client, &resource).await;
}

/// A reader whose write was resent by the SDK and refused by a lapsed intention holder: its
/// first attempt, held in the network, lands once the item is free. The attempt clears that
/// holder (the clearing fails if `clearing_fails`: the attempt fails) and writes again (the
/// reader holds the lock, and releases it); either way, once the client's background work is
/// done, nobody holds the lock.
async fn first_attempt_of_a_reader_refused_by_a_lapsed_holder(name: &str, clearing_fails: bool) {
    let direct = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_with_attempt_timeout(&proxy.endpoint(), Duration::from_secs(1));
    let resource = unique(name);
    lapsed_hold(&resource, Mode::IntentExclusive).await;
    let first = proxy.delay_next_request_containing("UpdateItem", &resource);
    if clearing_fails {
        proxy.refuse_next_containing("UpdateItem", "#h0.#expires_at", "ValidationException");
    }
    let tried = client
        .try_acquire(
            &resource,
            &AcquireOptions::new().owner("reader").mode(Mode::Shared),
        )
        .await;
    match (clearing_fails, tried) {
        (true, tried) => {
            assert!(tried.is_err(), "{tried:?}");
            direct.force_release(&resource).await.unwrap();
        }
        (false, Ok(Some(lock))) => {
            assert_eq!(
                client.release(&lock).await.unwrap(),
                ReleaseOutcome::Released
            );
        }
        (false, tried) => panic!("the lapsed holder cleared: {tried:?}"),
    }
    lands_for_nobody(first, &client, &resource).await;
}

/// A hold of `resource` in `mode` whose lease ended an hour ago (taken by a client whose clock is
/// an hour behind).
async fn lapsed_hold(resource: &str, mode: Mode) {
    let behind = ddb_lock_test_kit::builder(ddb_lock_test_kit::dynamodb())
        .clock(ddb_lock_test_kit::OffsetClock::shared(
            chrono::TimeDelta::hours(-1),
        ))
        .build()
        .unwrap();
    behind
        .try_acquire(resource, &AcquireOptions::new().owner("lapsed").mode(mode))
        .await
        .unwrap()
        .expect("free");
}

/// The clearing of the lapsed holder failed: the attempt's error left no clean-up, and the
/// write's first attempt held a shared entry for nobody, for a whole lease (found by review).
/// Every write of the attempt counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readers_first_attempt_landing_after_its_attempt_failed_is_released() {
    first_attempt_of_a_reader_refused_by_a_lapsed_holder("refused-resend-failed-clear", true).await;
}

/// The lapsed holder cleared, the reader's next write applied: the attempt took the lock, and its
/// release looked for nothing; the first write's first attempt held a shared entry for nobody,
/// for a whole lease (found by review). A later write's success does not forget an earlier one's
/// resend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readers_first_attempt_landing_after_a_later_write_took_the_lock_is_released() {
    first_attempt_of_a_reader_refused_by_a_lapsed_holder("refused-resend-cleared", false).await;
}

/// A set whose member `x` carries a lapsed reader, the set's first transaction's first attempt
/// held in the network past the SDK's attempt timeout and its resend cancelled by that reader:
/// the attempt cleared the reader and took the set with its next transaction, and the set was
/// released; the first attempt, landing then, took every member for nobody, for a whole lease (a
/// request token does not cover a copy of a cancelled transaction; found by review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sets_first_attempt_landing_after_a_later_transaction_took_the_set_is_released() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_with_attempt_timeout(&proxy.endpoint(), Duration::from_secs(1));
    let (x, y) = (unique("set/lapsed-late-x"), unique("set/lapsed-late-y"));
    lapsed_hold(&x, Mode::Shared).await;
    let first = proxy.delay_next_request_containing("TransactWriteItems", &x);
    let set = match client
        .try_acquire_set(
            &[(&x, Mode::Exclusive), (&y, Mode::Exclusive)],
            &AcquireOptions::new().owner("alice"),
        )
        .await
        .unwrap()
    {
        SetAttempt::Acquired(set) => set,
        other => panic!("the lapsed reader cleared: {other:?}"),
    };
    for (_, outcome) in client.release_set(&set).await {
        assert_eq!(outcome.unwrap(), ReleaseOutcome::Released);
    }
    assert!(
        first.deliver().await,
        "the first attempt reached the endpoint"
    );
    client.flush().await;
    assert_eq!(raw_item(&x).await, None, "taken for nobody");
    assert_eq!(raw_item(&y).await, None, "taken for nobody");
}

/// The release of a lock whose write the SDK sent twice, its first two tries failed: the look for
/// the write's earlier attempt starts once the release is answered. (Spawned at the first failed
/// try, it released the lock before the release's own third try, which then found the lock gone
/// and answered `Unconfirmed`, the payload a keeping client's release was to write lost; found
/// by review.)
#[tokio::test]
async fn a_release_retried_after_failed_tries_is_answered_released_after_a_resent_write() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = quickly_retrying_client(&proxy.endpoint());
    let resource = unique("resent-write-release-retried");
    proxy.drop_next_answer("PutItem");
    let lock = client
        .try_acquire(&resource, &AcquireOptions::new().owner("alice"))
        .await
        .unwrap()
        .expect("free");
    assert_eq!(proxy.counts("PutItem").dropped, 1, "the write was resent");
    for _ in 0..2 {
        proxy.refuse_next("DeleteItem", "ValidationException");
    }
    assert_eq!(
        client.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
    client.flush().await;
    assert_eq!(raw_item(&resource).await, None);
}

/// A try whose write's first attempt is held in the network past the SDK's attempt timeout, its
/// resend applied with its answer held back, while its client releases the lock by owner (or, if
/// `by_force`, force releases it), which removes it (the release by owner's answer held back too,
/// and passed on after the try's, if `removal_answered_after`): the try is then answered, and its
/// first attempt lands on the free lock. Its client looks for that attempt once both are
/// answered; once its background work is done, nobody holds the lock. (Only a release started
/// after the answer looked: the first attempt held the lock for nobody for a whole lease; found
/// by review.)
async fn first_attempt_landing_after_a_removal_before_the_answer(
    name: &str,
    by_force: bool,
    removal_answered_after: bool,
) {
    let ResentTry {
        proxy,
        client,
        resource,
        first,
        resend,
        trying,
    } = resent_try(name).await;
    if removal_answered_after {
        let mut removal = proxy.withhold_next_answer("DeleteItem");
        let removing = {
            let (client, resource) = (client.clone(), resource.clone());
            tokio::spawn(async move { remove_alices_lock(&client, &resource, by_force).await })
        };
        removal.applied().await;
        resend.deliver();
        assert!(trying.await.unwrap().unwrap().is_some(), "acquired");
        removal.deliver();
        removing.await.unwrap();
    } else {
        remove_alices_lock(&client, &resource, by_force).await;
        resend.deliver();
        assert!(trying.await.unwrap().unwrap().is_some(), "acquired");
    }
    lands_for_nobody(first, &client, &resource).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_attempt_landing_after_a_release_by_owner_before_the_answer_is_released() {
    first_attempt_landing_after_a_removal_before_the_answer("by-owner-before-answer", false, false)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_attempt_landing_after_a_force_release_before_the_answer_is_released() {
    first_attempt_landing_after_a_removal_before_the_answer("by-force-before-answer", true, false)
        .await;
}

/// The same, the release by owner answered after the try (found by review of the above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_attempt_landing_after_a_release_by_owner_answered_after_the_try_is_released() {
    first_attempt_landing_after_a_removal_before_the_answer("by-owner-answered-after", false, true)
        .await;
}

/// A lock whose write the SDK sent twice, extended (a new version), then released by
/// `release_all`, which DynamoDB fails every try: its look for the write's first attempt finds
/// nothing (the version changed), and the next `release_all` releases the lock and looks again.
/// (The failed release took the mark: the later release looked for nothing, and the first
/// attempt, landing after it, held the lock for nobody for a lease; found by review.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_attempt_landing_after_a_release_that_followed_a_failed_one_is_released() {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_with_attempt_timeout(&proxy.endpoint(), Duration::from_secs(1));
    let resource = unique("after-a-failed-release");
    let first = proxy.delay_next_request_containing("PutItem", &resource);
    let lock = client
        .try_acquire(&resource, &AcquireOptions::new().owner("alice"))
        .await
        .unwrap()
        .expect("free");
    let extended = client.extend(&lock, Duration::from_secs(60)).await.unwrap();
    assert!(
        matches!(extended, ddb_lock::ExtendOutcome::Extended(_)),
        "{extended:?}"
    );
    for _ in 0..4 {
        proxy.refuse_next("DeleteItem", "ValidationException");
    }
    let outcomes = client.release_all().await;
    assert!(matches!(outcomes[..], [(_, Err(_))]), "{outcomes:?}");
    client.flush().await;
    // The next release's DeleteItem answered, the first attempt lands (before `release_all`'s own
    // wait for its client's background work, which the looks are).
    let answered = proxy.counts("DeleteItem").answered;
    let mut all = Box::pin(client.release_all());
    tokio::select! {
        outcomes = &mut all => panic!("answered before its release was: {outcomes:?}"),
        () = proxy.wait_for("DeleteItem", |counts| counts.answered > answered) => {}
    }
    assert!(
        first.deliver().await,
        "the first attempt reached the endpoint"
    );
    let outcomes = all.await;
    assert!(
        matches!(outcomes[..], [(_, Ok(ReleaseOutcome::Released))]),
        "{outcomes:?}"
    );
    client.flush().await;
    assert_eq!(raw_item(&resource).await, None, "taken for nobody");
}

/// Alice's lock on `resource` removed through `client`: released by owner, or force released if
/// `by_force`.
async fn remove_alices_lock(client: &LockClient, resource: &str, by_force: bool) {
    match by_force {
        true => {
            let removed = client.force_release(resource).await.unwrap();
            assert_eq!(removed.map(|holder| holder.owner), Some("alice".to_owned()));
        }
        false => {
            let released = client.release_owned(resource, "alice").await.unwrap();
            assert_eq!(released, ReleaseOutcome::Released);
        }
    }
}

/// The write's `first` attempt, held in the network, is delivered; once `client`'s background
/// work is done, nobody holds `resource`.
async fn lands_for_nobody(first: HeldRequest, client: &LockClient, resource: &str) {
    assert!(
        first.deliver().await,
        "the first attempt reached the endpoint"
    );
    client.flush().await;
    assert_eq!(raw_item(resource).await, None, "taken for nobody");
}

/// A force release through the client that read alice's lock, its delete held in the network,
/// while alice's try (its write resent) is answered: the look for the write's first attempt is
/// left to the force release, which reports the holder it removed. (Looked for at the answer, the
/// look deleted the lock first, and the force release said it removed nobody; found by review.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_release_on_its_way_at_a_resent_tries_answer_reports_the_holder_it_removed() {
    let tried = resent_try("forced-at-the-answer").await;
    let mut delete = tried.proxy.delay_next_request("DeleteItem");
    let forcing = tried.force_releasing();
    delete.captured().await;
    let tried = tried.answered().await;
    tried.client.flush().await;
    assert!(delete.deliver().await, "the delete reached the endpoint");
    let removed = forcing.await.unwrap().unwrap();
    assert_eq!(removed.map(|holder| holder.owner), Some("alice".to_owned()));
    lands_for_nobody(tried.first, &tried.client, &tried.resource).await;
}

/// The same force release dropped by its caller once its delete landed, its answer held back: it
/// looks for the write's first attempt as it ends. (Left to it, nothing looked, and the first
/// attempt held the lock for nobody for a lease; found by review.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_release_dropped_after_its_delete_landed_still_looks_for_a_resent_write() {
    let tried = resent_try("forced-then-dropped").await;
    let mut delete = tried.proxy.withhold_next_answer("DeleteItem");
    let forcing = tried.force_releasing();
    delete.applied().await;
    let tried = tried.answered().await;
    forcing.abort();
    assert!(forcing.await.unwrap_err().is_cancelled());
    delete.drop_it();
    lands_for_nobody(tried.first, &tried.client, &tried.resource).await;
}

/// [`resent_try`]: alice's try through `client` (behind `proxy`) on `resource`, in a task
/// (`trying`), its write's `first` attempt held in the network, its `resend` applied with its
/// answer held back.
struct ResentTry {
    proxy: Proxy,
    client: LockClient,
    resource: String,
    first: HeldRequest,
    resend: WithheldAnswer,
    trying: Trying,
}

/// Alice's try, in a task.
type Trying = tokio::task::JoinHandle<Result<Option<ddb_lock::Lock>, ddb_lock::Error>>;

/// Alice's try on `resource` through `client`, in a task.
fn alices_try(client: &LockClient, resource: &str) -> Trying {
    let (client, resource) = (client.clone(), resource.to_owned());
    tokio::spawn(async move {
        client
            .try_acquire(&resource, &AcquireOptions::new().owner("alice"))
            .await
    })
}

/// Alice's try on a resource of its own (named after `name`), through a client whose attempts
/// time out after a second: its write's first attempt is held in the network, and the SDK's
/// resend is applied, its answer held back.
async fn resent_try(name: &str) -> ResentTry {
    lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let client = client_with_attempt_timeout(&proxy.endpoint(), Duration::from_secs(1));
    let resource = unique(name);
    let first = proxy.delay_next_request_containing("PutItem", &resource);
    let mut resend = proxy.withhold_next_answer("PutItem");
    let trying = alices_try(&client, &resource);
    resend.applied().await;
    ResentTry {
        proxy,
        client,
        resource,
        first,
        resend,
        trying,
    }
}

/// What is left of a [`ResentTry`] once answered.
struct Answered {
    client: LockClient,
    resource: String,
    first: HeldRequest,
}

impl ResentTry {
    /// A force release of the resource through the try's client, in a task.
    fn force_releasing(
        &self,
    ) -> tokio::task::JoinHandle<Result<Option<ddb_lock::Holder>, ddb_lock::Error>> {
        let (client, resource) = (self.client.clone(), self.resource.clone());
        tokio::spawn(async move { client.force_release(&resource).await })
    }

    /// The resend's answer passed on: the try acquires.
    async fn answered(self) -> Answered {
        self.resend.deliver();
        assert!(self.trying.await.unwrap().unwrap().is_some(), "acquired");
        Answered {
            client: self.client,
            resource: self.resource,
            first: self.first,
        }
    }
}
