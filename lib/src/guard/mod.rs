//! Holding a lock: a guard that extends it in the background, knows when it is lost, and releases
//! it when dropped, plus a scoped helper that always releases.
//!
//! A guard counts its lease on this process's monotonic clock from just before each write that set
//! it was sent. [`LockGuard::is_held`] is false as soon as that lease has run out without a
//! successful extension, even if the background task never got to run (a blocked runtime, a
//! paused process): the answer never depends on the task having noticed.
//!
//! What a guard knows, and how an extension's answer or a loss moves it, is in [`state`]; its
//! background extension in [`heartbeat`]; the view handed to code that runs under the lock in
//! [`lock_watch`]; [`LockClient::lock`], [`LockClient::try_lock`] and [`LockClient::with_lock`] in
//! [`scoped`].

mod heartbeat;
mod lock_watch;
mod scoped;
mod state;

pub use lock_watch::LockWatch;
pub(crate) use scoped::taken_at_release;

use crate::client::LockClient;
use crate::error::{Error, InvalidInput};
use crate::fencing::FencingToken;
use crate::limits;
use crate::lock::Lock;
use crate::ops::extend::DataChange;
use crate::outcome::{ExtendOutcome, LockLost, ReleaseOutcome};
use heartbeat::extend_until_lost;
use state::{held, lose, raise_lease, settle, wait_for_turn, why_lost, within_lease, State};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Mutex};
use tokio::task::JoinHandle;
use tracing::{debug, warn};

/// A held lock that extends itself in the background and is released when dropped.
///
/// Made by [`LockClient::lock`] and [`LockClient::try_lock`]. Every `heartbeat` (by default a
/// third of the lease) a background task extends the lease; if an extension finds the lock gone
/// or taken, or none succeeds before the lease runs out, the guard is lost for good:
/// [`is_held`](Self::is_held) turns false and [`lost`](Self::lost) completes. Dropping the guard
/// releases the lock from a spawned task (best effort, never blocking);
/// [`release`](Self::release) releases it and tells what it found.
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
/// use ddb_lock::AcquireOptions;
/// use std::time::Duration;
///
/// let guard = client
///     .lock("invoice/2026-0042", &AcquireOptions::new().lease(Duration::from_secs(10)))
///     .await?;
/// tokio::select! {
///     lost = guard.lost() => eprintln!("stopped: {lost}"),
///     () = tokio::time::sleep(Duration::from_secs(60)) => println!("a minute of work, held throughout"),
/// }
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct LockGuard {
    client: LockClient,
    lease: Duration,
    state: Arc<watch::Sender<State>>,
    /// Held by whichever extension of this guard is in flight (the heartbeat's or
    /// [`replace_data`](Self::replace_data)'s), so that the guard never has two at once and its
    /// answers settle in the order the requests were sent.
    extending: Arc<Mutex<()>>,
    watch: LockWatch,
    heartbeat: JoinHandle<()>,
    /// Set once [`release`](Self::release) has its answer: until then Drop releases (again).
    released: bool,
    /// The payload change [`release_and_replace_data`](Self::release_and_replace_data) asked
    /// for, if it did: Drop's release makes it too.
    release_data: Option<Option<Vec<u8>>>,
}

impl LockGuard {
    pub(crate) fn start(
        client: &LockClient,
        lock: Lock,
        lease: Duration,
        heartbeat: Duration,
    ) -> Self {
        let handle = lock.handle().clone();
        let expired_lock = lock.clone();
        let (sender, receiver) = watch::channel(State::Held(lock));
        let state = Arc::new(sender);
        let extending = Arc::new(Mutex::new(()));
        let task = tokio::spawn(extend_until_lost(
            client.clone(),
            Arc::clone(&state),
            Arc::clone(&extending),
            lease,
            heartbeat,
        ));
        // From here the client can stop the guard (a release of its lock through the client, by
        // another guard of the same acquisition, or an extension that found it lost); if the
        // client released the lock already (between the acquisition and now), the guard starts
        // released.
        let abort = task.abort_handle();
        let stopped = Arc::downgrade(&state);
        // Weak, as the state: the stop is kept in the client's own memory.
        let settings = Arc::downgrade(&client.settings);
        let stop = Arc::new(move |lost: LockLost| {
            let expired = matches!(lost, LockLost::Expired { .. });
            if let Some(state) = stopped.upgrade() {
                lose(&state, lost);
            }
            abort.abort();
            // Found expired by an extension through the client (the heartbeat's own, a data
            // replacement's, `LockClient::extend`'s: a wall clock that jumped past the lease):
            // an extension of this guard still on its way may land with its earlier `:now` and
            // lengthen the lease, so the lock is released, whoever found it expired (with only
            // the heartbeat releasing, a guard stopped by another extension left the lock held
            // for that lease while it stayed open; found by review).
            if let (true, Some(settings)) = (expired, settings.upgrade()) {
                let client = LockClient { settings };
                // (After a release of it on its way already, if that one fails: sent at once, it
                // could land first.)
                if !release_unattended(&client, expired_lock.clone(), None, "guard found expired") {
                    warn!("a guard found expired could not release outside a runtime; its lock ends with its lease");
                }
            }
        });
        if client.table().holds.guarded(&handle, stop) {
            let raised = Arc::downgrade(&state);
            client.table().holds.watched(
                &handle,
                Arc::new(move |until, stored_end| {
                    if let Some(state) = raised.upgrade() {
                        raise_lease(&state, until, stored_end);
                    }
                }),
            );
        } else {
            task.abort();
            lose(&state, LockLost::Released);
        }
        LockGuard {
            client: client.clone(),
            lease,
            state,
            extending,
            watch: LockWatch { state: receiver },
            heartbeat: task,
            released: false,
            release_data: None,
        }
    }

    /// Whether the lock is held now; see [`LockWatch::is_held`].
    pub fn is_held(&self) -> bool {
        self.watch.is_held()
    }

    /// Completes when the lock is lost; see [`LockWatch::lost`].
    pub async fn lost(&self) -> LockLost {
        self.watch.lost().await
    }

    /// A cloneable view of this guard's state, to hand to the code doing the work.
    pub fn watch(&self) -> LockWatch {
        self.watch.clone()
    }

    /// The lock as acquired or last extended, while held (see [`is_held`](Self::is_held)).
    pub fn lock(&self) -> Option<Lock> {
        self.watch.lock()
    }

    /// The acquisition's fencing token, if it was fenced: held or not (lost, run out), since the
    /// store that checks it is what refuses the writes of a holder whose lease ran out unnoticed
    /// once a later holder's token was seen.
    pub fn fencing_token(&self) -> Option<FencingToken> {
        self.watch.fencing_token()
    }

    /// Replaces the payload stored with the lock (`None` removes it), extending the lease in the
    /// same write. A lost outcome makes the guard lost too.
    ///
    /// It waits for an extension of the heartbeat that is in flight, and gives up when the lease
    /// runs out as the heartbeat does: then, or if the guard was lost already, the result is
    /// [`Error::Lost`] and the guard is lost.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(guard: ddb_lock::LockGuard) -> Result<(), ddb_lock::Error> {
    /// guard.replace_data(Some(br#"{"step":"2/3"}"#.to_vec())).await?;
    /// # Ok(()) }
    /// ```
    pub async fn replace_data(&self, data: Option<Vec<u8>>) -> Result<ExtendOutcome, Error> {
        if let Some(data) = &data {
            limits::data(data)?;
        }
        let lost = |lock: &Lock| Error::Lost {
            resource: lock.resource().to_owned(),
            reason: Box::new(why_lost(&self.state)),
        };
        // The heartbeat holds the turn at most until the lease it extends runs out (at once if
        // the guard is lost).
        let turn = wait_for_turn(&self.state, &self.extending).await;
        let lock = self.last_lock();
        if held(&self.state).is_none() {
            return Err(lost(&lock));
        }
        let Some(_turn) = turn else {
            // The lease ran out while another extension held the turn, which may have landed.
            // Its holder may be dropped before it gives up (a `select!` on the guard's loss,
            // which this makes ready), and the heartbeat, finding the guard lost, ends: released
            // here, from a task of the client and not awaited (the turn's holder may wait on its
            // answer still), rather than left held for the lease that extension wrote (found by
            // review). A second release, the turn holder's, finds it gone.
            lose(&self.state, LockLost::LeaseRanOut { last_error: None });
            if !release_unattended(
                &self.client,
                lock.clone(),
                None,
                "guard whose data replacement gave up",
            ) {
                warn!(resource = lock.resource(), "a lock given up on could not be released outside a runtime; it ends with its lease");
            }
            return Err(lost(&lock));
        };
        let answer = within_lease(
            &self.state,
            self.client.extend_and_replace_data(&lock, self.lease, data),
        )
        .await;
        if let Some(answer) = answer {
            let outcome = answer?;
            // Decided by the outcome, not by the guard's state: an extension through the client
            // that found the lock expired (a wall clock jumped) may have turned the guard lost
            // before this one's answer came, `Extended`, and the lock then released was
            // reported extended (found by review).
            match (settle(&self.state, &outcome), &outcome) {
                (Ok(()), _) => return Ok(outcome),
                // Found expired (a wall clock that jumped past the lease): an attempt of this
                // extension given up on by the SDK may still land with its earlier `:now`, as
                // for the heartbeat: released, and the outcome says so.
                (Err(_), ExtendOutcome::Expired { .. }) => {
                    self.release_given_up(&lock).await;
                    return Ok(outcome);
                }
                // Found gone or taken: the outcome says so.
                (Err(_), ExtendOutcome::NotFound | ExtendOutcome::NotOwner { .. }) => {
                    return Ok(outcome)
                }
                // Extended, but answered after the lease ran out or the guard was lost.
                (Err(_), ExtendOutcome::Extended(_)) => {}
            }
        } else {
            lose(&self.state, LockLost::LeaseRanOut { last_error: None });
        }
        // The guard is lost, but the extension may have landed (or may still land): release, so
        // that the lock is not held for a lease nobody uses.
        self.release_given_up(&lock).await;
        Err(lost(&lock))
    }

    /// Releases `lock`, given up on by this guard (lost) while an extension of it may still land,
    /// before the caller is answered; tried again when DynamoDB fails it, as a dropped guard's.
    /// From a task of the client ([`LockClient::flush`] waits for it): if this future is dropped
    /// first (a `select!`, a timeout), the release goes on, rather than leave the lock held for
    /// the lease the extension wrote while the guard, lost, stays open (found by review).
    async fn release_given_up(&self, lock: &Lock) {
        // (`release_detached` marks the lock as being released at the call, as every release a
        // guard sends from the background: an idempotent acquisition read before the spawned task
        // first ran was handed back the lock about to be deleted.)
        if let Err(err) = self.client.release_detached(lock.handle()).await {
            warn!(resource = lock.resource(), %err, "could not release a lock given up on; it expires with its lease");
        }
    }

    /// Stops extending and releases the lock: one conditional DeleteItem. Tells what it found,
    /// including [`ReleaseOutcome::NotFound`] or [`ReleaseOutcome::NotOwner`] if the lock had been
    /// lost; [`ReleaseOutcome::Unconfirmed`] if another release of it through the client, sent and
    /// not refused, may have released it first (a twin guard's, `release_all`'s, a force release
    /// that removed it, the release a guard found expired sends).
    ///
    /// From the moment it starts, every [`LockWatch`] of the guard says the lock is not held
    /// ([`LockLost::Released`]). The DeleteItem is sent from a task of the client
    /// ([`LockClient::flush`] waits for it): if this future is dropped before it is answered (a
    /// `select!`, an outer timeout), it goes on; if DynamoDB fails it ([`Error::Backend`], which
    /// is returned), that task sends it again, up to four tries in all, and the guard's drop
    /// sends it once more only if those failed too; a second DeleteItem of the same acquisition
    /// can delete nothing else. Called while another release of the lock is on its way (a twin
    /// guard's, `with_lock`'s, which stopped this guard), it is sent once that one is answered,
    /// as a resend: [`ReleaseOutcome::Unconfirmed`] if it finds the lock gone; so is one called
    /// after such a release was answered.
    pub async fn release(mut self) -> Result<ReleaseOutcome, Error> {
        self.heartbeat.abort();
        // Stopped (by another release of its acquisition through the client, a twin guard's,
        // `with_lock`'s, `release_all`'s; or found lost, and released by its stop): this one
        // resends such a release if one was sent and not refused (called once that one was
        // answered, it found the lock gone and said `NotFound`, a loss, of a lock its own
        // acquisition had released).
        let after_another = matches!(&*self.state.borrow(), State::Lost { .. });
        lose(&self.state, LockLost::Released);
        let lock = self.last_lock();
        let outcome = if after_another {
            self.client.release_after_another(lock.handle()).await
        } else {
            self.client.release(&lock).await
        };
        // Only now: a release cancelled at its await is covered by Drop, and so is one that
        // failed (DynamoDB failed it, or it was refused before it was sent): the guard, consumed,
        // is the caller's only way to the lock, so Drop sends it again from the background
        // rather than leave it held for its lease. Sent again, a release changes nothing.
        self.released = outcome.is_ok();
        outcome
    }

    /// [`release`](Self::release), keeping the item with `data` as its payload for the next
    /// holder (`None` removes it): see [`LockClient::release_and_replace_data`], which it calls,
    /// and which needs a client built with
    /// [`delete_on_release(false)`](crate::LockClientBuilder::delete_on_release). On a client
    /// that deletes items it fails with [`InvalidInput::DataNotKept`](crate::InvalidInput::DataNotKept),
    /// and the guard, consumed, is dropped: its lock is released as a dropped guard's.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(guard: ddb_lock::LockGuard) -> Result<(), ddb_lock::Error> {
    /// guard.release_and_replace_data(Some(b"resume at page 12".to_vec())).await?;
    /// # Ok(()) }
    /// ```
    pub async fn release_and_replace_data(
        mut self,
        data: Option<Vec<u8>>,
    ) -> Result<ReleaseOutcome, Error> {
        if self.client.table().delete_on_release {
            return Err(InvalidInput::DataNotKept.into());
        }
        if let Some(data) = &data {
            limits::data(data)?;
        }
        self.heartbeat.abort();
        lose(&self.state, LockLost::Released);
        let lock = self.last_lock();
        // As for `release`: a release cancelled at its await, or failed, is covered by Drop,
        // with the same payload (without it, Drop's copy, landing first, released the lock with
        // the old payload and this one was refused as already released; found by review). A data
        // change a shared hold cannot take is refused before anything is sent: Drop releases it
        // without one, rather than leave the lock to its lease.
        if lock.mode() == crate::mode::Mode::Exclusive {
            self.release_data = Some(data.clone());
        }
        let outcome = self.client.release_and_replace_data(&lock, data).await;
        self.released = outcome.is_ok();
        outcome
    }

    /// The lock as last known, lost or not (its credential never changes).
    fn last_lock(&self) -> Lock {
        match &*self.state.borrow() {
            State::Held(lock) | State::Lost { lock, .. } => lock.clone(),
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        self.heartbeat.abort();
        if self.released {
            return;
        }
        lose(&self.state, LockLost::Released);
        let lock = match &*self.state.borrow() {
            // Held until now, a release that did not complete, a lease that ran out while an
            // extension may still land, or found expired (its stop's release may have failed,
            // and an extension on its way land after). A release of the lock on its way (its own,
            // dropped at its await; a twin guard's, `with_lock`'s, `release_all`'s, the stop's)
            // is waited for (sent at once, this one could land first, the other then refused:
            // `with_lock` answered that its work lost its lock, a payload was never written;
            // found by review), and this one is sent only if none of them was answered (left to
            // one that then failed, the lock stayed held for nobody; found by review).
            State::Lost {
                lock,
                lost: LockLost::Released | LockLost::LeaseRanOut { .. } | LockLost::Expired { .. },
            } => lock.clone(),
            // Found gone or taken by an extension: nothing of ours to release.
            State::Lost { .. } | State::Held(_) => return,
        };
        // Releasing needs a request; Drop cannot wait for one without blocking the runtime.
        let data = self.release_data.take();
        release_unattended(&self.client, lock, data, "dropped guard");
    }
}

/// Sends the release of `lock`, which nobody waits for (a dropped guard's, a guard's whose lease
/// ran out), from a task of the client ([`LockClient::flush`] waits for it), tried again when
/// DynamoDB fails it, with the payload change `data` if given (`Some(None)` removes it); `whose`
/// names it in the log. The lock is marked as being released at once, so that no idempotent
/// acquisition of this client is handed it back before the release is sent. Sent after the
/// releases of the lock on their way, and only if DynamoDB answered none of them
/// ([`ReleaseUnderway::earlier_answered`](crate::holds::ReleaseUnderway::earlier_answered)).
/// False if there is no runtime to send it from.
pub(crate) fn release_unattended(
    client: &LockClient,
    lock: Lock,
    data: Option<Option<Vec<u8>>>,
    whose: &'static str,
) -> bool {
    let mut underway = client.table().holds.release_starts(lock.handle());
    let releaser = client.clone();
    client.release_in_background(async move {
        if underway.earlier_answered(Some(lock.acquired_at())).await {
            debug!(resource = lock.resource(), whose, "left to a release of the lock answered before");
            return;
        }
        let change = DataChange::of_release(data.as_ref());
        match releaser
            .release_retrying(lock.handle(), change, Some(underway))
            .await
        {
            Ok(outcome) => debug!(resource = lock.resource(), ?outcome, whose, "released a guard's lock"),
            Err(err) => warn!(resource = lock.resource(), %err, whose, "could not release a guard's lock; it expires with its lease"),
        }
    })
}
