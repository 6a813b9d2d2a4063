//! Releases left on their way across steps: a guard's release whose request the network holds
//! (delivered some steps later, or at the end), and the calls that may wait behind it, left
//! running when they do not finish soon and checked when they do ([`World::check_pending`]).
//!
//! A release started while another of the same acquisition is on its way waits for that one, five
//! seconds at most (a twin guard's release, sent at once, landed first, and the first, refused,
//! answered `NotFound`; so did a release through the client), and `LockClient::flush` (which
//! `release_all` ends with) waits for every background release of its client: while a proxy holds
//! a release, a step that awaited either would stall until the request is delivered. So every
//! release a step makes, and every `release_all`, runs in a task the step waits for a while only
//! ([`World::leave_on_its_way`]), the checks flush no client whose release is held or still
//! running ([`World::busy`]), and the end delivers the held releases before it awaits anything.

use super::*;
use ddb_lock::{Error, LockHandle, ReleaseOutcome};
use tokio::task::JoinHandle;

/// What only a shared hold's release's request says: it removes the hold's entry.
const SHARED_RELEASE: &str = "DELETE #set :ids REMOVE #entry";

/// How long a step waits for a release, or a `release_all`, before it leaves it running in
/// [`World::pending`]: one behind a release held in the network waits until its delivery.
const BOUND: Duration = Duration::from_millis(500);

/// A release, or a `release_all`, left on its way across steps.
pub(super) struct Pending {
    /// What it is and which step started it, for failure messages.
    pub(super) what: String,
    /// The client it goes through.
    pub(super) client: usize,
    /// The acquisition a release of one ends (told over when it answers).
    pub(super) acquisition: Option<LockId>,
    /// The first release started of its acquisition, its guard held until then: what it answers
    /// is checked.
    pub(super) first: Option<First>,
    /// A guard's release (not one through the client).
    pub(super) by_guard: bool,
    pub(super) state: State,
}

/// The first release of an acquisition, as [`World::check_pending`] checks it.
pub(super) struct First {
    /// The lock as its guard last knew it: its lease end tells from when another acquisition
    /// could take it over.
    pub(super) lock: Lock,
    /// The payload it leaves for the next holder (items kept).
    pub(super) payload: Option<Vec<u8>>,
    /// What else ended the acquisition while the release was on its way (a force release, a
    /// release by owner, an acquisition after its lease end): the release may then find the lock
    /// gone or another's.
    pub(super) ended_otherwise: Option<String>,
}

/// Whether a pending call is still running.
pub(super) enum State {
    Running(JoinHandle<Ended>),
    Done(Ended),
}

/// What a pending call answered.
#[derive(Debug)]
pub(super) enum Ended {
    One(Result<ReleaseOutcome, Error>),
    All(Vec<(LockHandle, Result<ReleaseOutcome, Error>)>),
}

impl Pending {
    /// Whether it has not finished yet.
    pub(super) fn running(&self) -> bool {
        matches!(&self.state, State::Running(task) if !task.is_finished())
    }
}

impl World {
    /// Releases an open guard whose lock is held, its request held in the network (delivered by a
    /// later step, or at the end), in a task left running: at times a guard with a twin (another
    /// guard of the same acquisition), whose release, drop, or a release of the lock through its
    /// client the later steps prefer while this one is on its way (see [`World::pick_guard`],
    /// [`World::end_through_the_client_or_behind`]); where items are kept, at times leaving a
    /// payload.
    pub(super) async fn release_held(&mut self, rng: &mut StdRng, step: usize) -> String {
        let held: Vec<usize> = (0..self.guards.len())
            .filter(|&k| self.guards[k].2.lock().is_some())
            .collect();
        if held.is_empty() {
            return "no guard held: no release held in the network".to_owned();
        }
        let twins: Vec<usize> =
            held.iter()
                .copied()
                .filter(|&k| {
                    let acquisition = self.acquisitions.get(&self.guards[k].0);
                    self.guards.iter().enumerate().any(|(j, (taken, _, _))| {
                        j != k && self.acquisitions.get(taken) == acquisition
                    })
                })
                .collect();
        let (made, mut twin) = if twins.is_empty() && rng.random_bool(0.5) {
            self.make_twin(rng, &held, step).await
        } else {
            (None, String::new())
        };
        let k = match made {
            Some(k) => k,
            None if !twins.is_empty() && rng.random_bool(0.7) => {
                twins[rng.random_range(0..twins.len())]
            }
            None => held[rng.random_range(0..held.len())],
        };
        // (A guard may have lost its lock while the twin was taken: its lease ran out, or its
        // heartbeat found it lost.)
        let Some(lock) = self.guards[k].2.lock() else {
            let taken = self.guards[k].0;
            return format!("{twin} (the guard of step {taken} lost its lock meanwhile)");
        };
        let (taken, owner, guard) = self.guards.remove(k);
        let exclusive = lock.mode() == Mode::Exclusive;
        let payload = (matches!(self.items, Items::Kept) && exclusive && rng.random_bool(0.5))
            .then(|| format!("released at step {step}").into_bytes());
        let first = self.first_release(&guard, &lock, payload.clone(), step);
        let (operation, text) = if exclusive {
            match payload {
                // Its condition, without a line's clause (a payload is for a kept item's next
                // holder): at its end in the request.
                Some(_) => ("UpdateItem", "#lock_id = :lock_id AND #owner = :owner\""),
                None => self.release_request(),
            }
        } else {
            ("UpdateItem", SHARED_RELEASE)
        };
        let mut held = self.proxies[owner].delay_next_request_containing(operation, text);
        self.closed.push(guard.watch());
        let sent = payload.clone();
        let mut task = tokio::spawn(async move {
            Ended::One(match sent {
                Some(data) => guard.release_and_replace_data(Some(data)).await,
                None => guard.release().await,
            })
        });
        // Biased: a request captured must be kept (dropped, its client would wait for an answer
        // forever); a rule that captured nothing is withdrawn when `held` is dropped.
        let finished = timeout(PATIENCE, async {
            tokio::select! {
                biased;
                () = held.captured() => None,
                ended = &mut task => Some(ended.expect("the release's task")),
            }
        })
        .await
        .unwrap_or_else(|_| {
            panic!("the release of the guard of step {taken} neither sent its request nor finished within {PATIENCE:?}")
        });
        // Captured, it may be another release of the client's (a dropped guard's): held all the
        // same, and this one goes on.
        let captured = held.is_captured();
        if captured {
            self.held_releases.push((owner, held));
        }
        let with = if payload.is_some() {
            " with a payload"
        } else {
            ""
        };
        let how = match &finished {
            None => "its request held in the network".to_owned(),
            Some(ended) => format!("answered before a request was held ({captured}): {ended:?}"),
        };
        self.pending.push(Pending {
            what: format!(
                "the release{with} of the guard of step {taken} (client {owner}), started at step {step}"
            ),
            client: owner,
            acquisition: Some(lock.lock_id()),
            first,
            by_guard: true,
            state: finished.map_or(State::Running(task), State::Done),
        });
        if !twin.is_empty() {
            twin.push_str("; then ");
        }
        format!("{twin}released{with} the guard of step {taken}: {how}")
    }

    /// Takes, through the client of one of the `held` guards that is exclusive, a second guard of
    /// its acquisition, which an idempotent acquisition hands back: a twin. Returns the index of
    /// one of the two, at random (none if no exclusive guard is held or none was taken), and what
    /// was done.
    async fn make_twin(
        &mut self,
        rng: &mut StdRng,
        held: &[usize],
        step: usize,
    ) -> (Option<usize>, String) {
        let exclusive: Vec<usize> = held
            .iter()
            .copied()
            .filter(|&k| {
                self.guards[k]
                    .2
                    .lock()
                    .is_some_and(|l| l.mode() == Mode::Exclusive)
            })
            .collect();
        if exclusive.is_empty() {
            return (None, String::new());
        }
        let k = exclusive[rng.random_range(0..exclusive.len())];
        let (of, owner) = (self.guards[k].0, self.guards[k].1);
        self.may_take_over(owner, step);
        let taken = self.clients[owner]
            .try_lock(&self.resource, &opts(owner).idempotent(true))
            .await;
        let guard = match taken {
            Ok(Some(guard)) => guard,
            Ok(None) => return (None, format!("client {owner} found the lock held")),
            Err(err) => return (None, format!("client {owner} try_lock failed: {err}")),
        };
        // As a step that takes a guard (a new acquisition if the one of step `of` ran out).
        let twin = guard.lock().map(|lock| {
            self.acquisitions.insert(step, lock.lock_id());
            let data = lock.data().map(<[u8]>::to_vec);
            self.data.entry(lock.lock_id()).or_insert(Data::Known(data));
            Some(lock.lock_id()) == self.acquisitions.get(&of).copied()
        });
        self.guards.push((step, owner, guard));
        let one = if rng.random_bool(0.5) {
            k
        } else {
            self.guards.len() - 1
        };
        let what = format!(
            "client {owner} took a guard idempotently (a twin of the guard of step {of}: {twin:?})"
        );
        (Some(one), what)
    }

    /// Releases the open guard `k` (in a task the step waits for a while only: behind a release
    /// of its acquisition held in the network, it waits).
    pub(super) async fn release_guard(&mut self, k: usize, step: usize) -> String {
        let (taken, owner, guard) = self.guards.remove(k);
        let first = guard
            .lock()
            .and_then(|lock| self.first_release(&guard, &lock, None, step));
        self.ending(taken, step);
        self.closed.push(guard.watch());
        let what = format!("the release of the guard of step {taken}, started at step {step}");
        let acquisition = self.acquisitions.get(&taken).copied();
        let call = async move { Ended::One(guard.release().await) };
        let outcome = self
            .leave_on_its_way(what, owner, acquisition, first, call)
            .await;
        if let Some(pending) = self.pending.last_mut() {
            pending.by_guard = true;
        }
        format!("released the guard of step {taken}: {outcome}")
    }

    /// At times, while a first release is held in the network, releases its lock again through
    /// its client (`release`, which waits for the first), or releases all of the client's locks
    /// (`release_all`, which leaves that one to the first and waits for it); otherwise
    /// [`end_through_the_client`](World::end_through_the_client).
    pub(super) async fn end_through_the_client_or_behind(
        &mut self,
        rng: &mut StdRng,
        step: usize,
    ) -> String {
        let behind: Vec<(usize, Lock)> = self
            .pending
            .iter()
            .filter(|p| p.running())
            .filter_map(|p| Some((p.client, p.first.as_ref()?.lock.clone())))
            .collect();
        if behind.is_empty() || rng.random_bool(0.5) {
            return self.end_through_the_client(rng, step).await;
        }
        let (owner, lock) = behind[rng.random_range(0..behind.len())].clone();
        let client = self.clients[owner].clone();
        let id = lock.lock_id();
        if rng.random_bool(0.5) {
            let what = format!("client {owner}'s release of acquisition {id}, started at step {step} behind another");
            let call = async move { Ended::One(client.release(&lock).await) };
            let outcome = self
                .leave_on_its_way(what, owner, Some(id), None, call)
                .await;
            format!("client {owner} released acquisition {id} again, its first release on its way: {outcome}")
        } else {
            // Every guard of the client ends.
            let ended: Vec<(usize, LockWatch)> = self
                .guards
                .iter()
                .filter(|(_, client_of, _)| *client_of == owner)
                .map(|(taken, _, guard)| (*taken, guard.watch()))
                .collect();
            for (taken, watch) in ended {
                self.ending(taken, step);
                self.closed.push(watch);
            }
            let what = format!("client {owner}'s release_all, started at step {step}");
            let call = async move { Ended::All(client.release_all().await) };
            let outcome = self.leave_on_its_way(what, owner, None, None, call).await;
            format!("client {owner} released all its locks, acquisition {id}'s release on its way: {outcome}")
        }
    }

    /// Runs `call` (a release, or `release_all`) through `client` in a task, waiting for it
    /// [`BOUND`] at most: one still running is left in [`World::pending`] (a release behind
    /// another of its acquisition held in the network waits up to five seconds, a flush until it
    /// is delivered), and checked when it finishes, as one that finished is at the next check.
    /// Returns what it answered, for the step's description.
    pub(super) async fn leave_on_its_way(
        &mut self,
        what: String,
        client: usize,
        acquisition: Option<LockId>,
        first: Option<First>,
        call: impl std::future::Future<Output = Ended> + Send + 'static,
    ) -> String {
        let mut task = tokio::spawn(call);
        let (state, outcome) = match timeout(BOUND, &mut task).await {
            Ok(ended) => {
                let ended = ended.expect("the release's task");
                let outcome = format!("answered: {ended:?}");
                (State::Done(ended), outcome)
            }
            Err(_) => (State::Running(task), format!("on its way after {BOUND:?}")),
        };
        self.pending.push(Pending {
            what,
            client,
            acquisition,
            first,
            by_guard: false,
            state,
        });
        outcome
    }

    /// The first release of `lock`'s acquisition, starting now for its guard `guard`, if the guard
    /// still holds it within its lease (no release of it started, no other acquisition can take it
    /// over) and no release of it was started before: it is checked when it ends. Records the
    /// release as the acquisition's ending either way.
    fn first_release(
        &mut self,
        guard: &LockGuard,
        lock: &Lock,
        payload: Option<Vec<u8>>,
        step: usize,
    ) -> Option<First> {
        // By the latest the clock has read: a lock taken over while the clock was ahead stays
        // taken when it steps back (by the clock stepped back, a release of a lock taken over
        // was expected to release it).
        let now = self.latest.max(self.clock.now());
        let live = guard.is_held() && lock.expires_at() > now;
        let first = live && !self.first_enders.contains_key(&lock.lock_id());
        self.first_enders.entry(lock.lock_id()).or_insert(step);
        first.then(|| First {
            lock: lock.clone(),
            payload,
            ended_otherwise: None,
        })
    }

    /// The guard of step `taken` is released, dropped, or its lock ended through its client, at
    /// `step`: the first ending of its acquisition, unless one came before.
    pub(super) fn ending(&mut self, taken: usize, step: usize) {
        if let Some(acquisition) = self.acquisitions.get(&taken) {
            self.first_enders.entry(*acquisition).or_insert(step);
        }
    }

    /// The first releases still running that `which` picks may find their acquisition ended by
    /// something else (`why`).
    pub(super) fn ended_otherwise(&mut self, which: impl Fn(&Pending) -> bool, why: &str) {
        for pending in &mut self.pending {
            if pending.running() && which(pending) {
                if let Some(first) = &mut pending.first {
                    first.ended_otherwise.get_or_insert_with(|| why.to_owned());
                }
            }
        }
    }

    /// `client` tries to take the lock at `step`: the first releases still running whose lease
    /// (as their guard believed it, the stored one not earlier) may have ended by now may find the
    /// lock taken over. (A second of slack for the stored time's rounding.)
    pub(super) fn may_take_over(&mut self, client: usize, step: usize) {
        let now = self.clock.now() + Duration::from_secs(1);
        for pending in &mut self.pending {
            let running = pending.running();
            if let Some(first) = &mut pending.first {
                if running && first.lock.expires_at() <= now {
                    first.ended_otherwise.get_or_insert_with(|| {
                        format!(
                            "client {client} tried to take the lock at step {step}, past its lease"
                        )
                    });
                }
            }
        }
    }

    /// An open guard: more often one whose acquisition has a release on its way (a twin's).
    pub(super) fn pick_guard(&self, rng: &mut StdRng) -> usize {
        let behind: Vec<usize> = (0..self.guards.len())
            .filter(|&k| {
                let acquisition = self.acquisitions.get(&self.guards[k].0).copied();
                self.pending
                    .iter()
                    .any(|p| p.running() && acquisition.is_some() && p.acquisition == acquisition)
            })
            .collect();
        if !behind.is_empty() && rng.random_bool(0.6) {
            behind[rng.random_range(0..behind.len())]
        } else {
            rng.random_range(0..self.guards.len())
        }
    }

    /// Whether a flush of `client` may wait for a release held in the network (its proxy holds
    /// one) or for one of the calls left running (a release behind a held one, a `release_all`).
    pub(super) fn busy(&self, client: usize) -> bool {
        self.held_releases.iter().any(|(c, _)| *c == client)
            || self
                .pending
                .iter()
                .any(|p| p.client == client && p.running())
    }

    /// A held request, to deliver: a held release half the time there is one (the lock it
    /// releases stays taken until then), else one held back or copied.
    pub(super) fn take_held(&mut self, rng: &mut StdRng) -> HeldRequest {
        if !self.held_releases.is_empty() && (self.held.is_empty() || rng.random_bool(0.5)) {
            let k = rng.random_range(0..self.held_releases.len());
            return self.held_releases.remove(k).1;
        }
        self.held.remove(rng.random_range(0..self.held.len()))
    }

    /// Delivers the release held in the network longest, for a step with nothing else to do.
    pub(super) async fn deliver_held_release(&mut self) -> String {
        let (client, request) = self.held_releases.remove(0);
        let delivered = timeout(PATIENCE, request.deliver())
            .await
            .expect("the endpoint answers a delivered request");
        format!("client {client}'s held release delivered: {delivered}")
    }

    /// The request of a release: a DeleteItem, or an UpdateItem where items are kept.
    pub(super) fn release_operation(&self) -> &'static str {
        self.release_request().0
    }

    /// The operation of a release by lock id, and what only its request says: its condition's
    /// end. Not `REMOVE #owner` where items are kept: a shared acquisition's update removes a
    /// lapsed exclusive holder with those words, and its copy, delivered after every release,
    /// took the lock again for a lease with nobody holding it (the documented limit of copies of
    /// acquisitions, below). Not a release by owner either (`release_owned`, conditioned on the
    /// owner alone): its copy, delivered after the same owner took the lock again, releases that
    /// newer lock, as documented (release by owner is safe where owners are unique per holder,
    /// and this test's clients each reuse theirs); seed 646 of items kept found it so.
    pub(super) fn release_request(&self) -> (&'static str, &'static str) {
        const BY_ID: &str = ":owner AND attribute_not_exists(#queue)";
        match self.items {
            Items::Deleted => ("DeleteItem", BY_ID),
            Items::Kept => ("UpdateItem", BY_ID),
        }
    }

    /// Delivers the releases held in the network and checks every call left running (each waits
    /// for nothing else then), releases or drops every open guard, delivers every other held
    /// request, then waits (event by event) until the lock is free.
    pub(super) async fn finish(mut self, context: &str) {
        for proxy in &self.proxies {
            proxy.set_faults(Faults::default());
        }
        for (_, request) in self.held_releases.drain(..) {
            timeout(PATIENCE, request.deliver())
                .await
                .expect("the endpoint answers a delivered request");
        }
        self.check_pending(context, true).await;
        for (i, (_, _, guard)) in self.guards.drain(..).enumerate() {
            self.closed.push(guard.watch());
            if i % 2 == 0 {
                let _ = guard.release().await;
            } else {
                drop(guard);
            }
        }
        self.check(context).await;
        for client in &self.clients {
            client.flush().await;
        }
        // Whatever arrives late, after every release, must not hold the lock again.
        for request in self.held.drain(..) {
            timeout(PATIENCE, request.deliver())
                .await
                .expect("the endpoint answers a delivered request");
        }
        self.check_over_for_good(context).await;
        let admin = &self.clients[0];
        loop {
            let answered = self.answered();
            if admin.status(&self.resource).await.expect("status") == ddb_lock::LockStatus::Free {
                return;
            }
            // A background release is still to come: the next answer of any proxy.
            if timeout(PATIENCE, self.any_answer_after(answered))
                .await
                .is_err()
            {
                let item = raw_item(&self.resource).await;
                panic!("{context}: every guard is closed and nothing happens, but the lock is held: {item:?}");
            }
        }
    }
}
