//! Waiters that go: one that times out or whose future is dropped leaves the line (and releases
//! a lock granted as it went); a lapsed holder's lock goes to the first in line; a waiter whose
//! deadline is gone is passed over, and a line of such waiters left on a kept item without a
//! holder is taken by a fair acquirer.

use super::{
    add_dead_waiter, add_dead_waiters, client_keeping, fair, line, line_becomes,
    reader_took_the_lapsed_lock, spawn_waiter, LEASE,
};
use ddb_lock::{Error, ReleaseOutcome};
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{
    builder, dynamodb, endpoint, hold, lock_client, raw_item, reader_options, string_attr, unique,
};
use std::time::Duration;
use tokio::sync::mpsc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_times_out_leaves_the_line_and_the_next_is_granted() {
    let holder = lock_client().await;
    let resource = unique("fair");
    let lock = hold(&holder, &resource, "holder", LEASE).await;
    let (granted_tx, mut granted) = mpsc::unbounded_channel();
    let quitter = spawn_waiter(
        &resource,
        "quitter",
        fair("quitter").timeout(Duration::from_millis(300)),
        granted_tx.clone(),
    );
    line_becomes(&holder, &resource, &["quitter"]).await;
    let stayer = spawn_waiter(&resource, "stayer", fair("stayer"), granted_tx);
    line_becomes(&holder, &resource, &["quitter", "stayer"]).await;

    let err = quitter.await.unwrap().unwrap_err();
    assert!(
        matches!(err, Error::Timeout { ref holder, .. } if holder.owner == "holder"),
        "{err:?}"
    );
    line_becomes(&holder, &resource, &["stayer"]).await;

    holder.release(&lock).await.unwrap();
    let (owner, next, client) = granted.recv().await.unwrap();
    assert_eq!(owner, "stayer");
    client.release(&next).await.unwrap();
    stayer.await.unwrap().unwrap();
    assert_eq!(raw_item(&resource).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_waiter_leaves_the_line() {
    let holder = lock_client().await;
    let resource = unique("fair");
    let lock = hold(&holder, &resource, "holder", LEASE).await;
    let waiter = lock_client().await;
    let acquiring = {
        let (waiter, resource) = (waiter.clone(), resource.clone());
        tokio::spawn(async move { waiter.acquire(&resource, &fair("gone")).await })
    };
    line_becomes(&holder, &resource, &["gone"]).await;
    acquiring.abort();
    assert!(acquiring.await.unwrap_err().is_cancelled());
    waiter.flush().await;
    assert!(line(&holder, &resource).await.is_empty());
    // Nobody to hand over to: the release deletes the item.
    holder.release(&lock).await.unwrap();
    assert_eq!(raw_item(&resource).await, None);
}

/// A waiter dropped around the moment of its grant: whether it returned the lock first or was
/// dropped with the grant made, no lock is left behind once it is released or flushed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_dropped_around_its_grant_leaves_no_lock_behind() {
    let holder = lock_client().await;
    for yields in [0, 1, 2, 4, 8, 16, 32, 64] {
        let resource = unique("fair");
        let lock = hold(&holder, &resource, "holder", LEASE).await;
        let waiter = lock_client().await;
        let acquiring = {
            let (waiter, resource) = (waiter.clone(), resource.clone());
            tokio::spawn(async move { waiter.acquire(&resource, &fair("racer")).await })
        };
        line_becomes(&holder, &resource, &["racer"]).await;
        let releasing = {
            let (holder, lock) = (holder.clone(), lock.clone());
            tokio::spawn(async move { holder.release(&lock).await })
        };
        for _ in 0..yields {
            tokio::task::yield_now().await;
        }
        acquiring.abort();
        assert_eq!(releasing.await.unwrap().unwrap(), ReleaseOutcome::Released);
        match acquiring.await {
            Ok(granted) => {
                waiter.release(&granted.unwrap()).await.unwrap();
            }
            Err(cancelled) => assert!(cancelled.is_cancelled()),
        }
        waiter.flush().await;
        assert_eq!(
            raw_item(&resource).await,
            None,
            "after {yields} yields: a lock or a line was left behind"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_holders_lock_goes_to_the_first_in_line() {
    let holder = lock_client().await;
    let resource = unique("fair");
    // A holder that crashes: it never releases, its short lease runs out.
    let _crashed = hold(&holder, &resource, "crashed", Duration::from_millis(800)).await;
    let (granted_tx, mut granted) = mpsc::unbounded_channel();
    let tasks = [
        spawn_waiter(&resource, "w0", fair("w0"), granted_tx.clone()),
        {
            line_becomes(&holder, &resource, &["w0"]).await;
            spawn_waiter(&resource, "w1", fair("w1"), granted_tx)
        },
    ];
    let (first, lock, client) = granted.recv().await.unwrap();
    assert_eq!(first, "w0");
    client.release(&lock).await.unwrap();
    let (second, lock, client) = granted.recv().await.unwrap();
    assert_eq!(second, "w1");
    client.release(&lock).await.unwrap();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_deadline_is_gone_is_passed_over() {
    let holder = lock_client().await;
    let resource = unique("fair");
    let lock = hold(&holder, &resource, "holder", LEASE).await;
    let dead = add_dead_waiter(&resource).await;
    let (granted_tx, mut granted) = mpsc::unbounded_channel();
    let task = spawn_waiter(&resource, "live", fair("live"), granted_tx);
    line_becomes(&holder, &resource, &["dead", "live"]).await;

    holder.release(&lock).await.unwrap();
    let (owner, next, client) = granted.recv().await.unwrap();
    assert_eq!(owner, "live");
    // The dead waiter's entry went with the grant.
    let item = raw_item(&resource).await.unwrap();
    assert!(!item.contains_key("Queue") && !item.contains_key(&format!("Queued:{dead}")));
    client.release(&next).await.unwrap();
    task.await.unwrap().unwrap();
}

/// On a client that keeps items, a holder released while the only waiter in line had vanished
/// (its deadline gone) keeps the line on the item, without a holder. A fair acquirer that did not
/// see the line before tries, is refused by the line, joins it and takes the lock (the refusal
/// had no holder to read: an error, for every fair acquirer, until some client cleared the line).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_item_left_with_a_dead_line_is_taken_by_a_fair_acquirer() {
    let _ = lock_client().await;
    let kept = || client_keeping(true);
    let holder = kept();
    let resource = unique("fair-kept-dead-line");
    let lock = hold(&holder, &resource, "holder", LEASE).await;
    add_dead_waiter(&resource).await;
    assert_eq!(
        holder.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
    let item = raw_item(&resource).await.unwrap();
    assert!(
        item.contains_key("Queue") && !item.contains_key("Owner"),
        "{item:?}"
    );

    let fresh = kept();
    let taken = fresh
        .acquire(&resource, &fair("fresh").timeout(Duration::from_secs(10)))
        .await
        .unwrap();
    let item = raw_item(&resource).await.unwrap();
    assert_eq!(string_attr(&item, "Owner"), "fresh");
    assert!(
        !item.contains_key("Queue"),
        "the dead waiter was passed over"
    );
    fresh.release(&taken).await.unwrap();
}

/// The holder's lease lapsed with a waiter in line, a reader took the lapsed lock (shared
/// acquisitions do not look at the line), and crashed in its turn: its lapsed entry refused every
/// grant, and the waiter waited until its deadline, the lock free to anyone else. The waiter
/// clears the lapsed reader, as an acquirer it refuses clears it, and is granted the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_reader_that_took_a_lapsed_lock_is_cleared_by_the_line() {
    let (_, resource, task, mut granted) = waiter_behind_a_holder().await;

    // What a reader's acquisition of the lapsed lock leaves, once the reader's own lease lapsed:
    // no exclusive holder, one shared entry whose lease is over.
    let reader = reader_took_the_lapsed_lock(
        &resource,
        chrono::Utc::now() - chrono::TimeDelta::seconds(1),
    )
    .await;

    let (owner, lock, client) = granted
        .recv()
        .await
        .expect("the waiter was granted the lock");
    assert_eq!(owner, "w");
    let item = raw_item(&resource).await.unwrap();
    assert!(!item.contains_key(&format!("Shared:{reader}")), "{item:?}");
    client.release(&lock).await.unwrap();
    task.await.unwrap().unwrap();
}

/// A fair try on a lock nobody holds (its holder's lease over, or a kept item released) whose
/// line nobody waits in any more (every waiter's deadline gone: crashed waiters): the lock is
/// taken. The line refused every fair try, which said the lock was held (by the lapsed holder, or
/// by a dead waiter) while `status` said free.
#[tokio::test]
async fn a_fair_try_takes_a_free_lock_whose_line_is_dead() {
    let holder = lock_client().await;
    // Deleting items: the holder's lease is over by the trying client's clock, an hour ahead.
    let resource = unique("fair");
    let _lapsing = hold(&holder, &resource, "holder", LEASE).await;
    add_dead_waiter(&resource).await;
    let ahead = builder(dynamodb())
        .clock(ddb_lock_test_kit::clocks::OffsetClock::shared(
            chrono::TimeDelta::hours(1),
        ))
        .build()
        .unwrap();
    let taken = ahead.try_acquire(&resource, &fair("late")).await.unwrap();
    let lock = taken.expect("the lock is free: its holder's lease is over and nobody waits");
    ahead.release(&lock).await.unwrap();

    // Keeping items: released with the dead waiter in line, the item stands with no holder.
    let keeping = client_keeping(true);
    let resource = unique("fair");
    let kept = hold(&keeping, &resource, "holder", LEASE).await;
    add_dead_waiter(&resource).await;
    keeping.release(&kept).await.unwrap();
    let taken = keeping.try_acquire(&resource, &fair("next")).await.unwrap();
    let lock = taken.expect("the kept lock is free and nobody waits");
    keeping.release(&lock).await.unwrap();
}

/// The holder's lease lapsed with a waiter in line, and a reader took the lapsed lock, live: the
/// waiter sent grants the reader refused and never placed its marker, so that new readers joined
/// the first and kept the line out until its deadline. It places the marker, as an exclusive
/// acquirer readers refuse does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_behind_readers_of_a_lapsed_lock_stops_new_readers() {
    let (holder, resource, task, _granted) = waiter_behind_a_holder().await;
    reader_took_the_lapsed_lock(
        &resource,
        chrono::Utc::now() + chrono::TimeDelta::seconds(60),
    )
    .await;

    let marked = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let item = raw_item(&resource).await.unwrap();
            if item.contains_key("WriterWaiting") {
                return;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(marked.is_ok(), "the waiter placed its marker");
    let refused = holder
        .try_acquire(&resource, &reader_options("r2"))
        .await
        .unwrap();
    assert!(refused.is_none(), "a new reader waits behind the waiter");
    task.abort();
}

/// A holder's lock (that the test then makes lapse) and `w` waiting in its line, in a task that
/// sends its lock on `granted` once granted.
async fn waiter_behind_a_holder() -> (
    ddb_lock::LockClient,
    String,
    tokio::task::JoinHandle<Result<(), Error>>,
    mpsc::UnboundedReceiver<(String, ddb_lock::Lock, ddb_lock::LockClient)>,
) {
    let holder = lock_client().await;
    let resource = unique("fair");
    hold(&holder, &resource, "holder", LEASE).await;
    let (granted_tx, granted) = mpsc::unbounded_channel();
    let task = spawn_waiter(
        &resource,
        "w",
        fair("w").timeout(Duration::from_secs(30)),
        granted_tx,
    );
    line_becomes(&holder, &resource, &["w"]).await;
    (holder, resource, task, granted)
}

/// A waiter that joined first (its client last saw the line) and whose deadline passes while a
/// live reader holds the lapsed lock, no exclusive holder left, times out naming the reader: it
/// said the wait failed in transaction conflicts (found by review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_joined_first_times_out_behind_a_reader_of_the_lapsed_lock() {
    let holder = lock_client().await;
    let resource = unique("fair-timeout-behind-reader");
    hold(&holder, &resource, "holder", LEASE).await;
    let waiter = lock_client().await;
    // Refused, it joins and times out: its client has seen the line, and joins first next time.
    let first = waiter
        .acquire(&resource, &fair("w").timeout(Duration::from_millis(100)))
        .await;
    assert!(matches!(first, Err(Error::Timeout { .. })), "{first:?}");
    let waiting = tokio::spawn({
        let (waiter, resource) = (waiter.clone(), resource.clone());
        async move {
            waiter
                .acquire(&resource, &fair("w").timeout(Duration::from_secs(2)))
                .await
        }
    });
    line_becomes(&holder, &resource, &["w"]).await;
    reader_took_the_lapsed_lock(
        &resource,
        chrono::Utc::now() + chrono::TimeDelta::seconds(60),
    )
    .await;
    let result = waiting.await.unwrap();
    assert!(
        matches!(&result, Err(Error::Timeout { holder, .. }) if holder.owner == "reader"),
        "{result:?}"
    );
}

/// Two hundred waiters vanished without leaving stand before a live one: the holder's release
/// grants the lock to it past them, removing forty of them, and the next grants pass over the
/// rest. A grant that removed them all went over DynamoDB's 4 KB expression size and was refused,
/// and the lock with its line stayed unusable to fair acquirers (found by review). Where items are
/// kept, the live waiter's release leaves the rest of the dead line on the item, and a fair try
/// clears it, forty at a time, and takes the lock (a line over forty was left, and every fair try
/// said the lock held; found by review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_grants_past_a_long_line_of_dead_waiters() {
    let _ = lock_client().await;
    for keeping in [false, true] {
        let client = || client_keeping(keeping);
        let holder = client();
        let resource = unique("fair-long-dead-line");
        let lock = holder.acquire(&resource, &fair("holder")).await.unwrap();
        add_dead_waiters(&resource, 200).await;
        let live = client();
        let waiting = tokio::spawn({
            let (live, resource) = (live.clone(), resource.clone());
            async move { live.acquire(&resource, &fair("live")).await }
        });
        loop {
            let waiting = line(&holder, &resource).await;
            if waiting.last().is_some_and(|w| w.owner == "live") {
                assert_eq!(waiting.len(), 201);
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(
            holder.release(&lock).await.unwrap(),
            ReleaseOutcome::Released
        );
        let granted = waiting.await.unwrap().expect("the live waiter is granted");
        assert_eq!(
            line(&holder, &resource).await.len(),
            160,
            "forty dead entries removed"
        );
        assert_eq!(
            live.release(&granted).await.unwrap(),
            ReleaseOutcome::Released
        );
        let taken = client()
            .try_acquire(&resource, &fair("next"))
            .await
            .unwrap()
            .unwrap_or_else(|| {
                panic!("keeping: {keeping}: a free lock behind a dead line is taken")
            });
        holder.force_release(&resource).await.unwrap();
        drop(taken);
    }
}

/// A dropped waiter whose leave finds the line changed at each of its tries (the waiters ahead of
/// it leaving meanwhile, as a burst of cancelled waiters does): its clean-up took the last refusal
/// for done, the waiter stayed in line, and the next release would have granted it the lock, held
/// by nobody for its lease. It tries again after a pause, and leaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_waiter_whose_leave_keeps_being_refused_still_leaves() {
    const AHEAD: usize = 8;
    let holder = lock_client().await;
    let resource = unique("fair");
    let lock = hold(&holder, &resource, "holder", LEASE).await;
    let mut ahead = Vec::new();
    let mut owners: Vec<String> = Vec::new();
    for n in 0..AHEAD {
        let client = lock_client().await;
        let owner = format!("a{n}");
        let acquiring = {
            let (client, resource, opts) = (client.clone(), resource.clone(), fair(&owner));
            tokio::spawn(async move { client.acquire(&resource, &opts).await })
        };
        owners.push(owner);
        let expected: Vec<&str> = owners.iter().map(String::as_str).collect();
        line_becomes(&holder, &resource, &expected).await;
        ahead.push((client, acquiring));
    }
    let proxy = Proxy::start(&endpoint()).await;
    let waiter = ddb_lock_test_kit::quickly_retrying_client(&proxy.endpoint());
    let acquiring = {
        let (waiter, resource) = (waiter.clone(), resource.clone());
        tokio::spawn(async move { waiter.acquire(&resource, &fair("gone")).await })
    };
    owners.push("gone".to_owned());
    let expected: Vec<&str> = owners.iter().map(String::as_str).collect();
    line_becomes(&holder, &resource, &expected).await;

    let held_leave = || proxy.delay_next_request_containing("UpdateItem", "REMOVE #queue[");
    let mut leave = held_leave();
    acquiring.abort();
    assert!(acquiring.await.unwrap_err().is_cancelled());
    for (n, (client, acquiring)) in ahead.into_iter().enumerate() {
        leave.captured().await;
        // One ahead leaves before the held leave lands: its place is another's now, and the leave
        // is refused, then sent again at once (held again, but after the last of its tries).
        acquiring.abort();
        assert!(acquiring.await.unwrap_err().is_cancelled());
        client.flush().await;
        let refused = std::mem::replace(&mut leave, held_leave());
        assert!(refused.deliver().await, "the leave reached the endpoint");
        if n + 1 == AHEAD {
            break;
        }
    }
    waiter.flush().await;
    assert!(
        line(&holder, &resource).await.is_empty(),
        "the gone waiter left"
    );
    // Nobody to hand over to: the release deletes the item.
    assert_eq!(
        holder.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert_eq!(raw_item(&resource).await, None);
}
