//! A model-based test of the whole client: random sequences of operations on one resource, run
//! against the real client and the local endpoint, every outcome checked against a small reference
//! model of that resource's lock state.
//!
//! The model ([`Model`]) knows the lock item (which acquisition holds it, owner, acquisition time,
//! lease end, whether it was fenced, payload) and "now". The fencing tokens themselves are guessed
//! by the client, so the test keeps the highest one returned (the fence's high-water mark) and
//! checks that every fenced acquisition gets a larger one. The operations ([`Op`]): `try_acquire`
//! and `acquire` with a zero timeout (idempotent or not, fenced or not, with or without data),
//! `release` of any lock ever returned (the current one or a stale one), `release_owned`, `extend`
//! and `extend_and_replace_data`, `force_release`, `status`, the passage of time, and deletion of
//! the item as DynamoDB's TTL would do it. They come from three owners, each through either of two
//! clients (so owners share a client, and an owner uses several), and any of them may go through a
//! third client behind a proxy that drops the answer after the endpoint applied the request, so
//! the SDK retries ([`Via::LostAnswer`]). Sequences are generated, run and shrunk by
//! `proptest-state-machine`; a failure names the step, the operation, its answer and what the model
//! allowed, after the shrunk sequence.
//!
//! All clients share one clock that only the test moves ([`SteppedClock`]): DynamoDB Local does
//! not judge time (the client sends `:now`), so leases end with no sleeping, exactly on the
//! millisecond the model says, and both sides of every boundary (`ExpiresAt == now`, one
//! millisecond later) come up often.
//!
//! After every step the stored lock item and fence item are read back (two GetItems at the keys
//! the schema gives) and compared with the model, so a wrong write is caught at the step that made
//! it, not only when an answer later shows it.
//!
//! The state machine runs three times ([`Layout`]): on the default table layout; on a table of the
//! user's own keyed by `id` alone, with key prefixes `lock:` and `fence:` and its TTL on the
//! reserved word `ttl`; and with releases that keep the item (`delete_on_release(false)`), where the
//! model also knows the kept item (the last holder's `LockID` and payload) and that a keeping
//! acquisition keeps the payload it finds unless it sets one.
//!
//! The extension rule is the one being introduced: an extension never shortens the stored lease
//! ([`extended_expiry`]); asking for less leaves it as it is and still answers `Extended`, with the
//! stored lease end. The model takes it that `extend_and_replace_data` still replaces (or removes)
//! the payload then, and that `TTL` always follows the stored `ExpiresAt`.
//!
//! Run: `cargo test -p ddb-lock --test model_based` with `DYNAMODB_ENDPOINT` set.
//! `PROPTEST_CASES` changes the number of cases (default [`CASES`]).

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use ddb_lock::item::{ACQUIRED_AT, DATA, EXPIRES_AT, FENCING_TOKEN, LOCK_ID, OWNER, TTL};
use ddb_lock::{
    AcquireOptions, Clock, Error, ExtendOutcome, FencingToken, Holder, Lock, LockClient,
    LockClientBuilder, LockId, LockStatus, ReleaseOutcome, TableSchema,
};
use ddb_lock_test_kit::proxy::Proxy;
use ddb_lock_test_kit::{
    builder, dynamodb, endpoint, lock_client, quickly_retrying_dynamodb, stored, unique,
};
use proptest::prelude::*;
use proptest::strategy::Union;
use proptest::test_runner::Config;
use proptest_state_machine::{prop_state_machine, ReferenceStateMachine, StateMachineTest};
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

/// Cases per run, unless `PROPTEST_CASES` says otherwise; each runs up to [`MAX_STEPS`] steps.
const CASES: u32 = 48;
const MAX_STEPS: usize = 40;

const OWNERS: [&str; 3] = ["alice", "bob", "carol"];
const PAYLOADS: [&str; 2] = ["a", "bb"];
/// Leases and clock steps in milliseconds: multiples of one another, so that a lease often ends
/// exactly at "now", and one millisecond to step just past it.
const LEASES_MS: [i64; 3] = [1000, 2000, 3000];
const STEPS_MS: [i64; 4] = [1, 1000, 2000, 3000];
/// The clients' default `ttl_grace`: `TTL` is `ExpiresAt` plus this, in epoch seconds.
const TTL_GRACE: TimeDelta = TimeDelta::hours(1);

// ---------------------------------------------------------------------------------------------
// Time

/// Where the clock of every case starts; the model counts milliseconds from here.
fn start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0)
        .single()
        .expect("a valid date")
}

/// The instant `ms` milliseconds after [`start`].
fn at(ms: i64) -> DateTime<Utc> {
    start() + TimeDelta::milliseconds(ms)
}

/// The one clock of all clients of a case: [`start`] plus an offset that only the test moves.
#[derive(Debug, Default)]
struct SteppedClock {
    offset_ms: AtomicI64,
}

impl SteppedClock {
    fn set(&self, ms: i64) {
        self.offset_ms.store(ms, Ordering::SeqCst);
    }
}

impl Clock for SteppedClock {
    fn now(&self) -> DateTime<Utc> {
        at(self.offset_ms.load(Ordering::SeqCst))
    }
}

// ---------------------------------------------------------------------------------------------
// Operations

/// Which client makes a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
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
struct Acquisition {
    via: Via,
    owner: &'static str,
    lease_ms: i64,
    idempotent: bool,
    fencing: bool,
    data: Option<&'static str>,
}

/// What an extension does to the payload.
#[derive(Debug, Clone, Copy)]
enum Payload {
    /// `extend`
    Keep,
    /// `extend_and_replace_data(Some(..))`
    Replace(&'static str),
    /// `extend_and_replace_data(None)`
    Remove,
}

#[derive(Debug, Clone)]
enum Op {
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
    fn via(&self) -> Option<Via> {
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
struct Stored {
    /// Which lock ever returned this is (counting from 0).
    lock: usize,
    owner: &'static str,
    acquired_at: i64,
    expires_at: i64,
    fenced: bool,
    data: Option<&'static str>,
}

impl Stored {
    /// Live up to and including the millisecond its lease ends.
    fn live_at(&self, now: i64) -> bool {
        self.expires_at >= now
    }
}

/// An item kept by a release (`delete_on_release(false)`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Kept {
    /// The lock whose `LockID` it keeps.
    lock: usize,
    data: Option<&'static str>,
}

/// The reference model of one resource, and what it allows the last operation to answer.
#[derive(Debug, Clone, Default)]
struct Model {
    now: i64,
    item: Option<Stored>,
    /// Whether releases keep the item (`delete_on_release(false)`).
    keep: bool,
    /// The item a release kept: no holder, the last holder's `LockID` and payload.
    kept: Option<Kept>,
    /// How many distinct locks (acquisitions) have been returned.
    acquisitions: usize,
    expect: Expect,
}

/// What the model allows an operation to answer.
#[derive(Debug, Clone, Default)]
enum Expect {
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
enum ReleaseAnswer {
    Released,
    NotFound,
    NotOwner(Stored),
}

#[derive(Debug, Clone)]
enum Extension {
    Extended(Stored),
    Expired { expired_at: i64 },
    NotFound,
    NotOwner(Stored),
}

/// Acquire wins iff there is no item or its lease ended strictly before now
/// (`attribute_not_exists(PK) OR ExpiresAt < :now`).
fn acquire_wins(item: Option<&Stored>, now: i64) -> bool {
    item.is_none_or(|s| s.expires_at < now)
}

/// The lease end an extension leaves stored: an extension never shortens a stored lease, so that a
/// late or reordered extension cannot leave its holder believing in a longer lease than stored.
/// Asking for less than is left keeps the stored end (and still answers `Extended`).
fn extended_expiry(stored_expires_at: i64, now: i64, lease_ms: i64) -> i64 {
    stored_expires_at.max(now + lease_ms)
}

/// A release whose answer was lost is retried, and the retry cannot tell our own first attempt's
/// deletion from anything else: it may answer `NotFound` instead of what the first attempt found
/// (but never `NotOwner` for its own lock, which `allowed` then does not contain).
fn with_lost_answer(mut allowed: Vec<ReleaseAnswer>, lost: bool) -> Vec<ReleaseAnswer> {
    if lost && !allowed.contains(&ReleaseAnswer::NotFound) {
        allowed.push(ReleaseAnswer::NotFound);
    }
    allowed
}

impl Model {
    /// The lock item goes: deleted, or, when releases keep items, kept without its holder.
    fn end_hold(&mut self) {
        if let Some(s) = self.item.take() {
            if self.keep {
                self.kept = Some(Kept {
                    lock: s.lock,
                    data: s.data,
                });
            }
        }
    }

    /// The number of the lock returned `back` acquisitions before the latest.
    fn lock_back(&self, back: usize) -> usize {
        self.acquisitions - 1 - back
    }

    fn step(mut self, op: &Op) -> Model {
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
                    self.kept = None;
                    self.item = Some(lock.clone());
                    Expect::Acquired { lock, new: true }
                } else {
                    let holder = live.expect("an item that refuses an acquire is live");
                    // A fenced request is not handed back an unfenced lock: no token to give.
                    if a.idempotent && holder.owner == a.owner && (holder.fenced || !a.fencing) {
                        Expect::Acquired {
                            lock: holder,
                            new: false,
                        }
                    } else {
                        Expect::Refused { holder }
                    }
                }
            }
            Op::Release { back, .. } => {
                let lock = self.lock_back(*back);
                let allowed = if self.item.as_ref().is_some_and(|s| s.lock == lock) {
                    // Its own item goes, whether or not its lease has ended.
                    self.end_hold();
                    vec![ReleaseAnswer::Released]
                } else {
                    vec![live.map_or(ReleaseAnswer::NotFound, ReleaseAnswer::NotOwner)]
                };
                Expect::Release(with_lost_answer(allowed, lost))
            }
            Op::ReleaseOwned { owner, .. } => {
                let allowed = if self.item.as_ref().is_some_and(|s| s.owner == *owner) {
                    self.end_hold();
                    vec![ReleaseAnswer::Released]
                } else {
                    vec![live.map_or(ReleaseAnswer::NotFound, ReleaseAnswer::NotOwner)]
                };
                Expect::Release(with_lost_answer(allowed, lost))
            }
            Op::Extend {
                back,
                lease_ms,
                payload,
                ..
            } => Expect::Extend(match (self.lock_back(*back), &mut self.item) {
                (lock, Some(s)) if s.lock == lock && s.live_at(now) => {
                    s.expires_at = extended_expiry(s.expires_at, now, *lease_ms);
                    match payload {
                        Payload::Keep => {}
                        Payload::Replace(data) => s.data = Some(*data),
                        Payload::Remove => s.data = None,
                    }
                    Extension::Extended(s.clone())
                }
                (lock, Some(s)) if s.lock == lock => Extension::Expired {
                    expired_at: s.expires_at,
                },
                _ => live.map_or(Extension::NotFound, Extension::NotOwner),
            }),
            Op::ForceRelease { .. } => {
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

struct Reference<L>(std::marker::PhantomData<L>);

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

// ---------------------------------------------------------------------------------------------
// The system under test

/// The table the state machine runs on.
#[derive(Debug, Clone, Copy)]
enum Layout {
    /// The shared test table, default schema (`PK`/`SK`, `LOCK#`, `TTL`).
    Default,
    /// A table keyed by `id` alone: `lock:<resource>`, `fence:<resource>`, TTL on `ttl`.
    IdOnly,
    /// The shared test table, with releases that keep the item (`delete_on_release(false)`).
    Kept,
}

impl Layout {
    fn table(self) -> &'static str {
        match self {
            Layout::Default | Layout::Kept => ddb_lock_test_kit::TABLE,
            Layout::IdOnly => "ddb-lock-model-id-only",
        }
    }

    fn schema(self) -> TableSchema {
        match self {
            Layout::Default | Layout::Kept => TableSchema::new(),
            Layout::IdOnly => ddb_lock_test_kit::schemas::id_only(),
        }
    }

    fn keeps_items(self) -> bool {
        matches!(self, Layout::Kept)
    }

    /// A builder for this layout's table over `dynamodb`.
    fn builder(self, dynamodb: aws_sdk_dynamodb::Client) -> LockClientBuilder {
        builder(dynamodb)
            .table_name(self.table())
            .schema(self.schema())
            .delete_on_release(!self.keeps_items())
    }

    /// Creates the table once per test process.
    fn ready(self) {
        static DEFAULT: Once = Once::new();
        static ID_ONLY: Once = Once::new();
        let once = match self {
            Layout::Default | Layout::Kept => &DEFAULT,
            Layout::IdOnly => &ID_ONLY,
        };
        once.call_once(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async {
                lock_client().await;
                let client = self.builder(dynamodb()).build().expect("valid schema");
                client.create_table().await.expect("the layout's table");
            });
        });
    }
}

struct Sut {
    layout: Layout,
    runtime: tokio::runtime::Runtime,
    resource: String,
    clock: Arc<SteppedClock>,
    client_a: LockClient,
    client_b: LockClient,
    lossy: LockClient,
    proxy: Proxy,
    /// Every lock returned, by acquisition number, as last returned (acquired or extended).
    locks: Vec<Lock>,
    /// The highest fencing token returned so far.
    fence: Option<FencingToken>,
    step: usize,
    last_op: String,
}

/// A returned lock as the model can predict it: which acquisition (by its `LockID`), owner,
/// times and token.
#[derive(Debug, PartialEq, Eq)]
struct LockView {
    acquisition: Option<usize>,
    owner: String,
    acquired_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
    fencing_token: Option<FencingToken>,
}

/// An acquisition attempt's answer: the lock, or refused (with the holder, if the call names it).
#[derive(Debug, PartialEq, Eq)]
enum Attempted {
    Acquired(LockView),
    Held(Option<Holder>),
}

/// An extension's answer, with the lock as a [`LockView`].
#[derive(Debug, PartialEq, Eq)]
enum ExtendView {
    Extended(LockView),
    Expired { expired_at: DateTime<Utc> },
    NotFound,
    NotOwner { holder: Holder },
}

/// Fails the test naming the step, the operation, what it answered and what the model allows.
#[track_caller]
fn not_allowed(step: usize, op: &Op, answered: &dyn Debug, allowed: &dyn Debug) -> ! {
    panic!(
        "step {step}: {op:?}\n  answered: {answered:?}\n  but the model allows only: {allowed:?}"
    )
}

impl Sut {
    fn new(layout: Layout) -> Sut {
        layout.ready();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let clock = Arc::new(SteppedClock::default());
        let with_clock = |b: LockClientBuilder| {
            b.clock(clock.clone() as Arc<dyn Clock>)
                .build()
                .expect("valid settings")
        };
        let proxy = runtime.block_on(Proxy::start(&endpoint()));
        // As `quickly_retrying_client`, with the shared clock.
        let lossy = with_clock(layout.builder(quickly_retrying_dynamodb(&proxy.endpoint())));
        Sut {
            layout,
            resource: unique("model"),
            client_a: with_clock(layout.builder(dynamodb())),
            client_b: with_clock(layout.builder(dynamodb())),
            lossy,
            proxy,
            clock,
            runtime,
            locks: Vec::new(),
            fence: None,
            step: 0,
            last_op: "nothing yet".into(),
        }
    }

    /// The request that ends a hold: a DeleteItem, or an UpdateItem when releases keep the item.
    fn release_operation(&self) -> &'static str {
        if self.layout.keeps_items() {
            "UpdateItem"
        } else {
            "DeleteItem"
        }
    }

    /// The client for `via`; for [`Via::LostAnswer`], the next answer of `operation` is dropped.
    /// Returns the proxy's count of dropped `operation` answers before the call, to check after it.
    fn client(&self, via: Via, operation: &'static str) -> (&LockClient, Option<usize>) {
        match via {
            Via::ClientA => (&self.client_a, None),
            Via::ClientB => (&self.client_b, None),
            Via::LostAnswer => {
                let before = self.proxy.counts(operation).dropped;
                self.proxy.drop_next_answer(operation);
                (&self.lossy, Some(before))
            }
        }
    }

    /// The answer really was lost and the request really sent again.
    fn check_dropped(&self, operation: &'static str, before: Option<usize>) {
        if let Some(before) = before {
            let counts = self.proxy.counts(operation);
            assert_eq!(
                counts.dropped,
                before + 1,
                "step {}: the proxy did not drop the {operation} answer: {counts:?}",
                self.step
            );
        }
    }

    /// An operation's answer, or the test fails naming the operation and the error.
    fn answer<T>(&self, op: &Op, result: Result<T, Error>) -> T {
        result.unwrap_or_else(|err| {
            panic!(
                "step {}: {op:?}\n  failed: {err:?}\n  the model allows no error here",
                self.step
            )
        })
    }

    fn token(&self, lock: usize) -> Option<FencingToken> {
        self.locks.get(lock).and_then(Lock::fencing_token)
    }

    fn holder(&self, s: &Stored) -> Holder {
        Holder {
            owner: s.owner.to_owned(),
            acquired_at: at(s.acquired_at),
            expires_at: at(s.expires_at),
            fencing_token: self.token(s.lock),
            data: s.data.map(|d| d.as_bytes().to_vec()),
        }
    }

    fn acquisition_of(&self, id: LockId) -> Option<usize> {
        self.locks.iter().position(|l| l.lock_id() == id)
    }

    fn view(&self, lock: &Lock) -> LockView {
        LockView {
            acquisition: self.acquisition_of(lock.lock_id()),
            owner: lock.owner().to_owned(),
            acquired_at: lock.acquired_at(),
            expires_at: lock.expires_at(),
            fencing_token: lock.fencing_token(),
        }
    }

    fn expected_view(&self, s: &Stored) -> LockView {
        LockView {
            acquisition: Some(s.lock),
            owner: s.owner.to_owned(),
            acquired_at: at(s.acquired_at),
            expires_at: at(s.expires_at),
            fencing_token: self.token(s.lock),
        }
    }

    fn extend_view(&self, answer: &ExtendOutcome) -> ExtendView {
        match answer {
            ExtendOutcome::Extended(lock) => ExtendView::Extended(self.view(lock)),
            ExtendOutcome::Expired { expired_at } => ExtendView::Expired {
                expired_at: *expired_at,
            },
            ExtendOutcome::NotFound => ExtendView::NotFound,
            ExtendOutcome::NotOwner { holder } => ExtendView::NotOwner {
                holder: holder.clone(),
            },
        }
    }

    fn expected_extension(&self, expected: &Extension) -> ExtendView {
        match expected {
            Extension::Extended(s) => ExtendView::Extended(self.expected_view(s)),
            Extension::Expired { expired_at } => ExtendView::Expired {
                expired_at: at(*expired_at),
            },
            Extension::NotFound => ExtendView::NotFound,
            Extension::NotOwner(s) => ExtendView::NotOwner {
                holder: self.holder(s),
            },
        }
    }

    fn run(&mut self, model: &Model, op: &Op) {
        let step = self.step;
        let resource = self.resource.clone();
        match op {
            Op::TryAcquire(a) | Op::AcquireNoWait(a) => {
                let operation = match (a.fencing, self.layout.keeps_items()) {
                    (true, _) => "TransactWriteItems",
                    (false, false) => "PutItem",
                    (false, true) => "UpdateItem",
                };
                let mut opts = AcquireOptions::new()
                    .owner(a.owner)
                    .lease(Duration::from_millis(a.lease_ms.unsigned_abs()))
                    .idempotent(a.idempotent)
                    .fencing(a.fencing);
                if let Some(data) = a.data {
                    opts = opts.data(data.as_bytes().to_vec());
                }
                let (client, dropped) = self.client(a.via, operation);
                // Ok(lock), or Err(the holder if the call names it).
                let answer: Result<Lock, Option<Holder>> = if let Op::TryAcquire(_) = op {
                    let result = self.runtime.block_on(client.try_acquire(&resource, &opts));
                    self.answer(op, result).ok_or(None)
                } else {
                    let opts = opts.timeout(Duration::ZERO);
                    match self.runtime.block_on(client.acquire(&resource, &opts)) {
                        Err(Error::Timeout { holder, .. }) => Err(Some(*holder)),
                        result => Ok(self.answer(op, result)),
                    }
                };
                self.check_dropped(operation, dropped);
                self.check_acquisition(model, op, answer);
            }
            Op::Release { via, back } => {
                let (client, dropped) = self.client(*via, self.release_operation());
                let lock = &self.locks[model.lock_back(*back)];
                let result = self.runtime.block_on(client.release(lock));
                let answer = self.answer(op, result);
                self.check_dropped(self.release_operation(), dropped);
                self.check_release(model, op, answer);
            }
            Op::ReleaseOwned { via, owner } => {
                let (client, dropped) = self.client(*via, self.release_operation());
                let result = self
                    .runtime
                    .block_on(client.release_owned(&resource, owner));
                let answer = self.answer(op, result);
                self.check_dropped(self.release_operation(), dropped);
                self.check_release(model, op, answer);
            }
            Op::Extend {
                via,
                back,
                lease_ms,
                payload,
            } => {
                let lock = model.lock_back(*back);
                let (client, dropped) = self.client(*via, "UpdateItem");
                let handle = &self.locks[lock];
                let lease = Duration::from_millis(lease_ms.unsigned_abs());
                let data = |d: &str| Some(d.as_bytes().to_vec());
                let result = self.runtime.block_on(async {
                    match payload {
                        Payload::Keep => client.extend(handle, lease).await,
                        Payload::Replace(d) => {
                            client.extend_and_replace_data(handle, lease, data(d)).await
                        }
                        Payload::Remove => {
                            client.extend_and_replace_data(handle, lease, None).await
                        }
                    }
                });
                let answer = self.answer(op, result);
                self.check_dropped("UpdateItem", dropped);
                let Expect::Extend(expected) = &model.expect else {
                    unreachable!("an extension is expected to answer as one")
                };
                let (got, want) = (self.extend_view(&answer), self.expected_extension(expected));
                if got != want {
                    not_allowed(step, op, &got, &want);
                }
                if let ExtendOutcome::Extended(got) = answer {
                    self.locks[lock] = got;
                }
            }
            Op::ForceRelease { via } => {
                let (client, dropped) = self.client(*via, self.release_operation());
                let result = self.runtime.block_on(client.force_release(&resource));
                let answer = self.answer(op, result);
                self.check_dropped(self.release_operation(), dropped);
                let Expect::ForceRelease(allowed) = &model.expect else {
                    unreachable!("a force release is expected to answer as one")
                };
                let allowed: Vec<Option<Holder>> = allowed
                    .iter()
                    .map(|s| s.as_ref().map(|s| self.holder(s)))
                    .collect();
                if !allowed.contains(&answer) {
                    not_allowed(step, op, &answer, &allowed);
                }
            }
            Op::Status { via } => {
                let (client, dropped) = self.client(*via, "GetItem");
                let result = self.runtime.block_on(client.status(&resource));
                let answer = self.answer(op, result);
                self.check_dropped("GetItem", dropped);
                let Expect::Status(expected) = &model.expect else {
                    unreachable!("a status is expected to answer as one")
                };
                let expected = match expected {
                    None => LockStatus::Free,
                    Some(s) => LockStatus::Held {
                        holder: self.holder(s),
                        remaining: Duration::from_millis((s.expires_at - model.now).unsigned_abs()),
                    },
                };
                if answer != expected {
                    not_allowed(step, op, &answer, &expected);
                }
            }
            Op::Advance { .. } => self.clock.set(model.now),
            Op::TtlDelete => {
                if let Expect::TtlDelete { delete: true } = model.expect {
                    self.runtime.block_on(async {
                        dynamodb()
                            .delete_item()
                            .table_name(self.layout.table())
                            .set_key(Some(self.layout.schema().lock_key(&self.resource)))
                            .send()
                            .await
                            .expect("DeleteItem of the lock item")
                    });
                }
            }
        }
    }

    fn check_acquisition(&mut self, model: &Model, op: &Op, answer: Result<Lock, Option<Holder>>) {
        let step = self.step;
        if let (Expect::Acquired { lock: s, new: true }, Ok(lock)) = (&model.expect, &answer) {
            // A new acquisition: fenced iff asked, with a token above every earlier one.
            let token = lock.fencing_token();
            let token_ok = match (s.fenced, token) {
                (true, Some(t)) => self.fence.is_none_or(|high| t > high),
                (false, None) => true,
                _ => false,
            };
            if !token_ok {
                let rule = format!(
                    "a new lock with fencing_token {} above every earlier one ({:?})",
                    if s.fenced { "Some" } else { "None, not" },
                    self.fence
                );
                not_allowed(step, op, &self.view(lock), &rule);
            }
            if self.acquisition_of(lock.lock_id()).is_none() {
                self.locks.push(lock.clone());
                if token.is_some() {
                    self.fence = token;
                }
            }
        }
        let got = match &answer {
            Ok(lock) => Attempted::Acquired(self.view(lock)),
            Err(holder) => Attempted::Held(holder.clone()),
        };
        let want = match &model.expect {
            Expect::Acquired { lock, .. } => Attempted::Acquired(self.expected_view(lock)),
            Expect::Refused { holder } => Attempted::Held(Some(self.holder(holder))),
            other => unreachable!("an acquisition is expected to answer as one, not {other:?}"),
        };
        // `try_acquire` does not name the holder that refused it.
        let unnamed = matches!((&got, &want), (Attempted::Held(None), Attempted::Held(_)));
        if got != want && !unnamed {
            not_allowed(step, op, &got, &want);
        }
    }

    fn check_release(&self, model: &Model, op: &Op, answer: ReleaseOutcome) {
        let Expect::Release(allowed) = &model.expect else {
            unreachable!("a release is expected to answer as one")
        };
        let allowed: Vec<ReleaseOutcome> = allowed
            .iter()
            .map(|r| match r {
                ReleaseAnswer::Released => ReleaseOutcome::Released,
                ReleaseAnswer::NotFound => ReleaseOutcome::NotFound,
                ReleaseAnswer::NotOwner(s) => ReleaseOutcome::NotOwner {
                    holder: self.holder(s),
                },
            })
            .collect();
        if !allowed.contains(&answer) {
            not_allowed(self.step, op, &answer, &allowed);
        }
    }

    /// The stored lock and fence items, attribute by attribute as the model can predict them.
    fn stored_items(&self) -> (BTreeMap<&'static str, String>, Option<String>) {
        let schema = self.layout.schema();
        let read = |key: HashMap<String, AttributeValue>| {
            self.runtime.block_on(async {
                dynamodb()
                    .get_item()
                    .table_name(self.layout.table())
                    .set_key(Some(key))
                    .consistent_read(true)
                    .send()
                    .await
                    .expect("GetItem of the resource's item")
                    .item
            })
        };
        let show = |item: &HashMap<String, AttributeValue>, name: &str| {
            item.get(name).map(|value| match value {
                AttributeValue::S(v) | AttributeValue::N(v) => v.clone(),
                AttributeValue::B(b) => String::from_utf8_lossy(b.as_ref()).into_owned(),
                other => format!("{other:?}"),
            })
        };
        let mut lock = BTreeMap::new();
        if let Some(item) = read(schema.lock_key(&self.resource)) {
            let ttl = schema.ttl_attribute_name().expect("a TTL attribute");
            for (name, stored_as) in [
                (ACQUIRED_AT, ACQUIRED_AT),
                (DATA, DATA),
                (EXPIRES_AT, EXPIRES_AT),
                (FENCING_TOKEN, FENCING_TOKEN),
                (LOCK_ID, LOCK_ID),
                (OWNER, OWNER),
                (TTL, ttl),
            ] {
                if let Some(value) = show(&item, stored_as) {
                    lock.insert(name, value);
                }
            }
        }
        let fence =
            read(schema.fence_key(&self.resource)).and_then(|item| show(&item, FENCING_TOKEN));
        (lock, fence)
    }

    /// The same, as the model says they must be.
    fn model_items(&self, model: &Model) -> (BTreeMap<&'static str, String>, Option<String>) {
        let mut lock = BTreeMap::new();
        if let Some(s) = &model.item {
            let expires_at = at(s.expires_at);
            lock.insert(ACQUIRED_AT, stored(at(s.acquired_at)));
            lock.insert(EXPIRES_AT, stored(expires_at));
            // Whole epoch seconds, rounded up: never before the lease has ended.
            let deletable = expires_at + TTL_GRACE;
            let ttl = deletable.timestamp() + i64::from(deletable.timestamp_subsec_millis() > 0);
            lock.insert(TTL, ttl.to_string());
            lock.insert(OWNER, s.owner.to_owned());
            let lock_id = self.locks.get(s.lock).map(|l| l.lock_id().to_string());
            lock.insert(
                LOCK_ID,
                lock_id.unwrap_or_else(|| "(never returned)".into()),
            );
            if let Some(token) = self.token(s.lock) {
                lock.insert(FENCING_TOKEN, token.value().to_string());
            }
            if let Some(data) = s.data {
                lock.insert(DATA, data.to_owned());
            }
        }
        if let Some(kept) = &model.kept {
            let lock_id = self.locks.get(kept.lock).map(|l| l.lock_id().to_string());
            lock.insert(
                LOCK_ID,
                lock_id.unwrap_or_else(|| "(never returned)".into()),
            );
            if let Some(data) = kept.data {
                lock.insert(DATA, data.to_owned());
            }
        }
        (lock, self.fence.map(|t| t.value().to_string()))
    }
}

/// The state machine on a [`Layout`], named by a type for `prop_state_machine!`.
trait OnLayout: 'static {
    const LAYOUT: Layout;
}

/// On the default layout.
struct DefaultLayout;
impl OnLayout for DefaultLayout {
    const LAYOUT: Layout = Layout::Default;
}

/// On a table keyed by `id` alone.
struct IdOnlyLayout;
impl OnLayout for IdOnlyLayout {
    const LAYOUT: Layout = Layout::IdOnly;
}

/// With releases that keep the item.
struct KeptLayout;
impl OnLayout for KeptLayout {
    const LAYOUT: Layout = Layout::Kept;
}

struct ModelBased<L>(std::marker::PhantomData<L>);

impl<L: OnLayout> StateMachineTest for ModelBased<L> {
    type SystemUnderTest = Sut;
    type Reference = Reference<L>;

    fn init_test(_model: &Model) -> Sut {
        Sut::new(L::LAYOUT)
    }

    fn apply(mut sut: Sut, model: &Model, op: Op) -> Sut {
        sut.step += 1;
        sut.last_op = format!("{op:?}");
        sut.run(model, &op);
        sut
    }

    /// After every step, the stored items are what the model says.
    fn check_invariants(sut: &Sut, model: &Model) {
        let (stored, expected) = (sut.stored_items(), sut.model_items(model));
        assert!(
            stored == expected,
            "after step {} ({}) on {:?}: the stored (lock item, fence token) differ from the \
             model's\n  stored: {stored:?}\n  model:  {expected:?}\n  model state: {model:?}",
            sut.step,
            sut.last_op,
            sut.layout,
        );
    }
}

/// `cases` cases, unless `PROPTEST_CASES` says otherwise.
fn config(cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(cases);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

prop_state_machine! {
    #![proptest_config(config(CASES))]

    #[test]
    fn every_outcome_of_a_random_sequence_of_operations_is_one_the_model_allows(
        sequential 1..MAX_STEPS => ModelBased<DefaultLayout>
    );
}

prop_state_machine! {
    // Half the cases: the operations are the same, only the names and keys differ.
    #![proptest_config(config(CASES / 2))]

    #[test]
    fn on_a_table_keyed_by_id_alone_every_outcome_is_one_the_model_allows(
        sequential 1..MAX_STEPS => ModelBased<IdOnlyLayout>
    );
}

prop_state_machine! {
    // Half the cases: the same operations, with every release keeping the item and its payload.
    #![proptest_config(config(CASES / 2))]

    #[test]
    fn with_items_kept_on_release_every_outcome_is_one_the_model_allows(
        sequential 1..MAX_STEPS => ModelBased<KeptLayout>
    );
}
