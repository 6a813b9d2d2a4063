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
use chrono::{DateTime, Utc};

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

/// What names the hold a release takes away, besides the lock's id: its resource, owner and mode,
/// and for a release by owner of the locks acquired by a moment, that moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Releaser {
    resource: String,
    owner: String,
    mode: Mode,
    acquired_by: Option<DateTime<Utc>>,
}

impl Releaser {
    fn of(handle: &LockHandle, acquired_by: Option<DateTime<Utc>>) -> Self {
        Releaser {
            resource: handle.resource().to_owned(),
            owner: handle.owner().to_owned(),
            mode: handle.mode(),
            acquired_by,
        }
    }

    /// Whether this release may take away the hold of `handle`, its acquisition time
    /// `acquired_at` if known: made with its resource, owner and mode, and, bounded by a moment,
    /// not known to spare it. An acquisition time never goes back (a hand-back writes its own,
    /// never an earlier one), so a lock seen acquired after the moment is one such a release
    /// leaves, whenever it is read: a stopped saga run's late stop event, refused by the lock
    /// handed back to the redriven run, left it marked in the warm instance that sent it, and the
    /// redriven run's next extension there, applied, was answered `NotFound` and the lock deleted
    /// (found by review).
    fn takes_away(&self, handle: &LockHandle, acquired_at: Option<DateTime<Utc>>) -> bool {
        *self == Releaser::of(handle, self.acquired_by)
            && !super::acquired_after(acquired_at, self.acquired_by)
    }
}

impl Ending {
    /// Released by `handle` (its resource, owner and mode).
    pub(super) fn released_by(handle: &LockHandle) -> Self {
        Ending::Released {
            by: Some(vec![Releaser::of(handle, None)]),
        }
    }

    /// Released by `handle`'s owner, the locks acquired by `acquired_by` (`None`: any time).
    pub(super) fn released_by_owner(
        handle: &LockHandle,
        acquired_by: Option<DateTime<Utc>>,
    ) -> Self {
        Ending::Released {
            by: Some(vec![Releaser::of(handle, acquired_by)]),
        }
    }

    /// Released whoever holds the lock.
    pub(super) fn released_by_any() -> Self {
        Ending::Released { by: None }
    }

    /// Whether this is a release that takes away the hold of `handle` whenever it was acquired:
    /// [`releases`](Self::releases), less those bounded by a moment (the hold's time unknown, a
    /// lock handed back after it would count as released).
    pub(super) fn releases_whenever_acquired(&self, handle: &LockHandle) -> bool {
        match self {
            Ending::Released { by: None } => true,
            Ending::Released { by: Some(by) } => by.iter().any(|releaser| {
                releaser.acquired_by.is_none() && releaser.takes_away(handle, None)
            }),
            Ending::Lost => false,
        }
    }

    /// Whether this ends the hold of `handle` (acquired at `acquired_at`, if known): a loss
    /// (found through any handle), or a release that may take it away.
    pub(super) fn ends(&self, handle: &LockHandle, acquired_at: Option<DateTime<Utc>>) -> bool {
        matches!(self, Ending::Lost) || self.releases(handle, acquired_at)
    }

    /// Whether this is a release that may take away the hold of `handle` (acquired at
    /// `acquired_at`, if known): one made with its resource, owner and mode, not bounded by a
    /// moment before `acquired_at`, or by any holder. (A release of another resource is sent to
    /// another item, and one by another owner or mode names another holder in its condition:
    /// either changes nothing of this one's hold.)
    pub(super) fn releases(&self, handle: &LockHandle, acquired_at: Option<DateTime<Utc>>) -> bool {
        match self {
            Ending::Released { by: None } => true,
            Ending::Released { by: Some(by) } => by
                .iter()
                .any(|releaser| releaser.takes_away(handle, acquired_at)),
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
