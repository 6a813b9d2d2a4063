//! The holds' bookkeeping, without DynamoDB.

use super::*;
use crate::mode::Mode;
use std::time::Duration;

pub(super) fn handle(resource: &str) -> LockHandle {
    LockHandle::new(resource, "me", LockId::generate())
}

pub(super) fn acquired_at() -> DateTime<Utc> {
    crate::record::samples::now()
}

/// An extension's answer: applied, to `until` (its stored end thirty seconds after
/// [`acquired_at`]).
pub(super) fn applied(until: Instant) -> Applied {
    Applied {
        acquired_at: acquired_at(),
        stored_end: acquired_at() + chrono::TimeDelta::seconds(30),
        until,
    }
}

/// `holds` took `lock`, for thirty seconds.
pub(super) fn held_for_a_while(holds: &Holds, lock: &LockHandle) {
    holds.acquired(
        lock,
        acquired_at(),
        Instant::now() + Duration::from_secs(30),
    );
}

/// A guard's stop that counts its calls and remembers the last reason.
pub(super) fn counting_stop() -> (StopGuard, Arc<Mutex<Vec<LockLost>>>) {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&calls);
    let stop: StopGuard = Arc::new(move |lost| seen.lock().unwrap().push(lost));
    (stop, calls)
}

#[test]
fn every_guard_of_a_lock_is_stopped_and_only_those() {
    let holds = Holds::default();
    let (a, b) = (handle("a"), handle("b"));
    let until = Instant::now() + Duration::from_secs(30);
    holds.acquired(&a, acquired_at(), until);
    holds.acquired(&b, acquired_at(), until);
    let (first, first_calls) = counting_stop();
    let (second, second_calls) = counting_stop();
    let (other, other_calls) = counting_stop();
    assert!(holds.guarded(&a, first));
    // Handed back to an idempotent acquisition: a second guard of the same lock.
    holds.acquired(&a, acquired_at(), until);
    assert!(holds.guarded(&a, second));
    assert!(holds.guarded(&b, other));

    holds.found_lost(a.lock_id(), &LockLost::NotFound);
    assert_eq!(*first_calls.lock().unwrap(), [LockLost::NotFound]);
    assert_eq!(*second_calls.lock().unwrap(), [LockLost::NotFound]);
    assert!(other_calls.lock().unwrap().is_empty());
}

#[test]
fn a_release_by_owner_stops_the_guards_it_can_release_and_spares_the_rest() {
    let holds = Holds::default();
    let until = Instant::now() + Duration::from_secs(30);
    let early = acquired_at();
    let late = early + chrono::TimeDelta::seconds(10);
    let mine = handle("r");
    let later = handle("r");
    let theirs = LockHandle::new("r", "them", LockId::generate());
    let elsewhere = handle("s");
    let shared = handle("r").with_mode(Mode::Shared);
    let mut calls = Vec::new();
    for (lock, at) in [
        (&mine, early),
        (&later, late),
        (&theirs, early),
        (&elsewhere, early),
        (&shared, early),
    ] {
        holds.acquired(lock, at, until);
        let (stop, seen) = counting_stop();
        assert!(holds.guarded(lock, stop));
        calls.push(seen);
    }
    let stopped = || {
        calls
            .iter()
            .map(|c| c.lock().unwrap().len())
            .collect::<Vec<_>>()
    };

    holds.releases_start_on("r", Some("me"), Some(early));
    assert_eq!(
        stopped(),
        [1, 0, 0, 0, 0],
        "acquired no later than the moment, of that owner, exclusive"
    );
    holds.releases_start_on("r", Some("me"), None);
    assert_eq!(stopped(), [2, 1, 0, 0, 0]);
    let forced = holds.releases_start_on("r", None, None);
    assert_eq!(
        stopped(),
        [3, 2, 1, 0, 1],
        "a force release: every lock on the resource"
    );
    assert_eq!(*calls[0].lock().unwrap(), vec![LockLost::Released; 3]);
    assert!(holds.release_started(mine.lock_id()) && holds.release_started(theirs.lock_id()));
    assert!(!holds.release_started(elsewhere.lock_id()));
    // Ended by the force release while it is on its way; after, only where it may have removed
    // the lock (here: `theirs`, answered released, and `shared`, sent and unanswered).
    for release in &forced {
        release.sending();
        if release.lock_id() == theirs.lock_id() {
            release.answered(&Ok(crate::outcome::ReleaseOutcome::Released));
        } else if release.lock_id() != shared.lock_id() {
            release.answered(&Ok(crate::outcome::ReleaseOutcome::NotFound));
        }
    }
    drop(forced);
    assert!(holds.release_started(theirs.lock_id()) && holds.release_started(shared.lock_id()));
    assert!(
        holds.release_started(mine.lock_id()),
        "its release by owner started"
    );
    let later_extended = holds.extended(&later, super::tests::applied(until));
    assert!(!later_extended, "its release by owner started too");
}

#[test]
fn a_lock_whose_release_started_stays_ended_after_it_is_freed() {
    let holds = Holds::default();
    let lock = handle("a");
    held_for_a_while(&holds, &lock);
    let (stop, calls) = counting_stop();
    assert!(holds.guarded(&lock, stop));
    assert!(!holds.release_started(lock.lock_id()));
    drop(holds.release_starts(&lock));
    assert!(holds.release_started(lock.lock_id()));
    assert_eq!(*calls.lock().unwrap(), [LockLost::Released]);
    // Taken again meanwhile (an answer read late): still ended, no guard joins it.
    holds.acquired(&lock, acquired_at(), Instant::now());
    assert!(holds.release_started(lock.lock_id()));
    assert!(!holds.guarded(&lock, Arc::new(|_| {})));
    holds.freed(lock.lock_id());
    assert!(
        holds.release_started(lock.lock_id()),
        "answered, still ended"
    );
    // An extension answered after the release does not remember it as held again.
    assert!(
        !holds.extended(&lock, applied(Instant::now() + Duration::from_secs(30))),
        "not counted on"
    );
    assert!(holds.handles().is_empty());
    // A lock this client never took, released through it, is marked too.
    let elsewhere = handle("b");
    drop(holds.release_starts(&elsewhere));
    assert!(holds.release_started(elsewhere.lock_id()));
    assert!(holds.handles().is_empty());
}

#[test]
fn a_lock_whose_release_is_on_its_way_is_left_to_it_by_take_all() {
    let holds = Holds::default();
    let (a, b) = (handle("a"), handle("b"));
    held_for_a_while(&holds, &a);
    held_for_a_while(&holds, &b);
    let first = holds.release_starts(&a);
    let second = holds.release_starts(&a);
    let taken: Vec<LockHandle> = holds.take_all().into_iter().map(|h| h.handle).collect();
    assert_eq!(taken, [b], "only the lock with no release on its way");
    // The first release answered, the second still on its way: still left.
    drop(first);
    assert!(holds.take_all().is_empty());
    // Both failed (the hold stays, ended): the next call takes it.
    drop(second);
    let taken: Vec<LockHandle> = holds.take_all().into_iter().map(|h| h.handle).collect();
    assert_eq!(taken, [a]);
}

#[test]
fn the_latest_ended_acquisitions_are_kept() {
    let holds = Holds::default();
    let first = handle("first");
    drop(holds.release_starts(&first));
    let rest: Vec<LockHandle> = (0..ENDED_KEPT).map(|i| handle(&i.to_string())).collect();
    for lock in &rest {
        drop(holds.release_starts(lock));
    }
    assert!(
        !holds.release_started(first.lock_id()),
        "the oldest forgotten"
    );
    assert!(rest
        .iter()
        .all(|lock| holds.release_started(lock.lock_id())));
    assert_eq!(holds.inner().ended.len(), ENDED_KEPT);
}

#[test]
fn a_hold_is_remembered_until_freed() {
    let holds = Holds::default();
    let (a, b) = (handle("a"), handle("b"));
    let until = Instant::now() + Duration::from_secs(30);
    holds.acquired(&a, acquired_at(), until);
    holds.acquired(&b, acquired_at(), until);
    assert_eq!(holds.handles().len(), 2);
    holds.freed(a.lock_id());
    assert_eq!(holds.handles(), vec![b.clone()]);
}

#[test]
fn an_earlier_extension_answered_last_does_not_shorten_a_hold() {
    let holds = Holds::default();
    let lock = handle("r");
    let now = Instant::now();
    holds.acquired(&lock, acquired_at(), now + Duration::from_secs(5));
    assert!(holds.extended(&lock, applied(now + Duration::from_secs(60))));
    assert!(holds.extended(&lock, applied(now + Duration::from_secs(1))));
    assert_eq!(
        holds.inner().held[&lock.lock_id()].until,
        now + Duration::from_secs(60)
    );
}

#[test]
fn a_release_by_owner_ends_only_the_holds_its_condition_takes() {
    let holds = Holds::default();
    let (older, newer) = (handle("r"), handle("r"));
    let until = Instant::now() + Duration::from_secs(30);
    let then = acquired_at();
    holds.acquired(&older, then, until);
    holds.releases_start_on("r", Some("me"), Some(then));
    // Taken after the release started: its condition spares it.
    holds.acquired(&newer, then + chrono::TimeDelta::seconds(1), until);
    let ending = holds.releases_start_on("r", Some("me"), Some(then));
    let ending: Vec<LockId> = ending.iter().map(ReleaseUnderway::lock_id).collect();
    assert_eq!(ending, vec![older.lock_id()]);
}

#[test]
fn pruning_forgets_only_holds_whose_lease_ran_out_without_a_guard() {
    let holds = Holds::default();
    let ran_out = Instant::now();
    let guarded = handle("guarded");
    holds.acquired(&guarded, acquired_at(), ran_out);
    assert!(holds.guarded(&guarded, Arc::new(|_| {})));
    for i in 0..FIRST_PRUNE_AT - 1 {
        holds.acquired(&handle(&format!("ran-out/{i}")), acquired_at(), ran_out);
    }
    // Ran out, but an extension sent may still be answered: what it sent is kept.
    let extending = handle("extending");
    holds.acquired(&extending, acquired_at(), ran_out);
    holds.lease_to_send(&extending, acquired_at(), Duration::from_secs(30));
    let live = handle("live");
    held_for_a_while(&holds, &live);
    let mut left: Vec<_> = holds
        .handles()
        .iter()
        .map(|handle| handle.resource().to_owned())
        .collect();
    left.sort();
    assert_eq!(left, vec!["extending", "guarded", "live"]);
}

#[test]
fn the_extensions_of_a_lock_taken_elsewhere_are_ordered_from_the_first() {
    let holds = Holds::default();
    let elsewhere = handle("elsewhere");
    let t = acquired_at();
    let first = holds.lease_to_send(&elsewhere, t, Duration::from_secs(60));
    assert_eq!(first.earlier_end, None);
    // Unanswered, then a shorter one: it asks past the first's end, and knows of it.
    let second = holds.lease_to_send(&elsewhere, t, Duration::from_secs(10));
    assert!(second.asked > Duration::from_secs(60), "{second:?}");
    assert_eq!(first.earlier_end, None);
    assert_eq!(second.earlier_end, Some(t + chrono::TimeDelta::seconds(60)));
    // Remembered as extended here only: release_all leaves it.
    assert!(holds.take_all().is_empty());
    // Ended through this client: no longer remembered, the lease as given.
    drop(holds.release_starts(&elsewhere));
    holds.freed(elsewhere.lock_id());
    let after = holds.lease_to_send(&elsewhere, t, Duration::from_secs(10));
    assert_eq!(after.asked, Duration::from_secs(10));
}

#[test]
fn a_lock_taken_back_keeps_its_guard() {
    let holds = Holds::default();
    let lock = handle("a");
    holds.acquired(&lock, acquired_at(), Instant::now());
    assert!(holds.guarded(&lock, Arc::new(|_| {})));
    held_for_a_while(&holds, &lock);
    let taken = holds.take_all();
    assert_eq!(taken[0].stop_guards.len(), 1);
}

#[test]
fn an_extension_remembers_a_hold_pruned_before_it_succeeded() {
    let holds = Holds::default();
    let lock = handle("a");
    // Its lease ran out on this process's clock, and pruning forgot it.
    holds.acquired(&lock, acquired_at(), Instant::now());
    for i in 0..FIRST_PRUNE_AT {
        held_for_a_while(&holds, &handle(&format!("live/{i}")));
    }
    assert!(!holds.handles().contains(&lock), "pruned");
    let until = Instant::now() + Duration::from_secs(30);
    assert!(holds.extended(&lock, applied(until)));
    assert!(holds.handles().contains(&lock), "remembered again");
    assert!(holds.extended(&lock, applied(until + Duration::from_secs(30))));
    let taken = holds.take_all();
    let again = taken.iter().find(|h| h.handle == lock).expect("taken");
    assert_eq!(again.until, until + Duration::from_secs(30));
}

#[test]
fn an_extension_of_a_lock_taken_elsewhere_does_not_make_it_taken_here() {
    let holds = Holds::default();
    let elsewhere = handle("saga");
    let until = Instant::now() + Duration::from_secs(30);
    assert!(holds.extended(&elsewhere, applied(until)));
    assert!(
        holds.take_all().is_empty(),
        "release_all leaves it to its holder"
    );
    // Its later extensions are ordered as this client's own.
    assert_eq!(holds.handles(), vec![elsewhere.clone()]);
    // Handed back to this client (an idempotent acquisition), it is taken here.
    holds.acquired(&elsewhere, acquired_at(), until);
    assert_eq!(holds.take_all().len(), 1);
}

#[test]
fn a_guard_cannot_join_a_hold_taken_by_release_all() {
    let holds = Holds::default();
    let lock = handle("a");
    held_for_a_while(&holds, &lock);
    assert_eq!(holds.take_all().len(), 1);
    assert!(!holds.guarded(&lock, Arc::new(|_| {})));
    assert!(holds.handles().is_empty());
}

#[test]
fn extensions_ask_for_lease_ends_in_the_order_they_are_sent() {
    let holds = Holds::default();
    let lock = handle("a");
    let lease = Duration::from_secs(10);
    holds.acquired(&lock, acquired_at(), Instant::now());
    let t = acquired_at();
    let seconds = chrono::TimeDelta::seconds;
    // Sent in order on a clock that moves forward: the lease given.
    assert_eq!(holds.lease_to_send(&lock, t, lease).asked, lease);
    // The clock stepped back 2 s: an end a millisecond past the last one sent.
    let stepped = holds.lease_to_send(&lock, t - seconds(2), lease).asked;
    assert_eq!(stepped, Duration::from_millis(12_001));
    // Caught up again (the reading of the first): the stretched end is still the latest sent.
    let caught_up = holds.lease_to_send(&lock, t, lease).asked;
    assert_eq!(caught_up, Duration::from_millis(10_002));
    // A shorter lease asked for later: still past every end sent.
    let shorter = holds
        .lease_to_send(&lock, t + seconds(1), Duration::from_secs(2))
        .asked;
    assert_eq!(shorter, Duration::from_millis(9_003));
    // Past them all: the lease given.
    assert_eq!(
        holds.lease_to_send(&lock, t + seconds(2), lease).asked,
        lease
    );
}

#[test]
fn extensions_write_at_least_the_lease_counted_on() {
    let holds = Holds::default();
    let lock = handle("a");
    let until = Instant::now() + Duration::from_secs(20);
    holds.acquired(&lock, acquired_at(), until);
    // The wall clock jumped 30 s forward: a 2 s lease from it ends well after the stored end, but
    // the client counts on 20 s more. It asks for 2 s and writes at least what it counts on.
    let now = acquired_at() + chrono::TimeDelta::seconds(30);
    let two = Duration::from_secs(2);
    let lease = holds.lease_to_send(&lock, now, two);
    let counted_on = until.saturating_duration_since(Instant::now());
    assert_eq!(lease.asked, two);
    assert!(
        lease.written >= counted_on && lease.written <= Duration::from_secs(20),
        "{lease:?} for {counted_on:?}"
    );
    // A lock this client does not hold: the lease given.
    let elsewhere = handle("b");
    let given = holds.lease_to_send(&elsewhere, now, two);
    assert_eq!((given.asked, given.written), (two, two));
}

#[test]
fn locks_taken_for_release_all_are_not_handed_back() {
    let holds = Holds::default();
    let lock = handle("a");
    held_for_a_while(&holds, &lock);
    let taken = holds.take_all();
    assert_eq!(taken.len(), 1);
    // Before each lock's release task has run: the take marked them.
    assert!(!holds.taken_back(
        &lock,
        acquired_at(),
        Instant::now() + Duration::from_secs(30)
    ));
}

#[test]
fn an_unanswered_extension_counts_in_the_lease_written() {
    let holds = Holds::default();
    let lock = handle("a");
    holds.acquired(
        &lock,
        acquired_at(),
        Instant::now() + Duration::from_secs(2),
    );
    let t = acquired_at();
    // A 30 s extension is sent; its answer is late. The wall clock jumps 29 s forward, and a 1 s
    // extension is sent: its end is past the first's, so it applies first; the first's late
    // `Extended` then tells its caller of 30 s, which the second's `LeaseMs` must cover.
    let first = holds.lease_to_send(&lock, t, Duration::from_secs(30));
    assert_eq!(first.asked, Duration::from_secs(30));
    let second = holds.lease_to_send(
        &lock,
        t + chrono::TimeDelta::seconds(29),
        Duration::from_secs(1),
    );
    assert!(second.asked < Duration::from_secs(2), "{second:?}");
    assert!(second.written >= Duration::from_secs(29), "{second:?}");
}

#[test]
fn a_lock_taken_back_keeps_the_longer_lease_counted_on() {
    let holds = Holds::default();
    let lock = handle("a");
    let long = Instant::now() + Duration::from_secs(60);
    holds.acquired(&lock, acquired_at(), long);
    assert!(holds.taken_back(
        &lock,
        acquired_at(),
        Instant::now() + Duration::from_secs(1)
    ));
    assert_eq!(holds.inner().held[&lock.lock_id()].until, long);
}

#[test]
fn a_lock_kept_to_its_expiry_stays_out_of_release_all_unless_taken_first() {
    let holds = Holds::default();
    let (kept, taken_first) = (handle("tick-a"), handle("tick-b"));
    held_for_a_while(&holds, &kept);
    held_for_a_while(&holds, &taken_first);
    assert!(holds.keep_until_expiry(kept.lock_id()));
    let taken: Vec<_> = holds.take_all().into_iter().map(|h| h.handle).collect();
    assert_eq!(taken, vec![taken_first.clone()], "the kept lock stays");
    assert!(
        !holds.keep_until_expiry(taken_first.lock_id()),
        "a lock release_all took first is being released: not kept"
    );
}
