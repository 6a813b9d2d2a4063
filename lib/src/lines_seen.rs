//! The fair locks this client last saw with a line of waiters, and the item it last saw of a lock
//! it holds with a line.
//!
//! Two requests of a contended fair acquisition can be spared with what the client has already
//! seen:
//!
//! - A fair acquirer's first request is a try (the PutItem of any acquirer, with "nobody waits"),
//!   refused while the lock is held, and only then does it join the line. Where this client last
//!   saw the lock held with waiters (it was refused and joined, or it released by handing the lock
//!   over), the next fair acquisition joins the line first and skips the try. A wrong guess costs
//!   what today's order costs: the join is refused (the lock is free, or lapsed without a line)
//!   and the acquirer tries as usual.
//! - A holder's release first tries to delete the item, "nobody waits", refused when somebody
//!   does, and then hands the lock over. A holder granted the lock from a line read the item then:
//!   if waiters stood behind it, its release hands over at once, from that item. A stale item
//!   costs what today's order costs: the grant's condition pins the line it was computed from, and
//!   a refusal's `ALL_OLD` computes it again.
//!
//! It is a hint, never a decision: every acquisition and release is still one of the conditional
//! writes, so the set may forget (it starts over when full) or be stale without harm.

use crate::item::Item;
use crate::lock::LockId;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// Most resources remembered; past it the set starts over.
const MAX_RESOURCES: usize = 4096;

/// The resources whose fair lock this client last saw held with a line, each with the item it
/// last saw of its own hold there, if it holds the lock.
#[derive(Debug, Default)]
pub(crate) struct LinesSeen {
    resources: Mutex<HashMap<String, Option<(LockId, Item)>>>,
}

impl LinesSeen {
    fn resources(&self) -> std::sync::MutexGuard<'_, HashMap<String, Option<(LockId, Item)>>> {
        self.resources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn insert(&self, resource: &str, hold: Option<(LockId, Item)>) {
        let mut resources = self.resources();
        if resources.len() >= MAX_RESOURCES && !resources.contains_key(resource) {
            resources.clear();
        }
        resources.insert(resource.to_owned(), hold);
    }

    /// `resource`'s lock was seen held with waiters (or about to be: this client joined them).
    pub(crate) fn held(&self, resource: &str) {
        self.insert(resource, None);
    }

    /// This client holds `resource`'s lock `lock_id`, whose item it read as `item`: remembered if
    /// waiters stand in its line.
    pub(crate) fn holding(&self, resource: &str, lock_id: LockId, item: &Item, has_line: bool) {
        if has_line {
            self.insert(resource, Some((lock_id, item.clone())));
        } else {
            self.free(resource);
        }
    }

    /// `resource`'s lock was seen without a line: free, or released with nobody waiting.
    pub(crate) fn free(&self, resource: &str) {
        self.resources().remove(resource);
    }

    /// Whether `resource`'s lock was last seen held with a line.
    pub(crate) fn has_line(&self, resource: &str) -> bool {
        self.resources().contains_key(resource)
    }

    /// The item last seen of this client's hold `lock_id` on `resource` with a line, taken: its
    /// release hands the lock over from it.
    pub(crate) fn take_line_of(&self, resource: &str, lock_id: LockId) -> Option<Item> {
        let mut resources = self.resources();
        let entry = resources.get_mut(resource)?;
        match entry.take() {
            Some((held, item)) if held == lock_id => Some(item),
            other => {
                *entry = other;
                None
            }
        }
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
    }

    #[test]
    fn a_hold_with_a_line_gives_its_item_once_and_only_to_its_release() {
        let seen = LinesSeen::default();
        let (mine, other) = (LockId::generate(), LockId::generate());
        seen.holding("a", mine, &Item::new(), true);
        assert!(seen.take_line_of("a", other).is_none(), "another hold's");
        assert!(seen.take_line_of("a", mine).is_some());
        assert!(seen.take_line_of("a", mine).is_none(), "taken");
        assert!(seen.has_line("a"), "the line is still remembered");
        seen.holding("a", mine, &Item::new(), false);
        assert!(!seen.has_line("a"), "held without a line");
    }

    #[test]
    fn a_full_set_starts_over() {
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
