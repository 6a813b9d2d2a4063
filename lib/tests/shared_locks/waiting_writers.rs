//! The marker of an exclusive acquirer waiting for shared holders (`WriterWaiting`): it stops new
//! readers, and the writer gets the lock when the readers leave; a writer that gives up withdraws
//! it; it is placed again when it no longer stands (its first announce found the readers gone,
//! then readers came back), placed by a fair acquirer too, and withdrawn when the acquirer's future
//! is dropped, so that readers are not kept out until its deadline.

use super::*;
use ddb_lock::Lock;
use ddb_lock_test_kit::{client_through, writer_options};
use tokio::task::JoinHandle;

#[tokio::test]
async fn a_waiting_writer_stops_new_readers_and_gets_the_lock_when_the_readers_leave() {
    let client = lock_client().await;
    let resource = unique("shared/writer-preference");
    let r1 = client
        .try_acquire(&resource, &reader("r1"))
        .await
        .unwrap()
        .expect("free");

    let waiting = {
        let client = client.clone();
        let resource = resource.clone();
        tokio::spawn(async move {
            client
                .acquire(&resource, &writer("w").timeout(Duration::from_secs(60)))
                .await
        })
    };
    // The writer announces itself once it has been refused by r1.
    loop {
        match client.status(&resource).await.unwrap() {
            LockStatus::Shared {
                writer_waiting: Some(w),
                ..
            } => {
                assert_eq!(w.owner, "w");
                break;
            }
            LockStatus::Shared { .. } => tokio::task::yield_now().await,
            other => panic!("r1 still reads: {other:?}"),
        }
    }
    match client
        .try_acquire_with_holder(&resource, &reader("r2"))
        .await
        .unwrap()
    {
        AcquireAttempt::Held(holder) => {
            assert_eq!(holder.owner, "w", "the waiting writer blocks new readers")
        }
        AcquireAttempt::Acquired(lock) => panic!("a reader overtook the waiting writer: {lock:?}"),
    }
    assert_eq!(client.release(&r1).await.unwrap(), ReleaseOutcome::Released);
    let w = waiting
        .await
        .unwrap()
        .expect("the writer gets the lock once r1 left");
    assert_eq!(w.mode(), Mode::Exclusive);
    match client.status(&resource).await.unwrap() {
        LockStatus::Held { holder, .. } => assert_eq!(holder.owner, "w"),
        other => panic!("{other:?}"),
    }
    client.release(&w).await.unwrap();
    // The marker went with the writer's acquisition: readers are welcome again.
    let r3 = client
        .try_acquire(&resource, &reader("r3"))
        .await
        .unwrap()
        .expect("free");
    client.release(&r3).await.unwrap();
}

#[tokio::test]
async fn a_writer_that_gives_up_withdraws_its_marker() {
    let client = lock_client().await;
    let resource = unique("shared/writer-gives-up");
    let r1 = client
        .try_acquire(&resource, &reader("r1"))
        .await
        .unwrap()
        .expect("free");
    let err = client
        .acquire(&resource, &writer("w").timeout(Duration::from_millis(50)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    let status = client.status(&resource).await.unwrap();
    assert!(
        matches!(
            status,
            LockStatus::Shared {
                writer_waiting: None,
                ..
            }
        ),
        "{status:?}"
    );
    let r2 = client
        .try_acquire(&resource, &reader("r2"))
        .await
        .unwrap()
        .expect("readers welcome");
    client.release(&r1).await.unwrap();
    client.release(&r2).await.unwrap();
}

/// How long a test waits for what must come; a bug, not a slow machine, runs out of it.
const PATIENCE: Duration = Duration::from_secs(20);

fn writer(owner: &str) -> AcquireOptions {
    writer_options(owner).timeout(Duration::from_secs(60))
}

/// The owner of the marker on `resource`, waiting for it to be `expected`.
async fn marker_becomes(client: &LockClient, resource: &str, expected: Option<&str>) {
    tokio::time::timeout(PATIENCE, async {
        loop {
            let marker = match client.status(resource).await.unwrap() {
                LockStatus::Shared { writer_waiting, .. } => writer_waiting.map(|w| w.owner),
                _ => None,
            };
            if marker.as_deref() == expected {
                return;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the marker never became {expected:?}"));
}

/// Reader `r1` holds `resource`; writer `w` (acquiring with `opts`, in a task) waits behind it,
/// its marker placed.
async fn writer_behind_a_reader(
    client: &LockClient,
    resource: &str,
    opts: AcquireOptions,
) -> (Lock, JoinHandle<Result<Lock, Error>>) {
    let r1 = client
        .try_acquire(resource, &reader("r1"))
        .await
        .unwrap()
        .unwrap();
    let waiting = {
        let (client, resource) = (client.clone(), resource.to_owned());
        tokio::spawn(async move { client.acquire(&resource, &opts).await })
    };
    marker_becomes(client, resource, Some("w")).await;
    (r1, waiting)
}

/// A new reader is kept out by the marker of `writer`.
async fn readers_kept_out_by(client: &LockClient, resource: &str, writer: &str) {
    match client
        .try_acquire_with_holder(resource, &reader("late reader"))
        .await
        .unwrap()
    {
        AcquireAttempt::Held(holder) => assert_eq!(holder.owner, writer),
        AcquireAttempt::Acquired(lock) => panic!("a reader overtook the waiting writer: {lock:?}"),
    }
}

/// The writer's announce arrives after the readers left (the item is gone: refused), and readers
/// come back before its next try: it announces again (it counted the refused announce as placed,
/// and readers overlapping one another kept it out until its deadline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_announces_again_when_its_marker_does_not_stand() {
    let direct = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let writers = client_through(&proxy, None);
    let resource = unique("writer-announces-again");
    let r1 = direct
        .try_acquire(&resource, &reader("r1"))
        .await
        .unwrap()
        .unwrap();

    let mut announce = proxy.delay_next_request_containing("UpdateItem", "SET #writer_waiting");
    let waiting = {
        let (writers, resource) = (writers.clone(), resource.clone());
        tokio::spawn(async move { writers.acquire(&resource, &writer("w")).await })
    };
    announce.captured().await;
    direct.release(&r1).await.unwrap();
    let mut next_try = proxy.delay_next_request("PutItem");
    assert!(announce.deliver().await);
    next_try.captured().await;
    let r2 = direct
        .try_acquire(&resource, &reader("r2"))
        .await
        .unwrap()
        .unwrap();
    assert!(next_try.deliver().await);

    marker_becomes(&direct, &resource, Some("w")).await;
    readers_kept_out_by(&direct, &resource, "w").await;
    direct.release(&r2).await.unwrap();
    let w = waiting.await.unwrap().unwrap();
    writers.release(&w).await.unwrap();
}

/// A fair exclusive acquirer refused by readers places the marker too, as any exclusive
/// acquirer does (it only polled, and readers overlapping one another starved it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_writer_stops_new_readers() {
    let client = lock_client().await;
    let resource = unique("fair-writer-marker");
    let (r1, waiting) = writer_behind_a_reader(&client, &resource, writer("w").fair(true)).await;
    readers_kept_out_by(&client, &resource, "w").await;
    client.release(&r1).await.unwrap();
    let w = waiting.await.unwrap().unwrap();
    client.release(&w).await.unwrap();
}

/// A waiting writer whose future is dropped withdraws its marker from the background: readers
/// are welcome again at once, not after its deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_waiting_writer_withdraws_its_marker() {
    let client = lock_client().await;
    let resource = unique("dropped-writer-marker");
    let (r1, waiting) = writer_behind_a_reader(&client, &resource, writer("w")).await;

    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    client.flush().await;

    marker_becomes(&client, &resource, None).await;
    let r2 = client
        .try_acquire(&resource, &reader("r2"))
        .await
        .unwrap()
        .expect("readers welcome once the writer is gone");
    client.release(&r1).await.unwrap();
    client.release(&r2).await.unwrap();
}

/// A waiting writer dropped after its announce landed, before its answer came back, withdraws
/// the marker too (it counted the marker as placed only once the answer was read, and left it
/// standing until its deadline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_dropped_before_its_announce_was_answered_withdraws_its_marker() {
    let direct = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let writers = client_through(&proxy, None);
    let resource = unique("writer-dropped-mid-announce");
    let r1 = direct
        .try_acquire(&resource, &reader("r1"))
        .await
        .unwrap()
        .unwrap();
    let mut announce = proxy.withhold_next_answer("UpdateItem");
    let waiting = {
        let (writers, resource) = (writers.clone(), resource.clone());
        tokio::spawn(async move { writers.acquire(&resource, &writer("w")).await })
    };
    announce.applied().await;
    marker_becomes(&direct, &resource, Some("w")).await;

    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    announce.drop_it();
    writers.flush().await;

    marker_becomes(&direct, &resource, None).await;
    direct.release(&r1).await.unwrap();
}

/// A waiting writer's announce applied, its answer lost, and the SDK's resend refused by the
/// marker it had placed: the writer took the marker for not placed and, dropped later, left it
/// standing until its deadline, keeping readers out for a writer that had gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_whose_announce_was_resent_withdraws_its_marker_when_dropped() {
    let direct = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let writers = client_through(&proxy, None);
    let resource = unique("writer-announce-resent");
    let r1 = direct
        .try_acquire(&resource, &reader("r1"))
        .await
        .unwrap()
        .unwrap();
    proxy.drop_next_answer("UpdateItem");
    let mut first_try = proxy.delay_next_request("PutItem");
    let mut next_try = proxy.delay_next_request("PutItem");
    let waiting = {
        let (writers, resource) = (writers.clone(), resource.clone());
        tokio::spawn(async move { writers.acquire(&resource, &writer("w")).await })
    };
    first_try.captured().await;
    assert!(first_try.deliver().await, "refused by the reader");
    // The writer tries again only once its announce (and the resend) has been answered.
    next_try.captured().await;
    assert_eq!(
        proxy.counts("UpdateItem").dropped,
        1,
        "the announce's answer was lost"
    );
    marker_becomes(&direct, &resource, Some("w")).await;

    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    writers.flush().await;

    marker_becomes(&direct, &resource, None).await;
    direct.release(&r1).await.unwrap();
}

/// A writer with no time to wait (`timeout(0)`: one attempt) refused by readers places no marker:
/// it announced itself until the moment it gave up, then withdrew, three requests for one try.
#[tokio::test]
async fn a_writer_with_no_time_to_wait_places_no_marker() {
    let client = lock_client().await;
    let resource = unique("shared/writer-no-wait");
    client
        .try_acquire(&resource, &reader("r1"))
        .await
        .unwrap()
        .expect("free");
    let proxy = Proxy::start(&endpoint()).await;
    let writer_client = client_through(&proxy, None);
    let refused = writer_client
        .acquire(&resource, &writer("w").timeout(Duration::ZERO))
        .await;
    assert!(matches!(refused, Err(Error::Timeout { .. })), "{refused:?}");
    assert_eq!(
        proxy.counts("UpdateItem").requests,
        0,
        "no announce, no withdrawal"
    );
}

/// A writer's marker placed, then a reader that came in before it landed refuses the writer
/// again: it announces again, its clock set back meanwhile, and is dropped before that answer
/// came. Each announce lasted until a deadline of its own, the second 50 ms before the first:
/// refused by the first, yet counted as placed, the writer withdrew the second alone and left
/// the first standing until its deadline, keeping readers out for a writer that had gone (found
/// by review). Every marker of one acquisition now lasts until the same deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_dropped_while_announcing_again_withdraws_its_first_marker() {
    let direct = lock_client().await;
    let proxy = Proxy::start(&endpoint()).await;
    let clock = ddb_lock_test_kit::AdjustableClock::new();
    // A second behind: the reader who comes in next took the lock after the first marker's time.
    clock.set_back(Duration::from_secs(1));
    let writers = client_through(&proxy, Some(clock.clone()));
    let resource = unique("writer-dropped-announcing-again");
    let r1 = direct
        .try_acquire(&resource, &reader("r1"))
        .await
        .unwrap()
        .unwrap();
    let mut first = proxy.delay_next_request_containing("UpdateItem", "SET #writer_waiting");
    let waiting = {
        let (writers, resource) = (writers.clone(), resource.clone());
        tokio::spawn(async move { writers.acquire(&resource, &writer("w")).await })
    };
    first.captured().await;
    let r2 = direct
        .try_acquire(&resource, &reader("r2"))
        .await
        .unwrap()
        .unwrap();
    let mut next_try = proxy.delay_next_request("PutItem");
    assert!(first.deliver().await, "the first marker landed");
    next_try.captured().await;
    marker_becomes(&direct, &resource, Some("w")).await;
    clock.set_back(Duration::from_millis(50));
    let mut again = proxy.withhold_next_answer("UpdateItem");
    assert!(next_try.deliver().await, "refused by the readers");
    again.applied().await;
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    again.drop_it();
    writers.flush().await;

    marker_becomes(&direct, &resource, None).await;
    direct.release(&r1).await.unwrap();
    direct.release(&r2).await.unwrap();
}
