//! The invariants the schedules check after every step, against the stored item.

use super::releases::{Ended, State};
use super::*;
use ddb_lock::ReleaseOutcome;

impl World {
    /// Checks every invariant at this step (`context` names it in a failure).
    pub(super) async fn check(&mut self, context: &str) {
        // The calls left on their way that have ended: acquisitions they were told over are
        // checked below.
        self.check_pending(context, false).await;
        // Then: it flushes clients, whose background work (a release) may end guards' holds.
        self.check_lost_guards_released(context, self.clock.now())
            .await;
        self.check_over_for_good(context).await;
        // Leases end by the latest the clock has read: a lock taken over while the clock was
        // ahead stays taken when it steps back.
        self.latest = self.latest.max(self.clock.now());
        let now = self.latest;
        let held: Vec<_> = self
            .guards
            .iter()
            .filter_map(|(taken, _, guard)| {
                let lock = guard.lock()?;
                (guard.is_held() && lock.expires_at() >= now).then_some((*taken, lock))
            })
            .collect();
        for watch in &self.closed {
            assert!(
                !watch.is_held(),
                "{context}: a closed guard's watch says held"
            );
        }
        let exclusive: std::collections::HashSet<_> = held
            .iter()
            .filter(|(_, lock)| lock.mode() == Mode::Exclusive)
            .map(|(_, lock)| lock.lock_id())
            .collect();
        assert!(
            exclusive.len() <= 1
                && (exclusive.is_empty()
                    || held.iter().all(|(_, l)| exclusive.contains(&l.lock_id()))),
            "{context}: an exclusive guard held with another acquisition: {held:?}"
        );
        if held.is_empty() {
            return;
        }
        let item = raw_item(&self.resource).await;
        // Held still after the read: a release that started meanwhile (a twin guard's, given up
        // at its lease end) turned the guard lost before its request was sent, so a guard still
        // held after the item was read is held in what was read.
        let held: Vec<_> = held
            .into_iter()
            .filter(|(taken, _)| {
                self.guards
                    .iter()
                    .any(|(step, _, guard)| step == taken && guard.is_held())
            })
            .collect();
        if held.is_empty() {
            return;
        }
        let item = item.unwrap_or_else(|| {
            panic!("{context}: guards say held but the lock item is gone: {held:?}")
        });
        for (taken, lock) in &held {
            if lock.mode() == Mode::Exclusive {
                check_exclusive(context, *taken, lock, &item);
                if let Some(Data::Known(data)) = self.data.get(&lock.lock_id()) {
                    let stored = match item.get("Data") {
                        Some(AttributeValue::B(blob)) => Some(blob.as_ref().to_vec()),
                        _ => None,
                    };
                    assert_eq!(
                        stored.as_deref().map(String::from_utf8_lossy),
                        data.as_deref().map(String::from_utf8_lossy),
                        "{context}: the guard of step {taken} holds data its last answered replacement did not write"
                    );
                }
            } else {
                check_shared(context, *taken, lock, &item, now);
            }
        }
    }

    /// The calls left on their way (see [`releases`](super::releases)) that have ended (`all`: every
    /// one, awaited, at the end once the held releases are delivered): an acquisition a release
    /// answered is over ([`World::told_over`]); and the first release started of an acquisition,
    /// its guard held until then, released it, unless something else ended it meanwhile: it
    /// answers `Released`, or `Unconfirmed` (overtaken by a later release of the acquisition that
    /// waited for it as long as it would), never that it found the lock gone, another's or
    /// released already (a twin guard's release sent while the first was held in the network
    /// landed first, and the first answered `NotFound`). A first release that left a payload and
    /// answered `Released` left it in the item, if the item is still the acquisition's.
    pub(super) async fn check_pending(&mut self, context: &str, all: bool) {
        let mut k = 0;
        while k < self.pending.len() {
            if !all && self.pending[k].running() {
                k += 1;
                continue;
            }
            let pending = self.pending.remove(k);
            let what = pending.what;
            let ended = match pending.state {
                State::Done(ended) => ended,
                State::Running(task) => timeout(PATIENCE, task)
                    .await
                    .unwrap_or_else(|_| {
                        panic!(
                            "{context}: {what} is on its way still, every held release delivered"
                        )
                    })
                    .expect("the release's task"),
            };
            let outcome = match ended {
                Ended::One(outcome) => outcome,
                Ended::All(outcomes) => {
                    for (handle, outcome) in &outcomes {
                        self.told_over(handle.lock_id(), outcome);
                        self.answered_release(handle.lock_id(), pending.client, outcome, None);
                    }
                    self.check_guard_releases(context);
                    continue;
                }
            };
            if let Some(acquisition) = pending.acquisition {
                self.told_over(acquisition, &outcome);
                let by_guard = pending.by_guard.then_some(what.as_str());
                self.answered_release(acquisition, pending.client, &outcome, by_guard);
                self.check_guard_releases(context);
            }
            let Some(first) = pending.first.filter(|f| f.ended_otherwise.is_none()) else {
                continue;
            };
            let id = first.lock.lock_id().to_string();
            assert!(
                matches!(
                    outcome,
                    Ok(ReleaseOutcome::Released | ReleaseOutcome::Unconfirmed)
                ),
                "{context}: {what}, the first release of acquisition {id}, answered {outcome:?}, and nothing else ended it"
            );
            let (Some(payload), Ok(ReleaseOutcome::Released)) = (&first.payload, &outcome) else {
                continue;
            };
            let Some(item) = raw_item(&self.resource).await else {
                continue;
            };
            if item.get("LockID").and_then(|l| l.as_s().ok()) == Some(&id) {
                let stored = match item.get("Data") {
                    Some(AttributeValue::B(blob)) => Some(blob.as_ref().to_vec()),
                    _ => None,
                };
                assert_eq!(
                    stored.as_deref().map(String::from_utf8_lossy),
                    Some(String::from_utf8_lossy(payload)),
                    "{context}: {what} answered Released, and the item, still acquisition {id}'s, holds other data: {item:?}"
                );
            }
        }
    }

    /// A release of `acquisition` through `client` answered `outcome` (a guard's release, `what`,
    /// if `by_guard`): remembered if it released it, or if a guard's found it gone or another's.
    pub(super) fn answered_release(
        &mut self,
        acquisition: LockId,
        client: usize,
        outcome: &Result<ReleaseOutcome, ddb_lock::Error>,
        by_guard: Option<&str>,
    ) {
        match (outcome, by_guard) {
            (Ok(ReleaseOutcome::Released), _) => {
                self.released_through.insert((acquisition, client));
            }
            (Ok(ReleaseOutcome::NotFound | ReleaseOutcome::NotOwner { .. }), Some(what)) => self
                .refused_guard_releases
                .push((acquisition, client, format!("{what}: {outcome:?}"))),
            _ => {}
        }
    }

    /// No guard's release found the lock gone or another's where a release of its acquisition
    /// through the same client answered `Released`, before or after it: that one released it (a
    /// twin's, `release_all`'s), and the guard's, sent after it, is a resend of it (sent once its
    /// twin's was answered, it said `NotFound`, a loss).
    fn check_guard_releases(&self, context: &str) {
        for (acquisition, client, what) in &self.refused_guard_releases {
            assert!(
                !self.released_through.contains(&(*acquisition, *client)),
                "{context}: {what}, while a release of acquisition {acquisition} through client {client} answered Released"
            );
        }
    }

    /// A release of `acquisition` through its client answered `outcome`: if it answered at all,
    /// whatever it found (released, gone, another's), the acquisition is over.
    pub(super) fn told_over(
        &mut self,
        acquisition: LockId,
        outcome: &Result<ddb_lock::ReleaseOutcome, ddb_lock::Error>,
    ) {
        if outcome.is_ok() {
            self.over.insert(acquisition);
        }
    }

    /// No acquisition some call was told is over holds the lock again: no extension of it, late,
    /// copied, or through another client, revives it (a release, answered, removed it or found
    /// it gone; an extension found it gone or taken).
    pub(super) async fn check_over_for_good(&self, context: &str) {
        if self.over.is_empty() {
            return;
        }
        let Some(item) = raw_item(&self.resource).await else {
            return;
        };
        let holder = item
            .get("LockID")
            .and_then(|id| id.as_s().ok())
            .filter(|_| item.contains_key("Owner"));
        for acquisition in &self.over {
            let id = acquisition.to_string();
            assert!(
                holder != Some(&id) && !item.contains_key(&format!("Shared:{id}")),
                "{context}: acquisition {id} was told over, yet the item holds it: {item:?}"
            );
        }
    }

    /// Open guards whose lease ran out or was found expired release their locks themselves (an
    /// extension of theirs may still land): once their clients' background work is done (and
    /// their heartbeats have had their turn), the item does not hold their acquisition live. Checked from the check after the one that
    /// first saw the guard lost (a watch says lost at the lease end, when the heartbeat's timer
    /// may not have fired yet; the requests of the check and the step in between let it).
    async fn check_lost_guards_released(&mut self, context: &str, now: DateTime<Utc>) {
        let mut lost = Vec::new();
        for (taken, client, guard) in &self.guards {
            if matches!(
                lost_now(&guard.watch()).await,
                Some(LockLost::LeaseRanOut { .. } | LockLost::Expired { .. })
            ) && !self.ran_out.insert(*taken)
            {
                lost.push((*taken, *client));
            }
        }
        if lost.is_empty() {
            return;
        }
        // The heartbeat's timer fires at the lease end as the watch's does, and the check may
        // come first: its release is awaited as an event (the next answer of any request), within
        // the patience that turns a release that never comes into a failure.
        let deadline = tokio::time::Instant::now() + PATIENCE;
        for (taken, client) in lost {
            // A flush of a client whose release is held in the network, or behind one, waits for
            // its delivery: checked at a later check (the guard stays in `ran_out`).
            if self.busy(client) {
                continue;
            }
            loop {
                let answered = self.answered();
                self.clients[client].flush().await;
                let Some(item) = raw_item(&self.resource).await else {
                    break;
                };
                let live_ours = item.get("LockID").and_then(|id| id.as_s().ok())
                    == Some(&self.acquisitions[&taken].to_string())
                    && item.contains_key("Owner")
                    && string_attr(&item, "ExpiresAt") >= stored(now).as_str();
                if !live_ours {
                    break;
                }
                let waited =
                    tokio::time::timeout_at(deadline, self.any_answer_after(answered)).await;
                assert!(
                    waited.is_ok(),
                    "{context}: the guard of step {taken} ran out of lease, yet its lock is held live: {item:?}"
                );
            }
        }
    }
}

/// An exclusive guard that says held finds its own acquisition in the item, held, with a lease end
/// not before the one it believes.
fn check_exclusive(context: &str, taken: usize, lock: &Lock, item: &Item) {
    assert_eq!(
        item.get("LockID")
            .and_then(|id| id.as_s().ok())
            .map(String::as_str),
        Some(lock.lock_id().to_string().as_str()),
        "{context}: the guard of step {taken} says held but the item is another acquisition's"
    );
    assert!(
        item.contains_key("Owner"),
        "{context}: the guard of step {taken} says held but the item was released"
    );
    let expires_at = string_attr(item, "ExpiresAt");
    assert!(
        expires_at >= stored(lock.expires_at()).as_str(),
        "{context}: the guard of step {taken} believes its lease ends at {}, the item says {expires_at}",
        stored(lock.expires_at())
    );
}

/// A shared guard that says held finds its entry in the item with a lease end not before the one
/// it believes, and no live exclusive holder beside it.
fn check_shared(context: &str, taken: usize, lock: &Lock, item: &Item, now: DateTime<Utc>) {
    let entry = item
        .get(&format!("Shared:{}", lock.lock_id()))
        .and_then(|entry| entry.as_m().ok())
        .unwrap_or_else(|| {
            panic!("{context}: the shared guard of step {taken} says held but its entry is gone: {item:?}")
        });
    let expires_at = string_attr(entry, "ExpiresAt");
    assert!(
        expires_at >= stored(lock.expires_at()).as_str(),
        "{context}: the shared guard of step {taken} believes its lease ends at {}, its entry says {expires_at}",
        stored(lock.expires_at())
    );
    if item.contains_key("Owner") {
        assert!(
            string_attr(item, "ExpiresAt") < stored(now).as_str(),
            "{context}: a live exclusive holder beside the shared guard of step {taken}: {item:?}"
        );
    }
}
