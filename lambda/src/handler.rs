//! The handler: parse the event, call the library, shape the answer, emit one metrics line.

use crate::config::Config;
use crate::error::HandlerError;
use crate::event::{self, HeldLock, NewLock, NewSet, Request, RequestError};
use crate::metrics::{emf_line, OperationMetrics};
use crate::response::{
    CleanupResponse, ForceReleaseResponse, ListResponse, LockResponse, LockSetResponse, Response,
    StatusResponse,
};
use ddb_lock::{
    wait_budget, AcquireOptions, CleanupCursor, LockClient, LockHandle, LockStatus, Mode,
    Namespace, SetAttempt,
};
use lambda_runtime::LambdaEvent;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::time::Instant;
use tracing::info;

mod release;

/// Writes one metrics line.
type MetricsWriter = Arc<dyn Fn(String) + Send + Sync>;

/// The Lambda handler. Cheap to share across invocations (`Arc`).
///
/// # Examples
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use ddb_lock_lambda::{Config, Handler};
/// use lambda_runtime::{Context, LambdaEvent};
/// use serde_json::json;
///
/// let config = Config::from_env()?;
/// let aws = aws_config::load_from_env().await;
/// let handler = Handler::new(config.lock_client(aws_sdk_dynamodb::Client::new(&aws))?, config);
/// let event = json!({"op": "try_acquire", "resource": "orders/42", "owner": "exec-1"});
/// let answer = handler.handle(LambdaEvent::new(event, Context::default())).await?;
/// println!("{answer:?}");
/// # Ok(()) }
/// ```
pub struct Handler {
    client: LockClient,
    config: Config,
    metrics: MetricsWriter,
}

/// The result of one operation: the answer and its outcome label for metrics.
struct Done {
    answer: Response,
    outcome: &'static str,
}

impl Done {
    fn new(answer: impl Into<Response>, outcome: &'static str) -> Done {
        Done {
            answer: answer.into(),
            outcome,
        }
    }
}

impl Handler {
    /// A handler over `client`; metrics lines go to standard output, where CloudWatch reads them.
    pub fn new(client: LockClient, config: Config) -> Self {
        Handler {
            client,
            config,
            metrics: Arc::new(|line| println!("{line}")),
        }
    }

    /// Sends metrics lines to `writer` instead of standard output.
    pub fn with_metrics_writer(mut self, writer: impl Fn(String) + Send + Sync + 'static) -> Self {
        self.metrics = Arc::new(writer);
        self
    }

    /// Handles one invocation.
    pub async fn handle(&self, event: LambdaEvent<Value>) -> Result<Response, HandlerError> {
        let started = Instant::now();
        let (payload, context) = event.into_parts();
        let operation = payload
            .get("op")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_owned();
        let resource = payload
            .get("resource")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let mut attempts = 0;
        let result = match event::namespace(&payload)
            .and_then(|namespace| event::parse(&payload).map(|request| (namespace, request)))
        {
            Ok((namespace, request)) => {
                let now = now_ms();
                let budget = wait_budget(context.deadline, now, self.config.deadline_margin);
                let deadline = wait_budget(context.deadline, now, Duration::ZERO)
                    .map(|left| Instant::now() + left);
                self.execute(namespace, request, budget, deadline, &mut attempts)
                    .await
            }
            Err(invalid) => Err(invalid.into()),
        };
        let outcome = match &result {
            Ok(done) => done.outcome,
            Err(err) => err.name(),
        };
        let metrics = OperationMetrics {
            operation,
            outcome: outcome.to_owned(),
            wait_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            attempts,
            resource,
        };
        (self.metrics)(emf_line(&self.config.metrics_namespace, now_ms(), &metrics));
        match &result {
            Ok(_) => info!(operation = %metrics.operation, outcome, "invocation handled"),
            Err(err) => {
                info!(operation = %metrics.operation, outcome, error = %err, "invocation failed")
            }
        }
        result.map(|done| done.answer)
    }

    /// Runs `request` in `namespace` within the time `budget`, counting its conditional writes in
    /// `attempts` (each is billed, so they are counted whether the operation succeeds or not), and
    /// answers before the invocation's `deadline`, if it has one.
    async fn execute(
        &self,
        namespace: Option<Namespace>,
        request: Request,
        budget: Option<Duration>,
        deadline: Option<Instant>,
        attempts: &mut u32,
    ) -> Result<Done, HandlerError> {
        let scoped;
        let client = match &namespace {
            Some(namespace) => {
                scoped = self.client.in_namespace(namespace.clone())?;
                &scoped
            }
            None => &self.client,
        };
        // An operation may end after its budget (its last attempt's answer comes late, up to an
        // attempt's timeout): it is cut a quarter of the margin before the deadline, and answered
        // `BackendUnavailable`, so that the caller gets a stable error name (Lambda's own timeout
        // reached it as `Sandbox.Timedout`, which a saga's retries do not name; found by review).
        // What it left (the clean-up of a write that may have landed) is done below.
        // (A margin longer than the time left counts as that time: the operation still gets
        // three quarters of it; cut at once, every operation was `BackendUnavailable`.)
        let before_deadline = |share: u32| {
            deadline.map(|deadline| {
                let left = deadline.saturating_duration_since(Instant::now());
                deadline - self.config.deadline_margin.min(left) / share
            })
        };
        let (cut_at, flushed_by) = (before_deadline(4), before_deadline(10));
        let run = self.run(client, namespace, request, budget, attempts);
        let done = match cut_at {
            Some(cut_at) => tokio::time::timeout_at(cut_at, run)
                .await
                .unwrap_or(Err(HandlerError::Unanswered)),
            None => run.await,
        };
        // The background work the operation left (the release of an acquisition whose write may
        // have landed though its answer never came, a waiting writer's withdrawal) is done before
        // the answer: once answered, the sandbox may be frozen, and the lock left held by nobody
        // until a thaw or its lease end (a clean-up sent on thaw spares a lock a retry was handed
        // back meanwhile: it releases only the version its write stored).
        // Until the deadline at most, less a tenth of the margin to send the answer: the sandbox
        // frozen then, the work goes on at a thaw, or, reset, what it would have released
        // expires with its lease. The work is bounded: a few tries of one request.
        match flushed_by {
            Some(flushed_by) => {
                if tokio::time::timeout_at(flushed_by, client.flush())
                    .await
                    .is_err()
                {
                    info!("the invocation's background work goes on past its answer");
                }
            }
            None => client.flush().await,
        }
        done
    }

    /// Runs `request` through `client` (of `namespace`, if any).
    async fn run(
        &self,
        client: &LockClient,
        namespace: Option<Namespace>,
        request: Request,
        budget: Option<Duration>,
        attempts: &mut u32,
    ) -> Result<Done, HandlerError> {
        match request {
            Request::Acquire { lock, wait } => {
                self.acquire(client, lock, wait, budget, attempts).await
            }
            Request::TryAcquire { lock } => self.try_acquire(client, lock, attempts).await,
            Request::AcquireSet { set, wait } => {
                self.acquire_set(client, set, wait, budget, attempts).await
            }
            Request::TryAcquireSet { set } => self.try_acquire_set(client, set, attempts).await,
            Request::ReleaseSet { owner, locks } => {
                self.release_set(client, owner, locks, attempts).await
            }
            Request::Release {
                lock,
                data,
                expires_at,
                retried,
            } => {
                // Only a retry may have been released by an earlier attempt of its own: a first
                // release that finds the lock another's, acquired before its lease end, lost it
                // to a force release or a stop event (found by review).
                let expires_at = expires_at.filter(|_| retried);
                self.release(client, lock, data, expires_at, attempts).await
            }
            Request::ReleaseExecution {
                resource,
                owner,
                stopped_at,
            } => {
                self.release_execution(client, resource, owner, stopped_at, attempts)
                    .await
            }
            Request::Extend { lock, lease, data } => {
                self.extend(client, lock, lease, data, attempts).await
            }
            Request::Status { resource, named_in } => self
                .status(client, resource)
                .await
                .map_err(|err| err.of_resource_in(named_in)),
            Request::ForceRelease { resource } => {
                self.force_release(client, resource, attempts).await
            }
            Request::Cleanup { cursor } => self.cleanup(client, cursor, budget, attempts).await,
            Request::List => self.list(client, namespace).await,
        }
    }

    /// Waits up to `wait` (the configured default if `None`), but never past the `budget`.
    async fn acquire(
        &self,
        client: &LockClient,
        lock: NewLock,
        wait: Option<Duration>,
        budget: Option<Duration>,
        attempts: &mut u32,
    ) -> Result<Done, HandlerError> {
        let wait = wait.unwrap_or(self.config.default_wait);
        let wait = budget.map_or(wait, |budget| wait.min(budget));
        let opts = acquire_options(&lock).timeout(wait);
        let (result, stats) = client.acquire_with_stats(&lock.resource, &opts).await;
        *attempts = stats.attempts;
        let mut answer = LockResponse::new(&result?);
        answer.waited_ms = Some(u64::try_from(stats.waited.as_millis()).unwrap_or(u64::MAX));
        answer.attempts = Some(stats.attempts);
        Ok(Done::new(answer, "acquired"))
    }

    async fn try_acquire(
        &self,
        client: &LockClient,
        lock: NewLock,
        attempts: &mut u32,
    ) -> Result<Done, HandlerError> {
        *attempts = 1;
        let attempt = client
            .try_acquire_with_holder(&lock.resource, &acquire_options(&lock))
            .await?;
        let acquired = HandlerError::from_try_acquire(&lock.resource, attempt)?;
        Ok(Done::new(LockResponse::new(&acquired), "acquired"))
    }

    /// Waits up to `wait` (within `budget`) for every member of `set`.
    async fn acquire_set(
        &self,
        client: &LockClient,
        set: NewSet,
        wait: Option<Duration>,
        budget: Option<Duration>,
        attempts: &mut u32,
    ) -> Result<Done, HandlerError> {
        *attempts = 1;
        let wait = wait.unwrap_or(self.config.default_wait);
        let wait = budget.map_or(wait, |budget| wait.min(budget));
        let members = set_members(&set);
        let acquired = client
            .acquire_set(&members, &set_options(&set).timeout(wait))
            .await
            .map_err(|err| HandlerError::from(err).of_member_in(set.field))?;
        Ok(Done::new(
            LockSetResponse::new(&set.owner, &acquired),
            "acquired",
        ))
    }

    /// One attempt at every member of `set`.
    async fn try_acquire_set(
        &self,
        client: &LockClient,
        set: NewSet,
        attempts: &mut u32,
    ) -> Result<Done, HandlerError> {
        *attempts = 1;
        let members = set_members(&set);
        let attempt = client
            .try_acquire_set(&members, &set_options(&set))
            .await
            .map_err(|err| HandlerError::from(err).of_member_in(set.field))?;
        match attempt {
            SetAttempt::Acquired(acquired) => Ok(Done::new(
                LockSetResponse::new(&set.owner, &acquired),
                "acquired",
            )),
            SetAttempt::Held { resource, holder } => Err(HandlerError::Held {
                resource,
                holder: Box::new(holder),
            }),
        }
    }

    /// Extends the lease to `lease` from now (the configured default if `None`), replacing the
    /// data when `data` is `Some`.
    async fn extend(
        &self,
        client: &LockClient,
        lock: HeldLock,
        lease: Option<Duration>,
        data: Option<Option<String>>,
        attempts: &mut u32,
    ) -> Result<Done, HandlerError> {
        *attempts = 1;
        let lease = lease.unwrap_or(self.config.default_lease);
        let held = handle(&lock);
        let outcome = match data {
            None => client.extend(&held, lease).await?,
            Some(data) => {
                let data = data.map(String::into_bytes);
                client.extend_and_replace_data(&held, lease, data).await?
            }
        };
        let extended = HandlerError::from_extend(lock, outcome)?;
        Ok(Done::new(LockResponse::new(&extended), "extended"))
    }

    async fn status(&self, client: &LockClient, resource: String) -> Result<Done, HandlerError> {
        let status = client.status(&resource).await?;
        let outcome = match status {
            LockStatus::Free => "free",
            LockStatus::Held { .. } => "held",
            LockStatus::Shared { .. } => "shared",
        };
        Ok(Done::new(StatusResponse::of(&resource, status), outcome))
    }

    /// The live locks of `namespace`.
    async fn list(
        &self,
        client: &LockClient,
        namespace: Option<Namespace>,
    ) -> Result<Done, HandlerError> {
        let namespace = namespace.ok_or_else(|| {
            RequestError::new("namespace", "is required: list names the namespace")
        })?;
        let locks = client
            .list(&namespace)
            .await?
            .into_iter()
            .map(|listed| StatusResponse::of(&listed.resource, listed.status))
            .collect();
        let answer = ListResponse {
            namespace: namespace.to_string(),
            locks,
        };
        Ok(Done::new(answer, "listed"))
    }

    /// Deletes the lock whoever holds it, if this deployment allows it.
    async fn force_release(
        &self,
        client: &LockClient,
        resource: String,
        attempts: &mut u32,
    ) -> Result<Done, HandlerError> {
        if !self.config.allow_force_release {
            return Err(HandlerError::ForceReleaseDisabled);
        }
        *attempts = 1;
        let removed = client.force_release(&resource).await?;
        let outcome = if removed.is_some() {
            "force_released"
        } else {
            "not_held"
        };
        let answer = ForceReleaseResponse {
            resource,
            released: removed.is_some(),
            previous_owner: removed.map(|holder| holder.owner),
        };
        Ok(Done::new(answer, outcome))
    }

    /// Cleans up from `cursor` call after call (each resuming where the last stopped) until the
    /// scan reaches the end of the table, the configured deletes are done, or the invocation's
    /// time `budget` would not fit another call as long as the longest so far. Where it stopped is
    /// in the answer's `next_cursor`, for the caller to pass back.
    async fn cleanup(
        &self,
        client: &LockClient,
        cursor: Option<CleanupCursor>,
        budget: Option<Duration>,
        attempts: &mut u32,
    ) -> Result<Done, HandlerError> {
        let ends = budget.map(|budget| Instant::now() + budget);
        let max_deletes = self.config.cleanup_max_deletes;
        let mut answer = CleanupResponse::starting_at(cursor);
        let mut longest = Duration::ZERO;
        loop {
            let started = Instant::now();
            let report = client
                .delete_expired(
                    self.config.cleanup_expired_for,
                    max_deletes - answer.deleted,
                    answer.next_cursor().as_ref(),
                )
                .await?;
            longest = longest.max(started.elapsed());
            answer.add(report);
            let out_of_time = ends.is_some_and(|ends| Instant::now() + longest * 2 > ends);
            if answer.complete || answer.deleted >= max_deletes || out_of_time {
                *attempts = answer.deleted + answer.skipped;
                return Ok(Done::new(answer, "cleaned"));
            }
        }
    }
}

/// Every acquire through the function is idempotent per owner: a Step Functions `Retry` of an
/// Acquire state gets back the lock its execution already holds.
fn acquire_options(lock: &NewLock) -> AcquireOptions {
    // Shared holds are not handed back to their owner: a retried shared acquisition whose answer
    // was lost takes a second hold, which ends with its lease.
    // Nor are fair ones: a retried fair acquisition joins the line again, and a lock granted to
    // the lost attempt ends with its lease.
    let mut opts = AcquireOptions::new()
        .owner(&lock.owner)
        .idempotent(lock.mode == Mode::Exclusive && !lock.fair)
        .fencing(lock.fencing)
        .only_if_exists(lock.only_if_exists)
        .fair(lock.fair);
    if let Some(permits) = lock.permits {
        opts = opts.permits(permits);
    }
    opts = opts.mode(lock.mode);
    if let Some(lease) = lock.lease {
        opts = opts.lease(lease);
    }
    if let Some(data) = &lock.data {
        opts = opts.data(data.as_bytes());
    }
    opts
}

/// A set's members as the library takes them.
fn set_members(set: &NewSet) -> Vec<(&str, Mode)> {
    set.members
        .iter()
        .map(|(resource, mode)| (resource.as_str(), *mode))
        .collect()
}

/// A set's options: its owner and lease (sets are not handed back to their owner: the library
/// refuses `idempotent` for sets).
fn set_options(set: &NewSet) -> AcquireOptions {
    let opts = AcquireOptions::new().owner(&set.owner).fencing(set.fencing);
    match set.lease {
        Some(lease) => opts.lease(lease),
        None => opts,
    }
}

fn handle(lock: &HeldLock) -> LockHandle {
    LockHandle::new(&lock.resource, &lock.owner, lock.lock_id).with_mode(lock.mode)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
