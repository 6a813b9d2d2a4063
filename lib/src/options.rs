//! Per-call settings of an acquisition.

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
