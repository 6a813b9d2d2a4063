//! The client façade: [`LockClient`] holds the validated settings and hands each call to the
//! operation that makes its request ([`ops`](crate::ops)) or to the waiting loop
//! ([`wait`](crate::wait)).
//!
//! Nothing here builds a request or reads an answer: the façade resolves the caller's options
//! against the client's defaults (owner, lease, timeout, backoff), validates them, and delegates.
//! Keeping it thin lets a reader find each request's expressions and its outcome rules in one
//! operation module, named after the request; the price is a level of indirection between a public
//! method and its request.
//!
//! The calls are grouped by what they do to a lock: [`acquire`], [`release`], [`extend`], and
//! [`admin`] (status, force release, clean-up, the table).

mod acquire;
mod admin;
mod extend;
mod release;

use crate::builder::LockClientBuilder;
use crate::lock_table::LockTable;
use crate::namespace::Namespace;
use crate::wait::backoff::BackoffBounds;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// A client for locks in one DynamoDB table. Cheap to clone; clones share configuration and the
/// SDK client's connection pool.
///
/// # Examples
///
/// ```no_run
/// # async fn run() -> Result<(), ddb_lock::Error> {
/// use ddb_lock::{AcquireOptions, LockClient};
///
/// let config = aws_config::load_from_env().await;
/// let client = LockClient::builder(aws_sdk_dynamodb::Client::new(&config))
///     .table_name("locks")
///     .build()?;
/// let lock = client.acquire("invoice/2026-0042", &AcquireOptions::new()).await?;
/// // ... the critical section ...
/// client.release(&lock).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct LockClient {
    pub(crate) settings: Arc<Settings>,
}

/// Validated configuration, shared by clones of a client: the table the operations work on, and
/// the defaults the façade applies before calling them.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) table: Arc<LockTable>,
    pub(crate) owner: String,
    pub(crate) lease: Duration,
    pub(crate) acquire_timeout: Duration,
    pub(crate) backoff: BackoffBounds,
    /// The clients of each namespace asked of this client's family
    /// ([`LockClient::in_namespace`]), so that a namespace has one memory however often, and of
    /// whichever client of the family, its client is asked for.
    pub(crate) namespaces: NamespaceClients,
}

/// The clients of the namespaces asked of a client, by namespace.
pub(crate) type Namespaces = Mutex<HashMap<Namespace, LockClient>>;

/// The namespaces' clients of a family of clients (one built, its clones, its namespaces'
/// clients): kept by the built client, reached weakly from its namespaces' clients (kept by them,
/// the map would keep itself).
#[derive(Debug)]
pub(crate) enum NamespaceClients {
    /// Of the built client.
    Built(Arc<Namespaces>),
    /// Of a namespace's client: the built client's, while it lives; then a map of its own (the
    /// built client dropped, a fresh client at every call made a fresh memory each time; found
    /// by review).
    Derived {
        family: Weak<Namespaces>,
        own: Arc<Namespaces>,
    },
}

impl NamespaceClients {
    /// Those of a built client: none yet.
    pub(crate) fn built() -> Self {
        NamespaceClients::Built(Arc::default())
    }

    /// Those a namespace's client of this family reaches (with a map of its own, empty: shared,
    /// a map would keep the clients that keep it).
    fn derived(&self) -> Self {
        let family = match self {
            NamespaceClients::Built(clients) => Arc::downgrade(clients),
            NamespaceClients::Derived { family, .. } => family.clone(),
        };
        NamespaceClients::Derived {
            family,
            own: Arc::default(),
        }
    }

    /// The family's clients, or this client's own once the built client is gone.
    pub(crate) fn get(&self) -> Arc<Namespaces> {
        match self {
            NamespaceClients::Built(clients) => Arc::clone(clients),
            NamespaceClients::Derived { family, own } => {
                family.upgrade().unwrap_or_else(|| Arc::clone(own))
            }
        }
    }
}

impl Settings {
    /// The same defaults over another `table`.
    pub(crate) fn with_table(&self, table: LockTable) -> Settings {
        Settings {
            table: Arc::new(table),
            owner: self.owner.clone(),
            lease: self.lease,
            acquire_timeout: self.acquire_timeout,
            backoff: self.backoff,
            namespaces: self.namespaces.derived(),
        }
    }
}

impl LockClient {
    /// Starts configuring a client over an SDK client, which brings its own region, endpoint,
    /// credentials and retry settings.
    pub fn builder(dynamodb: aws_sdk_dynamodb::Client) -> LockClientBuilder {
        LockClientBuilder::new(dynamodb)
    }

    pub(crate) fn from_settings(settings: Settings) -> Self {
        LockClient {
            settings: Arc::new(settings),
        }
    }

    /// The lock table's name.
    pub fn table_name(&self) -> &str {
        &self.settings.table.name
    }

    /// The lease used when [`AcquireOptions`](crate::AcquireOptions) sets none.
    pub fn default_lease(&self) -> Duration {
        self.settings.lease
    }

    /// The owner used when [`AcquireOptions`](crate::AcquireOptions) names none.
    pub fn default_owner(&self) -> &str {
        &self.settings.owner
    }

    /// Waits until every release this client (or a clone) sent in the background has finished:
    /// those of dropped [`LockGuard`](crate::LockGuard)s, of a `release()` or an acquisition
    /// whose future was dropped mid-request. Call it before a Lambda handler returns: the
    /// execution environment is frozen afterwards, and a release still in flight would wait for
    /// the next invocation (the lock meanwhile held until its lease ends).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// use ddb_lock::AcquireOptions;
    ///
    /// {
    ///     let _guard = client.lock("orders/42", &AcquireOptions::new()).await?;
    ///     // ... work; the guard is dropped here, its release sent from a spawned task ...
    /// }
    /// client.flush().await; // the release has been answered
    /// # Ok(()) }
    /// ```
    pub async fn flush(&self) {
        self.settings.table.background.finished().await;
    }

    /// The table and memory the client's operations share.
    pub(crate) fn table(&self) -> &Arc<LockTable> {
        &self.settings.table
    }

    /// Sends `release` from a spawned task that [`flush`](Self::flush) waits for; false if
    /// there is no runtime to spawn it on.
    pub(crate) fn release_in_background(
        &self,
        release: impl Future<Output = ()> + Send + 'static,
    ) -> bool {
        self.settings.table.release_in_background(release)
    }
}
