//! The view of a guard's lock handed to code that runs while the lock is held.

use super::state::State;
use crate::fencing::FencingToken;
use crate::lock::Lock;
use crate::outcome::LockLost;
use tokio::sync::watch;
use tokio::time::Instant;

/// A cheap, cloneable view of a guard's lock, for code that runs while the lock is held (such as
/// the work given to [`LockClient::with_lock`](crate::LockClient::with_lock)): whether it is
/// still held, and a future that completes when it is lost.
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
/// use ddb_lock::AcquireOptions;
///
/// let guard = client.lock("reports/daily", &AcquireOptions::new()).await?;
/// let watch = guard.watch();
/// tokio::spawn(async move {
///     let lost = watch.lost().await;
///     eprintln!("stop writing: {lost}");
/// });
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct LockWatch {
    pub(super) state: watch::Receiver<State>,
}

impl LockWatch {
    /// Whether the lock is held now: the guard has not released it (or started to), no extension
    /// has reported it lost, and the lease (as last extended, counted on the monotonic clock) has
    /// not run out.
    pub fn is_held(&self) -> bool {
        match &*self.state.borrow() {
            State::Held(lock) => Instant::now() < lock.valid_until_instant(),
            State::Lost { .. } => false,
        }
    }

    /// The lock as acquired or last extended, while held: `None` once
    /// [`is_held`](Self::is_held) is false, a lease that ran out included, even before the
    /// guard's background task noticed.
    pub fn lock(&self) -> Option<Lock> {
        match &*self.state.borrow() {
            State::Held(lock) if Instant::now() < lock.valid_until_instant() => Some(lock.clone()),
            _ => None,
        }
    }

    /// The acquisition's fencing token, if it was fenced, whatever the state (see
    /// [`LockGuard::fencing_token`](crate::LockGuard::fencing_token)): work given only the watch
    /// (under [`with_lock`](crate::LockClient::with_lock)) passes it with its writes, and the
    /// store refuses them once a later holder's token was seen.
    pub fn fencing_token(&self) -> Option<FencingToken> {
        match &*self.state.borrow() {
            State::Held(lock) | State::Lost { lock, .. } => lock.fencing_token(),
        }
    }

    /// Completes when the lock is lost: an extension found it gone or taken, its lease ran out
    /// without a successful extension, or the guard released it ([`LockLost::Released`], from the
    /// moment the release starts). Cancel-safe, for use in `tokio::select!`.
    pub async fn lost(&self) -> LockLost {
        let mut state = self.state.clone();
        loop {
            let valid_until = match &*state.borrow_and_update() {
                State::Lost { lost, .. } => return lost.clone(),
                State::Held(lock) => lock.valid_until_instant(),
            };
            if Instant::now() >= valid_until {
                return LockLost::LeaseRanOut { last_error: None };
            }
            // The lease end that passed is judged again from the state: polled late (a busy
            // runtime), both branches are ready, and an extension recorded before that end must
            // win over the end it replaced, as it does for `is_held`.
            tokio::select! {
                biased;
                changed = state.changed() => {
                    if changed.is_err() {
                        // The guard is gone; its lease is the only thing left to go by.
                        tokio::time::sleep_until(valid_until).await;
                        return LockLost::LeaseRanOut { last_error: None };
                    }
                }
                () = tokio::time::sleep_until(valid_until) => {}
            }
        }
    }
}
