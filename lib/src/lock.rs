//! The values that describe a lock: who holds it ([`Holder`]), the credential of one acquisition
//! ([`LockHandle`], carrying a [`LockId`]) and a held lock with its lease ([`Lock`]).

use crate::error::InvalidInput;
use crate::fencing::FencingToken;
use crate::mode::Mode;
use chrono::{DateTime, Utc};
use std::fmt;
use tokio::time::Instant;
use uuid::Uuid;

/// The random id of one acquisition (a UUID v4), stored as the item's `LockID`.
///
/// It is the credential for release and extend: whoever has it can release the lock. Its `Debug`
/// form shows only the first 8 hex digits so that logging a [`Lock`] does not leak it; `Display`
/// gives the full id, for handing it to another process.
///
/// # Examples
///
/// ```
/// use ddb_lock::LockId;
///
/// let id = LockId::parse("67e55044-10b1-426f-9247-bb680e5fe0c8").unwrap();
/// assert_eq!(id.to_string(), "67e55044-10b1-426f-9247-bb680e5fe0c8");
/// assert_eq!(format!("{id:?}"), "LockId(67e55044…)");
/// assert!(LockId::parse("not-a-lock-id").is_err());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LockId(Uuid);

impl LockId {
    pub(crate) fn generate() -> Self {
        LockId(Uuid::new_v4())
    }

    /// Parses a lock id received from elsewhere (an event, a message).
    pub fn parse(s: &str) -> Result<Self, InvalidInput> {
        Uuid::try_parse(s)
            .map(LockId)
            .map_err(|_| InvalidInput::MalformedLockId)
    }

    /// The first 8 hex digits: enough to correlate logs, useless as a credential.
    pub(crate) fn short(&self) -> String {
        let mut s = self.0.simple().to_string();
        s.truncate(8);
        s
    }
}

impl fmt::Display for LockId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

impl fmt::Debug for LockId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LockId({}…)", self.short())
    }
}

/// Who holds a lock and until when, as read from the lock item (never includes its [`LockId`]).
///
/// # Examples
///
/// ```
/// use chrono::{TimeDelta, Utc};
/// use ddb_lock::Holder;
///
/// let now = Utc::now();
/// let holder = Holder {
///     owner: "worker-1".into(),
///     acquired_at: now,
///     expires_at: now + TimeDelta::seconds(30),
///     fencing_token: None,
///     data: None,
/// };
/// assert!(holder.is_live_at(now));
/// assert!(!holder.is_live_at(now + TimeDelta::seconds(31)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The owner named at acquisition.
    pub owner: String,
    /// When the lock was acquired (the holder's clock).
    pub acquired_at: DateTime<Utc>,
    /// When the lease ends (the holder's clock, as last extended).
    pub expires_at: DateTime<Utc>,
    /// The fencing token of the acquisition, if it was fenced.
    pub fencing_token: Option<FencingToken>,
    /// The payload stored with the lock, if any.
    pub data: Option<Vec<u8>>,
}

impl Holder {
    /// Whether the lease still stands at `now`: the same rule as the acquire condition
    /// `ExpiresAt < :now`, so a lock is live up to and including its expiry millisecond.
    pub fn is_live_at(&self, now: DateTime<Utc>) -> bool {
        self.expires_at >= now
    }
}

/// The credential of one acquisition: resource, owner and [`LockId`]. Release and extend need
/// exactly this, so a process that received these three values (say, from a Step Functions
/// state) can release a lock that another process acquired.
///
/// # Examples
///
/// ```
/// use ddb_lock::{LockHandle, LockId};
///
/// let id = LockId::parse("67e55044-10b1-426f-9247-bb680e5fe0c8").unwrap();
/// let handle = LockHandle::new("orders/42", "worker-1", id);
/// assert_eq!(handle.resource(), "orders/42");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockHandle {
    resource: String,
    owner: String,
    lock_id: LockId,
    mode: Mode,
}

impl LockHandle {
    /// Builds the handle of an exclusive hold from its parts. They are validated when the handle
    /// is used.
    pub fn new(resource: impl Into<String>, owner: impl Into<String>, lock_id: LockId) -> Self {
        LockHandle {
            resource: resource.into(),
            owner: owner.into(),
            lock_id,
            mode: Mode::Exclusive,
        }
    }

    /// The same handle for a hold in `mode`: a shared hold is released and extended through its
    /// own entry of the lock item, so a handle passed between processes carries its mode.
    ///
    /// # Examples
    ///
    /// ```
    /// use ddb_lock::{LockHandle, LockId, Mode};
    ///
    /// let id = LockId::parse("67e55044-10b1-426f-9247-bb680e5fe0c8").unwrap();
    /// let handle = LockHandle::new("reports", "reader-1", id).with_mode(Mode::Shared);
    /// assert_eq!(handle.mode(), Mode::Shared);
    /// ```
    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Whether the hold is exclusive or shared.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The locked resource's name (without the key prefix).
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The owner the lock was acquired for.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The acquisition's id.
    pub fn lock_id(&self) -> LockId {
        self.lock_id
    }
}

impl AsRef<LockHandle> for LockHandle {
    fn as_ref(&self) -> &LockHandle {
        self
    }
}

/// A lock as acquired or last extended: its [`LockHandle`] and its lease.
///
/// Returned by [`acquire`](crate::LockClient::acquire), [`try_acquire`](crate::LockClient::try_acquire)
/// and [`extend`](crate::LockClient::extend). Pass it (or its handle) to
/// [`release`](crate::LockClient::release).
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
/// use ddb_lock::AcquireOptions;
///
/// let lock = client.acquire("orders/42", &AcquireOptions::new()).await?;
/// println!("{} holds {} until {}", lock.owner(), lock.resource(), lock.expires_at());
/// client.release(&lock).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Lock {
    handle: LockHandle,
    acquired_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
    fencing_token: Option<FencingToken>,
    /// The payload stored with the lock, as far as the write that set this state tells.
    data: Option<Vec<u8>>,
    /// The monotonic instant the lease ends, timed from before the write that set it was sent.
    valid_until: Instant,
}

impl Lock {
    pub(crate) fn new(
        handle: LockHandle,
        acquired_at: DateTime<Utc>,
        expires_at: DateTime<Utc>,
        valid_until: Instant,
    ) -> Self {
        Lock {
            handle,
            acquired_at,
            expires_at,
            fencing_token: None,
            data: None,
            valid_until,
        }
    }

    pub(crate) fn with_fencing_token(mut self, fencing_token: Option<FencingToken>) -> Self {
        self.fencing_token = fencing_token;
        self
    }

    pub(crate) fn with_data(mut self, data: Option<Vec<u8>>) -> Self {
        self.data = data;
        self
    }

    /// The credential needed to release or extend this lock.
    pub fn handle(&self) -> &LockHandle {
        &self.handle
    }

    /// The locked resource's name (without the key prefix).
    pub fn resource(&self) -> &str {
        self.handle.resource()
    }

    /// The owner the lock was acquired for.
    pub fn owner(&self) -> &str {
        self.handle.owner()
    }

    /// The acquisition's id.
    pub fn lock_id(&self) -> LockId {
        self.handle.lock_id()
    }

    /// Whether the lock is held exclusively or shared.
    pub fn mode(&self) -> Mode {
        self.handle.mode()
    }

    /// When the lock was acquired, by this client's clock (millisecond precision).
    pub fn acquired_at(&self) -> DateTime<Utc> {
        self.acquired_at
    }

    /// When the lease ends unless extended, by this client's clock (millisecond precision).
    pub fn expires_at(&self) -> DateTime<Utc> {
        self.expires_at
    }

    /// The instant (on this process's monotonic clock) at which the lease ends unless extended,
    /// timed from just before the request that set it was sent, so no wall clock is involved:
    /// until then no other client can have taken the lock over (given clocks that agree with
    /// the [`TakeoverRule`](crate::TakeoverRule) in use).
    pub fn valid_until(&self) -> std::time::Instant {
        self.valid_until.into_std()
    }

    pub(crate) fn valid_until_instant(&self) -> Instant {
        self.valid_until
    }

    /// The acquisition's fencing token, if it was fenced
    /// ([`AcquireOptions::fencing`](crate::AcquireOptions::fencing)): pass it with every write
    /// the lock protects, through [`FencedWrite`](crate::FencedWrite) or your store's own check.
    pub fn fencing_token(&self) -> Option<FencingToken> {
        self.fencing_token
    }

    /// The payload stored with the lock (`Data`) when it was acquired or last extended: what the
    /// acquisition or extension wrote, or, on a client that keeps items
    /// ([`delete_on_release(false)`](crate::LockClientBuilder::delete_on_release)), the payload
    /// the previous holder left, if the acquisition set none. A fenced acquisition's transaction
    /// returns nothing, so after one that set no payload this is `None` even where a kept payload
    /// stays in the item: read it with [`status`](crate::LockClient::status).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::AcquireOptions;
    ///
    /// let lock = client.acquire("report/daily", &AcquireOptions::new().data("started")).await?;
    /// assert_eq!(lock.data(), Some(&b"started"[..]));
    /// # Ok(()) }
    /// ```
    pub fn data(&self) -> Option<&[u8]> {
        self.data.as_deref()
    }
}

/// Two values describe the same lock state when they have the same credential, lease and token;
/// the monotonic instant each was computed at does not count.
impl PartialEq for Lock {
    fn eq(&self, other: &Self) -> bool {
        self.handle == other.handle
            && self.acquired_at == other.acquired_at
            && self.expires_at == other.expires_at
            && self.fencing_token == other.fencing_token
    }
}

impl Eq for Lock {}

impl AsRef<LockHandle> for Lock {
    fn as_ref(&self) -> &LockHandle {
        &self.handle
    }
}
