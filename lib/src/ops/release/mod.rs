//! Release: one conditional DeleteItem of the lock item, by acquisition (`LockID` and `Owner`), by
//! owner alone, or by owner for a lock acquired no later than a moment. On a client that keeps
//! items, the same condition guards one UpdateItem that clears the holder instead
//! ([`kept`](super::kept)), and may replace the payload for the next holder.
//!
//! The request asks for the refused item (`ALL_OLD`) so that a failure says why at no extra
//! request, and it watches its attempts: a successful DeleteItem leaves nothing to recognise,
//! so after an SDK retry of an attempt left unanswered a refusal on someone else's item may
//! follow our own first attempt's success, and is reported as `NotFound`, never `NotOwner`. A
//! successful release asks for nothing back (the old item would only serve a log line, at a cost
//! in bytes on every release). Every release through a client wakes that client's first waiter
//! for the resource, whether or not the item was deleted: this client no longer holds it.

use super::extend::DataChange;
use super::in_flight;
use super::kept;
use crate::background::retrying_resent;
use crate::conditional::{answer, delete_refused, update_refused, Answer, Transmissions};
use crate::error::{Error, InvalidInput};
use crate::fair::grant::{self, HandOver};
use crate::fair::line;
use crate::holds::ReleaseUnderway;
use crate::item::{s, Item, VERSION};
use crate::lock::{LockHandle, LockId};
use crate::lock_table::LockTable;
use crate::mode::Mode;
use crate::outcome::ReleaseOutcome;
use crate::record;
use crate::shared;
use crate::timestamp;
use aws_sdk_dynamodb::types::ReturnValue;
use chrono::{DateTime, SubsecRound, Utc};
use std::sync::Arc;
use tracing::info;

mod refused;

pub(crate) use refused::{already_released, read_refused};
use refused::{gone_after_retry, read_overtaken};

/// Release (DeleteItem) succeeds only for the same acquisition and owner.
pub(crate) const RELEASE_CONDITION: &str = "#lock_id = :lock_id AND #owner = :owner";
/// Release of one acquisition while nobody waits in its line ([`fair`](crate::fair)); refused
/// with a line, the release grants the lock to the next waiter instead.
pub(crate) const RELEASE_UNQUEUED_CONDITION: &str =
    "#lock_id = :lock_id AND #owner = :owner AND attribute_not_exists(#queue)";
/// Release by owner alone (DeleteItem), for owners that lost their lock id; of a lock item only,
/// never an application's item that happens to have an `Owner` of the same name.
pub(crate) const RELEASE_OWNED_CONDITION: &str = "attribute_exists(#lock_id) AND #owner = :owner";
/// Release by owner alone of a lock acquired no later than a moment (an execution's stop), so
/// that a later acquisition by the same owner (a redriven execution) is spared.
pub(crate) const RELEASE_OWNED_BY_CONDITION: &str =
    "attribute_exists(#lock_id) AND #owner = :owner AND #acquired_at <= :acquired_by";

/// Which hold a release ends: one acquisition (`lock_id`), else any lock of `owner`, perhaps only
/// one acquired no later than `acquired_by`.
#[derive(Clone, Copy)]
pub(crate) struct Release<'a> {
    pub(crate) resource: &'a str,
    pub(crate) owner: &'a str,
    pub(crate) lock_id: Option<LockId>,
    pub(crate) acquired_by: Option<DateTime<Utc>>,
    /// A shared hold is released from its entry ([`shared::hold`](crate::shared::hold)); only
    /// by its lock id.
    pub(crate) mode: Mode,
    /// An earlier send of this release failed without a definite answer (the client's own
    /// resend, after the SDK gave up): it may have been applied, as an SDK retry's may.
    pub(crate) resent: bool,
    /// Only the acquisition's item as its own write stored it (this `Version`): a dropped
    /// acquisition's clean-up, which must spare the lock if it was handed back to an idempotent
    /// acquisition of the same owner since (the hand-back writes a new version), in whichever
    /// process.
    pub(crate) version: Option<&'a str>,
}

/// The clause a release only of the version its acquisition stored adds to its condition.
const VERSION_CLAUSE: &str = " AND #version = :version";

impl<'a> Release<'a> {
    /// The release of one acquisition, in its mode.
    pub(crate) fn of(handle: &'a LockHandle) -> Self {
        Release {
            resource: handle.resource(),
            owner: handle.owner(),
            lock_id: Some(handle.lock_id()),
            acquired_by: None,
            mode: handle.mode(),
            resent: false,
            version: None,
        }
    }

    /// The handle of the acquisition `lock_id` this release ends (of its resource, owner and
    /// mode).
    pub(crate) fn handle(&self, lock_id: LockId) -> LockHandle {
        LockHandle::new(self.resource, self.owner, lock_id).with_mode(self.mode)
    }

    /// The same release, only of the item as `version` left it.
    pub(crate) fn only_of_version(self, version: Option<&'a str>) -> Self {
        Release { version, ..self }
    }

    /// The same release, sent again after a send that failed if `resent`.
    pub(crate) fn resent_if(self, resent: bool) -> Self {
        Release { resent, ..self }
    }

    /// The release of `owner`'s exclusive lock whatever its id, perhaps only if acquired no
    /// later than `acquired_by`.
    pub(crate) fn owned(
        resource: &'a str,
        owner: &'a str,
        acquired_by: Option<DateTime<Utc>>,
    ) -> Self {
        Release {
            resource,
            owner,
            lock_id: None,
            acquired_by,
            mode: Mode::Exclusive,
            resent: false,
            version: None,
        }
    }
}

/// [`send`] sent again when DynamoDB fails it ([`retrying_resent`]): a
/// resend's refusal is read as one (a request that failed may have been applied), and never names
/// a next holder, nor a loss, that the client's own earlier send made.
///
/// A caller that started the release ([`start`]) passes its `underway` token: each try is sent
/// as that release, read by it (made anew at each try, a token of its own, a later release's
/// overtaking, told to the caller's token, went unread, and a release overtaken answered
/// `NotFound`; found by review).
pub(crate) async fn send_retrying(
    table: &Arc<LockTable>,
    release: &Release<'_>,
    change: DataChange<'_>,
    underway: Option<&ReleaseUnderway>,
) -> Result<ReleaseOutcome, Error> {
    if underway.is_some() {
        return send_retrying_started(table, release, change, false, underway).await;
    }
    let outcome = retrying_resent(|resent| {
        let release = release.resent_if(release.resent || resent);
        async move { send(table, &release, change).await }
    })
    .await;
    looking_after_failure(table, release, false, outcome)
}

/// [`send_retrying`] of a release its caller started ([`start`]): `mismatched` and `underway` as
/// it said. Never started again at a try: a release by owner started twice made a second token
/// for each lock it ends, which overtook the first, and a release by owner that found nothing
/// answered `Unconfirmed` (found by the model-based test).
pub(crate) async fn send_retrying_started(
    table: &Arc<LockTable>,
    release: &Release<'_>,
    change: DataChange<'_>,
    mismatched: bool,
    underway: Option<&ReleaseUnderway>,
) -> Result<ReleaseOutcome, Error> {
    let outcome = retrying_resent(|resent| {
        let release = release.resent_if(release.resent || resent);
        async move { send_underway(table, &release, change, mismatched, underway).await }
    })
    .await;
    looking_after_failure(table, release, mismatched, outcome)
}

/// `outcome`, the last of a release's tries; after a failure the lock's acquisition's write, if
/// the SDK sent it more than once, is looked for now (an earlier try may have released the lock).
fn looking_after_failure(
    table: &Arc<LockTable>,
    release: &Release<'_>,
    mismatched: bool,
    outcome: Result<ReleaseOutcome, Error>,
) -> Result<ReleaseOutcome, Error> {
    if let (Some(lock_id), None, false, Err(_)) =
        (release.lock_id, release.version, mismatched, &outcome)
    {
        // Still remembered: the lock may stand, and its next release (`release_all`'s, a retry)
        // looks again (taken now, that one looked for nothing; found by review).
        if let Some(write) = table.holds.resent_write_of(lock_id) {
            let handle = release.handle(lock_id);
            in_flight::look_again_after_release(table, handle, write);
        }
    }
    outcome
}

/// A release started ([`start`]).
#[derive(Debug)]
pub(crate) struct Started {
    /// The handle is of another mode or owner than this client's hold, which the release leaves
    /// to its client.
    pub(crate) mismatched: bool,
    /// The release of one acquisition, on its way while this is kept: to be kept until its
    /// answer, by whichever task sends it.
    pub(crate) underway: Option<ReleaseUnderway>,
    /// A release by owner's: the release of each lock of this client it may end, on its way
    /// while kept, as `underway`.
    pub(crate) ending: Vec<ReleaseUnderway>,
}

/// Starts `release` at the call, before its request: refuses a payload change for a mode that
/// takes none, and marks the lock as being released (see [`send`], which starts it too, for a
/// caller that did not).
pub(crate) fn start(
    table: &LockTable,
    release: &Release<'_>,
    change: &DataChange<'_>,
) -> Result<Started, Error> {
    let (resource, owner, mode) = (release.resource, release.owner, release.mode);
    // Refused before anything changes: a release so refused stopped the lock's guards, and the
    // lock stayed taken by nobody for its lease.
    if mode != Mode::Exclusive && !matches!(change, DataChange::Keep) {
        return Err(InvalidInput::NotForMode {
            field: "data",
            mode,
        }
        .into());
    }
    // From here the lock may be free at any moment: no guard of it says "held" any more, and
    // this client hands it back to no idempotent acquisition. Not for a handle of another mode
    // than the hold this client took, which the item refuses (`ModeMismatch`), nor of another
    // owner (`NotOwner`): marked first, the real hold's guards turned lost and its heartbeat
    // stopped, for a release that changed nothing.
    let mismatched = release
        .lock_id
        .is_some_and(|lock_id| table.holds.held_by_another_handle(&release.handle(lock_id)));
    let (underway, ending) = match release.lock_id {
        _ if mismatched => (None, Vec::new()),
        Some(lock_id) => (
            Some(table.holds.release_starts(&release.handle(lock_id))),
            Vec::new(),
        ),
        None => (
            None,
            table
                .holds
                .releases_start_on(resource, Some(owner), release.acquired_by),
        ),
    };
    Ok(Started {
        mismatched,
        underway,
        ending,
    })
}

/// The release: a DeleteItem, or on a client that keeps items an UpdateItem that clears the
/// holder and makes `change` to the payload (only [`DataChange::Keep`] on a client that deletes:
/// checked by the caller).
pub(crate) async fn send(
    table: &Arc<LockTable>,
    release: &Release<'_>,
    change: DataChange<'_>,
) -> Result<ReleaseOutcome, Error> {
    // A release only of a version (a dropped acquisition's clean-up) marks and frees nothing in
    // the client: an idempotent acquisition of this client may be handed the lock back meanwhile
    // (its new version makes this release change nothing), and, marked, it was taken for a lock
    // being released and left held by nobody for a lease (found by review). Only a release that
    // applied frees the lock (below).
    let Started {
        mismatched,
        underway,
        ending,
    } = match release.version {
        Some(_) => Started {
            mismatched: false,
            underway: None,
            ending: Vec::new(),
        },
        None => start(table, release, &change)?,
    };
    let send = send_underway(table, release, change, mismatched, underway.as_ref());
    sent_for_ending(table, release, &ending, send).await
}

/// A release by owner's request, `send`, on its way for this client's locks it may end
/// (`ending`), each told the answer: a refusal that finds the lock gone, released or another's is
/// a resend's if a release of one of them, started after it, was sent before it was answered
/// (overtaken: that release may have done it), as [`send_underway`] reads a release of one
/// acquisition. Answered, the client no longer holds them: released, or not the owner's (any
/// more). Only those: a newer lock of the owner, spared by `acquired_by`, stays, and so does one
/// that `release_all` remembered again after its release failed (freed with every hold of the
/// resource that had been marked released, it was left out of the next `release_all`, held for
/// nobody for its lease; found by review). One whose write the SDK sent more than once is looked
/// for, as after a release of it by its lock id.
pub(crate) async fn sent_for_ending(
    table: &Arc<LockTable>,
    release: &Release<'_>,
    ending: &[ReleaseUnderway],
    send: impl std::future::Future<Output = Result<ReleaseOutcome, Error>>,
) -> Result<ReleaseOutcome, Error> {
    for ended in ending {
        ended.sending();
    }
    // (A release by owner changes no payload.)
    let overtaken = ending.iter().any(ReleaseUnderway::overtaken);
    let outcome = read_overtaken(send.await, overtaken, true);
    for ended in ending {
        if outcome.is_ok() {
            table
                .holds
                .freed_acquired_by(ended.lock_id(), release.acquired_by);
            let handle = release.handle(ended.lock_id());
            in_flight::look_again_if_resent(table, handle);
        }
        ended.answered(&outcome);
    }
    outcome
}

/// [`send`], started: `mismatched` if the handle is of another mode or owner than this client's
/// hold, `underway` the token of the release (if any), which reads the answer.
async fn send_underway(
    table: &Arc<LockTable>,
    release: &Release<'_>,
    change: DataChange<'_>,
    mismatched: bool,
    underway: Option<&ReleaseUnderway>,
) -> Result<ReleaseOutcome, Error> {
    if let Some(underway) = underway {
        underway.sending();
    }
    // Boxed: the future of a release nests deep (hand-overs, shared holds), and a caller's
    // future that awaited one, `release_all`'s, overflowed the compiler's query depth limit.
    let keeps_data = matches!(change, DataChange::Keep);
    let outcome = Box::pin(send_started(table, release, change, mismatched)).await;
    // Once answered: a try that failed (the release sends it again) left it to the next
    // (spawned at a failed try, the look beat the release's own retry, which read the lock gone
    // as `Unconfirmed`, the payload it was to write lost; found by review).
    if let (Some(lock_id), None, false, Ok(_)) =
        (release.lock_id, release.version, mismatched, &outcome)
    {
        let handle = release.handle(lock_id);
        in_flight::look_again_if_resent(table, handle);
    }
    let Some(underway) = underway else {
        return outcome;
    };
    // Overtaken by a later release of the lock (which waited for this one as long as it would).
    let outcome = read_overtaken(outcome, underway.overtaken(), keeps_data);
    // (A release that waits for this one reads it, whoever else holds a token of it.)
    underway.answered(&outcome);
    outcome
}

/// [`send_underway`]'s request and its reading: `mismatched` if the handle is of another mode or
/// owner than this client's hold.
async fn send_started(
    table: &Arc<LockTable>,
    release: &Release<'_>,
    change: DataChange<'_>,
    mismatched: bool,
) -> Result<ReleaseOutcome, Error> {
    let Release {
        resource,
        owner,
        lock_id,
        acquired_by,
        mode,
        resent,
        version,
    } = *release;
    if let (true, Some(lock_id)) = (mode != Mode::Exclusive, lock_id) {
        let handle = release.handle(lock_id);
        return shared::hold::release(table, &handle, mismatched, resent).await;
    }
    let of_version = |condition: &str| match version {
        Some(_) => format!("{condition}{VERSION_CLAUSE}"),
        None => condition.to_owned(),
    };
    let condition = of_version(match (lock_id, acquired_by) {
        // A lock with a line is handed over rather than deleted (below). A payload change is
        // for the next holder of a kept item: it is released without a grant, and a waiter grants.
        (Some(_), _) if matches!(change, DataChange::Keep) => RELEASE_UNQUEUED_CONDITION,
        (Some(_), _) => RELEASE_CONDITION,
        (None, Some(_)) => RELEASE_OWNED_BY_CONDITION,
        (None, None) => RELEASE_OWNED_CONDITION,
    });
    let values = values(owner, lock_id, acquired_by, version);
    // A hold granted from a line with waiters behind it hands the lock over at once, from the
    // item it was granted with ([`LinesSeen`](crate::lines_seen::LinesSeen)), rather than first
    // try a delete that the line refuses.
    // Not for a release only of a version: the item seen shows the version of the grant, and an
    // extension since wrote another (the hand-over refused it with no request, and the lock a
    // late extension held stayed held for nobody, the line waiting; found by review).
    let (held_for, seen_line) = match (lock_id, change) {
        (Some(lock_id), DataChange::Keep) if version.is_none() => table
            .lines_seen
            .take_hold(resource, lock_id)
            .map_or((None, None), |(held_for, line)| (Some(held_for), line)),
        _ => (None, None),
    };
    let handed = match (seen_line, lock_id) {
        (Some(item), Some(lock_id)) => Some(
            grant::hand_over(table, resource, (lock_id, owner, held_for, version), item).await?,
        ),
        _ => None,
    };
    let mut handed_over = matches!(handed, Some(HandOver::HandedOver));
    let (mut answer, mut retried) = match handed {
        Some(HandOver::HandedOver) => (Answer::Applied(()), false),
        Some(HandOver::NotOurs { item, retried }) => (Answer::Refused(item), retried),
        // Nobody waits by the item seen, or none was seen: released as usual.
        Some(HandOver::NoWaiter) | None => {
            send_request(table, release, &condition, &values, change).await?
        }
    };
    if let (Answer::Refused(Some(item)), Some(lock_id)) = (&answer, lock_id) {
        if line::has_line(item) && line::held_by(item, lock_id) {
            let item = item.clone();
            match grant::hand_over(table, resource, (lock_id, owner, held_for, version), item)
                .await?
            {
                HandOver::HandedOver => {
                    answer = Answer::Applied(());
                    handed_over = true;
                }
                HandOver::NotOurs {
                    item,
                    retried: again,
                } => {
                    answer = Answer::Refused(item);
                    retried |= again;
                }
                HandOver::NoWaiter => {
                    let condition = of_version(RELEASE_CONDITION);
                    (answer, retried) =
                        send_request(table, release, &condition, &values, change).await?;
                }
            }
        }
    }
    // What a fair acquirer of this client tries first next time: the line, if there was one.
    if handed_over {
        table.lines_seen.held(resource);
    } else if matches!(answer, Answer::Applied(_)) {
        table.lines_seen.free(resource);
    }
    // Released or not ours (any more): either way not held by this client. Unless the handle
    // was of another mode than the client's hold, which this request did not touch.
    match lock_id {
        Some(_) if mismatched => {}
        Some(_) if version.is_some() && !matches!(answer, Answer::Applied(_)) => {}
        Some(lock_id) => {
            table.queues.freed(resource, lock_id);
            table.holds.freed(lock_id);
        }
        // (The holds it stopped are freed once it is answered: [`sent_for_ending`]. The lock it
        // removed, which `ALL_OLD` names, is freed in the line as it is read, which wakes the
        // first in line.)
        None => {
            if !matches!(answer, Answer::Applied(_)) {
                table.queues.wake(resource);
            }
        }
    }
    match answer {
        Answer::Applied(_) => {
            info!(
                resource,
                owner,
                lock_id = lock_id.map(|id| id.short()),
                "lock released"
            );
            Ok(ReleaseOutcome::Released)
        }
        Answer::Refused(item) => {
            if let Some(outcome) = item
                .as_ref()
                .and_then(|item| already_released(owner, lock_id, item))
            {
                // A release the client sent again that meets the acquisition's release record may
                // have made it itself (its resend writes a version of its own, which the record
                // does not carry): `AlreadyReleased` said another release did, and the DynamoDB
                // backend took it for a lock it no longer held (found by review). An SDK retry
                // sends the same version, and one that met its own record was applied (above);
                // the record it meets may still be written over its own by a force release since
                // (which writes a version of its own too), its payload replaced: so read too
                // (found by review).
                let outcome = if resent || retried {
                    ReleaseOutcome::Unconfirmed
                } else {
                    outcome
                };
                info!(resource, owner, ?outcome, "lock not released");
                return Ok(outcome);
            }
            if let (Some(item), Some(lock_id)) = (&item, lock_id) {
                shared::holders::check_mode(resource, item, lock_id, mode)?;
            }
            let retried = retried || resent;
            let record = table.record(resource, item.as_ref())?;
            if gone_after_retry(owner, lock_id, record.as_ref(), retried) {
                info!(resource, owner, "release was retried after an answer was lost; the lock is gone, perhaps by that attempt");
            }
            let outcome = read_refused(owner, lock_id, record, retried, table.now());
            info!(resource, owner, ?outcome, "lock not released");
            Ok(outcome)
        }
    }
}

/// Sends the release's DeleteItem (or, keeping items, UpdateItem) under `condition`; its answer
/// and whether the SDK sent it more than once.
async fn send_request(
    table: &Arc<LockTable>,
    release: &Release<'_>,
    condition: &str,
    values: &Item,
    change: DataChange<'_>,
) -> Result<(Answer<(), Option<Item>>, bool), Error> {
    let transmissions = Transmissions::default();
    // A release by owner learns which lock it removed (`ALL_OLD`): one this client's acquisition
    // made, answered only after the removal, must start no guard as held.
    let by_owner = release.lock_id.is_none();
    // (By the item's `LockID`: a kept item, cleared of its holder, still names the lock.)
    // (Freed as held too: its acquisition's answer, read after the release by owner started, was
    // not among the holds it ends, and stayed held, for `release_all` to release again. And its
    // write, if the SDK sent it more than once and it was answered before this, looked for: no
    // release of it is to come; found by review.)
    let removed = |old: Option<&Item>| {
        if let Some(lock_id) = old.and_then(record::lock_id) {
            table.holds.removing([lock_id]);
            table.holds.freed(lock_id);
            table.queues.freed(release.resource, lock_id);
            let handle = release.handle(lock_id);
            in_flight::look_again_if_resent(table, handle);
        }
    };
    let answer = if table.delete_on_release {
        let request = table
            .delete_item(release.resource, condition)
            .set_expression_attribute_values(Some(values.clone()))
            .set_return_values(by_owner.then_some(ReturnValue::AllOld))
            .customize()
            .interceptor(transmissions.clone())
            .send();
        answer("DeleteItem", request.await, delete_refused)?
            .map(|output| removed(output.attributes.as_ref()))
    } else {
        let record = kept::release_record(table, Some(release.owner))?;
        let (update, update_values) = kept::release_update(change, &record);
        let written = update_values.get(":new_version").cloned();
        let mut values = values.clone();
        values.extend(update_values);
        let request = table
            .update_item(release.resource, &update, condition)
            .set_expression_attribute_values(Some(values))
            .set_return_values(by_owner.then_some(ReturnValue::AllOld))
            .customize()
            .interceptor(transmissions.clone())
            .send();
        let answer = answer("UpdateItem", request.await, update_refused)?;
        match answer.map(|output| removed(output.attributes.as_ref())) {
            // An SDK retry refused by the item its own first attempt wrote: released by it (and
            // the kept item still names the lock it removed).
            Answer::Refused(Some(item))
                if written.is_some() && item.get(VERSION) == written.as_ref() =>
            {
                if by_owner {
                    removed(Some(&item));
                }
                Answer::Applied(())
            }
            answer => answer,
        }
    };
    Ok((answer, transmissions.retried()))
}

/// The condition's values: exactly those its expression uses.
fn values(
    owner: &str,
    lock_id: Option<LockId>,
    acquired_by: Option<DateTime<Utc>>,
    version: Option<&str>,
) -> Item {
    [
        (":owner", Some(s(owner))),
        (":lock_id", lock_id.map(|id| s(id.to_string()))),
        (
            ":acquired_by",
            acquired_by.map(|t| s(timestamp::format(t.trunc_subsecs(3)))),
        ),
        (":version", version.map(s)),
    ]
    .into_iter()
    .filter_map(|(name, value)| Some((name.to_owned(), value?)))
    .collect()
}

#[cfg(test)]
mod tests;
