//! Configuring a [`LockClient`].

use crate::client::{LockClient, Settings};
use crate::clock::{Clock, SystemClock};
use crate::error::{Error, InvalidInput};
use crate::global_tables::GlobalTables;
use crate::limits::{self, MIN_LEASE};
use crate::lock_table::LockTable;
use crate::namespace::Namespace;
use crate::schema::{self, TableSchema};
use crate::takeover::TakeoverRule;
use crate::wait::backoff::BackoffBounds;
use std::sync::Arc;
use std::time::Duration;

/// Builds a [`LockClient`]; get one from [`LockClient::builder`]. Every setting is validated by
/// [`build`](Self::build).
///
/// # Examples
///
/// ```no_run
/// # async fn run() -> Result<(), ddb_lock::Error> {
/// use ddb_lock::LockClient;
/// use std::time::Duration;
///
/// let config = aws_config::load_from_env().await;
/// let client = LockClient::builder(aws_sdk_dynamodb::Client::new(&config))
///     .table_name("locks")
///     .owner("billing-worker")
///     .lease(Duration::from_secs(60))
///     .acquire_timeout(Duration::from_secs(5))
///     .build()?;
/// client.check_table().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct LockClientBuilder {
    dynamodb: aws_sdk_dynamodb::Client,
    table_name: Option<String>,
    schema: TableSchema,
    owner: Option<String>,
    lease: Duration,
    acquire_timeout: Duration,
    backoff: BackoffBounds,
    ttl_grace: Duration,
    clock: Arc<dyn Clock>,
    takeover: TakeoverRule,
    delete_on_release: bool,
    keep_released_for: Option<Duration>,
    global_tables: GlobalTables,
    namespace: Option<Namespace>,
}

impl LockClientBuilder {
    /// Default key prefix: items are keyed `LOCK#<resource>`.
    pub const DEFAULT_KEY_PREFIX: &'static str = schema::DEFAULT_KEY_PREFIX;
    /// Default lease.
    pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
    /// Default acquire timeout.
    pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);
    /// Default time between a lease's end and the `TTL` DynamoDB may delete the item at.
    pub const DEFAULT_TTL_GRACE: Duration = Duration::from_secs(60 * 60);

    pub(crate) fn new(dynamodb: aws_sdk_dynamodb::Client) -> Self {
        LockClientBuilder {
            dynamodb,
            table_name: None,
            schema: TableSchema::default(),
            owner: None,
            lease: Self::DEFAULT_LEASE,
            acquire_timeout: Self::DEFAULT_ACQUIRE_TIMEOUT,
            backoff: BackoffBounds::default(),
            ttl_grace: Self::DEFAULT_TTL_GRACE,
            clock: Arc::new(SystemClock),
            takeover: TakeoverRule::WallClock,
            delete_on_release: true,
            keep_released_for: None,
            global_tables: GlobalTables::Refuse,
            namespace: None,
        }
    }

    /// The lock table (required).
    pub fn table_name(mut self, table_name: impl Into<String>) -> Self {
        self.table_name = Some(table_name.into());
        self
    }

    /// Prefix of every partition key (default `LOCK#`), so lock items can share a table with
    /// other items: the same as [`TableSchema::key_prefix`] on the client's schema (the later of
    /// this and [`schema`](Self::schema) wins).
    pub fn key_prefix(mut self, key_prefix: impl Into<String>) -> Self {
        self.schema = self.schema.key_prefix(key_prefix);
        self
    }

    /// Where lock items live in the table (key attributes, key formats, TTL attribute); default
    /// [`TableSchema::new`], the library's historical layout. Validated by [`build`](Self::build).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::{LockClient, TableSchema};
    ///
    /// let config = aws_config::load_from_env().await;
    /// let client = LockClient::builder(aws_sdk_dynamodb::Client::new(&config))
    ///     .table_name("app")
    ///     .schema(TableSchema::new().partition_key("pk").sort_key("sk", "LOCK").without_ttl())
    ///     .build()?;
    /// client.check_table().await?;
    /// # Ok(()) }
    /// ```
    pub fn schema(mut self, schema: TableSchema) -> Self {
        self.schema = schema;
        self
    }

    /// Every lock of the client lives in `namespace`, apart from the locks of clients without
    /// one and of other namespaces, and [`LockClient::list`] finds it there. See
    /// [`Namespace`]; [`LockClient::in_namespace`] makes a client of another namespace from
    /// this one.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::LockClient;
    ///
    /// let config = aws_config::load_from_env().await;
    /// let client = LockClient::builder(aws_sdk_dynamodb::Client::new(&config))
    ///     .table_name("locks")
    ///     .namespace("billing".parse()?)
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn namespace(mut self, namespace: Namespace) -> Self {
        self.namespace = Some(namespace);
        self
    }

    /// Owner used when [`AcquireOptions`](crate::AcquireOptions) names none (default: `ddb-lock-`
    /// followed by a UUID, unique to this client).
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// Lease used when the options give none.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Acquire timeout used when the options give none.
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = timeout;
        self
    }

    /// Bounds of the jittered backoff between acquire attempts.
    pub fn backoff(mut self, backoff: BackoffBounds) -> Self {
        self.backoff = backoff;
        self
    }

    /// How long after a lease ends the item's `TTL` lets DynamoDB delete it.
    pub fn ttl_grace(mut self, grace: Duration) -> Self {
        self.ttl_grace = grace;
        self
    }

    /// The wall clock that decides expiry (default [`SystemClock`]).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// How this client decides that a lock someone else wrote may be taken over: by comparing
    /// `ExpiresAt` with its clock (the default), or by seeing the item's version unchanged for a
    /// whole lease, immune to clock skew. See [`TakeoverRule`].
    pub fn takeover(mut self, rule: TakeoverRule) -> Self {
        self.takeover = rule;
        self
    }

    /// Whether a release deletes the lock item (`true`, the default) or keeps it (`false`).
    ///
    /// A kept item loses its holder and lease but keeps its key, its `LockID` and its payload
    /// (`Data`), so the next holder reads what the last one left: every acquisition through this
    /// client then keeps the payload it finds unless it sets one
    /// ([`AcquireOptions::data`](crate::AcquireOptions::data)), and returns it in
    /// [`Lock::data`](crate::Lock::data). A release still costs one request (an UpdateItem instead of
    /// a DeleteItem), an acquisition too (an UpdateItem instead of a PutItem), and so does
    /// everything that ends a hold: a guard's release or drop, the clean-up of a dropped
    /// acquisition, [`release_all`](LockClient::release_all), a force release. Kept items stay until
    /// deleted (no `TTL`); [`AcquireOptions::only_if_exists`](crate::AcquireOptions::only_if_exists)
    /// takes locks only on such items. Clients of both kinds can share a table.
    ///
    /// A kept item also records its release (`ReleasedBy`, `ReleasedAt`), so that a later release
    /// of the same acquisition, or by the same owner, answers
    /// [`ReleaseOutcome::AlreadyReleased`](crate::ReleaseOutcome::AlreadyReleased) instead of
    /// `NotFound`. To keep that record for a while only, see
    /// [`keep_released_for`](Self::keep_released_for). Setting this replaces it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(dynamodb: aws_sdk_dynamodb::Client) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::{AcquireOptions, LockClient};
    ///
    /// let client = LockClient::builder(dynamodb)
    ///     .table_name("locks")
    ///     .delete_on_release(false)
    ///     .build()?;
    /// let lock = client.acquire("ledger/7", &AcquireOptions::new()).await?;
    /// let cursor = lock.data().map(<[u8]>::to_vec); // what the last holder left
    /// client.release_and_replace_data(&lock, Some(b"row 9812".to_vec())).await?;
    /// # Ok(()) }
    /// ```
    pub fn delete_on_release(mut self, delete: bool) -> Self {
        self.delete_on_release = delete;
        self.keep_released_for = None;
        self
    }

    /// Keeps a released item for `keep` after its release, then lets DynamoDB's TTL delete it: a
    /// release clears the holder, as [`delete_on_release(false)`](Self::delete_on_release) does,
    /// and sets the item's `TTL` to the release time plus `keep` instead of removing it. Meanwhile
    /// a release of the same acquisition, or by the same owner, answers
    /// [`ReleaseOutcome::AlreadyReleased`](crate::ReleaseOutcome::AlreadyReleased) (the
    /// `LOCK_ALREADY_RELEASED` of the atomic-lock protocol); afterwards, as TTL deletion is late
    /// (often hours), `AlreadyReleased` until the item is gone and `NotFound` after. For keys that
    /// come and go (one per order, per user), where kept items would pile up for good. The schema
    /// needs its TTL attribute (`InvalidInput::NeedsTtl` otherwise); `keep` is at least a second
    /// (`TTL` counts whole seconds). Setting [`delete_on_release`](Self::delete_on_release)
    /// replaces it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(dynamodb: aws_sdk_dynamodb::Client) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::{AcquireOptions, LockClient, ReleaseOutcome};
    /// use std::time::Duration;
    ///
    /// let client = LockClient::builder(dynamodb)
    ///     .table_name("locks")
    ///     .keep_released_for(Duration::from_secs(24 * 3600))
    ///     .build()?;
    /// let lock = client.acquire("order/7", &AcquireOptions::new()).await?;
    /// client.release(&lock).await?;
    /// assert!(matches!(client.release(&lock).await?, ReleaseOutcome::AlreadyReleased { .. }));
    /// # Ok(()) }
    /// ```
    pub fn keep_released_for(mut self, keep: Duration) -> Self {
        self.delete_on_release = false;
        self.keep_released_for = Some(keep);
        self
    }

    /// Whether [`check_table`](LockClient::check_table) and
    /// [`create_table`](LockClient::create_table) accept a global table (one with replicas):
    /// refused by default, because two Regions can each grant the same lock; see
    /// [`GlobalTables`] for the only safe use.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn run(dynamodb: aws_sdk_dynamodb::Client) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::{GlobalTables, LockClient};
    ///
    /// let client = LockClient::builder(dynamodb)
    ///     .table_name("locks")
    ///     .global_tables(GlobalTables::WritesThroughOneRegion)
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn global_tables(mut self, policy: GlobalTables) -> Self {
        self.global_tables = policy;
        self
    }

    /// Validates the settings and builds the client. Sends no request: call
    /// [`LockClient::check_table`] or [`LockClient::create_table`] to verify the table.
    pub fn build(self) -> Result<LockClient, Error> {
        let table_name = self.table_name.ok_or(InvalidInput::Empty {
            field: "table_name",
        })?;
        limits::table_name(&table_name)?;
        let schema = match self.namespace {
            Some(namespace) => self.schema.in_namespace(namespace),
            None => self.schema,
        };
        schema.validate()?;
        let owner = self
            .owner
            .unwrap_or_else(|| format!("ddb-lock-{}", uuid::Uuid::new_v4()));
        limits::owner(&owner)?;
        limits::duration("lease", self.lease, MIN_LEASE)?;
        limits::duration("acquire_timeout", self.acquire_timeout, Duration::ZERO)?;
        limits::duration("ttl_grace", self.ttl_grace, Duration::ZERO)?;
        limits::duration("backoff", self.backoff.initial(), Duration::from_millis(1))?;
        limits::duration("backoff", self.backoff.max(), Duration::from_millis(1))?;
        if let Some(keep) = self.keep_released_for {
            limits::duration("keep_released_for", keep, Duration::from_secs(1))?;
            if schema.ttl_attribute_name().is_none() {
                return Err(InvalidInput::NeedsTtl {
                    field: "keep_released_for",
                }
                .into());
            }
        }
        if self.backoff.initial() > self.backoff.max() {
            return Err(InvalidInput::BackoffOrder {
                initial: self.backoff.initial(),
                max: self.backoff.max(),
            }
            .into());
        }
        let table = LockTable {
            dynamodb: crate::conflict_retry::retrying_transaction_conflicts(self.dynamodb),
            name: table_name,
            schema,
            ttl_grace: self.ttl_grace,
            clock: self.clock,
            takeover: self.takeover,
            delete_on_release: self.delete_on_release,
            keep_released_for: self.keep_released_for,
            global_tables: self.global_tables,
            observations: Default::default(),
            queues: Default::default(),
            holds: Default::default(),
            lines_seen: Default::default(),
            background: Default::default(),
            window_claims: Default::default(),
            claims_given_back: Default::default(),
            token_offset: Default::default(),
        };
        Ok(LockClient::from_settings(Settings {
            table: Arc::new(table),
            owner,
            lease: self.lease,
            acquire_timeout: self.acquire_timeout,
            backoff: self.backoff,
            namespaces: crate::client::NamespaceClients::built(),
        }))
    }
}
