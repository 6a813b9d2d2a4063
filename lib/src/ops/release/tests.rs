use super::*;
use crate::record::samples::{self, now};
use crate::record::Record;
use crate::schema::tests::assert_every_placeholder_named;

use chrono::TimeDelta;

fn record(lock_id: LockId, owner: &str, expires_in_secs: i64) -> Record {
    samples::record(lock_id, owner, TimeDelta::seconds(expires_in_secs))
}

#[test]
fn no_item_is_not_found_and_after_a_retry_unconfirmed() {
    let ours = LockId::generate();
    for (retried, outcome) in [
        (false, ReleaseOutcome::NotFound),
        (true, ReleaseOutcome::Unconfirmed),
    ] {
        assert_eq!(
            read_refused("me", Some(ours), None, retried, now()),
            outcome
        );
    }
}

#[test]
fn a_live_item_of_another_acquisition_is_not_owner() {
    let other = record(LockId::generate(), "them", 5);
    let outcome = read_refused(
        "me",
        Some(LockId::generate()),
        Some(other.clone()),
        false,
        now(),
    );
    assert_eq!(
        outcome,
        ReleaseOutcome::NotOwner {
            holder: other.holder
        }
    );
}

#[test]
fn a_live_item_of_another_acquisition_by_the_same_owner_is_not_owner() {
    let other = record(LockId::generate(), "me", 5);
    let outcome = read_refused(
        "me",
        Some(LockId::generate()),
        Some(other.clone()),
        false,
        now(),
    );
    assert!(matches!(outcome, ReleaseOutcome::NotOwner { .. }));
}

#[test]
fn an_expired_item_of_another_acquisition_is_not_found() {
    let expired = record(LockId::generate(), "them", -1);
    let outcome = read_refused("me", Some(LockId::generate()), Some(expired), false, now());
    assert_eq!(outcome, ReleaseOutcome::NotFound);
}

#[test]
fn after_a_retry_another_acquisitions_item_is_unconfirmed_never_not_owner() {
    let other = record(LockId::generate(), "them", 5);
    let outcome = read_refused("me", Some(LockId::generate()), Some(other), true, now());
    assert_eq!(outcome, ReleaseOutcome::Unconfirmed);
}

#[test]
fn release_owned_spares_a_later_acquisition_of_the_same_owner() {
    // The `acquired_by` condition failed on the owner's own, newer, live lock.
    let newer = record(LockId::generate(), "exec", 5);
    let outcome = read_refused("exec", None, Some(newer.clone()), false, now());
    assert_eq!(
        outcome,
        ReleaseOutcome::NotOwner {
            holder: newer.holder
        }
    );
    let retried = read_refused(
        "exec",
        None,
        Some(record(LockId::generate(), "other", 5)),
        true,
        now(),
    );
    assert_eq!(retried, ReleaseOutcome::Unconfirmed);
}

#[test]
fn every_placeholder_is_named() {
    for expr in [
        RELEASE_CONDITION,
        RELEASE_UNQUEUED_CONDITION,
        RELEASE_OWNED_CONDITION,
        RELEASE_OWNED_BY_CONDITION,
    ] {
        assert_every_placeholder_named(expr);
    }
}
