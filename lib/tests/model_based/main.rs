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
//! The extension rule: an extension never shortens the stored lease; asking for less leaves it as
//! it is and still answers `Extended`, with the stored lease end. A client that has not ended the
//! lock (took it, was handed it back, or extends it, from its first extension on) asks for an end
//! a millisecond past every end it asked for before, when a lease from now would not reach past
//! them ([`Model::asked_end`]). The model takes it that `extend_and_replace_data` still replaces (or removes)
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
use std::collections::{HashMap, HashSet};
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

mod model;
mod sut;

use model::*;
use sut::*;

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
