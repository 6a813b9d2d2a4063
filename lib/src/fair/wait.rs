//! A fair acquirer's wait: try, join the line, read the item until granted.
//!
//! A waiter reads the item when its turn may have come ([`pace`](super::pace)): only a grant to
//! it, or a holder's lapse, needs it. A read that finds the holder's lease over grants the lock
//! to the first live waiter, whoever reads. Each read is one strongly consistent GetItem; a
//! waiter writes only to join and, if it gives up, to leave.
//!
//! A waiter whose future is dropped leaves the line from a background task
//! ([`LockClient::flush`](crate::LockClient::flush) waits for it), and releases the lock if the
//! lock had been granted to it meanwhile, as the in-flight acquisition of a dropped `acquire`
//! does ([`in_flight`](crate::ops::in_flight)).

use super::grant::{self, Grant, Over};
use super::line::{self, Joined, Left};
use super::pace::{self, Pace, Turns};
use super::timing::LineTiming;
use super::QueuedWaiter;
use crate::background::{looking_again, retrying};
use crate::error::Error;
use crate::holds::ResentWrite;
use crate::item::Item;
use crate::lock::{Holder, Lock, LockHandle, LockId};
use crate::lock_table::LockTable;
use crate::ops::acquire::{self, Attempt};
use crate::ops::attempt_acquire;
use crate::ops::extend::DataChange;
use crate::ops::inspect;
use crate::ops::release::{self, Release};
use crate::outcome::AcquireStats;
use crate::shared::writer::{self, SharedRefusal};
use crate::time::span;
use crate::wait::backoff::{Backoff, BackoffBounds};
use crate::wait::writer_marker::WriterMarker;
use crate::wait::{log_acquired, Wait};
use chrono::{DateTime, Utc};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tracing::{debug, warn};

/// How a turn in the line ended.
enum Turn {
    /// Granted: the lock.
    Granted(Lock),
    /// Not in line (the lock was free, or the line was replaced): try to acquire again.
    NotInLine,
    /// The deadline passed; it left the line. The holder last seen, if any.
    TimedOut(Option<Holder>),
}

/// Waits for `wait`'s lock as a fair acquirer.
pub(crate) async fn run(wait: &Wait<'_>, stats: &mut AcquireStats) -> Result<Lock, Error> {
    let mut backoff = Backoff::new(wait.bounds);
    let mut last_holder = None;
    let resource = wait.request.resource;
    // Shared holders are waited for as any exclusive acquirer waits for them, marker included.
    let mut marker = WriterMarker::new(wait.table, resource, wait.request.owner);
    // Last seen held with a line: join it first, rather than try a lock a line stands before.
    if wait.table.lines_seen.has_line(resource) {
        stats.attempts += 1;
        match in_line(wait, &mut marker).await? {
            Turn::Granted(lock) => {
                marker.acquired();
                log_acquired(&lock, wait.started.elapsed(), stats.attempts);
                return Ok(lock);
            }
            Turn::TimedOut(holder) => {
                marker.withdraw().await;
                return Err(wait.timed_out(holder, Instant::now(), stats.attempts));
            }
            // Free, or lapsed without a line: tried below, at once.
            Turn::NotInLine => wait.table.lines_seen.free(resource),
        }
    }
    loop {
        stats.attempts += 1;
        let retry_at = match attempt_acquire(wait.table, wait.request, None).await? {
            Attempt::Acquired(lock) => {
                marker.acquired();
                wait.table.lines_seen.free(resource);
                wait.table
                    .lines_seen
                    .holding(resource, lock.lock_id(), None);
                log_acquired(&lock, wait.started.elapsed(), stats.attempts);
                return Ok(lock);
            }
            Attempt::Held {
                holder,
                retry_at,
                readers: true,
            } => {
                marker.refused_by_readers(&holder, wait.deadline).await;
                last_holder = Some(holder);
                retry_at
            }
            Attempt::Held { holder, .. } => {
                last_holder = Some(holder);
                wait.table.lines_seen.held(resource);
                match in_line(wait, &mut marker).await? {
                    Turn::Granted(lock) => {
                        // The grant removed the marker.
                        marker.acquired();
                        log_acquired(&lock, wait.started.elapsed(), stats.attempts);
                        return Ok(lock);
                    }
                    Turn::TimedOut(holder) => {
                        marker.withdraw().await;
                        let now = Instant::now();
                        let holder = holder.or(last_holder);
                        return Err(wait.timed_out(holder, now, stats.attempts));
                    }
                    Turn::NotInLine => Instant::now() + backoff.next_delay(),
                }
            }
            Attempt::Conflict => Instant::now() + wait.bounds.max(),
            Attempt::Cleared => Instant::now(),
        };
        let now = Instant::now();
        if now >= wait.deadline {
            marker.withdraw().await;
            return Err(wait.timed_out(last_holder, now, stats.attempts));
        }
        let delay = backoff
            .next_delay()
            .min(retry_at.saturating_duration_since(now))
            .min(wait.deadline - now);
        tokio::time::sleep(delay).await;
    }
}

/// Joins the line and waits for a grant until the deadline; `marker` is placed while live shared
/// holders that took the lapsed lock stand before the line.
async fn in_line(wait: &Wait<'_>, marker: &mut WriterMarker) -> Result<Turn, Error> {
    let (table, request) = (wait.table, wait.request);
    let resource = request.resource;
    let lock_id = LockId::generate();
    let joined_at = table.now();
    let remaining = wait.deadline.saturating_duration_since(Instant::now());
    let waiter = QueuedWaiter {
        owner: request.owner.to_owned(),
        joined_at,
        lease: request.lease,
        until: crate::time::after(joined_at, remaining, "timeout").ok(),
    };
    let handle = LockHandle::new(resource, request.owner, lock_id);
    let mut leaving = LeaveOnDrop::arm(table, &handle);
    let mut last_sent = Instant::now();
    let pace = Pace::new(wait.bounds);
    // The join's answer is the item as it left it: the first look at the line costs no read.
    let joined = line::join(table, resource, (lock_id, &waiter, request.fencing)).await?;
    // This waiter's last request's round trip, by which it times its reads.
    let mut round_trip = last_sent.elapsed();
    // A join the SDK sent more than once: its earlier attempt may land once this waiter, granted,
    // has released the lock, and put it back in line behind the next holder, whose release then
    // grants the lock to nobody (found by review): the release of a lock so granted looks again.
    let join_resent = matches!(joined, Joined::InLine { resent: true, .. });
    let mut seen = match joined {
        Joined::InLine { item, resent } => {
            // Answered after a resend, an earlier attempt may still land: the clean-up of a
            // waiter dropped since looks for it as for a join unanswered (it left, looked no more,
            // and that attempt put it back in line for a grant to nobody; found by review).
            if !resent {
                leaving.join_answered();
            }
            Some((last_sent, item))
        }
        Joined::NotHeld { unanswered: false } => {
            leaving.disarm();
            return Ok(Turn::NotInLine);
        }
        // An attempt of the join whose answer never came may land yet, and put this waiter in
        // line behind the lock it goes on to take: left armed, it is looked for again, and taken
        // out (disarmed, the late join stood, and the waiter's own release granted the lock to
        // that entry, held by nobody for its lease; found by review).
        Joined::NotHeld { unanswered: true } => return Ok(Turn::NotInLine),
    };
    debug!(resource, owner = request.owner, lock_id = %lock_id.short(), "joined the lock's line");
    // The holder last seen, and the looks between which its grant happened: after the send of
    // the look before (if that one showed another holder), before the send of the first look that
    // showed it.
    let (mut seen_holder, mut granted_between, mut previous_sent) = (None, None, None);
    // The last live reader seen holding the lapsed lock: who the waiter waited for, when it times
    // out without an exclusive holder (it said the wait failed in transaction conflicts).
    let mut reader_seen = None;
    // The pace of looks while live readers hold the lapsed lock (no grant can come before they
    // leave): the backoff's, as an acquirer that is not fair waits for them.
    let mut behind_readers = Backoff::new(wait.bounds);
    loop {
        let mut readers_in_the_way = None;
        let (sent, item) = match seen.take() {
            Some(seen) => seen,
            None => {
                let sent = Instant::now();
                let Some(item) = inspect::read(table, resource).await? else {
                    leaving.not_in_line();
                    return Ok(Turn::NotInLine);
                };
                round_trip = sent.elapsed();
                (sent, item)
            }
        };
        if line::held_by(&item, lock_id) {
            leaving.disarm();
            granted_after_resend(table, lock_id, join_resent);
            return granted(table, &handle, &item, last_sent).map(Turn::Granted);
        }
        let waiters = line::decode(resource, &item)?;
        let Some(place) = waiters.iter().position(|entry| entry.lock_id == lock_id) else {
            // The line was replaced (a lapsed lock taken by an acquirer that is not fair, a
            // force release, a clean-up): join again.
            leaving.not_in_line();
            return Ok(Turn::NotInLine);
        };
        let record = table.record(resource, Some(&item))?;
        let holder = record.as_ref().map(|record| record.holder.clone());
        let holder_id = record.as_ref().map(|record| record.lock_id);
        // Its place among the live waiters: the dead ones ahead (grants remove forty at most)
        // are passed over, and counted, they had it read at the backoff's largest delay.
        let wall_now = table.now();
        let place = waiters[..place]
            .iter()
            .filter(|entry| !entry.gave_up_at(wall_now) && Some(entry.lock_id) != holder_id)
            .count();
        if holder_id != seen_holder || granted_between.is_none() {
            granted_between = Some((seen_holder.and(previous_sent), sent));
            seen_holder = holder_id;
        }
        previous_sent = Some(sent);
        if holder.as_ref().is_none_or(|h| !h.is_live_at(table.now())) {
            // Shared or intention holders that took the lapsed lock (their acquisitions do not
            // look at the line) and whose leases ended too (crashed): cleared, as an exclusive
            // acquirer they refuse clears them, and the lock is granted from the next look. Left,
            // they refused every grant, and the line waited until its deadlines (found by review).
            let now = table.now();
            let grant = match writer::read_refused(resource, &item, now)? {
                Some(SharedRefusal::Lapsed(lapsed)) => {
                    if writer::clear_lapsed(table, resource, &lapsed, now).await? {
                        continue;
                    }
                    Some(grant::send(table, resource, &item, Over::Lapsed).await?)
                }
                // Live shared holders took the lapsed lock: they refuse any grant, and the
                // waiter's marker stops new ones from joining them, as for an exclusive acquirer
                // they refuse (without it, overlapping readers kept the line out until its
                // deadlines; found by review). The grant that ends the wait removes it.
                Some(SharedRefusal::Live(reader)) => {
                    marker.refused_by_readers(&reader, wait.deadline).await;
                    readers_in_the_way = Some(reader.expires_at);
                    reader_seen = Some(reader);
                    None
                }
                None => Some(grant::send(table, resource, &item, Over::Lapsed).await?),
            };
            if let Some(Grant::Granted {
                to,
                acquired_at,
                expires_at,
                fencing_token,
            }) = grant
            {
                debug!(resource, to = %to.short(), "granted a lapsed lock to the first in line");
                if to == lock_id {
                    leaving.disarm();
                    granted_after_resend(table, lock_id, join_resent);
                    // From the look's send, not the grant's: the grant that stands may be another
                    // waiter's, made after that look (which showed the lock not yet granted) but
                    // before this grant was sent.
                    let valid_until = within_stored_lease(table, sent + request.lease, expires_at);
                    let lock = Lock::new(handle, acquired_at, expires_at, valid_until)
                        .with_fencing_token(fencing_token);
                    table.lines_seen.holding(resource, lock_id, None);
                    return Ok(Turn::Granted(acquire::took(table, lock)));
                }
                // Granted to a waiter before us: read again at once, we may be next.
                continue;
            }
            // Refused (shared holders took the lapsed lock, say) or, fenced, cancelled by a
            // concurrent write: wait as in line, below.
        }
        let now = Instant::now();
        if now >= wait.deadline {
            let left = line::leave(table, resource, lock_id, Some(item)).await?;
            // A leave that kept failing (the line changing under it) is left to the background,
            // as a dropped waiter's is: disarmed, the entry stayed until grants passed it over by
            // the granter's clock, and one behind could still grant to this gone waiter.
            if !matches!(left, Left::Stuck) {
                leaving.disarm();
            }
            return match left {
                Left::Granted(item) => {
                    granted_after_resend(table, lock_id, join_resent);
                    granted(table, &handle, &item, sent).map(Turn::Granted)
                }
                Left::Gone | Left::NotInLine | Left::Stuck => {
                    Ok(Turn::TimedOut(holder.or(reader_seen)))
                }
            };
        }
        last_sent = sent;
        let delay = match (readers_in_the_way, LineTiming::of(&item)) {
            // Looked at the line's pace, it read every few milliseconds for as long as the
            // readers held (found by review).
            (Some(last_lease_end), _) => behind_readers
                .next_delay()
                .min(span(table.now(), last_lease_end) + Duration::from_millis(1)),
            (None, Some(timing)) => {
                let ago = holder
                    .as_ref()
                    .and_then(|holder| (table.now() - holder.acquired_at).to_std().ok());
                let (earliest, latest) = granted_between.unwrap_or((None, sent));
                let since = pace::holder_start(ago, earliest, latest, now);
                let turns = Turns { timing, round_trip };
                pace.next_with_turns(place, turns, since, now)
            }
            (None, None) => pace.next(place),
        }
        .min(wait.deadline - now);
        tokio::time::sleep(delay).await;
    }
}

/// The lock granted to `handle`, read back as `item`; its lease began no earlier than
/// `not_before` (a request sent before the grant was made). Its release hands it over from `item`
/// if waiters stand behind it there.
fn granted(
    table: &Arc<LockTable>,
    handle: &LockHandle,
    item: &Item,
    not_before: Instant,
) -> Result<Lock, Error> {
    let line = line::has_line(item).then_some(item);
    table
        .lines_seen
        .holding(handle.resource(), handle.lock_id(), line);
    let record = table
        .record(handle.resource(), Some(item))?
        .ok_or(Error::UnexpectedResponse {
            operation: "GetItem",
            detail: "a granted lock item has no holder",
        })?;
    let valid_until =
        within_stored_lease(table, not_before + record.lease, record.holder.expires_at);
    let lock = Lock::new(
        handle.clone(),
        record.holder.acquired_at,
        record.holder.expires_at,
        valid_until,
    )
    .with_fencing_token(record.holder.fencing_token);
    Ok(acquire::took(table, lock))
}

/// `valid_until`, but no later than the granted lease end `expires_at` as this client's clock
/// counts it from now. The granter computed `expires_at` from its clock when it sent the grant,
/// which may be long before the look that counts as the lease's start was sent (a grant held up
/// by retries, a granter whose clock is behind): a grantee that counted a whole lease from that
/// look held on after others could take the lock (found by review;
/// `fair_queue/lost_answers.rs` `a_grant_from_a_granter_whose_clock_is_behind_is_held_for_its_stored_lease`).
fn within_stored_lease(
    table: &LockTable,
    valid_until: Instant,
    expires_at: DateTime<Utc>,
) -> Instant {
    valid_until.min(Instant::now() + span(table.now(), expires_at))
}

/// Armed while a waiter may stand in the line: if dropped armed (the acquire's future dropped,
/// or an error), leaves the line in the background, and releases the lock if it was granted.
struct LeaveOnDrop {
    table: Arc<LockTable>,
    handle: Option<LockHandle>,
    /// The join was answered: if the waiter is not in line then, no join of it is on its way.
    join_answered: bool,
}

impl LeaveOnDrop {
    fn arm(table: &Arc<LockTable>, handle: &LockHandle) -> Self {
        LeaveOnDrop {
            table: Arc::clone(table),
            handle: Some(handle.clone()),
            join_answered: false,
        }
    }

    fn join_answered(&mut self) {
        self.join_answered = true;
    }

    /// The waiter found itself out of line (the item gone, or its line replaced), and joins again
    /// under a new id: disarmed, unless its join may still land (unanswered, or answered after the
    /// SDK sent it again), which the clean-up then looks for. Disarmed, an earlier attempt of the
    /// join landed behind the waiter's next lock, and its release granted the lock to nobody
    /// (found by review).
    fn not_in_line(&mut self) {
        if self.join_answered {
            self.disarm();
        }
    }

    fn disarm(&mut self) {
        self.handle = None;
    }
}

/// How many times a gone waiter's leave reads the line again when it keeps changing, and the
/// bounds of the random pauses between (full jitter, doubling).
const LEAVE_ROUNDS: usize = 8;
const LEAVE_PAUSE: Duration = Duration::from_millis(10);
const LEAVE_PAUSE_MAX: Duration = Duration::from_millis(500);

/// The waiter `lock_id` was granted the lock; its join was sent more than once if `join_resent`,
/// and its release then looks again
/// ([`look_again_after_release`](crate::ops::in_flight::look_again_after_release)).
fn granted_after_resend(table: &LockTable, lock_id: LockId, join_resent: bool) {
    if join_resent {
        table.holds.written_after_resend(lock_id, ResentWrite::Join);
    }
}

/// Takes the waiter `handle` that has gone out of the line, releasing the lock if it was granted
/// meanwhile: whether it found it (in line or holding).
pub(crate) async fn leave_gone_waiter(
    table: &Arc<LockTable>,
    handle: &LockHandle,
) -> Result<bool, Error> {
    let resource = handle.resource();
    // A leave that kept finding the line changed under it (waiters ahead leaving at the same
    // time, all in step) tries again after a pause, a random one, so that those leaving together
    // fall out of step: taken for done, it left the waiter in line, and the next release granted
    // it the lock, held by nobody for its lease (found by review).
    let mut pause = Backoff::new(BackoffBounds::new(LEAVE_PAUSE, LEAVE_PAUSE_MAX));
    let mut left = retrying(|| line::leave(table, resource, handle.lock_id(), None)).await?;
    for _ in 1..LEAVE_ROUNDS {
        if !matches!(left, Left::Stuck) {
            break;
        }
        tokio::time::sleep(pause.next_delay()).await;
        left = retrying(|| line::leave(table, resource, handle.lock_id(), None)).await?;
    }
    match left {
        Left::Granted(_) => {
            // Only as the grant left it: a hand-back to an idempotent acquisition of the owner
            // since, in another process, is that one's.
            let version = grant::version_granted_to(handle.lock_id());
            let release = Release::of(handle).only_of_version(Some(&version));
            let outcome = release::send_retrying(table, &release, DataChange::Keep, None).await?;
            debug!(
                resource,
                ?outcome,
                "released a lock granted to a waiter that had gone"
            );
            Ok(true)
        }
        Left::NotInLine => Ok(false),
        Left::Gone => {
            debug!(resource, "a waiter that had gone left the line");
            Ok(true)
        }
        Left::Stuck => {
            warn!(resource, "a waiter that had gone could not leave a line that kept changing; a grant passes it over after its deadline");
            Ok(true)
        }
    }
}

impl Drop for LeaveOnDrop {
    fn drop(&mut self) {
        let Some(handle) = self.handle.take() else {
            return;
        };
        // As for a dropped acquisition: a lock granted to this waiter is not handed back to an
        // idempotent acquisition of its owner before the release below deletes it; and one that
        // was handed back already (its grant read by the other task's refusal before this waiter
        // looked) is that task's now, left to it (it was released under it; found by review).
        if !self.table.holds.abandoned(&handle) {
            return;
        }
        let table = Arc::clone(&self.table);
        let join_answered = self.join_answered;
        let spawned = self.table.release_in_background(async move {
            // A join dropped unanswered may land after the first look (a resend of the SDK's
            // after a lost answer, even after a look that found the first attempt's place and
            // left: it looked no more, the resend put it back in line, and a grant went to
            // nobody; found by review): look again.
            let found = looking_again(
                || leave_gone_waiter(&table, &handle),
                |found| !join_answered && found.is_ok(),
            )
            .await;
            if let Err(err) = found {
                warn!(resource = handle.resource(), %err, "a waiter that had gone could not leave the line; a grant passes it over after its deadline");
            }
        });
        if !spawned {
            warn!("a waiter left outside a runtime; a grant passes it over after its deadline");
        }
    }
}
