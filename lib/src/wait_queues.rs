//! Waiting in line inside one client.
//!
//! Tasks of one process that wait for the same resource through the same
//! [`LockClient`](crate::LockClient) (or its clones) need not all poll DynamoDB. They line up, first
//! come first served, and only the first in line makes requests. A release, a lost extension or a
//! force release of that resource through this client wakes the first in line at once, and it
//! makes one ordinary conditional PutItem: a hand-off between tasks of one process costs the
//! release and that PutItem, with no polling and no wasted attempt. While the lock is held by this
//! very client, the first in line does not even poll at the backoff's pace: it waits for that
//! wake-up, the lock's lease end, or the backoff's largest delay (the lock may be released
//! elsewhere, by `release_owned` or `force_release`), whichever comes first.
//!
//! Waiters in other processes are not affected: they poll the item as always. The queue holds no
//! lock state of its own and writes nothing: every acquisition is the waiter's own conditional
//! write, so the queue can only change who tries when, never who gets the lock, and a waiter that
//! gives up (a timeout, a dropped future) leaves nothing behind but its place in line.

use crate::lock::LockId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::futures::Notified;
use tokio::sync::{MutexGuard, Notify};
use tokio::time::Instant;

/// Most resources a client keeps lines for; beyond it, holds nobody waits for are forgotten
/// first, and if that is not enough, new holds are not remembered (which only costs a waiter of
/// this client some polling).
const MAX_LINES: usize = 4096;

/// The lines of one client, one per resource that someone of this client is waiting for or that
/// this client holds a lock on.
#[derive(Debug, Default)]
pub(crate) struct WaitQueues {
    lines: Mutex<HashMap<String, Line>>,
}

/// One resource's line. It exists while a task waits in it or a lock this client took on the
/// resource has not been released through the client and its lease has not ended.
#[derive(Debug, Default)]
struct Line {
    shared: Arc<Turns>,
    waiting: usize,
    /// A lock on the resource that this client took.
    held: Option<Hold>,
}

/// A lock this client took, as its waiters need to know it.
#[derive(Debug)]
struct Hold {
    lock_id: LockId,
    /// Its owner: an idempotent waiter of the same owner takes the lock back instead of waiting.
    owner: String,
    /// Its monotonic lease end.
    until: Instant,
}

/// What the tasks of one line wait on.
#[derive(Debug, Default)]
struct Turns {
    /// Held by the first in line; tokio's mutex is fair, so the others get it in arrival order.
    first: tokio::sync::Mutex<()>,
    /// Signalled when the lock may have been freed through this client.
    freed: Notify,
}

/// A task's place in a resource's line; leaving the line is dropping it.
#[derive(Debug)]
pub(crate) struct Place<'a> {
    queues: &'a WaitQueues,
    resource: &'a str,
    turns: Arc<Turns>,
}

impl WaitQueues {
    fn lines(&self) -> std::sync::MutexGuard<'_, HashMap<String, Line>> {
        self.lines.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Joins the line for `resource`.
    pub(crate) fn join<'a>(&'a self, resource: &'a str) -> Place<'a> {
        let mut lines = self.lines();
        let line = lines.entry(resource.to_owned()).or_default();
        line.waiting += 1;
        Place {
            queues: self,
            resource,
            turns: line.shared.clone(),
        }
    }

    /// This client took a lock on `resource` for `owner`, held until `valid_until`.
    pub(crate) fn acquired(
        &self,
        resource: &str,
        lock_id: LockId,
        owner: &str,
        valid_until: Instant,
    ) {
        let mut lines = self.lines();
        if lines.len() >= MAX_LINES && !lines.contains_key(resource) {
            let now = Instant::now();
            lines.retain(|_, line| {
                line.waiting > 0 || line.held.as_ref().is_some_and(|hold| hold.until > now)
            });
            if lines.len() >= MAX_LINES {
                return;
            }
        }
        let line = lines.entry(resource.to_owned()).or_default();
        // The same lock taken back (an idempotent acquisition) keeps the later end.
        let until = match &line.held {
            Some(hold) if hold.lock_id == lock_id => hold.until.max(valid_until),
            _ => valid_until,
        };
        line.held = Some(Hold {
            lock_id,
            owner: owner.to_owned(),
            until,
        });
    }

    /// This client extended its lock `lock_id` on `resource` to `valid_until`.
    pub(crate) fn extended(&self, resource: &str, lock_id: LockId, valid_until: Instant) {
        if let Some(line) = self.lines().get_mut(resource) {
            if let Some(hold) = line.held.as_mut().filter(|hold| hold.lock_id == lock_id) {
                // Never earlier: the answers of two extensions (a guard's and the caller's, two
                // guards of one acquisition) can come in either order, and an earlier end made
                // the holder's idempotent acquisition wait behind this client's line (found by
                // review).
                hold.until = hold.until.max(valid_until);
            }
        }
    }

    /// The lock `lock_id` on `resource` is not held by this client any more: released,
    /// force-released, or found lost. Wakes the first in line, unless this client is known to
    /// hold another live lock on the resource. (A release that removed no lock it can name wakes
    /// the line with [`wake`](Self::wake) instead, keeping what the client holds.)
    pub(crate) fn freed(&self, resource: &str, lock_id: LockId) {
        let mut lines = self.lines();
        let Some(line) = lines.get_mut(resource) else {
            return;
        };
        // Another live lock of this client's (one whose lease ran out is stale: it no longer
        // keeps the waiters from trying).
        let now = Instant::now();
        if line
            .held
            .as_ref()
            .is_some_and(|hold| hold.lock_id != lock_id && hold.until > now)
        {
            return;
        }
        line.held = None;
        if line.waiting == 0 {
            lines.remove(resource);
        } else {
            line.shared.freed.notify_one();
        }
    }

    /// The lock may have been freed through this client, though not one it knows it holds (a
    /// release by owner refused, a force release that spared a newer lock, a shared hold's
    /// release): wakes the first in line, and keeps what the client holds. (Forgetting it made an
    /// idempotent acquisition of its owner wait behind the line for its own lock.)
    pub(crate) fn wake(&self, resource: &str) {
        if let Some(line) = self.lines().get(resource).filter(|line| line.waiting > 0) {
            line.shared.freed.notify_one();
        }
    }

    /// The lease end of the live lock this client holds on `resource`, if it knows of one and
    /// its owner is not `except_owner`.
    pub(crate) fn held_here(
        &self,
        resource: &str,
        now: Instant,
        except_owner: Option<&str>,
    ) -> Option<Instant> {
        let lines = self.lines();
        let hold = lines.get(resource)?.held.as_ref()?;
        let other = except_owner != Some(hold.owner.as_str());
        (hold.until > now && other).then_some(hold.until)
    }

    /// Whether this client holds a live lock of `owner` on `resource` (as of `now`).
    pub(crate) fn held_by_here(&self, resource: &str, now: Instant, owner: &str) -> bool {
        self.lines()
            .get(resource)
            .and_then(|line| line.held.as_ref())
            .is_some_and(|hold| hold.until > now && hold.owner == owner)
    }
}

impl Place<'_> {
    /// Waits until this task is first in line; it stays first while the guard lives.
    pub(crate) async fn first(&self) -> MutexGuard<'_, ()> {
        self.turns.first.lock().await
    }

    /// Completes once the lock may have been freed through this client, counting from this call
    /// (or from a wake-up that found nobody waiting, which is kept for the next caller).
    pub(crate) fn freed(&self) -> Notified<'_> {
        self.turns.freed.notified()
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        let mut lines = self.queues.lines();
        if let Some(line) = lines.get_mut(self.resource) {
            line.waiting -= 1;
            if line.waiting == 0 && line.held.is_none() {
                lines.remove(self.resource);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn id() -> LockId {
        LockId::generate()
    }

    #[tokio::test]
    async fn a_line_remembers_the_lock_this_client_holds_until_it_is_freed() {
        let queues = WaitQueues::default();
        let now = Instant::now();
        let secs = |s| now + Duration::from_secs(s);
        let place = queues.join("r");
        let lock = id();
        queues.acquired("r", lock, "alice", secs(5));
        assert_eq!(queues.held_here("r", now, None), Some(secs(5)));
        queues.extended("r", id(), secs(9));
        assert_eq!(
            queues.held_here("r", now, None),
            Some(secs(5)),
            "not that lock"
        );
        queues.extended("r", lock, secs(9));
        assert_eq!(queues.held_here("r", now, None), Some(secs(9)));
        assert_eq!(
            queues.held_here("r", secs(9), None),
            None,
            "its lease has ended"
        );
        queues.freed("r", id());
        assert!(queues.held_here("r", now, None).is_some(), "not that lock");
        queues.freed("r", lock);
        assert_eq!(queues.held_here("r", now, None), None);
        drop(place);
        assert!(queues.lines().is_empty());

        queues.acquired("s", lock, "alice", secs(5));
        assert!(
            queues.held_here("s", now, None).is_some(),
            "kept with nobody waiting"
        );
        queues.freed("s", lock);
        assert!(queues.lines().is_empty(), "and dropped at its release");
    }

    #[tokio::test]
    async fn a_late_answer_never_moves_a_holds_end_earlier() {
        let queues = WaitQueues::default();
        let now = Instant::now();
        let secs = |s| now + Duration::from_secs(s);
        let lock = id();
        queues.acquired("r", lock, "alice", secs(5));
        // Two extensions' answers, the later-sent first.
        queues.extended("r", lock, secs(9));
        queues.extended("r", lock, secs(7));
        assert_eq!(queues.held_here("r", now, None), Some(secs(9)));
        // Taken back by an idempotent acquisition with less lease left.
        queues.acquired("r", lock, "alice", secs(6));
        assert!(queues.held_by_here("r", secs(8), "alice"));
        // Another lock there replaces it.
        queues.acquired("r", id(), "alice", secs(6));
        assert!(!queues.held_by_here("r", secs(8), "alice"));
    }

    #[tokio::test]
    async fn a_lock_freed_beside_a_stale_hold_of_this_client_wakes_the_first_in_line() {
        let queues = WaitQueues::default();
        let place = queues.join("r");
        // This client's lock there ran out (nobody released it through the client).
        queues.acquired("r", id(), "alice", Instant::now());
        let freed = place.freed();
        // Another lock there is removed (a force release of another client's lock).
        queues.freed("r", id());
        assert!(
            futures_util::FutureExt::now_or_never(freed).is_some(),
            "the stale hold kept the wake-up back"
        );
        assert_eq!(queues.held_here("r", Instant::now(), None), None);
    }

    #[tokio::test]
    async fn a_lock_held_here_is_not_waited_for_by_its_own_owner_when_asked() {
        let queues = WaitQueues::default();
        let now = Instant::now();
        let until = now + Duration::from_secs(5);
        queues.acquired("r", id(), "alice", until);
        assert_eq!(queues.held_here("r", now, Some("bob")), Some(until));
        assert_eq!(queues.held_here("r", now, None), Some(until));
        assert_eq!(queues.held_here("r", now, Some("alice")), None);
    }

    #[tokio::test]
    async fn holds_nobody_waits_for_are_forgotten_first_when_the_lines_are_full() {
        let queues = WaitQueues::default();
        let now = Instant::now();
        let _waiting = queues.join("waited-for");
        for i in 0..MAX_LINES - 1 {
            queues.acquired(&format!("ended/{i}"), id(), "alice", now);
        }
        queues.acquired("live", id(), "alice", now + Duration::from_secs(60));
        assert!(queues.held_here("live", now, None).is_some());
        let lines = queues.lines();
        assert_eq!(
            lines.len(),
            2,
            "ended holds dropped, the waited-for line kept"
        );
        assert!(lines.contains_key("waited-for"));
    }

    #[tokio::test]
    async fn the_first_in_line_keeps_its_turn_and_a_release_wakes_it() {
        let queues = WaitQueues::default();
        let (a, b) = (queues.join("r"), queues.join("r"));
        let first = a.first().await;
        assert!(b.turns.first.try_lock().is_err(), "b waits behind a");

        let freed = a.freed();
        queues.wake("r");
        freed.await; // completes: the wake-up reached the first in line

        drop(first);
        let _second = b.first().await;
        drop(a);
        assert_eq!(queues.lines()["r"].waiting, 1);
    }
}
