//! The operations and the reference model of one resource's lock state.

use super::*;

// ---------------------------------------------------------------------------------------------
// Operations

/// Which client makes a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Via {
    /// A client shared by the owners that use it.
    ClientA,
    /// Another client, with its own lines of waiters and its own fencing-token offset.
    ClientB,
    /// A client behind a proxy that forwards the request, lets the endpoint apply it, and drops
    /// its answer: the SDK sends the request again.
    LostAnswer,
}

/// One acquisition attempt's parameters.
#[derive(Debug, Clone)]
pub(crate) struct Acquisition {
    pub(crate) via: Via,
    pub(crate) owner: &'static str,
    pub(crate) lease_ms: i64,
    pub(crate) idempotent: bool,
    pub(crate) fencing: bool,
    pub(crate) data: Option<&'static str>,
}

/// What an extension does to the payload.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Payload {
    /// `extend`
    Keep,
    /// `extend_and_replace_data(Some(..))`
    Replace(&'static str),
    /// `extend_and_replace_data(None)`
    Remove,
}

#[derive(Debug, Clone)]
pub(crate) enum Op {
    TryAcquire(Acquisition),
    /// `acquire` with a zero timeout: exactly one attempt, `Err(Timeout)` when held.
    AcquireNoWait(Acquisition),
    /// `release` of a lock returned earlier: the latest (`back` 0) or one `back` acquisitions
    /// before it (counted back, so that a shrunk sequence keeps referring to the same lock).
    Release {
        via: Via,
        back: usize,
    },
    ReleaseOwned {
        via: Via,
        owner: &'static str,
    },
    /// `extend`, or `extend_and_replace_data`, of a lock returned earlier (`back` as for release).
    Extend {
        via: Via,
        back: usize,
        lease_ms: i64,
        payload: Payload,
    },
    ForceRelease {
        via: Via,
    },
    Status {
        via: Via,
    },
    /// The shared clock moves forward.
    Advance {
        ms: i64,
    },
    /// DynamoDB's TTL deletes the lock item, which it only does once the lease has ended.
    TtlDelete,
}

impl Op {
    pub(crate) fn via(&self) -> Option<Via> {
        match self {
            Op::TryAcquire(a) | Op::AcquireNoWait(a) => Some(a.via),
            Op::Release { via, .. }
            | Op::ReleaseOwned { via, .. }
            | Op::Extend { via, .. }
            | Op::ForceRelease { via }
            | Op::Status { via } => Some(*via),
            Op::Advance { .. } | Op::TtlDelete => None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The model

/// The lock item as the model has it; times in milliseconds after [`start`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stored {
    /// Which lock ever returned this is (counting from 0).
    pub(crate) lock: usize,
    pub(crate) owner: &'static str,
    pub(crate) acquired_at: i64,
    pub(crate) expires_at: i64,
    pub(crate) fenced: bool,
    pub(crate) data: Option<&'static str>,
}

impl Stored {
    /// Live up to and including the millisecond its lease ends.
    pub(crate) fn live_at(&self, now: i64) -> bool {
        self.expires_at >= now
    }
}

/// An item kept by a release (`delete_on_release(false)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Kept {
    /// The lock whose `LockID` it keeps.
    pub(crate) lock: usize,
    pub(crate) data: Option<&'static str>,
    /// The owner whose lock the release ended, and when (`ReleasedBy`, `ReleasedAt`).
    pub(crate) released_by: &'static str,
    pub(crate) released_at: i64,
}

/// The reference model of one resource, and what it allows the last operation to answer.
#[derive(Debug, Clone, Default)]
pub(crate) struct Model {
    pub(crate) now: i64,
    pub(crate) item: Option<Stored>,
    /// Whether releases keep the item (`delete_on_release(false)`).
    pub(crate) keep: bool,
    /// The item a release kept: no holder, the last holder's `LockID` and payload.
    pub(crate) kept: Option<Kept>,
    /// How many distinct locks (acquisitions) have been returned.
    pub(crate) acquisitions: usize,
    /// The owner of each lock returned, by its number.
    pub(crate) owners: Vec<&'static str>,
    /// What each client remembers of the locks it holds: the latest lease end an extension of
    /// the lock asked for through it, if any (its extensions ask for ends past it).
    pub(crate) holds: HashMap<(Via, usize), Option<i64>>,
    /// The locks each client ended (released, removed, or found lost): it remembers them no
    /// more, even when a late answer extends them.
    pub(crate) ended: HashSet<(Via, usize)>,
    pub(crate) expect: Expect,
}

/// What the model allows an operation to answer.
#[derive(Debug, Clone, Default)]
pub(crate) enum Expect {
    #[default]
    Nothing,
    /// A new acquisition (`new`), or the live lock of the same owner handed back (idempotent).
    Acquired {
        lock: Stored,
        new: bool,
    },
    /// Held by `holder`: `try_acquire` → `None`, `acquire` → `Err(Timeout { holder })`.
    Refused {
        holder: Stored,
    },
    /// Any of these.
    Release(Vec<ReleaseAnswer>),
    Extend(Extension),
    /// `Held` by this lock, or `Free`.
    Status(Option<Stored>),
    /// Any of these holders (`None`: no live lock removed).
    ForceRelease(Vec<Option<Stored>>),
    /// Whether the TTL deletion happens (only for an item whose lease has ended).
    TtlDelete {
        delete: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReleaseAnswer {
    Released,
    NotFound,
    /// Sent again after a lost answer, the release found the lock gone: its first send's doing,
    /// or not.
    Unconfirmed,
    NotOwner(Stored),
    /// The kept item records the release of this lock (by id) or of this owner's lock, at this
    /// time.
    AlreadyReleased {
        released_at: i64,
    },
}

#[derive(Debug, Clone)]
pub(crate) enum Extension {
    Extended(Stored),
    Expired { expired_at: i64 },
    NotFound,
    NotOwner(Stored),
}

/// Acquire wins iff there is no item or its lease ended strictly before now
/// (`attribute_not_exists(PK) OR ExpiresAt < :now`).
pub(crate) fn acquire_wins(item: Option<&Stored>, now: i64) -> bool {
    item.is_none_or(|s| s.expires_at < now)
}

/// A release whose answer was lost is retried, and the retry cannot tell our own first attempt's
/// deletion from anything else: it answers `Unconfirmed` where the lock is gone, whatever the
/// first attempt found, and never `NotFound` (a loss) nor `NotOwner` for its own lock (which
/// `allowed` then does not contain).
pub(crate) fn with_lost_answer(allowed: Vec<ReleaseAnswer>, lost: bool) -> Vec<ReleaseAnswer> {
    if !lost {
        return allowed;
    }
    let mut allowed: Vec<_> = allowed
        .into_iter()
        .filter(|answer| *answer != ReleaseAnswer::NotFound)
        .collect();
    allowed.push(ReleaseAnswer::Unconfirmed);
    allowed
}

impl Model {
    /// The lock item goes: deleted, or, when releases keep items, kept without its holder.
    pub(crate) fn end_hold(&mut self) {
        if let Some(s) = self.item.take() {
            if self.keep {
                self.kept = Some(Kept {
                    lock: s.lock,
                    data: s.data,
                    released_by: s.owner,
                    released_at: self.now,
                });
            }
        }
    }

    /// The number of the lock returned `back` acquisitions before the latest.
    pub(crate) fn lock_back(&self, back: usize) -> usize {
        self.acquisitions - 1 - back
    }

    /// The lease end an extension of `lock` through `via` asks for at `now`: a lease from now,
    /// or a millisecond past every end an earlier extension of it asked for through that client,
    /// unless the client ended it (released it, or found it lost): it remembers the ends of the
    /// locks it holds, and of those it extends (a lock taken through another client) from their
    /// first extension on.
    pub(crate) fn asked_end(&mut self, via: Via, lock: usize, now: i64, lease_ms: i64) -> i64 {
        if self.ended.contains(&(via, lock)) {
            return now + lease_ms;
        }
        let latest = self.holds.entry((via, lock)).or_insert(None);
        let asked = latest.map_or(now + lease_ms, |l| (now + lease_ms).max(l + 1));
        *latest = Some(latest.map_or(asked, |l| l.max(asked)));
        asked
    }

    /// What an extension of `lock` asking for the end `asked` at `now` answers, and does.
    fn extension(&mut self, lock: usize, now: i64, asked: i64, payload: &Payload) -> Extension {
        let live = self.item.clone().filter(|s| s.live_at(now));
        match &mut self.item {
            Some(s) if s.lock == lock && s.live_at(now) => {
                s.expires_at = s.expires_at.max(asked);
                match payload {
                    Payload::Keep => {}
                    Payload::Replace(data) => s.data = Some(*data),
                    Payload::Remove => s.data = None,
                }
                Extension::Extended(s.clone())
            }
            Some(s) if s.lock == lock => Extension::Expired {
                expired_at: s.expires_at,
            },
            _ => live.map_or(Extension::NotFound, Extension::NotOwner),
        }
    }

    /// `via` ends its hold of `lock`, or learns it ended.
    pub(crate) fn ends(&mut self, via: Via, lock: usize) {
        self.holds.remove(&(via, lock));
        self.ended.insert((via, lock));
    }

    /// `via` holds `lock` (taken, handed back, or extended), unless it ended it.
    pub(crate) fn holds_now(&mut self, via: Via, lock: usize) {
        if !self.ended.contains(&(via, lock)) {
            self.holds.entry((via, lock)).or_insert(None);
        }
    }

    pub(crate) fn step(mut self, op: &Op) -> Model {
        let now = self.now;
        let lost = op.via() == Some(Via::LostAnswer);
        let live = self.item.clone().filter(|s| s.live_at(now));
        self.expect = match op {
            Op::TryAcquire(a) | Op::AcquireNoWait(a) => {
                if acquire_wins(self.item.as_ref(), now) {
                    // A keeping client's acquisition keeps the payload it finds, unless it sets one.
                    let found = match (&self.item, &self.kept) {
                        (Some(expired), _) => expired.data,
                        (None, Some(kept)) => kept.data,
                        (None, None) => None,
                    };
                    let lock = Stored {
                        lock: self.acquisitions,
                        owner: a.owner,
                        acquired_at: now,
                        expires_at: now + a.lease_ms,
                        fenced: a.fencing,
                        data: if self.keep { a.data.or(found) } else { a.data },
                    };
                    self.acquisitions += 1;
                    self.owners.push(a.owner);
                    self.holds_now(a.via, lock.lock);
                    self.kept = None;
                    self.item = Some(lock.clone());
                    Expect::Acquired { lock, new: true }
                } else {
                    let holder = live.expect("an item that refuses an acquire is live");
                    // A fenced request is not handed back an unfenced lock: no token to give.
                    if a.idempotent && holder.owner == a.owner && (holder.fenced || !a.fencing) {
                        // Extended first, in whichever client (a new version, which a dropped
                        // acquisition's clean-up spares), as an extension through that client
                        // asks, and taken at the hand-back (a late release by owner of the
                        // locks acquired by an earlier moment spares it).
                        let asked = self.asked_end(a.via, holder.lock, now, a.lease_ms);
                        let stored = self.item.as_mut().expect("live");
                        stored.expires_at = stored.expires_at.max(asked);
                        stored.acquired_at = now;
                        let lock = stored.clone();
                        self.holds_now(a.via, lock.lock);
                        Expect::Acquired { lock, new: false }
                    } else {
                        Expect::Refused { holder }
                    }
                }
            }
            Op::Release { via, back } => {
                let lock = self.lock_back(*back);
                self.ends(*via, lock);
                let allowed = if self.item.as_ref().is_some_and(|s| s.lock == lock) {
                    // Its own item goes, whether or not its lease has ended.
                    self.end_hold();
                    vec![ReleaseAnswer::Released]
                } else if let Some(kept) = self.kept.as_ref().filter(|k| k.lock == lock) {
                    vec![ReleaseAnswer::AlreadyReleased {
                        released_at: kept.released_at,
                    }]
                } else {
                    vec![live.map_or(ReleaseAnswer::NotFound, ReleaseAnswer::NotOwner)]
                };
                Expect::Release(with_lost_answer(allowed, lost))
            }
            Op::ReleaseOwned { via, owner } => {
                // The client's holds of the owner's locks end; so does the lock it removes.
                let owned: Vec<usize> = (0..self.acquisitions)
                    .filter(|&k| self.owners[k] == *owner)
                    .collect();
                for k in owned {
                    if self.holds.contains_key(&(*via, k)) {
                        self.ends(*via, k);
                    }
                }
                if let Some(removed) = self.item.as_ref().filter(|s| s.owner == *owner) {
                    self.ended.insert((*via, removed.lock));
                }
                let allowed = if self.item.as_ref().is_some_and(|s| s.owner == *owner) {
                    self.end_hold();
                    vec![ReleaseAnswer::Released]
                } else if let Some(kept) = self.kept.as_ref().filter(|k| k.released_by == *owner) {
                    vec![ReleaseAnswer::AlreadyReleased {
                        released_at: kept.released_at,
                    }]
                } else {
                    vec![live.map_or(ReleaseAnswer::NotFound, ReleaseAnswer::NotOwner)]
                };
                Expect::Release(with_lost_answer(allowed, lost))
            }
            Op::Extend {
                via,
                back,
                lease_ms,
                payload,
            } => {
                let lock = self.lock_back(*back);
                let asked = self.asked_end(*via, lock, now, *lease_ms);
                let extension = self.extension(lock, now, asked, payload);
                match extension {
                    Extension::Extended(_) => self.holds_now(*via, lock),
                    _ => self.ends(*via, lock),
                }
                Expect::Extend(extension)
            }
            Op::ForceRelease { via } => {
                // Every hold of the client on the resource ends, and the lock it removes.
                let held: Vec<usize> = self
                    .holds
                    .keys()
                    .filter(|(v, _)| v == via)
                    .map(|(_, k)| *k)
                    .collect();
                for k in held {
                    self.ends(*via, k);
                }
                if let Some(removed) = &self.item {
                    self.ended.insert((*via, removed.lock));
                }
                self.end_hold();
                // Deleted by the first attempt, the retry finds nothing: it cannot name the holder.
                let mut allowed = vec![live.clone()];
                if lost && live.is_some() {
                    allowed.push(None);
                }
                Expect::ForceRelease(allowed)
            }
            Op::Status { .. } => Expect::Status(live),
            Op::Advance { ms } => {
                self.now += ms;
                Expect::Nothing
            }
            Op::TtlDelete => {
                let delete = self.item.is_some() && live.is_none();
                if delete {
                    self.item = None;
                }
                Expect::TtlDelete { delete }
            }
        };
        self
    }
}

pub(crate) struct Reference<L>(std::marker::PhantomData<L>);

impl<L: OnLayout> ReferenceStateMachine for Reference<L> {
    type State = Model;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<Model> {
        Just(Model {
            keep: L::LAYOUT.keeps_items(),
            ..Model::default()
        })
        .boxed()
    }

    fn transitions(model: &Model) -> BoxedStrategy<Op> {
        let via = || {
            prop_oneof![
                3 => Just(Via::ClientA),
                3 => Just(Via::ClientB),
                2 => Just(Via::LostAnswer),
            ]
        };
        let owner = || prop::sample::select(&OWNERS[..]);
        let lease = || prop::sample::select(&LEASES_MS[..]);
        let payload = || prop::sample::select(&PAYLOADS[..]);
        let acquisition = (
            via(),
            owner(),
            lease(),
            any::<bool>(),
            any::<bool>(),
            prop::option::of(payload()),
        )
            .prop_map(
                |(via, owner, lease_ms, idempotent, fencing, data)| Acquisition {
                    via,
                    owner,
                    lease_ms,
                    idempotent,
                    fencing,
                    data,
                },
            );
        let mut ops = vec![
            (4, acquisition.clone().prop_map(Op::TryAcquire).boxed()),
            (2, acquisition.prop_map(Op::AcquireNoWait).boxed()),
            (
                1,
                (via(), owner())
                    .prop_map(|(via, owner)| Op::ReleaseOwned { via, owner })
                    .boxed(),
            ),
            (1, via().prop_map(|via| Op::ForceRelease { via }).boxed()),
            (2, via().prop_map(|via| Op::Status { via }).boxed()),
            (
                4,
                prop::sample::select(&STEPS_MS[..])
                    .prop_map(|ms| Op::Advance { ms })
                    .boxed(),
            ),
            (1, Just(Op::TtlDelete).boxed()),
        ];
        if model.acquisitions > 0 {
            let n = model.acquisitions;
            // Mostly the latest lock, often a stale one.
            let back = || prop_oneof![Just(0), 0..n];
            ops.push((
                3,
                (via(), back())
                    .prop_map(|(via, back)| Op::Release { via, back })
                    .boxed(),
            ));
            let payload = prop_oneof![
                2 => Just(Payload::Keep),
                1 => payload().prop_map(Payload::Replace),
                1 => Just(Payload::Remove),
            ];
            ops.push((
                3,
                (via(), back(), lease(), payload)
                    .prop_map(|(via, back, lease_ms, payload)| Op::Extend {
                        via,
                        back,
                        lease_ms,
                        payload,
                    })
                    .boxed(),
            ));
        }
        Union::new_weighted(ops).boxed()
    }

    fn apply(model: Model, op: &Op) -> Model {
        model.step(op)
    }

    /// A shrunk sequence may have lost the acquisition a release or extension refers to.
    fn preconditions(model: &Model, op: &Op) -> bool {
        match op {
            Op::Release { back, .. } | Op::Extend { back, .. } => *back < model.acquisitions,
            _ => true,
        }
    }
}
