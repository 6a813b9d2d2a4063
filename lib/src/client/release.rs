//! Giving a lock back: [`LockClient::release`] and its variants (replacing the payload, by owner),
//! and [`LockClient::release_all`].

use super::LockClient;
use crate::error::{Error, InvalidInput};
use crate::holds::{Held, ReleaseUnderway};
use crate::limits;
use crate::lock::{Holder, LockHandle};
use crate::ops::extend::DataChange;
use crate::ops::release::{self, Release};
use crate::outcome::{LockLost, ReleaseOutcome};
use crate::takeover::TakeoverRule;
use chrono::{DateTime, Utc};

impl LockClient {
    /// Releases every lock this client (and its clones) holds, for shutdown: a container's
    /// SIGTERM, the end of a Lambda invocation. One release request per lock, sent concurrently;
    /// then waits for the client's background releases ([`flush`](Self::flush)).
    ///
    /// It covers every lock acquired through the client and not yet released through it, found
    /// lost or run out of lease, whichever call took it: [`acquire`](Self::acquire),
    /// [`try_acquire`](Self::try_acquire), [`lock`](Self::lock) and the rest. A
    /// [`LockGuard`](crate::LockGuard) among them stops extending and says released
    /// ([`LockLost::Released`](crate::LockLost::Released)) before its release is sent, so no guard
    /// reports a lock held that is being released; a guard whose acquisition completes while
    /// `release_all` runs starts released. A scheduled tick's lock, meant to stand to its lease
    /// end, is left, and so is a lock this client only extended (a handle taken elsewhere), and
    /// one whose release is already on its way (a guard's, `with_lock`'s), which is left to that
    /// release, not listed, and waited for. An acquisition still in flight when it is called may
    /// complete after it and stay held: stop acquiring first. A lock whose release fails (the
    /// error is in its entry) is still remembered, for another `release_all`.
    ///
    /// Returns each lock with its release's outcome: [`ReleaseOutcome::Released`], or
    /// [`NotFound`](ReleaseOutcome::NotFound) / [`NotOwner`](ReleaseOutcome::NotOwner) for a lock
    /// that was lost meanwhile (left untouched).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use tokio::signal::unix::{signal, SignalKind};
    ///
    /// let mut terminate = signal(SignalKind::terminate()).expect("a signal handler");
    /// terminate.recv().await;
    /// for (lock, outcome) in client.release_all().await {
    ///     eprintln!("{}: {:?}", lock.resource(), outcome);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn release_all(&self) -> Vec<(LockHandle, Result<ReleaseOutcome, Error>)> {
        let table = &self.settings.table;
        let held = table.holds.take_all();
        // Each on its way from here, before its guards are stopped: a guard dropped once stopped
        // leaves the lock to this release (with no token yet, it sent a second one, which could
        // land first; found by review).
        let underway: Vec<_> = held
            .iter()
            .map(|lock| table.holds.release_starts(&lock.handle))
            .collect();
        for lock in &held {
            lock.stop(&LockLost::Released);
        }
        // Each release runs in a task of its own, so that dropping this future (a shutdown
        // deadline, a `select!`) neither cancels a release nor forgets a lock: `flush` still
        // waits for them, and a failed one is remembered again.
        let releases: Vec<_> = held
            .into_iter()
            .zip(underway)
            .map(|(lock, underway)| {
                let (client, spawned_lock) = (self.clone(), lock.clone());
                let answered = self.detached(async move {
                    client
                        .release_remembering(&spawned_lock, Some(underway))
                        .await
                });
                (lock, answered)
            })
            .collect();
        let mut outcomes = Vec::with_capacity(releases.len());
        for (lock, answered) in releases {
            let in_place = self.release_remembering(&lock, None);
            let outcome = detached_outcome(answered, lock.handle.resource(), in_place).await;
            outcomes.push((lock.handle, outcome));
        }
        self.flush().await;
        outcomes
    }

    /// Runs `release` in a task of its own (which `flush` waits for), so that dropping the
    /// future that awaits its answer cancels nothing: the answer's receiver, or `None` with no
    /// runtime to spawn on (the caller then releases in place: [`detached_outcome`]).
    fn detached(
        &self,
        release: impl std::future::Future<Output = Result<ReleaseOutcome, Error>> + Send + 'static,
    ) -> Option<tokio::sync::oneshot::Receiver<Result<ReleaseOutcome, Error>>> {
        let (answer, answered) = tokio::sync::oneshot::channel();
        let spawned = self.release_in_background(async move {
            let _ = answer.send(release.await);
        });
        spawned.then_some(answered)
    }

    /// Releases `lock` from a task of the client, tried again when DynamoDB fails it (whoever
    /// awaits the answer may be gone): sent at the call, so that dropping the returned future
    /// cancels nothing, and [`flush`](Self::flush) waits for it. Released in place with no
    /// runtime to spawn on.
    pub(crate) fn release_detached<'a>(
        &'a self,
        handle: &'a LockHandle,
    ) -> impl std::future::Future<Output = Result<ReleaseOutcome, Error>> + 'a {
        // Marked as being released at the call, not when the task first runs: meanwhile an
        // extension answered said the lock extended, and an idempotent acquisition was handed it
        // back (found by review). Keeping the payload, no mode refuses it.
        // On its way from here to the task's answer: `release_all` leaves the lock to it.
        let underway = release::start(
            &self.settings.table,
            &Release::of(handle),
            &DataChange::Keep,
        )
        .ok()
        .and_then(|started| started.underway);
        let (client, spawned) = (self.clone(), handle.clone());
        let answered = self.detached(async move {
            client
                .release_retrying(&spawned, DataChange::Keep, underway)
                .await
        });
        detached_outcome(answered, handle.resource(), self.release(handle))
    }

    /// Releases `handle` in place making `change` to the payload, sent again when DynamoDB fails
    /// it, each resend read as one ([`release::send_retrying`]): for releases nobody else sends
    /// again (a guard's, a set's, a backend's). With the release's `underway` token, sent only
    /// after the releases of the lock that were on their way before it, as a resend
    /// ([`ReleaseUnderway::after_earlier`]); the token is dropped once it is answered.
    pub(crate) async fn release_retrying(
        &self,
        handle: &LockHandle,
        change: DataChange<'_>,
        mut underway: Option<ReleaseUnderway>,
    ) -> Result<ReleaseOutcome, Error> {
        self.settings.table.check_handle(handle)?;
        let resent = after_earlier(&mut underway, &change).await;
        let release = Release::of(handle).resent_if(resent);
        let outcome =
            release::send_retrying(&self.settings.table, &release, change, underway.as_ref()).await;
        answered(underway.as_ref(), &outcome);
        outcome
    }

    /// Releases `lock` (a release on its way as `underway`), remembering it again if the
    /// release failed.
    async fn release_remembering(
        &self,
        lock: &Held,
        underway: Option<ReleaseUnderway>,
    ) -> Result<ReleaseOutcome, Error> {
        let outcome = match underway {
            Some(underway) => {
                self.release_retrying(&lock.handle, DataChange::Keep, Some(underway))
                    .await
            }
            // In place, with no runtime to spawn on: sent once, as `release` sends it there.
            None => self.release(&lock.handle).await,
        };
        if outcome.is_err() {
            self.settings.table.holds.put_back(lock);
        }
        outcome
    }

    /// Whether a release of `lock`'s acquisition through this client was sent and may have
    /// released it (answered released, or its answer unknown), among the latest few thousand
    /// releases: a release of it sent again through this client (a saga's retry after the answer
    /// was lost on its way to the caller) that finds the lock another's is then no mismatch, its
    /// own earlier release having ended the acquisition. A force release through this client does
    /// not count: the lock was lost, not released by its holder. No request.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient, lock: ddb_lock::Lock) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::ReleaseOutcome;
    ///
    /// match client.release(&lock).await? {
    ///     ReleaseOutcome::NotOwner { .. } if client.released_here(&lock) => println!("released before"),
    ///     outcome => println!("{outcome:?}"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn released_here(&self, lock: impl AsRef<LockHandle>) -> bool {
        self.settings
            .table
            .holds
            .released_on_request(lock.as_ref().lock_id())
    }

    /// Whether `holder`, found holding a lock that an acquisition held with its lease ending no
    /// earlier than `lease_end`, may have taken it over once that lease was over. Under the
    /// wall-clock rule a takeover's condition is the stored `ExpiresAt` < its `:now`, which it
    /// writes as `AcquiredAt`: a holder that acquired the lock by `lease_end` did not take it
    /// over, and the acquisition had been released (by its holder, or forced). Under the
    /// observed-lease rule, which compares no clocks, any holder may have. No request.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient, lock: ddb_lock::Lock) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::ReleaseOutcome;
    ///
    /// match client.release(&lock).await? {
    ///     ReleaseOutcome::NotOwner { holder }
    ///         if !client.may_have_taken_over(&holder, lock.expires_at()) =>
    ///     {
    ///         println!("released before {} took it", holder.owner)
    ///     }
    ///     outcome => println!("{outcome:?}"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn may_have_taken_over(&self, holder: &Holder, lease_end: DateTime<Utc>) -> bool {
        self.settings.table.takeover == TakeoverRule::ObservedLease
            || holder.acquired_at > lease_end
    }

    /// Releases a lock: one DeleteItem conditioned on the acquisition's `LockID` and `Owner`.
    ///
    /// If a task of this client is waiting for the resource in [`acquire`](Self::acquire), the
    /// release wakes it, and it makes its PutItem at once.
    ///
    /// Accepts a [`Lock`](crate::Lock) or a [`LockHandle`]. A lock that is already gone is
    /// [`ReleaseOutcome::NotFound`]; a lock someone else holds now is left untouched and reported as
    /// [`ReleaseOutcome::NotOwner`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient, lock: ddb_lock::Lock) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::ReleaseOutcome;
    ///
    /// let outcome = client.release(&lock).await?;
    /// assert_eq!(outcome, ReleaseOutcome::Released);
    /// # Ok(()) }
    /// ```
    pub async fn release(&self, lock: impl AsRef<LockHandle>) -> Result<ReleaseOutcome, Error> {
        self.release_changing_data(lock.as_ref(), None).await
    }

    /// Releases a held lock as [`release`](Self::release) does, keeping the item (one
    /// UpdateItem) with `data` as its payload for the next holder (`None` removes it). Only on a
    /// client that keeps items ([`delete_on_release(false)`](crate::LockClientBuilder::delete_on_release));
    /// on one that deletes them it is [`InvalidInput::DataNotKept`](crate::InvalidInput::DataNotKept)
    /// and nothing is sent. If the release finds the lock lost, the payload is not written.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient, lock: ddb_lock::Lock) -> Result<(), ddb_lock::Error> {
    /// client
    ///     .release_and_replace_data(&lock, Some(br#"{"last_row":9812}"#.to_vec()))
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn release_and_replace_data(
        &self,
        lock: impl AsRef<LockHandle>,
        data: Option<Vec<u8>>,
    ) -> Result<ReleaseOutcome, Error> {
        if self.settings.table.delete_on_release {
            return Err(InvalidInput::DataNotKept.into());
        }
        if let Some(data) = &data {
            limits::data(data)?;
        }
        self.release_changing_data(lock.as_ref(), Some(data)).await
    }

    /// Releases `handle` after another release of its acquisition through this client (a twin
    /// guard's, `with_lock`'s, `release_all`'s), which stopped the guard that sends this one: a
    /// resend of that release, which reads the lock gone as [`ReleaseOutcome::Unconfirmed`] (sent
    /// once that release was answered, it said `NotFound`, a loss, of a lock its own acquisition
    /// had released).
    pub(crate) async fn release_after_another(
        &self,
        handle: &LockHandle,
    ) -> Result<ReleaseOutcome, Error> {
        self.settings.table.check_handle(handle)?;
        self.release_from_task(&Release::of(handle), None, true)
            .await
    }

    /// Releases `handle`, replacing the payload with `data` if given (`Some(None)` removes it).
    async fn release_changing_data(
        &self,
        handle: &LockHandle,
        data: Option<Option<Vec<u8>>>,
    ) -> Result<ReleaseOutcome, Error> {
        self.settings.table.check_handle(handle)?;
        self.release_from_task(&Release::of(handle), data, false)
            .await
    }

    /// Sends `release` from a task of the client, started at the call and marked as being
    /// released at once: dropping the returned future (a timeout, a `select!`) cancels nothing,
    /// and [`flush`](Self::flush) waits for it (awaited in place, a release dropped before its
    /// request left sent none, and the lock stayed held for its lease; found by review). With
    /// no runtime to spawn on, released in place. `after_another` if a release of the same
    /// acquisition through this client stopped the guard that sends this one
    /// ([`release_after_another`](Self::release_after_another)).
    async fn release_from_task(
        &self,
        release: &Release<'_>,
        data: Option<Option<Vec<u8>>>,
        after_another: bool,
    ) -> Result<ReleaseOutcome, Error> {
        let table = &self.settings.table;
        // On its way from here to the task's answer: `release_all` leaves the lock to it.
        let release::Started {
            mut underway,
            ending,
            mismatched,
        } = release::start(table, release, &DataChange::of_release(data.as_ref()))?;
        let (client, (resource, owner)) = (
            self.clone(),
            (release.resource.to_owned(), release.owner.to_owned()),
        );
        let (lock_id, acquired_by, mode) = (release.lock_id, release.acquired_by, release.mode);
        let spawned_data = data.clone();
        let answered = self.detached(async move {
            // After any release of the lock on its way before it (a twin guard's, `with_lock`'s):
            // sent at once, it could land first, and that release, refused, found the lock gone.
            let resent = after_earlier(
                &mut underway,
                &DataChange::of_release(spawned_data.as_ref()),
            )
            .await;
            // Stopped by a release of its acquisition that has ended: a resend of it, if that
            // one may have released the lock (one refused told its caller the lock was lost or
            // another's, and this one says so too).
            let resent = resent
                || (after_another
                    && lock_id.is_some_and(|lock_id| {
                        client.settings.table.holds.may_have_been_released(lock_id)
                    }));
            let release = Release {
                resource: &resource,
                owner: &owner,
                lock_id,
                acquired_by,
                mode,
                resent,
                version: None,
            };
            let (table, change) = (
                &client.settings.table,
                DataChange::of_release(spawned_data.as_ref()),
            );
            // Sent again when DynamoDB fails it (four tries in all, each resend read as one, as a
            // dropped guard's release), before anyone is answered: sent once, a release whose
            // caller was gone left the lock held by nobody for its lease (found by the random
            // test of tasks sharing clients under cancellation), and answering the first failure
            // while sending again told callers (a saga's retry, `release_all`) of a failure that
            // then released the lock (found by review). On its way until then, so that a guard
            // dropped meanwhile leaves the lock to it; no longer once answered, so that a guard
            // dropped on its error sends it again.
            // (A release by owner's `ending`, a release of one acquisition's `underway`.)
            let send = release::send_retrying_started(
                table,
                &release,
                change,
                mismatched,
                underway.as_ref(),
            );
            let outcome = release::sent_for_ending(table, &release, &ending, send).await;
            answered(underway.as_ref(), &outcome);
            drop(underway);
            outcome
        });
        let in_place = release::send(table, release, DataChange::of_release(data.as_ref()));
        detached_outcome(answered, release.resource, in_place).await
    }

    /// Releases the lock on `resource` if `owner` holds it, whatever its `LockID`: one DeleteItem
    /// conditioned on `Owner` alone. For cleaning up after an owner that can no longer release
    /// with its lock id, such as a Step Functions execution that failed, timed out or was
    /// aborted. Safe only where owner names are unique per holder (execution ARNs are).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// let execution = "arn:aws:states:eu-west-1:123456789012:execution:checkout:7b1e";
    /// client.release_owned("invoice/2026-0042", execution).await?;
    /// # Ok(()) }
    /// ```
    pub async fn release_owned(
        &self,
        resource: &str,
        owner: &str,
    ) -> Result<ReleaseOutcome, Error> {
        self.settings.table.check_resource(resource)?;
        limits::owner(owner)?;
        self.release_from_task(&Release::owned(resource, owner, None), None, false)
            .await
    }

    /// [`release_owned`](Self::release_owned), sparing a lock of `owner` acquired after
    /// `acquired_by`: one DeleteItem conditioned on `Owner` and on `AcquiredAt <= acquired_by`.
    ///
    /// For releasing the lock of a Step Functions execution that stopped at `acquired_by` (the
    /// stop time its status-change event carries): if the execution was redriven since, under the
    /// same execution ARN, and took the lock again, that newer lock is left alone (reported as
    /// [`ReleaseOutcome::NotOwner`]), however late or often the event arrives. `AcquiredAt` is
    /// the acquirer's clock and the stop time the service's: a redrive sooner after the stop than
    /// the skew between them could be mistaken for the old acquisition.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use chrono::{TimeZone, Utc};
    ///
    /// let execution = "arn:aws:states:eu-west-1:123456789012:execution:checkout:7b1e";
    /// let stopped_at = Utc.timestamp_millis_opt(1_795_459_402_000).unwrap();
    /// client
    ///     .release_owned_acquired_by("invoice/2026-0042", execution, stopped_at)
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn release_owned_acquired_by(
        &self,
        resource: &str,
        owner: &str,
        acquired_by: DateTime<Utc>,
    ) -> Result<ReleaseOutcome, Error> {
        self.settings.table.check_resource(resource)?;
        limits::owner(owner)?;
        let release = Release::owned(resource, owner, Some(acquired_by));
        self.release_from_task(&release, None, false).await
    }
}

/// The outcome of a release [`detached`](LockClient::detached) from its caller, given its
/// receiver: the task's answer (`ReleaseAbandoned` for `resource` if the task ended without one),
/// or, with no runtime to spawn on (another executor polls the caller), `in_place`'s.
async fn detached_outcome(
    answered: Option<tokio::sync::oneshot::Receiver<Result<ReleaseOutcome, Error>>>,
    resource: &str,
    in_place: impl std::future::Future<Output = Result<ReleaseOutcome, Error>>,
) -> Result<ReleaseOutcome, Error> {
    match answered {
        Some(answered) => answered.await.unwrap_or_else(|_| {
            Err(Error::ReleaseAbandoned {
                resource: resource.to_owned(),
            })
        }),
        None => in_place.await,
    }
}

/// Waits for the releases of the lock on their way before `underway` (if any,
/// [`ReleaseUnderway::after_earlier`]); true if one of them may have released the lock, and the
/// release, making `change`, is then a resend: never one that changes the payload, which no
/// earlier release wrote (one that met such a release's record answered `Unconfirmed`, as if it
/// may have written it, rather than `AlreadyReleased`; found by review).
async fn after_earlier(underway: &mut Option<ReleaseUnderway>, change: &DataChange<'_>) -> bool {
    let earlier = match underway {
        Some(underway) => underway.after_earlier().await,
        None => false,
    };
    earlier && matches!(change, DataChange::Keep)
}

/// Tells the releases waiting for the one on its way as `underway` (if any) what it found.
fn answered(underway: Option<&ReleaseUnderway>, outcome: &Result<ReleaseOutcome, Error>) {
    if let Some(underway) = underway {
        underway.answered(outcome);
    }
}
