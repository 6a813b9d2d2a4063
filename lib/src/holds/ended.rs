//! The acquisitions a client has seen end: whose release started through it, or that it found
//! lost, and by which handle a release took each (see [`Holds`](super::Holds)).
//!
//! A release marks its lock as being released before its request is sent, whether or not this
//! client holds it (a saga's lock, released through a Lambda function's warm client): an extension
//! of it answered after through this client says `NotFound`, and releases it again if no release
//! is on its way. A release made with the lock's id under another owner or mode (a wrong owner, a
//! shared hold released as exclusive), which DynamoDB refuses, marked it all the same, and the
//! holder's next extension through that client, applied, was answered `NotFound` and the lock
//! deleted under its holder (found by review); so did one with the lock's id on another resource.
//! A release mark now names the resource, owner and mode of each handle that released (or any
//! holder), and only an extension, a hand-back or a first extension's record of such a handle
//! reads it (marked by another handle, the lock was neither handed back to its owner's idempotent
//! acquisition through that client, nor tracked as extended there, and a late extension of it
//! held it again after another had found it expired; found by review).

use super::latest::Latest;
use crate::lock::{LockHandle, LockId};
use crate::mode::Mode;

/// Acquisitions whose release started through this client, or that it found lost, the latest
/// [`ENDED_KEPT`](super::ENDED_KEPT), each with how it ended.
pub(super) type Ended = Latest<Ending>;

/// How an acquisition ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Ending {
    /// Its release started through this client (a release, a drop, `release_all`, a force
    /// release or release by owner that read it, a dropped acquisition's clean-up), by handles
    /// of these resources, owners and modes (`None`: any holder, a force release's).
    Released { by: Option<Vec<Releaser>> },
    /// An extension found it lost (gone, taken, or expired).
    Lost,
}

/// What names the hold a release takes away, besides the lock's id: its resource, owner and mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Releaser {
    resource: String,
    owner: String,
    mode: Mode,
}

impl Releaser {
    fn of(handle: &LockHandle) -> Self {
        Releaser {
            resource: handle.resource().to_owned(),
            owner: handle.owner().to_owned(),
            mode: handle.mode(),
        }
    }
}

impl Ending {
    /// Released by `handle` (its resource, owner and mode).
    pub(super) fn released_by(handle: &LockHandle) -> Self {
        Ending::Released {
            by: Some(vec![Releaser::of(handle)]),
        }
    }

    /// Released whoever holds the lock.
    pub(super) fn released_by_any() -> Self {
        Ending::Released { by: None }
    }

    /// Whether this ends the hold of `handle`: a loss (found through any handle), or a release
    /// that may take it away.
    pub(super) fn ends(&self, handle: &LockHandle) -> bool {
        matches!(self, Ending::Lost) || self.releases(handle)
    }

    /// Whether this is a release that may take away the hold of `handle`: one made with its
    /// resource, owner and mode, or by any holder. (A release of another resource is sent to
    /// another item, and one by another owner or mode names another holder in its condition:
    /// either changes nothing of this one's hold.)
    pub(super) fn releases(&self, handle: &LockHandle) -> bool {
        match self {
            Ending::Released { by: None } => true,
            Ending::Released { by: Some(by) } => by.contains(&Releaser::of(handle)),
            Ending::Lost => false,
        }
    }
}

impl Ended {
    /// Marks `lock_id` as ended by `ending` (a release outranks a loss: either way it ended, but
    /// only a release takes the lock away whatever an extension wrote; releases by several
    /// handles each count, and one by any holder counts for all).
    pub(super) fn insert(&mut self, lock_id: LockId, ending: Ending) {
        match (self.get_mut(lock_id), ending) {
            (Some(_), Ending::Lost) => {}
            (Some(marked @ Ending::Lost), released) => *marked = released,
            (
                Some(Ending::Released { by: Some(marked) }),
                Ending::Released {
                    by: Some(releasers),
                },
            ) => {
                for releaser in releasers {
                    if !marked.contains(&releaser) {
                        marked.push(releaser);
                    }
                }
            }
            (Some(marked), Ending::Released { by: None }) => *marked = Ending::released_by_any(),
            (Some(Ending::Released { by: None }), _) => {}
            (None, ending) => self.insert_new(lock_id, ending),
        }
    }
}
