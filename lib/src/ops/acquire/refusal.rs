//! What a refused acquisition found in the item that refused it (`ALL_OLD`, no extra request):
//! shared holders in the way (waited for, or cleared once lapsed), this very attempt's own write
//! (an SDK retry after a lost answer: acquired), an idempotent request's owner's live lock (handed
//! back, extended first under the observed-lease rule), or someone else's lock (held, with when
//! to try again).

use super::{acquired, took_back, Attempt, Request};
use crate::error::Error;
use crate::fair::line;
use crate::item::Item;
use crate::lock::{Holder, Lock, LockHandle, LockId};
use crate::lock_table::LockTable;
use crate::ops::extend;
use crate::outcome::ExtendOutcome;
use crate::record::Record;
use crate::shared::writer::{self, SharedRefusal};
use crate::takeover::TakeoverRule;
use crate::time::span;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tracing::debug;

/// The first waiter of a line standing on an item without a holder (a kept item released when
/// every waiter's deadline was gone), as the holder a fair acquirer is refused by: it joins the
/// line, and its first look grants the lock to the first live waiter (a lock without a holder is
/// granted as a lapsed one). Without it the refusal had no holder to read, an error.
fn first_in_line(resource: &str, item: Option<&Item>) -> Result<Option<Holder>, Error> {
    let Some(item) = item.filter(|item| line::has_line(item)) else {
        return Ok(None);
    };
    Ok(line::decode(resource, item)?
        .into_iter()
        .next()
        .map(|first| Holder {
            owner: first.waiter.owner,
            acquired_at: first.waiter.joined_at,
            expires_at: first.waiter.joined_at,
            fencing_token: None,
            data: None,
        }))
}

/// The line that refused a fair attempt, if nobody waits in it any more over a lock nobody holds:
/// no holder, or a lapsed one, and every waiter's deadline gone (crashed waiters). Such a line
/// refused every fair try (`try_acquire` said held, whoever asked, while `status` said free; found
/// by review): it is removed, and the attempt made again.
fn dead_line(
    resource: &str,
    item: Option<&Item>,
    record: Option<&Record>,
    now: DateTime<Utc>,
) -> Result<Option<Vec<line::Entry>>, Error> {
    let Some(item) = item.filter(|item| line::has_line(item)) else {
        return Ok(None);
    };
    if record.is_some_and(|record| record.holder.is_live_at(now)) {
        return Ok(None);
    }
    let line = line::decode(resource, item)?;
    let holder = record.map(|record| record.lock_id);
    Ok(crate::fair::grant::first_live(&line, now, holder)
        .is_none()
        .then_some(line))
}

/// What a refused attempt to write `lock` found in the item that refused it (`ALL_OLD`).
pub(crate) async fn refused(
    table: &Arc<LockTable>,
    request: &Request<'_>,
    lock: Lock,
    item: Option<&Item>,
    operation: &'static str,
) -> Result<Attempt, Error> {
    let received = Instant::now();
    let now = table.now();
    if let Some(refusal) = shared_in_the_way(request.resource, item, now)? {
        return match refusal {
            SharedRefusal::Live(holder) => Ok(Attempt::Held {
                retry_at: wall_clock_retry_at(received, now, holder.expires_at),
                holder,
                readers: true,
            }),
            SharedRefusal::Lapsed(lapsed) => {
                writer::clear_lapsed(table, request.resource, &lapsed, now).await?;
                Ok(Attempt::Cleared)
            }
        };
    }
    let record = table.record(request.resource, item)?;
    if request.fair {
        if let Some(dead) = dead_line(request.resource, item, record.as_ref(), now)? {
            if line::clear_dead(table, request.resource, &dead, now).await? {
                return Ok(Attempt::Cleared);
            }
        }
    }
    if record.is_none() && request.fair {
        if let Some(first) = first_in_line(request.resource, item)? {
            return Ok(Attempt::Held {
                holder: first,
                retry_at: received,
                readers: false,
            });
        }
    }
    if record.is_none() && request.only_if_exists {
        return Err(Error::NoLockItem {
            table: table.name.clone(),
            key: table.schema.describe_key(&table.key(request.resource)),
        });
    }
    // A lock whose release this client has started is not handed back to an idempotent request:
    // the release in flight may delete it at any moment after, and one answered already may have
    // deleted it after DynamoDB decided this refusal.
    let releasing_here = record.as_ref().is_some_and(|record| {
        let handle = LockHandle::new(request.resource, request.owner, record.lock_id);
        table.holds.ended_for(&handle, record.holder.acquired_at)
    });
    let request = &Request {
        idempotent: request.idempotent && !releasing_here,
        ..*request
    };
    match read_refused(request, lock.lock_id(), record, now, received, operation)? {
        Refusal::OwnWrite(record) => {
            debug!(
                resource = request.resource,
                "condition failed on our own LockID: a retried write had already succeeded"
            );
            Ok(acquired(table, lock.with_data(record.holder.data)))
        }
        Refusal::OwnersLock(held) => {
            debug!(
                resource = request.resource,
                owner = request.owner,
                "returning the live lock this owner already holds"
            );
            // Always written, even for a lock this client took and holds: the hand-back's time
            // is its acquisition time, which a late release by owner of the locks acquired by a
            // moment (a stopped saga run's, its run redriven since) must find later than that
            // moment. Handed back as it was, with no request, it was released under the
            // redriven run (found by review).
            let held = match reclaim(table, held, request.lease).await? {
                Some(extended) => extended,
                None => return Ok(Attempt::Conflict),
            };
            let holder = holder_of(&held);
            Ok(match took_back(table, held) {
                Some(lock) => Attempt::Acquired(lock),
                // Its release started after the check above (a dropped acquisition's clean-up,
                // say): held, until that release is answered.
                None => Attempt::Held {
                    holder,
                    retry_at: received,
                    readers: false,
                },
            })
        }
        Refusal::Held(record) => {
            let retry_at = match table.takeover {
                TakeoverRule::WallClock => {
                    wall_clock_retry_at(received, now, record.holder.expires_at)
                }
                TakeoverRule::ObservedLease => table.observations.observe(
                    request.resource,
                    &record.version,
                    record.lease,
                    received,
                ),
            };
            Ok(Attempt::Held {
                holder: record.holder,
                retry_at,
                readers: false,
            })
        }
    }
}

/// The shared holders of a lock item that refused an exclusive attempt, if it has any (an
/// application's item is left to [`LockTable::record`] to report).
pub(crate) fn shared_in_the_way(
    resource: &str,
    item: Option<&Item>,
    now: DateTime<Utc>,
) -> Result<Option<SharedRefusal>, Error> {
    match item {
        Some(item) if item.contains_key(crate::item::LOCK_ID) => {
            writer::read_refused(resource, item, now)
        }
        _ => Ok(None),
    }
}

/// What the item that refused an attempt says.
#[derive(Debug, PartialEq)]
pub(crate) enum Refusal {
    /// The item carries this attempt's `LockID`: an earlier try of this very request (an SDK retry
    /// after a lost answer) wrote it.
    OwnWrite(Record),
    /// An idempotent request's owner holds this live lock already: it is handed back.
    OwnersLock(Lock),
    /// Someone else holds the lock (or the owner does, for a request that may not take it back).
    Held(Record),
}

/// Reads the item (`record`, `None` if the answer carried none) that refused the attempt whose
/// `LockID` is `ours`, at the clock reading `now` and the monotonic moment `received`.
pub(crate) fn read_refused(
    request: &Request<'_>,
    ours: LockId,
    record: Option<Record>,
    now: DateTime<Utc>,
    received: Instant,
    operation: &'static str,
) -> Result<Refusal, Error> {
    let record = record.ok_or(Error::UnexpectedResponse {
        operation,
        detail: "condition failed but no item came back for ALL_OLD",
    })?;
    if record.lock_id == ours {
        return Ok(Refusal::OwnWrite(record));
    }
    // A fenced request is not given back an unfenced lock: it has no token to offer.
    if request.idempotent
        && record.holder.owner == request.owner
        && record.holder.is_live_at(now)
        && (!request.fencing || record.holder.fencing_token.is_some())
    {
        let handle = LockHandle::new(request.resource, request.owner, record.lock_id);
        let held = Lock::new(
            handle,
            record.holder.acquired_at,
            record.holder.expires_at,
            received + span(now, record.holder.expires_at),
        )
        .with_fencing_token(record.holder.fencing_token)
        .with_data(record.holder.data);
        return Ok(Refusal::OwnersLock(held));
    }
    Ok(Refusal::Held(record))
}

/// When the wall-clock rule lets a waiter try again: the condition is `ExpiresAt < :now`, so the
/// lock frees a millisecond after `expires_at`.
fn wall_clock_retry_at(
    received: Instant,
    now: DateTime<Utc>,
    expires_at: DateTime<Utc>,
) -> Instant {
    received + span(now, expires_at) + Duration::from_millis(1)
}

/// Hands back this owner's live lock, extended first (one UpdateItem, a new version, the
/// acquisition time of the hand-back), its lease counting from that write. The new version is
/// what tells a dropped acquisition's clean-up (which deletes only the version its write stored)
/// that the lock it may have made was handed back, in whichever process: handed back as it was, it was deleted under the acquisition that
/// took it back (found by review). Under the observed-lease rule a waiter also times a version
/// from when it first saw it, which may be long ago, so the wall clock's view of the remaining
/// lease promised nothing. If the item changed meanwhile, the attempt is retried as after a
/// conflict.
///
/// An extension applied after this client's release of the lock failed (or found the lease over
/// while an earlier extension may still land, [`Answered::to_release`](extend::Answered::to_release))
/// releases the lock, as `LockClient::extend` does: left, it stood extended for nobody for a
/// whole lease, and the acquisition, refused by it, was not handed it back (its release had
/// started; found by review).
async fn reclaim(
    table: &Arc<LockTable>,
    lock: Lock,
    lease: Duration,
) -> Result<Option<Lock>, Error> {
    // Boxed: this nests an extension inside an acquire attempt, and without the box the
    // acquire future's type would nest the whole extension's, deeply enough to exceed the
    // compiler's query depth in callers that nest `acquire` further (a Lambda handler).
    let extension = Box::pin(extend::hand_back(table, lock.handle(), lease));
    let answered = extension.await?;
    if let (true, Some(version)) = (answered.to_release, &answered.applied_version) {
        extend::release_late_extension(table, lock.handle(), version);
    }
    match answered.outcome {
        ExtendOutcome::Extended(extended) => Ok(Some(extended)),
        outcome => {
            debug!(
                resource = lock.resource(),
                ?outcome,
                "own lock changed before its reclaim"
            );
            Ok(None)
        }
    }
}

/// The holder `lock` shows to a waiter.
fn holder_of(lock: &Lock) -> Holder {
    Holder {
        owner: lock.owner().to_owned(),
        acquired_at: lock.acquired_at(),
        expires_at: lock.expires_at(),
        fencing_token: lock.fencing_token(),
        data: lock.data().map(<[u8]>::to_vec),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fencing::FencingToken;
    use crate::mode::Mode;
    use crate::record::samples::{self, now};
    use chrono::TimeDelta;

    fn request(idempotent: bool, fencing: bool) -> Request<'static> {
        Request {
            resource: "orders/42",
            owner: "me",
            lease: Duration::from_secs(30),
            idempotent,
            fencing,
            only_if_exists: false,
            data: None,
            mode: Mode::Exclusive,
            permits: None,
            fair: false,
        }
    }

    fn record(lock_id: LockId, owner: &str, expires_in_secs: i64) -> Record {
        let mut record = samples::record(lock_id, owner, TimeDelta::seconds(expires_in_secs));
        record.holder.data = Some(b"payload".to_vec());
        record
    }

    fn read(request: &Request<'_>, ours: LockId, record: Option<Record>) -> Result<Refusal, Error> {
        read_refused(request, ours, record, now(), Instant::now(), "PutItem")
    }

    #[test]
    fn our_own_lock_id_is_an_acquisition() {
        let ours = LockId::generate();
        for (idempotent, fencing) in [(false, false), (true, true)] {
            let ours_written = record(ours, "me", 30);
            let refusal = read(
                &request(idempotent, fencing),
                ours,
                Some(ours_written.clone()),
            );
            assert_eq!(refusal.unwrap(), Refusal::OwnWrite(ours_written));
        }
    }

    #[test]
    fn an_idempotent_request_gets_its_owners_live_lock_back_unchanged() {
        let mut theirs = record(LockId::generate(), "me", 20);
        theirs.holder.fencing_token = Some(FencingToken::new(7));
        let received = Instant::now();
        let refusal = read_refused(
            &request(true, false),
            LockId::generate(),
            Some(theirs.clone()),
            now(),
            received,
            "PutItem",
        );
        let Ok(Refusal::OwnersLock(lock)) = refusal else {
            panic!("{refusal:?}");
        };
        assert_eq!(lock.lock_id(), theirs.lock_id);
        assert_eq!(lock.expires_at(), theirs.holder.expires_at);
        assert_eq!(lock.acquired_at(), theirs.holder.acquired_at);
        assert_eq!(lock.fencing_token(), Some(FencingToken::new(7)));
        assert_eq!(
            lock.valid_until_instant(),
            received + Duration::from_secs(20)
        );
    }

    #[test]
    fn a_fenced_idempotent_request_is_not_given_an_unfenced_lock() {
        let unfenced = record(LockId::generate(), "me", 20);
        let refusal = read(
            &request(true, true),
            LockId::generate(),
            Some(unfenced.clone()),
        );
        assert_eq!(refusal.unwrap(), Refusal::Held(unfenced));
        let mut fenced = record(LockId::generate(), "me", 20);
        fenced.holder.fencing_token = Some(FencingToken::new(3));
        let refusal = read(&request(true, true), LockId::generate(), Some(fenced));
        assert!(matches!(refusal, Ok(Refusal::OwnersLock(_))));
    }

    #[test]
    fn the_same_owner_without_idempotence_contends_like_anyone() {
        let mine = record(LockId::generate(), "me", 20);
        let refusal = read(
            &request(false, false),
            LockId::generate(),
            Some(mine.clone()),
        );
        assert_eq!(refusal.unwrap(), Refusal::Held(mine));
    }

    #[test]
    fn an_expired_lock_of_the_same_owner_is_not_handed_back() {
        let ended = record(LockId::generate(), "me", -1);
        let refusal = read(
            &request(true, false),
            LockId::generate(),
            Some(ended.clone()),
        );
        assert_eq!(refusal.unwrap(), Refusal::Held(ended));
    }

    #[test]
    fn someone_elses_lock_is_held() {
        let theirs = record(LockId::generate(), "them", 20);
        let refusal = read(
            &request(true, false),
            LockId::generate(),
            Some(theirs.clone()),
        );
        assert_eq!(refusal.unwrap(), Refusal::Held(theirs));
    }

    #[test]
    fn a_refusal_without_an_item_is_an_unexpected_response() {
        let refusal = read(&request(false, false), LockId::generate(), None);
        assert!(
            matches!(
                refusal,
                Err(Error::UnexpectedResponse {
                    operation: "PutItem",
                    ..
                })
            ),
            "{refusal:?}"
        );
    }

    #[test]
    fn under_the_wall_clock_a_waiter_retries_a_millisecond_after_expiry() {
        let received = Instant::now();
        let expires_at = now() + TimeDelta::milliseconds(250);
        assert_eq!(
            wall_clock_retry_at(received, now(), expires_at),
            received + Duration::from_millis(251)
        );
        let ended = now() - TimeDelta::seconds(1);
        assert_eq!(
            wall_clock_retry_at(received, now(), ended),
            received + Duration::from_millis(1)
        );
    }
}
