//! What this client has seen of the fair locks it uses: which it last saw with a line of
//! waiters, and of a lock it holds, since when, and the item it was granted with.
//!
//! Three requests of a contended fair acquisition can be spared or timed with it:
//!
//! - A fair acquirer's first request is a try (the PutItem of any acquirer, with "nobody waits"),
//!   refused while the lock is held, and only then does it join the line. Where this client last
//!   saw the lock held with waiters (it was refused and joined, or it released by handing the lock
//!   over), the next fair acquisition joins the line first and skips the try. A wrong guess costs
//!   what the other order costs: the join is refused (the lock is free, or lapsed without a line)
//!   and the acquirer tries as usual.
//! - A holder's release first tries to delete the item, "nobody waits", refused when somebody
//!   does, and then hands the lock over. A holder granted the lock from a line read the item then:
//!   if waiters stood behind it, its release hands over at once, from that item. A stale item
//!   costs what the other order costs: the grant's condition pins the line it was computed from,
//!   and a refusal's `ALL_OLD` computes it again.
//! - A hand-over folds how long its holder held the lock, counted from when this client learned
//!   it holds it, and its whole turn, from its `AcquiredAt`, into the line's figures in the item
//!   ([`timing`](crate::fair::timing)), so that the waiters can time their reads
//!   ([`pace`](crate::fair::pace)).
//!
//! It is a hint, never a decision: every acquisition and release is still one of the conditional
//! writes, so the memory may forget (it starts over when full) or be stale without harm.

use crate::item::Item;
use crate::lock::LockId;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// Most resources remembered; past it the memory starts over.
const MAX_RESOURCES: usize = 4096;

/// What this client has seen of one resource's fair lock.
#[derive(Debug, Default)]
struct Seen {
    /// Last seen held with a line.
    line: bool,
    /// Its hold of the lock, if it holds it.
    hold: Option<Hold>,
}

/// A hold of this client.
#[derive(Debug)]
struct Hold {
    lock_id: LockId,
    /// When this client learned it holds the lock.
    since: Instant,
    /// The item it was granted with, if waiters stood behind it there.
    line: Option<Item>,
}

/// What this client has seen of the fair locks it uses.
#[derive(Debug, Default)]
pub(crate) struct LinesSeen {
    resources: Mutex<HashMap<String, Seen>>,
}

impl LinesSeen {
    fn resources(&self) -> std::sync::MutexGuard<'_, HashMap<String, Seen>> {
        self.resources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn with(&self, resource: &str, change: impl FnOnce(&mut Seen)) {
        let mut resources = self.resources();
        if resources.len() >= MAX_RESOURCES && !resources.contains_key(resource) {
            resources.clear();
        }
        let seen = resources.entry(resource.to_owned()).or_default();
        change(seen);
        if !seen.line && seen.hold.is_none() {
            resources.remove(resource);
        }
    }

    /// `resource`'s lock was seen held with waiters (or about to be: this client joined them).
    pub(crate) fn held(&self, resource: &str) {
        self.with(resource, |seen| seen.line = true);
    }

    /// `resource`'s lock was seen without a line: free, or released with nobody waiting.
    pub(crate) fn free(&self, resource: &str) {
        self.with(resource, |seen| seen.line = false);
    }

    /// This client holds `resource`'s lock `lock_id` from now; `line` is the item it was granted
    /// with, if waiters stand behind it there.
    pub(crate) fn holding(&self, resource: &str, lock_id: LockId, line: Option<&Item>) {
        self.with(resource, |seen| {
            seen.line |= line.is_some();
            seen.hold = Some(Hold {
                lock_id,
                since: Instant::now(),
                line: line.cloned(),
            });
        });
    }

    /// Whether `resource`'s lock was last seen held with a line.
    pub(crate) fn has_line(&self, resource: &str) -> bool {
        self.resources().get(resource).is_some_and(|seen| seen.line)
    }

    /// This client's hold `lock_id` of `resource`, taken for its release: how long it has been
    /// held, and the item it was granted with if waiters stood behind it there.
    pub(crate) fn take_hold(
        &self,
        resource: &str,
        lock_id: LockId,
    ) -> Option<(Duration, Option<Item>)> {
        let mut taken = None;
        self.with(resource, |seen| match seen.hold.take() {
            Some(hold) if hold.lock_id == lock_id => {
                taken = Some((hold.since.elapsed(), hold.line));
            }
            other => seen.hold = other,
        });
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_remembered_until_seen_free() {
        let seen = LinesSeen::default();
        assert!(!seen.has_line("a"));
        seen.held("a");
        assert!(seen.has_line("a") && !seen.has_line("b"));
        seen.free("a");
        assert!(!seen.has_line("a"));
        assert!(
            seen.resources().is_empty(),
            "nothing kept of a resource seen free"
        );
    }

    #[test]
    fn a_hold_is_given_once_and_only_to_its_release() {
        let seen = LinesSeen::default();
        let (mine, other) = (LockId::generate(), LockId::generate());
        seen.holding("a", mine, Some(&Item::new()));
        assert!(seen.has_line("a"), "granted with waiters behind");
        assert!(seen.take_hold("a", other).is_none(), "another hold's");
        let (_, line) = seen.take_hold("a", mine).expect("its own");
        assert!(line.is_some());
        assert!(seen.take_hold("a", mine).is_none(), "taken");
        assert!(seen.has_line("a"), "the line is still remembered");
        seen.holding("b", mine, None);
        assert!(!seen.has_line("b"), "held without a line");
        assert!(seen
            .take_hold("b", mine)
            .is_some_and(|(_, line)| line.is_none()));
    }

    #[test]
    fn a_full_memory_starts_over() {
        let seen = LinesSeen::default();
        for i in 0..MAX_RESOURCES {
            seen.held(&format!("r{i}"));
        }
        seen.held("r0");
        assert!(seen.has_line("r1"), "a resource it has is not a new one");
        seen.held("new");
        assert!(seen.has_line("new") && !seen.has_line("r1"));
    }
}
