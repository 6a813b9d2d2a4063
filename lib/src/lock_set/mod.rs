//! Lock sets: several resources, each exclusive or shared, taken all or nothing in one
//! `TransactWriteItems` ([`transaction`]) and released together.
//!
//! A set is the members' own acquisitions in one transaction: each member's write is exactly
//! the one a single acquisition of it would send (the exclusive Put, or the shared UpdateItem),
//! so a set excludes and is excluded by single locks of its members as they exclude each other.
//! Each member is then an ordinary [`Lock`], extended, guarded and released like one.
//!
//! Members name each resource once: a resource named twice (a redundant member, as Locktopus
//! allows) is taken once, in the stronger of its modes. No empty sets, at most
//! [`MAX_SET_MEMBERS`] distinct resources (one transaction's items).

mod transaction;

use crate::client::LockClient;
use crate::error::{Error, InvalidInput};
use crate::guard::{taken_at_release, LockGuard, LockWatch};
use crate::limits::MAX_SET_MEMBERS;
use crate::lock::{Holder, Lock, LockHandle};
use crate::mode::Mode;
use crate::ops::acquire::Request;
use crate::ops::fenced_acquire::TransactionConflicts;
use crate::options::AcquireOptions;
use crate::outcome::{LockLost, ReleaseOutcome};
use crate::takeover::TakeoverRule;
use crate::wait::backoff::Backoff;
use futures_util::future::{join_all, select_all, FutureExt};
use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;
use tokio::time::Instant;
use tracing::{debug, info};

/// The locks of a set taken as one: one [`Lock`] per distinct resource, in the order of the
/// resources' names.
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
/// use ddb_lock::{AcquireOptions, Mode};
///
/// let set = client
///     .acquire_set(&[("account/1", Mode::Exclusive), ("account/2", Mode::Exclusive)], &AcquireOptions::new())
///     .await?;
/// // ... move money from account 1 to account 2 ...
/// client.release_set(&set).await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockSet {
    locks: Vec<Lock>,
}

impl LockSet {
    /// Every member's lock.
    pub fn locks(&self) -> &[Lock] {
        &self.locks
    }

    /// The lock of `resource`, if it is a member.
    pub fn get(&self, resource: &str) -> Option<&Lock> {
        self.locks.iter().find(|lock| lock.resource() == resource)
    }

    /// The members' locks, for handing each on.
    pub fn into_locks(self) -> Vec<Lock> {
        self.locks
    }
}

/// The outcome of one try at a lock set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetAttempt {
    /// Every member is held.
    Acquired(LockSet),
    /// Nothing was taken: `resource` is held by `holder` (the first member found in the way).
    Held {
        /// The member that refused.
        resource: String,
        /// Who holds it.
        holder: Holder,
    },
}

/// The distinct members of a set, each in its strongest mode, in name order.
pub(crate) fn members(requested: &[(&str, Mode)]) -> Result<Vec<(String, Mode)>, InvalidInput> {
    if requested.is_empty() {
        return Err(InvalidInput::EmptySet);
    }
    let mut members: BTreeMap<&str, Mode> = BTreeMap::new();
    for &(resource, mode) in requested {
        let joined = members.entry(resource).or_insert(mode);
        *joined = joined.join(mode);
    }
    if members.len() > MAX_SET_MEMBERS {
        return Err(InvalidInput::TooManyMembers {
            count: members.len(),
            max: MAX_SET_MEMBERS,
        });
    }
    Ok(members
        .into_iter()
        .map(|(resource, mode)| (resource.to_owned(), mode))
        .collect())
}

/// The options of each member: `opts` in the member's mode. Options a set does not take are
/// refused.
fn member_options(
    client: &LockClient,
    members: &[(String, Mode)],
    opts: &AcquireOptions,
) -> Result<Vec<AcquireOptions>, InvalidInput> {
    let unsupported = [
        ("idempotent", opts.is_idempotent()),
        ("data", opts.data_bytes().is_some()),
        ("only_if_exists", opts.is_only_if_exists()),
        ("permits", opts.permit_count().is_some()),
        // A set is taken in one transaction: it does not wait in the lines of its members.
        ("fair", opts.is_fair()),
        (
            "takeover_rule",
            client.settings.table.takeover == TakeoverRule::ObservedLease,
        ),
    ];
    if let Some((field, _)) = unsupported.iter().find(|(_, set)| *set) {
        return Err(InvalidInput::NotForSets { field });
    }
    // Fencing orders the writes of exclusive holders; a shared member takes no token.
    let fenced = |mode: Mode| opts.is_fencing() && mode == Mode::Exclusive;
    let fenced_members = members.iter().filter(|(_, mode)| fenced(*mode));
    let common = crate::path::common_fence(fenced_members.clone().map(|(r, _)| r.as_str()));
    let fences = fenced_members.count() + usize::from(common.is_some());
    if members.len() + fences > MAX_SET_MEMBERS {
        return Err(InvalidInput::TooManyWrites {
            members: members.len(),
            fences,
            max: MAX_SET_MEMBERS,
        });
    }
    Ok(members
        .iter()
        .map(|(_, mode)| opts.clone().mode(*mode).fencing(fenced(*mode)))
        .collect())
}

impl LockClient {
    /// Tries once to take every member of a set, all or nothing: one `TransactWriteItems` of
    /// each member's acquisition write. A refusal names the member in the way and its holder;
    /// then nothing was taken.
    ///
    /// `members` are `(resource, mode)` pairs; a resource named twice is taken once, in the
    /// stronger mode. The options' owner, lease and fencing apply to every member (fencing gives
    /// each exclusive member a token, raised in the same transaction: at most 100 members and
    /// fence items together, [`InvalidInput::TooManyWrites`]; a shared member takes none); payloads,
    /// `idempotent`, `only_if_exists` and `permits` are not offered for sets
    /// ([`InvalidInput::NotForSets`]).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::{AcquireOptions, Mode, SetAttempt};
    ///
    /// let members = [("order/7", Mode::Exclusive), ("catalog", Mode::Shared)];
    /// match client.try_acquire_set(&members, &AcquireOptions::new()).await? {
    ///     SetAttempt::Acquired(set) => drop(client.release_set(&set).await),
    ///     SetAttempt::Held { resource, holder } => println!("{resource} is {}'s", holder.owner),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire_set(
        &self,
        members: &[(&str, Mode)],
        opts: &AcquireOptions,
    ) -> Result<SetAttempt, Error> {
        let members = members_of(self, members, opts)?;
        let requests = self.member_requests(&members)?;
        let mut backoff = Backoff::new(self.settings.backoff);
        for tries in 1..=transaction::MAX_CONFLICTS {
            match transaction::attempt(&self.settings.table, &requests).await? {
                transaction::Attempt::Acquired(set) => return Ok(SetAttempt::Acquired(set)),
                transaction::Attempt::Held {
                    resource, holder, ..
                } => return Ok(SetAttempt::Held { resource, holder }),
                transaction::Attempt::Conflict if tries < transaction::MAX_CONFLICTS => {
                    tokio::time::sleep(backoff.next_delay()).await;
                }
                transaction::Attempt::Conflict => {}
            }
        }
        Err(Error::backend_other(
            "TransactWriteItems",
            TransactionConflicts(transaction::MAX_CONFLICTS),
        ))
    }

    /// Takes every member of a set, all or nothing, waiting up to the options' timeout (else the
    /// client's) as [`acquire`](Self::acquire) does, with the same backoff. On timeout,
    /// [`Error::Timeout`] names the member seen in the way last and its holder.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::{AcquireOptions, Mode};
    ///
    /// let set = client
    ///     .acquire_set(&[("seat/12A", Mode::Exclusive), ("seat/12B", Mode::Exclusive)], &AcquireOptions::new())
    ///     .await?;
    /// client.release_set(&set).await;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_set(
        &self,
        members: &[(&str, Mode)],
        opts: &AcquireOptions,
    ) -> Result<LockSet, Error> {
        let started = Instant::now();
        let members = members_of(self, members, opts)?;
        let requests = self.member_requests(&members)?;
        let timeout = opts
            .timeout_duration()
            .unwrap_or(self.settings.acquire_timeout);
        crate::limits::duration("timeout", timeout, Duration::ZERO)?;
        let deadline = started + timeout;
        let mut backoff = Backoff::new(self.settings.backoff);
        let mut last: Option<(String, Holder)> = None;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let retry_at = match transaction::attempt(&self.settings.table, &requests).await? {
                transaction::Attempt::Acquired(set) => {
                    info!(members = set.locks.len(), waited_ms = %started.elapsed().as_millis(), attempts, "lock set acquired");
                    return Ok(set);
                }
                transaction::Attempt::Held {
                    resource,
                    holder,
                    retry_at,
                } => {
                    debug!(%resource, holder = %holder.owner, "lock set refused");
                    last = Some((resource, holder));
                    retry_at
                }
                transaction::Attempt::Conflict => Instant::now() + self.settings.backoff.max(),
            };
            let now = Instant::now();
            if now >= deadline {
                return Err(match last {
                    Some((resource, holder)) => Error::Timeout {
                        resource,
                        waited: now - started,
                        holder: Box::new(holder),
                    },
                    None => {
                        Error::backend_other("TransactWriteItems", TransactionConflicts(attempts))
                    }
                });
            }
            let delay = backoff
                .next_delay()
                .min(retry_at.saturating_duration_since(now))
                .min(deadline - now);
            tokio::time::sleep(delay).await;
        }
    }

    /// Releases every member of `set`, each with its own request, sent together: a member lost
    /// meanwhile does not keep the others held. One outcome per member, in the set's order. Each
    /// release runs in a task of the client's (as [`release_all`](Self::release_all)'s do), so
    /// that dropping this future (a timeout, a `select!`) releases every member all the same:
    /// the members not yet sent stayed held (a path's ancestors' intentions, say) for their
    /// lease.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient, set: ddb_lock::LockSet) {
    /// for (lock, outcome) in client.release_set(&set).await {
    ///     println!("{}: {outcome:?}", lock.resource());
    /// }
    /// # }
    /// ```
    pub async fn release_set(
        &self,
        set: &LockSet,
    ) -> Vec<(LockHandle, Result<ReleaseOutcome, Error>)> {
        let handles: Vec<&LockHandle> = set.locks.iter().map(Lock::handle).collect();
        let outcomes = self.release_members(&handles).await;
        handles.into_iter().cloned().zip(outcomes).collect()
    }

    /// Releases the members `handles` of a set as [`release_set`](Self::release_set) does (a set
    /// handed back as its members' handles, from a saga's state, say), once every handle is
    /// checked: a bad one ([`InvalidInput`], naming the member's field, or `resources` for an
    /// empty or too large set) releases nothing. Checked member by member as each was released,
    /// the set was released in part and the error named a field the caller's set does not have
    /// (found by review). One outcome per handle, in their order.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient, handles: Vec<ddb_lock::LockHandle>) -> Result<(), ddb_lock::Error> {
    /// for outcome in client.release_handles(&handles).await? {
    ///     println!("{:?}", outcome?);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn release_handles(
        &self,
        handles: &[LockHandle],
    ) -> Result<Vec<Result<ReleaseOutcome, Error>>, Error> {
        if handles.is_empty() {
            return Err(InvalidInput::EmptySet.into());
        }
        let distinct = handles
            .iter()
            .map(LockHandle::resource)
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        if distinct > MAX_SET_MEMBERS {
            return Err(InvalidInput::TooManyMembers {
                count: distinct,
                max: MAX_SET_MEMBERS,
            }
            .into());
        }
        for handle in handles {
            self.settings.table.check_handle(handle)?;
        }
        let handles: Vec<&LockHandle> = handles.iter().collect();
        Ok(self.release_members(&handles).await)
    }

    /// Releases `handles`, each with its own request from a task of the client, sent together.
    async fn release_members(&self, handles: &[&LockHandle]) -> Vec<Result<ReleaseOutcome, Error>> {
        join_all(handles.iter().map(|handle| self.release_detached(handle))).await
    }

    /// [`acquire_set`](Self::acquire_set), returning one [`LockGuard`] per member, each
    /// extending its lock until released, dropped or lost.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::{AcquireOptions, Mode};
    ///
    /// let guards = client.lock_set(&[("a", Mode::Exclusive), ("b", Mode::Shared)], &AcquireOptions::new()).await?;
    /// assert!(guards.iter().all(|guard| guard.is_held()));
    /// # Ok(()) }
    /// ```
    pub async fn lock_set(
        &self,
        members: &[(&str, Mode)],
        opts: &AcquireOptions,
    ) -> Result<Vec<LockGuard>, Error> {
        let (lease, heartbeat) = self.guard_timing(opts)?;
        let set = self.acquire_set(members, opts).await?;
        Ok(set
            .locks
            .into_iter()
            .map(|lock| LockGuard::start(self, lock, lease, heartbeat))
            .collect())
    }

    /// Runs `work` while holding every member of a set, and always releases them afterwards, as
    /// [`with_lock`](Self::with_lock) does for one lock: `work` gets a [`LockWatch`] per member
    /// (in name order); if any member is lost first, `work` is dropped at its next `.await` and
    /// the result is [`Error::Lost`] naming that member (also one whose release after the work
    /// found someone else's lock).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::{AcquireOptions, Mode};
    ///
    /// let moved = client
    ///     .with_lock_set(&[("account/1", Mode::Exclusive), ("account/2", Mode::Exclusive)], &AcquireOptions::new(), |_watches| async {
    ///         Ok::<_, ddb_lock::Error>(100)
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn with_lock_set<T, E, F, Fut>(
        &self,
        members: &[(&str, Mode)],
        opts: &AcquireOptions,
        work: F,
    ) -> Result<T, E>
    where
        F: FnOnce(Vec<LockWatch>) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: From<Error>,
    {
        let (lease, heartbeat) = self.guard_timing(opts).map_err(Error::from)?;
        let set = self.acquire_set(members, opts).await?;
        let resources: Vec<String> = set.locks.iter().map(|l| l.resource().to_owned()).collect();
        let guards: Vec<LockGuard> = set
            .locks
            .into_iter()
            .map(|lock| LockGuard::start(self, lock, lease, heartbeat))
            .collect();
        let watches: Vec<LockWatch> = guards.iter().map(LockGuard::watch).collect();
        let any_lost = select_all(guards.iter().map(|guard| Box::pin(guard.lost())));
        let held = |guards: &[LockGuard]| guards.iter().all(LockGuard::is_held);
        let finished = tokio::select! {
            biased;
            (lost, index, _) = any_lost => SetFinished::Lost(index, lost),
            result = AssertUnwindSafe(work(watches)).catch_unwind() => match result {
                Err(panic) => SetFinished::Panicked(panic),
                Ok(result) if held(&guards) => SetFinished::Done(result),
                Ok(_) => {
                    let (lost, index, _) = select_all(guards.iter().map(|guard| Box::pin(guard.lost()))).await;
                    SetFinished::Lost(index, lost)
                }
            },
        };
        let taken = join_all(
            resources
                .iter()
                .zip(guards)
                .map(|(resource, guard)| async move {
                    taken_at_release(resource, guard.release().await)
                }),
        )
        .await
        .into_iter()
        .enumerate()
        .find_map(|(index, taken)| taken.map(|lost| (index, lost)));
        let finished = match (finished, taken) {
            (SetFinished::Done(_), Some((index, lost))) => SetFinished::Lost(index, lost),
            (finished, _) => finished,
        };
        let lost_member = match &finished {
            SetFinished::Lost(index, _) => resources.get(*index).cloned(),
            _ => None,
        };
        match finished {
            SetFinished::Done(result) => result,
            SetFinished::Lost(_, reason) => Err(Error::Lost {
                resource: lost_member.unwrap_or_default(),
                reason: Box::new(reason),
            }
            .into()),
            SetFinished::Panicked(panic) => std::panic::resume_unwind(panic),
        }
    }

    /// One validated request per member.
    fn member_requests<'a>(
        &'a self,
        members: &'a [(String, AcquireOptions)],
    ) -> Result<Vec<Request<'a>>, Error> {
        members
            .iter()
            .map(|(resource, opts)| self.request(resource, opts))
            .collect()
    }
}

/// The distinct members of a set with their options, validated.
fn members_of(
    client: &LockClient,
    requested: &[(&str, Mode)],
    opts: &AcquireOptions,
) -> Result<Vec<(String, AcquireOptions)>, InvalidInput> {
    let members = members(requested)?;
    let options = member_options(client, &members, opts)?;
    Ok(members
        .into_iter()
        .map(|(resource, _)| resource)
        .zip(options)
        .collect())
}

/// How [`with_lock_set`](LockClient::with_lock_set)'s work ended.
enum SetFinished<T> {
    Done(T),
    Lost(usize, LockLost),
    Panicked(Box<dyn std::any::Any + Send>),
}
