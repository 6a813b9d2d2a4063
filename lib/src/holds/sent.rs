//! What a client's extensions of one lock sent: the lease ends they asked for, and the rewrites
//! still unanswered. From them an extension asks for a lease that ends after every earlier one
//! (see [`Holds::lease_to_send`](super::Holds::lease_to_send)), and one that finds the lease
//! over tells whether an earlier request of the client may still land and hold it again.

use super::{Ending, Hold, Holds, Inner};
use crate::lock::{LockHandle, LockId};
use crate::outcome::LockLost;
use crate::time::whole_millis_up;
use chrono::{DateTime, Utc};
use std::collections::hash_map::Entry;
use std::time::Duration;
use tokio::time::Instant;

/// What the extensions of one lock sent through this client.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Sent {
    /// The latest lease end an extension asked for.
    latest_end: Option<DateTime<Utc>>,
    /// The latest monotonic lease end an extension may answer (its send plus the lease it asked
    /// for), answered or not.
    latest_until: Option<Instant>,
    /// The lease end of the latest rewrite (a data change, or an observed-lease extension,
    /// written again at a later stored end) sent while rewrites were unanswered: dropped with
    /// their request on the way, or failed. A rewrite's condition holds while the version it
    /// names stands, so it may land yet, and write a new version.
    unanswered_rewrite_end: Option<DateTime<Utc>>,
    /// How many rewrites are sent and not answered: the end is forgotten once none is (one slot
    /// for the end alone, cleared by the answer of either of two rewrites at one end, forgot the
    /// other one, still on its way; found by review).
    unanswered_rewrites: u32,
}

/// What an applied extension's answer tells of the lock (see [`Holds::extended`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Applied {
    /// When the lock was acquired, as written.
    pub(crate) acquired_at: DateTime<Utc>,
    /// The lease end stored.
    pub(crate) stored_end: DateTime<Utc>,
    /// The monotonic lease end the caller is told.
    pub(crate) until: Instant,
}

/// What an extension that found the lease over tells (see [`Holds::expiry_found`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExpiryFound {
    /// An extension of this client was applied with a later lease end since the refusal was
    /// decided: the lock stands, and the extension is to be sent again.
    OutOfDate,
    /// The lock is lost; `to_release` if an earlier extension of this client may still land and
    /// hold it again, which the caller is to release (the lock is marked as being released).
    Lost { to_release: bool },
}

/// The leases of one extension (see [`Holds::lease_to_send`](super::Holds::lease_to_send)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LeaseToSend {
    /// The lease asked for: its end is the request's `:expires_at`, and its caller is told it.
    pub(crate) asked: Duration,
    /// The lease written as `LeaseMs`, for waiters under the observed-lease rule.
    pub(crate) written: Duration,
    /// The latest lease end an earlier extension of the lock sent through this client asked
    /// for, if any: stored later than the lease end an extension finds, that one was not
    /// applied, and may be yet (unanswered, or dropped with its request on the way).
    pub(crate) earlier_end: Option<DateTime<Utc>>,
}

impl LeaseToSend {
    /// `lease` as given, asked for and written, after no earlier extension.
    pub(super) fn given(lease: Duration) -> Self {
        LeaseToSend {
            asked: lease,
            written: lease,
            earlier_end: None,
        }
    }
}

impl Holds {
    /// The lease an extension of `lock_id` computed at `now` asks for, and the lease it writes
    /// for the observed-lease rule (`LeaseMs`): `lease`, or longer where `lease` would fall short
    /// of what this client already sent or counts on.
    ///
    /// - The lease asked for ends after every lease end an earlier extension of the lock sent
    ///   through this client, so that its lease ends go up in the order its extensions are sent:
    ///   the extension condition compares lease ends only, and a late copy of an earlier
    ///   extension that ended as late applied over a later one (its data over the later data). A
    ///   clock stepped back made a later extension ask for an earlier end; so did one sent once
    ///   the clock had caught up again (an end no later than the stretched one before it), and
    ///   an extension asked for a shorter lease than an earlier one.
    /// - The lease written is at least the one this client already counts on (its `until`, or
    ///   the end an extension sent earlier and not yet answered may still be answered with):
    ///   under the observed-lease rule a waiter times the newest version for that version's
    ///   `LeaseMs`, and a shorter one, applied because the wall clock had jumped forward, let a
    ///   waiter take the lock while its guard, counting on the longer lease, said held. (Only
    ///   `LeaseMs`: the lease end asked for stays a function of the wall clock and the ends
    ///   sent, as the wall-clock rule's waiters and the condition see it.)
    ///
    /// The caller is told the lease asked for. A lock this client does not remember (a handle
    /// from elsewhere) is remembered from its first extension on, as extended here; one whose
    /// release started through it asks for and writes `lease`.
    pub(crate) fn lease_to_send(
        &self,
        handle: &LockHandle,
        now: DateTime<Utc>,
        lease: Duration,
    ) -> LeaseToSend {
        let mut inner = self.inner();
        let Inner {
            held,
            ended,
            pruned,
            ..
        } = &mut *inner;
        let lock_id = handle.lock_id();
        let hold = match held.entry(lock_id) {
            Entry::Occupied(hold) => hold.into_mut(),
            // Being released by this handle (a release by another, refused, counts for nothing,
            // and so does a release by owner bounded by a moment: the lock, handed back after it,
            // went on untracked here, its extensions' order unkept; found by review).
            Entry::Vacant(_)
                if ended
                    .get(lock_id)
                    .is_some_and(|ending| ending.releases_whenever_acquired(handle)) =>
            {
                return LeaseToSend::given(lease);
            }
            // Not remembered (a handle taken elsewhere, or this client's own lock pruned):
            // remembered from this send on, as extended here (taken here if it was pruned), so
            // that an extension after this one knows what this one sent (a late one held a lock
            // again after another found it expired; found by review). Its acquisition time is
            // not known until an answer tells it.
            Entry::Vacant(vacant) => vacant.insert(Hold {
                handle: handle.clone(),
                acquired_at: None,
                until: Instant::now(),
                stop_guards: Vec::new(),
                extend_guards: Vec::new(),
                sent: Sent::default(),
                until_expiry: false,
                taken_here: pruned.take(lock_id),
            }),
        };
        hold.sent.lease_to_send(hold.until, now, lease)
    }

    /// A rewrite of an extension of `lock_id` to the stored lease end `end` is sent; until
    /// [`rewrite_answered`](Self::rewrite_answered), it may land at any time.
    pub(crate) fn rewrite_sent(&self, lock_id: LockId, end: DateTime<Utc>) {
        if let Some(hold) = self.inner().held.get_mut(&lock_id) {
            hold.sent.rewrite_sent(end);
        }
    }

    /// A rewrite of an extension of `lock_id` is answered.
    pub(crate) fn rewrite_answered(&self, lock_id: LockId) {
        if let Some(hold) = self.inner().held.get_mut(&lock_id) {
            hold.sent.rewrite_answered();
        }
    }

    /// An extension of `handle`'s lock whose leases were `leases` found the lease over at
    /// `expired_at` (the lock `lost`): out of date if an extension of this client was applied with
    /// a later lease end meanwhile (its answer read first; stored ends only go up); else the lock
    /// is marked as lost, or as being released where an extension sent earlier may still land
    /// (see [`sent`](self::sent)), and its guards stop. Checked and marked under one lock, against
    /// an applied extension's answer ([`Holds::extended`]): read after, that one finds the lock
    /// marked for release and answers `NotFound`; read before, it makes this one out of date.
    pub(crate) fn expiry_found(
        &self,
        handle: &LockHandle,
        leases: &LeaseToSend,
        expired_at: DateTime<Utc>,
        lost: &LockLost,
    ) -> ExpiryFound {
        let lock_id = handle.lock_id();
        let stops = {
            let mut inner = self.inner();
            // Kept apart from the hold: an extension that found the lease over before leaves
            // it, and a late one applied after (sent while the lease stood) extended the lock
            // again, answered `Extended`; a refusal decided before that one, read after, then
            // released it under its caller (found by the random test of extension histories).
            if inner
                .applied
                .get(lock_id)
                .is_some_and(|end| *end > expired_at)
            {
                return ExpiryFound::OutOfDate;
            }
            let hold = inner.held.get(&lock_id);
            let to_release = match hold {
                Some(hold) => hold.sent.may_land_after(leases, expired_at),
                None => leases.earlier_end > Some(expired_at),
            };
            let stops = hold
                .map(|hold| hold.stop_guards.clone())
                .unwrap_or_default();
            let ending = if to_release {
                Ending::released_by(handle)
            } else {
                Ending::Lost
            };
            inner.ended.insert(lock_id, ending);
            (stops, to_release)
        };
        let (stops, to_release) = stops;
        for stop in stops {
            stop(lost.clone());
        }
        ExpiryFound::Lost { to_release }
    }
}

impl Sent {
    /// The leases of an extension computed at `now` asking for `lease`, of a hold counted on
    /// until `until`; remembered as sent.
    pub(super) fn lease_to_send(
        &mut self,
        until: Instant,
        now: DateTime<Utc>,
        lease: Duration,
    ) -> LeaseToSend {
        let past_sent = self
            .latest_end
            .and_then(|end| {
                (end - now + chrono::TimeDelta::milliseconds(1))
                    .to_std()
                    .ok()
            })
            .map(whole_millis_up);
        let asked = lease.max(past_sent.unwrap_or_default());
        // Counted on: the hold's lease as answered, or as an extension still unanswered may
        // answer it (a late `Extended` counted from its send, after this one was written).
        let sent = Instant::now();
        let promised = until.max(self.latest_until.unwrap_or(until));
        let counted_on = whole_millis_up(promised.saturating_duration_since(sent));
        self.latest_until = self.latest_until.max(sent.checked_add(asked));
        let end = chrono::TimeDelta::from_std(asked)
            .ok()
            .and_then(|span| now.checked_add_signed(span));
        let earlier_end = self.latest_end;
        self.latest_end = self.latest_end.max(end);
        LeaseToSend {
            asked,
            written: asked.max(counted_on),
            earlier_end,
        }
    }

    /// Whether an extension may still be answered at `now` (its monotonic lease end is ahead).
    pub(super) fn unanswered_at(&self, now: Instant) -> bool {
        self.latest_until.is_some_and(|until| until > now)
    }

    /// A rewrite to `end` is sent.
    pub(super) fn rewrite_sent(&mut self, end: DateTime<Utc>) {
        self.unanswered_rewrite_end = self.unanswered_rewrite_end.max(Some(end));
        self.unanswered_rewrites = self.unanswered_rewrites.saturating_add(1);
    }

    /// A rewrite is answered: the latest end sent is forgotten once every rewrite is.
    pub(super) fn rewrite_answered(&mut self) {
        self.unanswered_rewrites = self.unanswered_rewrites.saturating_sub(1);
        if self.unanswered_rewrites == 0 {
            self.unanswered_rewrite_end = None;
        }
    }

    /// Whether a request of an extension sent earlier than the one whose leases are `leases`
    /// may still land on the acquisition whose lease that one found over at `expired_at`: an
    /// extension that asked for a later end (not applied, since stored ends only go up), or a
    /// rewrite at that end or later still unanswered.
    pub(super) fn may_land_after(&self, leases: &LeaseToSend, expired_at: DateTime<Utc>) -> bool {
        leases.earlier_end > Some(expired_at) || self.unanswered_rewrite_end >= Some(expired_at)
    }
}
