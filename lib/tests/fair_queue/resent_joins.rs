//! A fair waiter whose join the SDK sent again (its first attempt held in the network past the
//! attempt timeout): the first attempt, landing late, must not put the waiter back in line for a
//! grant to nobody, whether the waiter was dropped, took the lock, or held and released it.

use super::{fair, line, line_becomes, LEASE};
use ddb_lock::{Error, Lock, LockClient, ReleaseOutcome};
use ddb_lock_test_kit::proxy::{HeldRequest, Proxy};
use ddb_lock_test_kit::{
    client_with_attempt_timeout, endpoint, hold, lock_client, raw_item, unique,
};
use std::time::Duration;
use tokio::task::JoinHandle;

/// A fair acquisition in line behind a holder's lock, its join sent again: see
/// [`in_line_after_a_resent_join`].
struct InLineAfterAResend {
    resource: String,
    /// The holder's lock.
    lock: Lock,
    /// The proxy the waiter's requests go through.
    _proxy: Proxy,
    waiter: LockClient,
    /// The join's first attempt, held in the network.
    first_join: HeldRequest,
    acquiring: JoinHandle<Result<Lock, Error>>,
}

/// `holder` takes a resource of its own; a fair acquisition of `owner`'s, through a client whose
/// SDK gives attempts up after a second and tries again at once, joins its line: the join's first
/// attempt is held in the network, and its resend, applied and answered, puts the waiter in line.
async fn in_line_after_a_resent_join(holder: &LockClient, owner: &str) -> InLineAfterAResend {
    let resource = unique("fair");
    let proxy = Proxy::start(&endpoint()).await;
    let waiter = client_with_attempt_timeout(&proxy.endpoint(), Duration::from_secs(1));
    let lock = hold(holder, &resource, "holder", LEASE).await;
    let mut first_join = proxy.delay_next_request_containing("UpdateItem", "list_append");
    let acquiring = {
        let (waiter, resource, owner) = (waiter.clone(), resource.clone(), owner.to_owned());
        tokio::spawn(async move { waiter.acquire(&resource, &fair(&owner)).await })
    };
    first_join.captured().await;
    line_becomes(holder, &resource, &[owner]).await;
    InLineAfterAResend {
        resource,
        lock,
        _proxy: proxy,
        waiter,
        first_join,
        acquiring,
    }
}

/// A join's first attempt held in the network past the SDK's attempt timeout, its resend applied
/// and answered, and the waiter then dropped: its clean-up, the join answered, left the line and
/// looked no more, and the first attempt, landing after, put it back in line; the holder's
/// release granted the lock to nobody for a lease (found by review). A join answered after a
/// resend counts, for the clean-up, as one that may still land.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_join_attempt_landing_after_its_answered_waiter_left_is_taken_out() {
    let holder = lock_client().await;
    let InLineAfterAResend {
        resource,
        lock,
        _proxy,
        waiter,
        first_join,
        acquiring,
    } = in_line_after_a_resent_join(&holder, "gone").await;
    acquiring.abort();
    assert!(acquiring.await.unwrap_err().is_cancelled());
    // Its clean-up's first look leaves the line; the first attempt lands after it.
    line_becomes(&holder, &resource, &[]).await;
    landing_late_grants_nothing(first_join, &waiter, &holder, &lock).await;
}

/// A join's first attempt held in the network past the SDK's attempt timeout, its resend applied:
/// the waiter waits in line; the holder's lock is force released, the waiter finds itself out of
/// line and takes the free lock. Its clean-up had been disarmed, and the first attempt, landing
/// after, put its old id in line behind its new lock, whose release then granted the lock to
/// nobody (found by review). A waiter whose join may still land leaves its clean-up armed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_join_attempt_landing_after_its_waiter_took_the_lock_is_taken_out() {
    let holder = lock_client().await;
    let InLineAfterAResend {
        resource,
        _proxy,
        waiter,
        first_join,
        acquiring,
        ..
    } = in_line_after_a_resent_join(&holder, "waiter").await;
    holder.force_release(&resource).await.unwrap();
    let taken = acquiring.await.unwrap().unwrap();
    assert!(
        first_join.deliver().await,
        "the first attempt reached the endpoint"
    );
    waiter.flush().await;

    assert_eq!(
        waiter.release(&taken).await.unwrap(),
        ReleaseOutcome::Released
    );
    let next = holder
        .try_acquire(&resource, &ddb_lock::AcquireOptions::new().owner("next"))
        .await
        .unwrap();
    assert!(
        next.is_some(),
        "the lock is free: {:?}",
        raw_item(&resource).await
    );
}

/// A join's first attempt held in the network past the SDK's attempt timeout, its resend applied:
/// the waiter is granted the lock, holds it and releases it, and another holder takes it; the
/// first attempt, landing then, put the waiter's old id back in line, and the next release
/// granted the lock to nobody for a lease (found by review). The release of a lock granted after
/// a resent join looks again for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_join_attempt_landing_after_its_waiter_held_and_released_is_taken_out() {
    let holder = lock_client().await;
    let InLineAfterAResend {
        resource,
        lock,
        _proxy,
        waiter,
        first_join,
        acquiring,
    } = in_line_after_a_resent_join(&holder, "waiter").await;
    assert_eq!(
        holder.release(&lock).await.unwrap(),
        ReleaseOutcome::Released
    );
    let granted = acquiring.await.unwrap().unwrap();
    assert_eq!(
        waiter.release(&granted).await.unwrap(),
        ReleaseOutcome::Released
    );
    let next = hold(&holder, &resource, "next", LEASE).await;
    landing_late_grants_nothing(first_join, &waiter, &holder, &next).await;
}

/// The join's first attempt is delivered and `waiter`'s background work done: nobody is in line,
/// and `holder`'s release of `lock` leaves the lock free (a grant to the gone waiter keeps it).
async fn landing_late_grants_nothing(
    first_join: HeldRequest,
    waiter: &LockClient,
    holder: &LockClient,
    lock: &Lock,
) {
    assert!(
        first_join.deliver().await,
        "the first attempt reached the endpoint"
    );
    waiter.flush().await;
    assert_eq!(line(holder, lock.resource()).await.len(), 0);
    assert_eq!(
        holder.release(lock).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert_eq!(
        raw_item(lock.resource()).await,
        None,
        "granted to the gone waiter"
    );
}
