//! How a waiter decides that a lock someone else wrote may be taken over.
//!
//! The seed rule compares the item's `ExpiresAt`, written by the holder's clock, with the waiter's
//! clock: two wall clocks, so skew moves the takeover. The observed-lease rule uses no wall clock at
//! all: every write of a lock item rotates its `Version`, and a waiter that has seen the same
//! version for the item's whole lease, timed on its own monotonic clock from the moment it received
//! that version, knows the holder has not written since and that the holder's lease (timed by the
//! holder from before its write was sent) has ended. It then takes over with a condition on that
//! version, so an extension that lands first makes the takeover fail.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// The rule by which a waiter may take over a lock item that someone else wrote.
///
/// # Examples
///
/// ```
/// # fn run(dynamodb: aws_sdk_dynamodb::Client) -> Result<(), ddb_lock::Error> {
/// use ddb_lock::{LockClient, TakeoverRule};
///
/// let client = LockClient::builder(dynamodb)
///     .table_name("locks")
///     .takeover(TakeoverRule::ObservedLease)
///     .build()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TakeoverRule {
    /// Take over once the item's `ExpiresAt` is before this client's clock (the condition
    /// `ExpiresAt < :now`). Takeover after a crash is immediate once the lease has ended, but it
    /// trusts clocks: a waiter whose clock runs `d` ahead of the holder's takes over `d` early, and
    /// one whose clock runs behind waits `d` longer. Use it where clocks are synchronised (Lambda,
    /// EC2 and containers on AWS use the Amazon Time Sync Service) and leases are long compared
    /// with the skew. The default.
    #[default]
    WallClock,
    /// Take over only an item whose `Version` this client has seen unchanged for the item's whole
    /// lease (`LeaseMs`), timed on its own monotonic clock; the takeover is conditioned on that
    /// version. No wall clock is compared, so skew can neither shorten nor lengthen a lease; the
    /// price is that a waiter which first sees a crashed holder's item waits one whole lease from
    /// then, however long ago the lease ended. Every client of a resource must hold its locks with
    /// a monotonic deadline (as [`LockGuard`](crate::LockGuard) does) for the guarantee to hold.
    ObservedLease,
}

/// Most resources whose versions a client remembers at once; beyond it the oldest observation is
/// forgotten (which only delays that takeover).
const MAX_OBSERVED: usize = 4096;

/// The versions a client has seen, per resource, for the observed-lease rule.
#[derive(Debug, Default)]
pub(crate) struct Observations {
    seen: Mutex<HashMap<String, Observation>>,
}

#[derive(Debug, Clone)]
struct Observation {
    version: String,
    since: Instant,
    lease: Duration,
}

impl Observations {
    /// Records that `resource`'s item had `version` with `lease` at `received`, and returns when
    /// that version may be taken over if it stays unchanged.
    pub(crate) fn observe(
        &self,
        resource: &str,
        version: &str,
        lease: Duration,
        received: Instant,
    ) -> Instant {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = seen.get(resource) {
            if known.version == version {
                return known.since + known.lease;
            }
        }
        if seen.len() >= MAX_OBSERVED && !seen.contains_key(resource) {
            let oldest = seen
                .iter()
                .min_by_key(|(_, o)| o.since)
                .map(|(r, _)| r.clone());
            if let Some(oldest) = oldest {
                seen.remove(&oldest);
            }
        }
        seen.insert(
            resource.to_owned(),
            Observation {
                version: version.to_owned(),
                since: received,
                lease,
            },
        );
        received + lease
    }

    /// The version of `resource` seen unchanged for its whole lease by `now`, if any.
    pub(crate) fn ripe(&self, resource: &str, now: Instant) -> Option<String> {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.get(resource)
            .filter(|o| o.since + o.lease <= now)
            .map(|o| o.version.clone())
    }

    /// Forgets `resource` (this client holds it now).
    pub(crate) fn forget(&self, resource: &str) {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(resource);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_ripens_one_lease_after_it_was_first_seen() {
        let observations = Observations::default();
        let t0 = Instant::now();
        let lease = Duration::from_secs(10);
        assert_eq!(observations.observe("r", "v1", lease, t0), t0 + lease);
        // Seeing it again later does not restart the wait.
        let later = t0 + Duration::from_secs(4);
        assert_eq!(observations.observe("r", "v1", lease, later), t0 + lease);
        assert_eq!(observations.ripe("r", t0 + Duration::from_secs(9)), None);
        assert_eq!(observations.ripe("r", t0 + lease).as_deref(), Some("v1"));
    }

    #[test]
    fn a_new_version_restarts_the_wait() {
        let observations = Observations::default();
        let t0 = Instant::now();
        let lease = Duration::from_secs(10);
        observations.observe("r", "v1", lease, t0);
        let t1 = t0 + Duration::from_secs(8);
        assert_eq!(observations.observe("r", "v2", lease, t1), t1 + lease);
        assert_eq!(observations.ripe("r", t0 + lease), None);
        observations.forget("r");
        assert_eq!(observations.ripe("r", t1 + lease), None);
    }

    #[test]
    fn the_memory_is_bounded() {
        let observations = Observations::default();
        let t0 = Instant::now();
        for i in 0..=MAX_OBSERVED {
            let at = t0 + Duration::from_millis(i as u64);
            observations.observe(&format!("r{i}"), "v", Duration::ZERO, at);
        }
        let seen = observations.seen.lock().unwrap();
        assert_eq!(seen.len(), MAX_OBSERVED);
        assert!(
            !seen.contains_key("r0"),
            "the oldest observation is forgotten"
        );
    }
}
