//! The acquisitions a client has seen end: whose release started through it, or that it found
//! lost, and by which handle a release took each (see [`Holds`](super::Holds)).
//!
//! A release marks its lock as being released before its request is sent, whether or not this
//! client holds it (a saga's lock, released through a Lambda function's warm client): an extension
//! of it answered after through this client says `NotFound`, and releases it again if no release
//! is on its way. A release made with the lock's id under another owner or mode (a wrong owner, a
//! shared hold released as exclusive), which DynamoDB refuses, marked it all the same, and the
//! holder's next extension through that client, applied, was answered `NotFound` and the lock
//! deleted under its holder (found by review). A release mark now names the owner and mode of the
//! handle that released (or any holder), and only an extension of that handle reads it.

use super::ENDED_KEPT;
use crate::lock::{LockHandle, LockId};
use crate::mode::Mode;
use std::collections::{HashMap, VecDeque};

/// Acquisitions whose release started through this client, or that it found lost, the latest
/// [`ENDED_KEPT`], each with how it ended.
pub(super) type Ended = Latest<Ending>;

/// How an acquisition ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Ending {
    /// Its release started through this client (a release, a drop, `release_all`, a force
    /// release or release by owner that read it, a dropped acquisition's clean-up), by a handle
    /// of this owner and mode (`None`: any holder, a force release's, or releases by two
    /// handles).
    Released { by: Option<(String, Mode)> },
    /// An extension found it lost (gone, taken, or expired).
    Lost,
}

impl Ending {
    /// Released by `handle` (its owner and mode).
    pub(super) fn released_by(handle: &LockHandle) -> Self {
        Ending::Released {
            by: Some((handle.owner().to_owned(), handle.mode())),
        }
    }

    /// Released whoever holds the lock.
    pub(super) fn released_by_any() -> Self {
        Ending::Released { by: None }
    }

    /// Whether this is a release that may take away the hold of `handle`: one made with its
    /// owner and mode, or by any holder. (A release by another owner or mode names another
    /// holder in its condition, and changes nothing of this one's hold.)
    pub(super) fn releases(&self, handle: &LockHandle) -> bool {
        match self {
            Ending::Released { by: None } => true,
            Ending::Released {
                by: Some((owner, mode)),
            } => owner == handle.owner() && *mode == handle.mode(),
            Ending::Lost => false,
        }
    }
}

impl Ended {
    /// Marks `lock_id` as ended by `ending` (a release outranks a loss: either way it ended, but
    /// only a release takes the lock away whatever an extension wrote; releases by two handles
    /// count as one by any holder).
    pub(super) fn insert(&mut self, lock_id: LockId, ending: Ending) {
        match (self.ids.get_mut(&lock_id), ending) {
            (Some(_), Ending::Lost) => {}
            (Some(marked @ Ending::Lost), released) => *marked = released,
            (Some(marked), released) => {
                if *marked != released {
                    *marked = Ending::released_by_any();
                }
            }
            (None, ending) => self.insert_new(lock_id, ending),
        }
    }

    /// How `lock_id` ended, if it did.
    pub(super) fn get(&self, lock_id: LockId) -> Option<&Ending> {
        self.ids.get(&lock_id)
    }
}

/// Lock ids, each with a value, the latest [`ENDED_KEPT`] inserted (the oldest forgotten first).
pub(super) struct Latest<V> {
    pub(super) order: VecDeque<LockId>,
    ids: HashMap<LockId, V>,
}

impl<V> Default for Latest<V> {
    fn default() -> Self {
        Latest {
            order: VecDeque::new(),
            ids: HashMap::new(),
        }
    }
}

impl<V> Latest<V> {
    /// Inserts `lock_id` with `value`, unless it is there.
    pub(super) fn insert_new(&mut self, lock_id: LockId, value: V) {
        if self.ids.contains_key(&lock_id) {
            return;
        }
        self.ids.insert(lock_id, value);
        self.order.push_back(lock_id);
        if self.order.len() > ENDED_KEPT {
            if let Some(oldest) = self.order.pop_front() {
                self.ids.remove(&oldest);
            }
        }
    }

    pub(super) fn contains(&self, lock_id: LockId) -> bool {
        self.ids.contains_key(&lock_id)
    }

    /// Whether `lock_id` was there (it is not any more).
    pub(super) fn take(&mut self, lock_id: LockId) -> bool {
        self.ids.remove(&lock_id).is_some()
    }
}
