//! The releases on their way ([`underway`](super::underway)), without DynamoDB: which ones a
//! release waits for, and what it reads of them.

use super::tests::{acquired_at, handle, held_for_a_while};
use super::*;

/// A release started while others of the lock are on their way waits for all of them, whatever
/// order they end in, and only for them.
#[tokio::test]
async fn a_release_started_after_others_waits_for_them() {
    use futures_util::FutureExt;
    let holds = Holds::default();
    let (a, b) = (handle("a"), handle("b"));
    let mut alone = holds.release_starts(&b);
    assert!(!alone.after_earlier().await, "nothing before it");
    let (first, second) = (holds.release_starts(&a), holds.release_starts(&a));
    let mut third = holds.release_starts(&a);
    let mut waiting = Box::pin(third.after_earlier());
    assert_eq!((&mut waiting).now_or_never(), None);
    drop(second);
    assert_eq!(
        (&mut waiting).now_or_never(),
        None,
        "the first is on its way"
    );
    first.sending();
    drop(first);
    assert_eq!((&mut waiting).now_or_never(), Some(true));
    drop(waiting);
    drop(third);
    assert!(!holds.release_underway(a.lock_id()));
    assert!(holds.release_underway(b.lock_id()));
}

/// A release behind a stuck one (never answered) waits [`EARLIER_WAIT`] for it once: a dropped
/// guard's, which first asks whether that one was answered, then sends its own as a resend
/// without waiting again (it waited twice as long; found by review). On a paused clock.
#[tokio::test(start_paused = true)]
async fn a_release_behind_a_stuck_one_waits_for_it_once() {
    use super::underway::EARLIER_WAIT;
    let holds = Holds::default();
    let lock = handle("a");
    let stuck = holds.release_starts(&lock);
    stuck.sending();
    let mut dropped_guards = holds.release_starts(&lock);
    let start = tokio::time::Instant::now();
    assert!(
        !dropped_guards.earlier_answered(Some(acquired_at())).await,
        "never answered"
    );
    assert_eq!(start.elapsed(), EARLIER_WAIT);
    assert!(
        dropped_guards.after_earlier().await,
        "the stuck one may have released the lock"
    );
    assert_eq!(start.elapsed(), EARLIER_WAIT, "waited once");
    assert!(stuck.overtaken());
}

/// A release dropped before its request was sent released nothing: the release waiting for it is
/// no resend.
#[tokio::test]
async fn a_release_after_one_dropped_unsent_is_no_resend() {
    use futures_util::FutureExt;
    let holds = Holds::default();
    let a = handle("a");
    let unsent = holds.release_starts(&a);
    let mut after = holds.release_starts(&a);
    drop(unsent);
    assert_eq!(after.after_earlier().now_or_never(), Some(false));
}

/// A force release's release of a lock on its way is waited for, but the lock is not left to it:
/// it may be cancelled before its delete.
#[tokio::test]
async fn a_force_releases_lock_is_waited_for_but_not_left_to_it() {
    use futures_util::FutureExt;
    let holds = Holds::default();
    let lock = handle("r");
    held_for_a_while(&holds, &lock);
    let forced = holds.releases_start_on("r", None, None);
    assert_eq!(forced.len(), 1);
    assert!(!holds.release_underway(lock.lock_id()), "not left to it");
    let mut after = holds.release_starts(&lock);
    let mut waiting = Box::pin(after.after_earlier());
    assert_eq!((&mut waiting).now_or_never(), None, "waited for");
    for release in &forced {
        release.sending();
    }
    drop(forced);
    assert_eq!((&mut waiting).now_or_never(), Some(true));
}

/// A release sent only if the releases before it failed (a dropped guard's) is left to one that
/// DynamoDB answered, but not to a force release (one that gave up, its item changing under it,
/// answers that it found nothing; one that removed the lock may have removed an earlier copy of
/// it; found by review), nor to one that failed.
#[tokio::test]
async fn only_an_answered_release_of_the_acquisition_is_left_to() {
    use super::underway::Reach;
    use crate::outcome::ReleaseOutcome;
    use futures_util::FutureExt;
    let holds = Holds::default();
    let stopped_at = acquired_at() + chrono::TimeDelta::seconds(1);
    // The release left to the earlier one is of the acquisition handed back after the stop.
    let later = acquired_at() + chrono::TimeDelta::seconds(5);
    for (i, (reach, answer, left_to_it)) in [
        (Reach::AnyHolder, Ok(ReleaseOutcome::NotFound), false),
        (Reach::AnyHolder, Ok(ReleaseOutcome::Released), false),
        (Reach::Acquisition, Ok(ReleaseOutcome::NotFound), true),
        (
            Reach::Acquisition,
            Err(crate::error::InvalidInput::DataNotKept.into()),
            false,
        ),
        // Refused (a newer version of the same acquisition), it ended nothing.
        (Reach::Version, Ok(ReleaseOutcome::NotFound), false),
        (Reach::Version, Ok(ReleaseOutcome::Released), true),
        // Bounded by a moment and refused (the lock acquired after it), it ended nothing.
        (
            Reach::AcquiredBy(stopped_at),
            Ok(ReleaseOutcome::NotFound),
            false,
        ),
        (
            Reach::AcquiredBy(stopped_at),
            Ok(ReleaseOutcome::Released),
            true,
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let resource = format!("r{i}");
        let lock = handle(&resource);
        held_for_a_while(&holds, &lock);
        let earlier = match reach {
            Reach::AnyHolder => holds.releases_start_on(&resource, None, None).remove(0),
            Reach::Acquisition => holds.release_starts(&lock),
            Reach::Version => holds.release_of_version_starts(&lock),
            Reach::AcquiredBy(by) => holds
                .releases_start_on(&resource, Some(lock.owner()), Some(by))
                .remove(0),
        };
        assert_eq!(
            holds.release_underway(lock.lock_id()),
            matches!(reach, Reach::Acquisition | Reach::AcquiredBy(_)),
            "{reach:?}: only a release of the acquisition is one the lock is left to"
        );
        let mut after = holds.release_starts(&lock);
        earlier.answered(&answer);
        drop(earlier);
        assert_eq!(
            after.earlier_answered(Some(later)).now_or_never(),
            Some(left_to_it),
            "{reach:?}, {answer:?}"
        );
    }
}

/// A release by owner of the locks acquired by a moment, refused, ended the acquisition it was
/// sent for if that one was acquired by the moment (a later one, handed the same lock back, holds
/// it now): a guard of that acquisition dropped meanwhile leaves the lock to it; a guard of the
/// later one does not.
#[tokio::test]
async fn a_refused_release_by_a_moment_is_left_to_by_the_acquisitions_it_was_for() {
    use crate::outcome::ReleaseOutcome;
    use futures_util::FutureExt;
    let holds = Holds::default();
    let lock = handle("redriven");
    held_for_a_while(&holds, &lock);
    let stopped_at = acquired_at() + chrono::TimeDelta::seconds(1);
    let late_event = holds
        .releases_start_on(lock.resource(), Some(lock.owner()), Some(stopped_at))
        .remove(0);
    let mut stopped_runs_guard = holds.release_starts(&lock);
    let mut redriven_runs_guard = holds.release_starts(&lock);
    late_event.answered(&Ok(ReleaseOutcome::NotFound));
    drop(late_event);
    let (before, after) = (acquired_at(), acquired_at() + chrono::TimeDelta::seconds(5));
    assert_eq!(
        stopped_runs_guard
            .earlier_answered(Some(before))
            .now_or_never(),
        Some(true)
    );
    // (Never sent: the release after it does not wait for it.)
    drop(stopped_runs_guard);
    assert_eq!(
        redriven_runs_guard
            .earlier_answered(Some(after))
            .now_or_never(),
        Some(false)
    );
}

/// A release after one that DynamoDB refused (the lock gone, another's) is no resend: that one
/// changed nothing; after one that may have released the lock, it is.
#[tokio::test]
async fn a_release_after_a_refused_one_is_no_resend() {
    use crate::outcome::ReleaseOutcome;
    use futures_util::FutureExt;
    let holds = Holds::default();
    let a = handle("a");
    let refused = holds.release_starts(&a);
    let mut after_refused = holds.release_starts(&a);
    refused.answered(&Ok(ReleaseOutcome::NotFound));
    drop(refused);
    assert_eq!(after_refused.after_earlier().now_or_never(), Some(false));
    drop(after_refused);
    let released = holds.release_starts(&a);
    let mut after_released = holds.release_starts(&a);
    released.answered(&Ok(ReleaseOutcome::Released));
    drop(released);
    assert_eq!(after_released.after_earlier().now_or_never(), Some(true));
}

#[test]
fn only_a_release_sent_and_not_refused_may_have_released_the_lock() {
    let holds = Holds::default();
    let lock = handle("r");
    held_for_a_while(&holds, &lock);
    drop(holds.release_starts(&lock));
    assert!(
        !holds.may_have_been_released(lock.lock_id()),
        "dropped before it was sent"
    );
    let refused = holds.release_starts(&lock);
    refused.answered(&Ok(crate::ReleaseOutcome::NotFound));
    drop(refused);
    assert!(!holds.may_have_been_released(lock.lock_id()), "refused");
    let unanswered = holds.release_starts(&lock);
    unanswered.sending();
    drop(unanswered);
    assert!(
        holds.may_have_been_released(lock.lock_id()),
        "sent, and dropped unanswered"
    );
}
