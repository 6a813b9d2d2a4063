//! Releases a client sends in the background, and waiting for them.
//!
//! Some releases cannot be awaited by whoever causes them: a guard dropped in synchronous code, an
//! `acquire` or a `release` whose future was dropped mid-request. They are sent from spawned
//! tasks. [`LockClient::flush`](crate::LockClient::flush) waits for every one of them, which a
//! Lambda handler needs before it returns (the execution environment is frozen afterwards, with
//! any spawned request unsent until the next invocation thaws it), and so do tests.

use crate::error::Error;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How many times an unattended clean-up (a dropped guard's release, a dropped acquisition's, a
/// dropped fair waiter's leave) is tried in all when DynamoDB fails it, and the pause before the
/// second try, doubled before each later one: nobody is there to try again, and a clean-up given
/// up after one throttled or dropped request (beyond the SDK's own retries) leaves the lock held
/// by nobody for its lease.
const CLEAN_UP_TRIES: u32 = 4;
const FIRST_PAUSE: Duration = Duration::from_millis(25);

/// When the clean-up of a future dropped with a write unanswered (an acquisition's, a fair
/// waiter's join) looks again after finding nothing of its own: the write may have been on its way
/// and land after the clean-up's own request (two connections, either order). Looking again
/// narrows that window to writes delayed longer than a quarter second; it does not close it.
const LOOK_AGAIN_AFTER: [Duration; 2] = [Duration::from_millis(50), Duration::from_millis(200)];

/// Runs `look` and, while `look_again` says of its result that a write on its way may still land
/// (it found nothing of the clean-up's own, say), runs it again after each pause of
/// [`LOOK_AGAIN_AFTER`]: the last result.
pub(crate) async fn looking_again<T, F, Fut>(mut look: F, look_again: impl Fn(&T) -> bool) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = T>,
{
    let mut result = look().await;
    for pause in LOOK_AGAIN_AFTER {
        if !look_again(&result) {
            break;
        }
        tokio::time::sleep(pause).await;
        result = look().await;
    }
    result
}

/// Runs `look` after each pause of [`LOOK_AGAIN_AFTER`]: for a write on its way that may land
/// after a request that settled the lock (a release), which was the first look.
pub(crate) async fn looking_later<F, Fut>(mut look: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    for pause in LOOK_AGAIN_AFTER {
        tokio::time::sleep(pause).await;
        look().await;
    }
}

/// Runs `attempt` until it succeeds or fails other than in DynamoDB, at most
/// [`CLEAN_UP_TRIES`] times, pausing between tries. Every attempt must be safe to repeat: the
/// clean-ups' requests are conditioned on the acquisition they end.
pub(crate) async fn retrying<T, F, Fut>(mut attempt: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    let mut pause = FIRST_PAUSE;
    let mut tries = 1;
    loop {
        match attempt().await {
            Err(Error::Backend { .. }) if tries < CLEAN_UP_TRIES => {
                tokio::time::sleep(pause).await;
                pause *= 2;
                tries += 1;
            }
            result => return result,
        }
    }
}

/// [`retrying`], telling each attempt whether an earlier one failed in DynamoDB: that request
/// may have been applied (its answers lost, after the SDK's own retries), so the next attempt is
/// a resend, and reads a refusal as a resend's.
pub(crate) async fn retrying_resent<T, F, Fut>(mut attempt: F) -> Result<T, Error>
where
    F: FnMut(bool) -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    let mut resent = false;
    retrying(|| {
        let this = attempt(resent);
        resent = true;
        this
    })
    .await
}

/// The count of background releases of one client (and its clones) still running.
#[derive(Debug)]
pub(crate) struct BackgroundReleases {
    running: Arc<watch::Sender<usize>>,
}

impl Default for BackgroundReleases {
    fn default() -> Self {
        BackgroundReleases {
            running: Arc::new(watch::Sender::new(0)),
        }
    }
}

/// Counts one background release until it is dropped: finished, or cancelled with its runtime.
struct Running(Arc<watch::Sender<usize>>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

impl BackgroundReleases {
    /// Spawns `release` on the current runtime; false (and nothing runs) outside one.
    pub(crate) fn spawn(&self, release: impl Future<Output = ()> + Send + 'static) -> bool {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return false;
        };
        self.running.send_modify(|n| *n += 1);
        let running = Running(Arc::clone(&self.running));
        runtime.spawn(async move {
            let _running = running;
            release.await;
        });
        true
    }

    /// Completes once no background release is running.
    pub(crate) async fn finished(&self) {
        let mut running = self.running.subscribe();
        // The sender lives as long as `self`, so waiting cannot fail.
        let _ = running.wait_for(|n| *n == 0).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;
    use tokio::sync::oneshot;

    fn failed() -> Error {
        Error::Backend {
            operation: "DeleteItem",
            source: "connection dropped".into(),
        }
    }

    #[tokio::test]
    async fn a_clean_up_is_tried_again_after_a_backend_failure_a_bounded_number_of_times() {
        let tries = std::sync::atomic::AtomicU32::new(0);
        let count = || {
            tries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        };
        let flaky = retrying(|| async {
            count();
            match tries.load(std::sync::atomic::Ordering::Relaxed) {
                1 | 2 => Err(failed()),
                _ => Ok("released"),
            }
        })
        .await;
        assert_eq!(flaky.unwrap(), "released");
        assert_eq!(tries.swap(0, std::sync::atomic::Ordering::Relaxed), 3);

        let down: Result<(), Error> = retrying(|| async {
            count();
            Err(failed())
        })
        .await;
        assert!(matches!(down, Err(Error::Backend { .. })));
        assert_eq!(
            tries.swap(0, std::sync::atomic::Ordering::Relaxed),
            CLEAN_UP_TRIES
        );

        let refused: Result<(), Error> = retrying(|| async {
            count();
            Err(Error::UnexpectedResponse {
                operation: "DeleteItem",
                detail: "not a DynamoDB failure",
            })
        })
        .await;
        assert!(refused.is_err());
        assert_eq!(
            tries.load(std::sync::atomic::Ordering::Relaxed),
            1,
            "not tried again"
        );
    }

    #[tokio::test]
    async fn a_clean_up_that_found_nothing_looks_again_after_each_pause_and_stops_once_it_finds() {
        let looks = std::sync::atomic::AtomicUsize::new(0);
        let look = || async { looks.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1 };
        assert_eq!(
            looking_again(look, |_| true).await,
            1 + LOOK_AGAIN_AFTER.len()
        );
        looks.store(0, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(
            looking_again(look, |&n| n < 2).await,
            2,
            "found at the second look"
        );
        looks.store(0, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(looking_again(look, |_| false).await, 1, "found at once");
    }

    #[tokio::test]
    async fn finished_waits_for_every_spawned_release() {
        let background = BackgroundReleases::default();
        background.finished().await; // none: at once
        let (done, wait) = oneshot::channel::<()>();
        assert!(background.spawn(async move {
            let _ = wait.await;
        }));
        let finished = background.finished();
        tokio::pin!(finished);
        assert!(
            finished.as_mut().now_or_never().is_none(),
            "one release still running"
        );
        done.send(()).unwrap();
        finished.await;
    }

    #[test]
    fn outside_a_runtime_nothing_is_spawned() {
        let background = BackgroundReleases::default();
        assert!(!background.spawn(async {}));
        assert_eq!(*background.running.borrow(), 0);
    }
}
