//! Releases a client sends in the background, and waiting for them.
//!
//! Some releases cannot be awaited by whoever causes them: a guard dropped in synchronous code, an
//! `acquire` or a `release` whose future was dropped mid-request. They are sent from spawned
//! tasks. [`LockClient::flush`](crate::LockClient::flush) waits for every one of them, which a
//! Lambda handler needs before it returns (the execution environment is frozen afterwards, with
//! any spawned request unsent until the next invocation thaws it), and so do tests.

use std::future::Future;
use std::sync::Arc;
use tokio::sync::watch;

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
