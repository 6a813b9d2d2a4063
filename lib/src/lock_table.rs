//! The lock table as the operations see it: the SDK client, the table's name, the key prefix, the
//! clock, and the memory a client shares between its requests (its waiters' lines and the locks it
//! holds, the versions it has seen, its background releases, its fencing-token offset).
//!
//! Operations take a `&LockTable` rather than the [`LockClient`](crate::LockClient), so that
//! nothing below the façade depends on it: the façade resolves its own defaults (owner, lease,
//! timeout, backoff) before calling an operation. One struct rather than a list of arguments
//! keeps the operations' signatures short, at the price that an operation can reach memory it
//! does not use.

use crate::background::BackgroundReleases;
use crate::clock::Clock;
use crate::error::{Error, InvalidInput};
use crate::item::{self, Item};
use crate::limits;
use crate::lock::LockHandle;
use crate::record::{self, Record};
use crate::takeover::{Observations, TakeoverRule};
use crate::time;
use crate::wait_queues::WaitQueues;
use chrono::{DateTime, SubsecRound, Utc};
use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

/// One client's table and the memory its requests share; clones of a client share one.
#[derive(Debug)]
pub(crate) struct LockTable {
    pub(crate) dynamodb: aws_sdk_dynamodb::Client,
    pub(crate) name: String,
    pub(crate) key_prefix: String,
    pub(crate) ttl_grace: Duration,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) takeover: TakeoverRule,
    pub(crate) observations: Observations,
    /// This client's waiters, in line per resource, and the locks it holds.
    pub(crate) queues: WaitQueues,
    /// Releases sent from spawned tasks (dropped guards, dropped acquisitions).
    pub(crate) background: BackgroundReleases,
    /// Added to the clock (in microseconds) when guessing a fencing token: raised whenever a guess
    /// was stale, so that a client behind the tokens already issued pays for it once (a hybrid
    /// logical clock).
    pub(crate) token_offset: AtomicU64,
}

impl LockTable {
    /// The clock's reading at the stored precision, so that every `Lock` and `Holder` carries
    /// exactly the timestamps DynamoDB holds.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        self.clock.now().trunc_subsecs(3)
    }

    /// The primary key of `resource`'s lock item.
    pub(crate) fn key(&self, resource: &str) -> Item {
        item::key(&self.key_prefix, resource)
    }

    /// Decodes the lock item of `resource` an answer carried, if any.
    pub(crate) fn record(resource: &str, item: Option<&Item>) -> Result<Option<Record>, Error> {
        item.map(|item| record::decode(resource, item)).transpose()
    }

    /// The `TTL` value (epoch seconds) for a lease ending at `expires_at`: rounded up, so that
    /// even with no grace DynamoDB never deletes an item before its lease has ended.
    pub(crate) fn ttl_epoch_seconds(&self, expires_at: DateTime<Utc>) -> Result<i64, Error> {
        let deletable = time::after(expires_at, self.ttl_grace, "ttl_grace")?;
        let rounded_up = i64::from(deletable.timestamp_subsec_nanos() > 0);
        Ok(deletable.timestamp() + rounded_up)
    }

    /// Checks a resource name against the partition key's limit under this key prefix.
    pub(crate) fn check_resource(&self, resource: &str) -> Result<(), InvalidInput> {
        limits::resource(resource, &self.key_prefix)
    }

    /// Checks the resource and owner of a handle.
    pub(crate) fn check_handle(&self, handle: &LockHandle) -> Result<(), InvalidInput> {
        self.check_resource(handle.resource())?;
        limits::owner(handle.owner())
    }

    /// Sends `release` from a spawned task that [`LockClient::flush`](crate::LockClient::flush)
    /// waits for; false if there is no runtime to spawn it on.
    pub(crate) fn release_in_background(
        &self,
        release: impl Future<Output = ()> + Send + 'static,
    ) -> bool {
        self.background.spawn(release)
    }
}
