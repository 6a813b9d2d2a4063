//! Per-call settings of an acquisition.

use crate::mode::Mode;
use std::time::Duration;

/// Settings of one acquisition; anything left unset takes the client's default.
///
/// # Examples
///
/// ```
/// use ddb_lock::AcquireOptions;
/// use std::time::Duration;
///
/// let opts = AcquireOptions::new()
///     .owner("invoice-worker-7")
///     .lease(Duration::from_secs(60))
///     .timeout(Duration::from_secs(10));
/// assert_eq!(opts.lease_duration(), Some(Duration::from_secs(60)));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AcquireOptions {
    owner: Option<String>,
    lease: Option<Duration>,
    timeout: Option<Duration>,
    idempotent: bool,
    fencing: bool,
    heartbeat: Option<Duration>,
    data: Option<Vec<u8>>,
    only_if_exists: bool,
    mode: Mode,
    permits: Option<u32>,
    fair: bool,
}

impl AcquireOptions {
    /// All defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Who is acquiring, stored as the item's `Owner` and checked again on release.
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// How long the lock stands without an extension; must exceed the critical section.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// How long [`acquire`](crate::LockClient::acquire) keeps trying (ignored by `try_acquire`).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// When `true`, a live lock already held by the *same owner* is returned (with its `LockID`)
    /// instead of being refused: a retried acquire, such as a Step Functions `Retry` of an Acquire
    /// state whose answer was lost, gets the lock it already has. It is first extended with a
    /// new version and acquisition time (one UpdateItem, the lease counted from it; a second
    /// where a later lease end or acquisition time is stored, which it keeps): a first
    /// attempt still running elsewhere spares the new version when it cleans up after its own
    /// unanswered write, and a late release by owner of the locks acquired by a moment (a stopped
    /// Step Functions run's, redriven since) spares a lock handed back after it. Only use it
    /// where owner names are unique per logical holder, since anyone naming the same owner gets
    /// the lock too. Default `false`.
    pub fn idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = idempotent;
        self
    }

    /// When `true`, the acquisition gets a [`FencingToken`](crate::FencingToken) larger than that
    /// of every earlier fenced acquisition of the resource. It costs one more item write, in the
    /// same request: the acquire becomes a TransactWriteItems of the lock item and the resource's
    /// fence item (see `lib/DESIGN.md`). Default `false`.
    pub fn fencing(mut self, fencing: bool) -> Self {
        self.fencing = fencing;
        self
    }

    /// How often a [`LockGuard`](crate::LockGuard) extends the lease; shorter than the lease.
    /// Default: a third of the lease, so that two extensions in a row can fail before it is lost.
    pub fn heartbeat(mut self, period: Duration) -> Self {
        self.heartbeat = Some(period);
        self
    }

    /// The heartbeat period set on these options, if any.
    pub fn heartbeat_period(&self) -> Option<Duration> {
        self.heartbeat
    }

    /// Whether [`fencing`](Self::fencing) is set.
    pub fn is_fencing(&self) -> bool {
        self.fencing
    }

    /// A small payload stored with the lock as `Data` (at most
    /// [`MAX_DATA_BYTES`](crate::limits::MAX_DATA_BYTES)) and returned by
    /// [`status`](crate::LockClient::status): what the holder is doing, a progress marker. It
    /// replaces the payload an item kept by a release carries
    /// ([`delete_on_release(false)`](crate::LockClientBuilder::delete_on_release)); without it such
    /// a payload stays and comes back in [`Lock::data`](crate::Lock::data).
    pub fn data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.data = Some(data.into());
        self
    }

    /// When `true`, the lock is taken only on a lock item that exists already: one an operator
    /// made with [`create_lock_item`](crate::LockClient::create_lock_item), or one kept by a
    /// release ([`delete_on_release(false)`](crate::LockClientBuilder::delete_on_release)). With no
    /// item the acquisition fails at once with [`Error::NoLockItem`](crate::Error::NoLockItem),
    /// waiting for nothing. Same request, a stricter condition. Default `false`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::{AcquireOptions, Error};
    ///
    /// match client.acquire("tenant/acme", &AcquireOptions::new().only_if_exists(true)).await {
    ///     Ok(lock) => client.release(&lock).await.map(drop)?,
    ///     Err(Error::NoLockItem { .. }) => eprintln!("tenant not provisioned"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn only_if_exists(mut self, only_if_exists: bool) -> Self {
        self.only_if_exists = only_if_exists;
        self
    }

    /// Exclusive (the default: the mutex) or shared (a reader: any number of shared holders
    /// coexist, none with an exclusive one). See [`Mode`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::{AcquireOptions, Mode};
    ///
    /// let reader = client.acquire("catalog", &AcquireOptions::new().mode(Mode::Shared)).await?;
    /// // … read the catalog while other readers do too; no writer can hold it …
    /// client.release(&reader).await?;
    /// # Ok(()) }
    /// ```
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// A semaphore: shared mode with at most `permits` holders at a time (1 to
    /// [`MAX_SHARED_HOLDERS`](crate::limits::MAX_SHARED_HOLDERS)), each with its own lease. Sets
    /// [`Mode::Shared`]. The slot of a holder whose lease ran out goes to the next acquirer, in the
    /// same write. Every user of one resource should pass the same number: each acquirer checks
    /// its own.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::AcquireOptions;
    ///
    /// // At most 4 exports against the partner API at once, across every Lambda.
    /// let slot = client.acquire("partner-api", &AcquireOptions::new().permits(4)).await?;
    /// client.release(&slot).await?;
    /// # Ok(()) }
    /// ```
    pub fn permits(mut self, permits: u32) -> Self {
        self.mode = Mode::Shared;
        self.permits = Some(permits);
        self
    }

    /// A fair acquisition: a waiting [`acquire`](crate::LockClient::acquire) takes a place in the
    /// lock's line, kept in the lock item itself, and is granted the lock in its turn by the
    /// holder's release (one request hands it over) or, once the holder's lease has run out, by
    /// any waiter; no later fair acquirer overtakes it, whatever its process. Locktopus calls
    /// this state `ENQUEUED`; [`LockClient::status`](crate::LockClient::status) lists the line.
    /// Exclusive mode only, without idempotence, a payload, `only_if_exists` or the
    /// observed-lease takeover rule (each is [`InvalidInput::NotForFair`](crate::InvalidInput::NotForFair)).
    /// With [`fencing`](Self::fencing), the grant issues the token, in the same transaction that
    /// raises the fence item, so that tokens follow the order of the line.
    /// A `try_acquire` tries once and never joins the line. Acquirers that are not fair still
    /// take a free lock (a holder's release never leaves it free while someone waits in line),
    /// and one that takes a lapsed lock replaces its line: its waiters join again.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::AcquireOptions;
    /// use std::time::Duration;
    ///
    /// let opts = AcquireOptions::new().fair(true).timeout(Duration::from_secs(30));
    /// let lock = client.acquire("ledger", &opts).await?;
    /// // … our turn: every fair waiter that came before us has had its own …
    /// client.release(&lock).await?; // hands the lock to the next in line, if any
    /// # Ok(()) }
    /// ```
    pub fn fair(mut self, fair: bool) -> Self {
        self.fair = fair;
        self
    }

    /// Whether a waiting acquisition takes a place in the lock's line (see [`fair`](Self::fair)).
    pub fn is_fair(&self) -> bool {
        self.fair
    }

    /// The mode set on these options.
    pub fn lock_mode(&self) -> Mode {
        self.mode
    }

    /// The semaphore's permits set on these options, if any.
    pub fn permit_count(&self) -> Option<u32> {
        self.permits
    }

    /// Whether [`only_if_exists`](Self::only_if_exists) is set.
    pub fn is_only_if_exists(&self) -> bool {
        self.only_if_exists
    }

    /// Whether [`idempotent`](Self::idempotent) is set.
    pub fn is_idempotent(&self) -> bool {
        self.idempotent
    }

    /// The payload set on these options, if any.
    pub fn data_bytes(&self) -> Option<&[u8]> {
        self.data.as_deref()
    }

    /// The owner set on these options, if any.
    pub fn owner_name(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    /// The lease set on these options, if any.
    pub fn lease_duration(&self) -> Option<Duration> {
        self.lease
    }

    /// The timeout set on these options, if any.
    pub fn timeout_duration(&self) -> Option<Duration> {
        self.timeout
    }
}
