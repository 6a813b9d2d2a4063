//! The holds' bookkeeping of extensions, without DynamoDB: which answers make a refusal that
//! found the lease over out of date, and which release marks an applied extension reads.

use super::tests::{acquired_at, applied, counting_stop, handle, held_for_a_while};
use super::*;
use crate::mode::Mode;
use std::time::Duration;

/// The leases of an extension sent after one that asked for a lease end `earlier_end` seconds
/// after [`acquired_at`].
fn sent_after(earlier_end: i64) -> sent::LeaseToSend {
    sent::LeaseToSend {
        asked: Duration::from_secs(60),
        written: Duration::from_secs(60),
        earlier_end: Some(acquired_at() + chrono::TimeDelta::seconds(earlier_end)),
    }
}

#[test]
fn an_expiry_found_after_an_applied_extension_with_a_later_end_is_out_of_date() {
    let holds = Holds::default();
    let lock = handle("a");
    held_for_a_while(&holds, &lock);
    let (stop, calls) = counting_stop();
    assert!(holds.guarded(&lock, stop));
    assert!(holds.extended(&lock, applied(Instant::now())));
    let expired = LockLost::Expired {
        expired_at: acquired_at() + chrono::TimeDelta::seconds(10),
    };
    let found = holds.expiry_found(
        &lock,
        &sent_after(30),
        acquired_at() + chrono::TimeDelta::seconds(10),
        &expired,
    );
    assert_eq!(found, ExpiryFound::OutOfDate);
    assert!(calls.lock().unwrap().is_empty(), "the guard still holds");
    assert!(!holds.release_started(lock.lock_id()));
    // At the stored end itself or later: lost.
    let found = holds.expiry_found(
        &lock,
        &sent_after(10),
        acquired_at() + chrono::TimeDelta::seconds(30),
        &expired,
    );
    assert_eq!(found, ExpiryFound::Lost { to_release: false });
    assert_eq!(*calls.lock().unwrap(), [expired]);
}

#[test]
fn an_expiry_found_with_an_earlier_extension_on_its_way_marks_the_lock_for_release() {
    let holds = Holds::default();
    let lock = handle("a");
    held_for_a_while(&holds, &lock);
    let expired_at = acquired_at() + chrono::TimeDelta::seconds(10);
    let expired = LockLost::Expired { expired_at };
    let found = holds.expiry_found(&lock, &sent_after(60), expired_at, &expired);
    assert_eq!(found, ExpiryFound::Lost { to_release: true });
    // The earlier extension, applied and read after: not counted on.
    assert!(!holds.extended(&lock, applied(Instant::now())));
    // Through a handle of another owner, the hold is not this one's.
    holds.acquired(&lock, acquired_at(), Instant::now());
    let other = LockHandle::new("a", "someone", lock.lock_id());
    assert!(holds.extended(&other, applied(Instant::now())));
}

#[test]
fn a_release_mark_counts_for_the_handles_that_released() {
    let holds = Holds::default();
    let lock = handle("a");
    let other_owner = LockHandle::new("a", "other", lock.lock_id());
    let other_resource = LockHandle::new("b", "me", lock.lock_id());
    let shared = lock.clone().with_mode(Mode::Shared);
    drop(holds.release_starts(&other_owner));
    drop(holds.release_starts(&other_resource));
    // Neither took away the hold of `lock`, nor of its shared twin.
    assert!(holds.extended(&lock, applied(Instant::now())));
    assert!(holds.extended(&shared, applied(Instant::now())));
    assert!(!holds.extended(&other_owner, applied(Instant::now())));
    assert!(!holds.extended(&other_resource, applied(Instant::now())));
    // A loss after them changes nothing; a release by `lock` counts for it.
    holds.found_lost(lock.lock_id(), &LockLost::NotFound);
    assert!(!holds.extended(&other_owner, applied(Instant::now())));
    drop(holds.release_starts(&lock));
    assert!(!holds.extended(&lock, applied(Instant::now())));
    assert!(holds.extended(&shared, applied(Instant::now())));
    // A force release's mark counts for every holder.
    holds.removing([lock.lock_id()]);
    assert!(!holds.extended(&shared, applied(Instant::now())));
}

#[test]
fn an_extension_applied_after_the_lock_was_found_lost_makes_older_refusals_out_of_date() {
    let holds = Holds::default();
    let lock = handle("a");
    held_for_a_while(&holds, &lock);
    let expired_at = acquired_at() + chrono::TimeDelta::seconds(10);
    let expired = LockLost::Expired { expired_at };
    // Found over, no earlier extension on its way: lost, and forgotten as a hold.
    let given = sent::LeaseToSend::given(Duration::from_secs(60));
    assert_eq!(
        holds.expiry_found(&lock, &given, expired_at, &expired),
        ExpiryFound::Lost { to_release: false }
    );
    holds.freed(lock.lock_id());
    // A late extension, sent while the lease stood, applied and answered after.
    assert!(holds.extended(&lock, applied(Instant::now())));
    // A refusal decided before it, read now: out of date.
    assert_eq!(
        holds.expiry_found(&lock, &sent_after(60), expired_at, &expired),
        ExpiryFound::OutOfDate
    );
}

#[test]
fn a_lock_extended_again_is_remembered_as_extended_last() {
    let holds = Holds::default();
    let lock = handle("a");
    held_for_a_while(&holds, &lock);
    assert!(holds.extended(&lock, applied(Instant::now())));
    let others: Vec<LockHandle> = (1..ENDED_KEPT).map(|_| handle("other")).collect();
    for other in &others {
        assert!(holds.extended(other, applied(Instant::now())));
    }
    // Extended again, then one more lock extended for the first time.
    assert!(holds.extended(&lock, applied(Instant::now())));
    assert!(holds.extended(&handle("one more"), applied(Instant::now())));
    let expired_at = acquired_at() + chrono::TimeDelta::seconds(10);
    let expired = LockLost::Expired { expired_at };
    assert_eq!(
        holds.expiry_found(&lock, &sent_after(60), expired_at, &expired),
        ExpiryFound::OutOfDate
    );
}

/// Two rewrites at one stored end on their way, one answered: the other may still land after an
/// extension found the lease over there, and the lock is marked for release (one slot for the
/// end, cleared by the first answer, forgot the second; found by review).
#[test]
fn a_rewrite_still_on_its_way_after_another_was_answered_marks_the_lock_for_release() {
    let holds = Holds::default();
    let lock = handle("a");
    held_for_a_while(&holds, &lock);
    let end = acquired_at() + chrono::TimeDelta::seconds(10);
    holds.rewrite_sent(lock.lock_id(), end);
    holds.rewrite_sent(lock.lock_id(), end);
    holds.rewrite_answered(lock.lock_id());
    let no_earlier = sent::LeaseToSend::given(Duration::from_secs(60));
    let expired = LockLost::Expired { expired_at: end };
    let found = holds.expiry_found(&lock, &no_earlier, end, &expired);
    assert_eq!(found, ExpiryFound::Lost { to_release: true });
}

/// Every rewrite answered, none may land: an expiry found is a loss with nothing to release.
#[test]
fn with_every_rewrite_answered_an_expiry_found_releases_nothing() {
    let holds = Holds::default();
    let lock = handle("a");
    held_for_a_while(&holds, &lock);
    let end = acquired_at() + chrono::TimeDelta::seconds(10);
    holds.rewrite_sent(lock.lock_id(), end);
    holds.rewrite_answered(lock.lock_id());
    let no_earlier = sent::LeaseToSend::given(Duration::from_secs(60));
    let expired = LockLost::Expired { expired_at: end };
    let found = holds.expiry_found(&lock, &no_earlier, end, &expired);
    assert_eq!(found, ExpiryFound::Lost { to_release: false });
}

/// A release with the lock's id by another owner (refused by DynamoDB) marked the lock; the
/// holder's idempotent acquisition was handed it back and started a guard: an extension through
/// the client told the guard nothing (its heartbeat, its answer held, then gave up at its own
/// lease end and deleted the lock its client had answered extended; found by review).
#[test]
fn a_guard_counts_on_an_extension_after_another_handles_release_mark() {
    let holds = Holds::default();
    let lock = handle("a");
    drop(holds.release_starts(&LockHandle::new("a", "intruder", lock.lock_id())));
    assert!(holds.taken_back(&lock, acquired_at(), Instant::now()));
    let (stop, stopped) = counting_stop();
    assert!(holds.guarded(&lock, stop));
    let told = Arc::new(Mutex::new(Vec::new()));
    let heard = Arc::clone(&told);
    holds.watched(
        &lock,
        Arc::new(move |until, _| heard.lock().unwrap().push(until)),
    );
    let until = Instant::now() + Duration::from_secs(30);
    assert!(holds.extended(&lock, applied(until)));
    assert_eq!(*told.lock().unwrap(), [until], "the guard counts on it");
    assert!(stopped.lock().unwrap().is_empty());
    // Its own release's mark: nothing more counts.
    drop(holds.release_starts(&lock));
    assert!(!holds.extended(&lock, applied(until + Duration::from_secs(1))));
    assert_eq!(told.lock().unwrap().len(), 1);
}

/// A force release that removed nothing of a lock (it failed, gave up, or found another's) leaves
/// no mark on it: marked for good, the holder's next extension through this client was taken for
/// one applied after its release started, answered `NotFound`, and deleted the live lock (found by
/// review).
#[test]
fn a_force_release_that_removed_nothing_leaves_the_lock_to_its_holder() {
    let holds = Holds::default();
    let lock = handle("r");
    held_for_a_while(&holds, &lock);
    let (stop, stopped) = counting_stop();
    assert!(holds.guarded(&lock, stop));
    let forced = holds.releases_start_on("r", None, None);
    assert_eq!(*stopped.lock().unwrap(), [LockLost::Released]);
    assert!(
        !holds.extended(&lock, applied(Instant::now())),
        "on its way"
    );
    for release in &forced {
        release.sending();
        release.answered(&Ok(crate::outcome::ReleaseOutcome::NotFound));
    }
    drop(forced);
    assert!(!holds.release_started(lock.lock_id()));
    assert!(holds.extended(&lock, applied(Instant::now())));
    assert!(holds.taken_back(&lock, acquired_at(), Instant::now()));
}

/// A hand-back at T3 writes its time; the answer of an extension applied before it (at the
/// acquisition time T0), read after, does not set the hold's back: a release by owner of the
/// locks acquired by a moment between the two leaves the hold, as DynamoDB leaves the lock.
#[test]
fn an_extension_answered_after_a_hand_back_keeps_the_hand_backs_time() {
    let holds = Holds::default();
    let lock = handle("taken-back");
    held_for_a_while(&holds, &lock);
    let (t0, stop, t3) = (
        acquired_at(),
        acquired_at() + chrono::TimeDelta::seconds(1),
        acquired_at() + chrono::TimeDelta::seconds(5),
    );
    assert!(holds.taken_back(&lock, t3, Instant::now() + Duration::from_secs(30)));
    let before_it = Applied {
        acquired_at: t0,
        ..applied(Instant::now() + Duration::from_secs(30))
    };
    assert!(holds.extended(&lock, before_it));
    assert!(holds
        .releases_start_on(lock.resource(), Some(lock.owner()), Some(stop))
        .is_empty());
}

/// A release by owner of the locks acquired by a moment marks the lock this client remembers
/// acquired before it; an extension's answer showing the lock acquired after that moment (handed
/// back elsewhere since) is not one it took away, while one showing the old time still is.
#[test]
fn a_release_by_owner_bounded_by_a_moment_spares_a_lock_seen_acquired_after_it() {
    let holds = Holds::default();
    let lock = handle("redriven");
    held_for_a_while(&holds, &lock);
    let stopped_at = acquired_at() + chrono::TimeDelta::seconds(1);
    let started = holds.releases_start_on(lock.resource(), Some(lock.owner()), Some(stopped_at));
    assert_eq!(
        started.len(),
        1,
        "the lock remembered, acquired before the moment"
    );
    let until = Instant::now() + Duration::from_secs(30);
    let before = applied(until);
    assert!(!holds.extended(&lock, before), "acquired before: released");
    let handed_back = Applied {
        acquired_at: acquired_at() + chrono::TimeDelta::seconds(5),
        ..applied(until)
    };
    assert!(holds.extended(&lock, handed_back), "acquired after: spared");
    drop(started);
}
