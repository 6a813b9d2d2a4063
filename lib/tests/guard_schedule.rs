//! Random schedules of guards on one resource, deterministic given a seed: several clients (each
//! behind its own fault-injecting proxy, all reading one adjustable clock) take guards, replace
//! their data, release them, drop them, cancel their releases at the first await, suffer dropped
//! and delayed answers, and see time jump past every lease. After every step the invariants are
//! checked against the stored item:
//!
//! - a guard that says it is held, and whose lease end (as it believes it) has not passed on the
//!   shared clock, finds its own acquisition in the item with a lease end not before the one it
//!   believes: so no two such guards at once, no guard believing in more lease than is stored,
//!   and no live lock deleted by anyone else's release;
//! - a released or dropped guard's watch says lost at once;
//! - once every guard is released or dropped and their background releases have finished, the
//!   lock is free.
//!
//! `GUARD_SCHEDULE_SEEDS=a..b` (or one seed `a`) picks the seeds; a failure names its seed.

use ddb_lock::{AcquireOptions, Clock, LockClient, LockGuard, LockWatch};
use ddb_lock_test_kit::proxy::{Faults, Proxy};
use ddb_lock_test_kit::{
    builder, endpoint, lock_client, quickly_retrying_dynamodb, raw_item, stored, string_attr,
    unique, AdjustableClock,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::timeout;

/// Upper bound on any wait, so that a bug fails the test instead of hanging it.
const PATIENCE: Duration = Duration::from_secs(20);
const CLIENTS: usize = 3;
const STEPS: usize = 32;
const SEEDS: std::ops::Range<u64> = 0..32;
/// Long enough, on the monotonic clock, that only the clock's jumps expire a lease.
const LEASE: Duration = Duration::from_secs(4);
const HEARTBEAT: Duration = Duration::from_millis(700);
const OPERATIONS: [&str; 3] = ["PutItem", "UpdateItem", "DeleteItem"];

struct World {
    resource: String,
    clock: Arc<AdjustableClock>,
    proxies: Vec<Proxy>,
    clients: Vec<LockClient>,
    /// Open guards, with the step that took them.
    guards: Vec<(usize, LockGuard)>,
    /// Watches of the guards released or dropped.
    closed: Vec<LockWatch>,
}

#[tokio::test]
async fn random_schedules_of_guards_keep_the_invariants() {
    lock_client().await;
    for seed in ddb_lock_test_kit::seeds::from_env("GUARD_SCHEDULE_SEEDS", SEEDS) {
        let started = std::time::Instant::now();
        run(seed).await;
        eprintln!("seed {seed}: {:?}", started.elapsed());
    }
}

async fn run(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let clock = AdjustableClock::new();
    let mut proxies = Vec::new();
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let proxy = Proxy::start(&endpoint()).await;
        let dynamodb = quickly_retrying_dynamodb(&proxy.endpoint());
        clients.push(builder(dynamodb).clock(clock.clone()).build().unwrap());
        proxies.push(proxy);
    }
    let mut world = World {
        resource: unique(&format!("guard-schedule-{seed}")),
        clock,
        proxies,
        clients,
        guards: Vec::new(),
        closed: Vec::new(),
    };
    for step in 0..STEPS {
        let action = world.step(&mut rng, step).await;
        world.check(seed, step, &action).await;
    }
    world.finish(seed).await;
}

impl World {
    /// One random action; returns what it did, for failure messages.
    async fn step(&mut self, rng: &mut StdRng, step: usize) -> String {
        let roll = rng.random_range(0..100);
        let open = self.guards.len();
        let pick = |rng: &mut StdRng| rng.random_range(0..open.max(1));
        let client = rng.random_range(0..CLIENTS);
        match roll {
            0..30 => {
                let opts = AcquireOptions::new()
                    .owner(format!("client-{client}"))
                    .lease(LEASE)
                    .heartbeat(HEARTBEAT);
                match self.clients[client].try_lock(&self.resource, &opts).await {
                    Ok(Some(guard)) => {
                        self.guards.push((step, guard));
                        format!("client {client} took a guard")
                    }
                    Ok(None) => format!("client {client} found the lock held"),
                    Err(err) => format!("client {client} try_lock failed: {err}"),
                }
            }
            30..42 if open > 0 => {
                let (taken, guard) = self.guards.remove(pick(rng));
                let watch = guard.watch();
                let outcome = guard.release().await;
                self.closed.push(watch);
                format!("released the guard of step {taken}: {outcome:?}")
            }
            42..52 if open > 0 => {
                let (taken, guard) = self.guards.remove(pick(rng));
                self.closed.push(guard.watch());
                drop(guard);
                format!("dropped the guard of step {taken}")
            }
            52..62 if open > 0 => {
                let (taken, guard) = self.guards.remove(pick(rng));
                let watch = guard.watch();
                // Polled once and dropped at its first await (this is a current-thread runtime).
                let cancelled = tokio::time::timeout(Duration::ZERO, guard.release()).await;
                assert!(cancelled.is_err(), "a release finished in one poll");
                self.closed.push(watch);
                format!("cancelled the release of the guard of step {taken}")
            }
            62..72 if open > 0 => {
                let k = pick(rng);
                let data = format!("step {step}").into_bytes();
                let outcome = self.guards[k].1.replace_data(Some(data)).await;
                format!(
                    "replaced the data of the guard of step {}: {outcome:?}",
                    self.guards[k].0
                )
            }
            72..80 => {
                let operation = OPERATIONS[rng.random_range(0..OPERATIONS.len())];
                self.proxies[client].drop_next_answer(operation);
                format!("client {client}'s next {operation} answer will be dropped")
            }
            80..88 => {
                let latency = Duration::from_millis(rng.random_range(0..4) * 100);
                self.proxies[client].set_faults(Faults {
                    latency,
                    ..Faults::default()
                });
                format!("client {client}'s answers delayed by {latency:?}")
            }
            88..94 => {
                self.clock.advance(LEASE + Duration::from_secs(1));
                "the clock jumped past every lease".to_owned()
            }
            _ if self.guards.iter().any(|(_, guard)| guard.is_held()) => {
                // Let the background tasks (heartbeats, releases of dropped guards) run a while:
                // until one more request of any client has been answered (a held guard's
                // heartbeat makes one).
                let answered = self.answered();
                let _ = timeout(PATIENCE, self.any_answer_after(answered)).await;
                "waited for one more answer".to_owned()
            }
            _ => "nothing".to_owned(),
        }
    }

    /// Answers relayed, and dropped, by every proxy so far, per proxy and operation.
    fn answered(&self) -> Vec<usize> {
        self.proxies
            .iter()
            .flat_map(|p| OPERATIONS.map(|op| p.counts(op)))
            .map(|c| c.answered + c.dropped)
            .collect()
    }

    /// Completes when any proxy has answered (or dropped the answer of) one more request than
    /// `answered` says.
    async fn any_answer_after(&self, answered: Vec<usize>) {
        let mut waits = Vec::new();
        for (i, proxy) in self.proxies.iter().enumerate() {
            for (j, op) in OPERATIONS.into_iter().enumerate() {
                let seen = answered[i * OPERATIONS.len() + j];
                waits.push(Box::pin(
                    proxy.wait_for(op, move |c| c.answered + c.dropped > seen),
                ));
            }
        }
        any(waits).await;
    }

    async fn check(&self, seed: u64, step: usize, action: &str) {
        let now = self.clock.now();
        let held: Vec<_> = self
            .guards
            .iter()
            .filter_map(|(taken, guard)| {
                let lock = guard.lock()?;
                (guard.is_held() && lock.expires_at() >= now).then_some((*taken, lock))
            })
            .collect();
        let context = format!("seed {seed}, step {step} ({action})");
        for watch in &self.closed {
            assert!(
                !watch.is_held(),
                "{context}: a closed guard's watch says held"
            );
        }
        assert!(
            held.len() <= 1,
            "{context}: two guards held at once: {held:?}"
        );
        if let Some((taken, lock)) = held.first() {
            let item = raw_item(&self.resource).await.unwrap_or_else(|| {
                panic!("{context}: the guard of step {taken} says held but the lock item is gone")
            });
            assert_eq!(
                string_attr(&item, "LockID"),
                lock.lock_id().to_string(),
                "{context}: the guard of step {taken} says held but the item is another acquisition's"
            );
            let expires_at = string_attr(&item, "ExpiresAt");
            assert!(
                expires_at >= stored(lock.expires_at()).as_str(),
                "{context}: the guard of step {taken} believes its lease ends at {}, the item says {expires_at}",
                stored(lock.expires_at())
            );
        }
    }

    /// Releases or drops every open guard, then waits (event by event) until the lock is free.
    async fn finish(mut self, seed: u64) {
        for proxy in &self.proxies {
            proxy.set_faults(Faults::default());
        }
        for (i, (_, guard)) in self.guards.drain(..).enumerate() {
            self.closed.push(guard.watch());
            if i % 2 == 0 {
                let _ = guard.release().await;
            } else {
                drop(guard);
            }
        }
        self.check(seed, STEPS, "all guards closed").await;
        let admin = &self.clients[0];
        loop {
            let answered = self.answered();
            if admin.status(&self.resource).await.expect("status") == ddb_lock::LockStatus::Free {
                return;
            }
            // A background release is still to come: the next answer of any proxy.
            timeout(PATIENCE, self.any_answer_after(answered))
                .await
                .unwrap_or_else(|_| {
                    panic!("seed {seed}: every guard is closed and nothing happens, but the lock is held")
                });
        }
    }
}

/// Completes when any of `futures` does.
async fn any<F: std::future::Future<Output = ()> + Unpin>(mut futures: Vec<F>) {
    std::future::poll_fn(|cx| {
        for future in &mut futures {
            if std::pin::Pin::new(future).poll(cx).is_ready() {
                return std::task::Poll::Ready(());
            }
        }
        std::task::Poll::Pending
    })
    .await
}
