//! A bounded record of lock ids, each with a value: the latest [`ENDED_KEPT`] inserted or
//! raised, the oldest forgotten first. The holds keep several (the acquisitions that ended, the
//! locks pruned, the lease ends extensions applied, the releases that may have released).
//!
//! Raising a value makes its lock the latest without moving it in place: each insert or raise
//! is stamped, and a stamp another one replaced is skipped when the oldest is forgotten (a scan
//! of the whole record on every applied extension, under the holds' lock, cost its hot path up to
//! 4,096 steps).

use super::ENDED_KEPT;
use crate::lock::LockId;
use std::collections::{HashMap, VecDeque};

/// Lock ids, each with a value, the latest [`ENDED_KEPT`] inserted or raised.
pub(crate) struct Latest<V> {
    /// Each insert or raise in order, by stamp; one whose stamp is no longer its lock's is stale.
    order: VecDeque<(LockId, u64)>,
    /// Each lock's value and the stamp of its last insert or raise.
    ids: HashMap<LockId, (V, u64)>,
    stamped: u64,
}

impl<V> Default for Latest<V> {
    fn default() -> Self {
        Latest {
            order: VecDeque::new(),
            ids: HashMap::new(),
            stamped: 0,
        }
    }
}

impl<V> Latest<V> {
    /// Inserts `lock_id` with `value`, unless it is there.
    pub(crate) fn insert_new(&mut self, lock_id: LockId, value: V) {
        if self.ids.contains_key(&lock_id) {
            return;
        }
        let stamp = self.stamp(lock_id);
        self.ids.insert(lock_id, (value, stamp));
        self.forget_the_oldest();
    }

    /// The value of `lock_id`, if it is there.
    pub(super) fn get(&self, lock_id: LockId) -> Option<&V> {
        self.ids.get(&lock_id).map(|(value, _)| value)
    }

    /// The value of `lock_id` to change in place, if it is there (it stays where it was).
    pub(super) fn get_mut(&mut self, lock_id: LockId) -> Option<&mut V> {
        self.ids.get_mut(&lock_id).map(|(value, _)| value)
    }

    /// Whether `lock_id` is there.
    pub(crate) fn contains(&self, lock_id: LockId) -> bool {
        self.ids.contains_key(&lock_id)
    }

    /// Whether `lock_id` was there (it is not any more).
    pub(super) fn take(&mut self, lock_id: LockId) -> bool {
        self.ids.remove(&lock_id).is_some()
    }

    /// The value of `lock_id`, if it was there (it is not any more).
    pub(super) fn remove(&mut self, lock_id: LockId) -> Option<V> {
        self.ids.remove(&lock_id).map(|(value, _)| value)
    }

    /// How many lock ids are kept.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.ids.len()
    }

    /// A new stamp for `lock_id`, put last in the order.
    fn stamp(&mut self, lock_id: LockId) -> u64 {
        self.stamped += 1;
        self.order.push_back((lock_id, self.stamped));
        self.stamped
    }

    /// Forgets the oldest lock ids beyond [`ENDED_KEPT`], skipping stale stamps, and drops the
    /// stale stamps once they are as many as the live ones (so that the order stays within twice
    /// the bound).
    fn forget_the_oldest(&mut self) {
        while self.ids.len() > ENDED_KEPT {
            let Some((oldest, stamp)) = self.order.pop_front() else {
                break;
            };
            if self
                .ids
                .get(&oldest)
                .is_some_and(|(_, live)| *live == stamp)
            {
                self.ids.remove(&oldest);
            }
        }
        if self.order.len() > 2 * ENDED_KEPT.max(self.ids.len()) {
            let ids = &self.ids;
            self.order
                .retain(|(lock_id, stamp)| ids.get(lock_id).is_some_and(|(_, live)| live == stamp));
        }
    }
}

impl<V: Ord + Copy> Latest<V> {
    /// Sets the value of `lock_id` to `value` if it is larger, or inserts it; either way it is
    /// now the latest (kept in place, a lock extended all along was forgotten first, once as
    /// many others had been inserted after its first value; found by review).
    pub(super) fn raise(&mut self, lock_id: LockId, value: V) {
        if !self.ids.contains_key(&lock_id) {
            return self.insert_new(lock_id, value);
        }
        let stamp = self.stamp(lock_id);
        if let Some((marked, live)) = self.ids.get_mut(&lock_id) {
            *marked = (*marked).max(value);
            *live = stamp;
        }
        self.forget_the_oldest();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_is_forgotten_first_and_a_raised_one_counts_as_new() {
        let mut latest = Latest::default();
        let first = LockId::generate();
        latest.insert_new(first, 1);
        let others: Vec<LockId> = (0..ENDED_KEPT).map(|_| LockId::generate()).collect();
        for (n, lock_id) in others.iter().enumerate() {
            latest.insert_new(*lock_id, 0);
            if n == ENDED_KEPT / 2 {
                latest.raise(first, 5);
            }
        }
        assert_eq!(
            latest.get(first),
            Some(&5),
            "raised, it is among the latest"
        );
        assert!(!latest.contains(others[0]), "the oldest is forgotten");
        assert_eq!(latest.len(), ENDED_KEPT);
        latest.raise(first, 2);
        assert_eq!(latest.get(first), Some(&5), "a raise never lowers");
    }

    #[test]
    fn raising_one_lock_again_and_again_keeps_the_order_bounded() {
        let mut latest = Latest::default();
        let lock_id = LockId::generate();
        for value in 0..(10 * ENDED_KEPT as u64) {
            latest.raise(lock_id, value);
        }
        assert!(
            latest.order.len() <= 2 * ENDED_KEPT,
            "{}",
            latest.order.len()
        );
        assert_eq!(latest.get(lock_id), Some(&(10 * ENDED_KEPT as u64 - 1)));
    }
}
