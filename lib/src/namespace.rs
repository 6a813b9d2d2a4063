//! Namespaces: isolated sets of locks in one table, each listed without a Scan.
//!
//! A client in a namespace ([`LockClientBuilder::namespace`](crate::LockClientBuilder::namespace),
//! [`LockClient::in_namespace`]) works as if on a table of its own: its resource `orders/42` is
//! another lock than `orders/42` of the client without a namespace or of any other namespace.
//! Its lock items' partition keys start with `NS#<namespace>#` before the schema's own format
//! (`NS#billing#LOCK#orders/42` under the default schema), and carry a `Namespace` attribute: the
//! partition key of a sparse global secondary index, which [`LockClient::list`] queries. Items
//! of clients without a namespace carry no such attribute and cost the index nothing, so the
//! plain mutex keeps its single write per acquire and per release.

use crate::error::{Error, InvalidInput};
use crate::outcome::LockStatus;
use crate::LockClient;
use std::fmt;
use std::str::FromStr;
use std::sync::PoisonError;

/// What every namespaced partition key starts with, before the namespace and a `#`.
pub const NAMESPACE_KEY_PREFIX: &str = "NS#";

/// The longest namespace, in bytes.
pub const MAX_NAMESPACE_BYTES: usize = 64;

/// The name of a namespace: 1 to 64 characters of `a-z`, `A-Z`, `0-9`, `_`, `-` and `.`. No `#`,
/// so that no two namespaces' keys can ever be equal.
///
/// # Examples
///
/// ```
/// use ddb_lock::Namespace;
///
/// let billing: Namespace = "billing".parse()?;
/// assert_eq!(billing.as_str(), "billing");
/// let wrong = Namespace::new("a#b").unwrap_err();
/// assert_eq!(wrong.field(), "namespace");
/// # Ok::<(), ddb_lock::InvalidInput>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Namespace(String);

impl Namespace {
    /// Checks `name` and makes it a namespace; [`InvalidInput::Namespace`] if it is empty, longer
    /// than [`MAX_NAMESPACE_BYTES`] or has another character than the ones allowed.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(ddb_lock::Namespace::new("tenant-42").is_ok());
    /// assert!(ddb_lock::Namespace::new("").is_err());
    /// ```
    pub fn new(name: impl Into<String>) -> Result<Namespace, InvalidInput> {
        let name = name.into();
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
        if name.is_empty() || name.len() > MAX_NAMESPACE_BYTES || !name.chars().all(allowed) {
            return Err(InvalidInput::Namespace { name });
        }
        Ok(Namespace(name))
    }

    /// The name.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(ddb_lock::Namespace::new("billing").unwrap().as_str(), "billing");
    /// ```
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for Namespace {
    type Err = InvalidInput;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Namespace::new(name)
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One live lock of a namespace, as [`LockClient::list`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedLock {
    /// The resource, as the namespace's client names it.
    pub resource: String,
    /// Its holders: [`LockStatus::Held`] or [`LockStatus::Shared`], never
    /// [`LockStatus::Free`] (a free lock is left out).
    pub status: LockStatus,
}

impl LockClient {
    /// The namespace this client works in, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// let billing = client.in_namespace("billing".parse()?)?;
    /// assert_eq!(billing.namespace().map(|ns| ns.as_str()), Some("billing"));
    /// # Ok(()) }
    /// ```
    pub fn namespace(&self) -> Option<&Namespace> {
        self.settings.table.schema.namespace()
    }

    /// A client of the same table and settings working in `namespace`: its locks are apart from
    /// this client's and from every other namespace's, as if in another table. It has a memory
    /// of its own (its waiters' lines, the locks it holds and the extensions it sent, its
    /// background releases), which every client of `namespace` asked of this client, of its
    /// clones or of the clients of its other namespaces shares, as clones do (and this client
    /// itself, if it works in `namespace`): asked for again at each request (a Lambda function's
    /// invocation), it remembers what the earlier ones did (made anew, it forgot an extension
    /// still on its way, and a later one that found the lease over left that one to hold the lock
    /// again; found by review). The client built keeps them as long as it lives, one per
    /// namespace asked for. [`InvalidInput::NamespaceOverlap`] if the schema's key formats leave
    /// no room for namespaces (an empty key prefix).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// let billing = client.in_namespace("billing".parse()?)?;
    /// let shipping = client.in_namespace("shipping".parse()?)?;
    /// let opts = ddb_lock::AcquireOptions::new();
    /// let a = billing.acquire("orders/42", &opts).await?;
    /// let b = shipping.acquire("orders/42", &opts).await?; // another lock: no wait
    /// billing.release(&a).await?;
    /// shipping.release(&b).await?;
    /// # Ok(()) }
    /// ```
    pub fn in_namespace(&self, namespace: Namespace) -> Result<LockClient, Error> {
        if self.namespace() == Some(&namespace) {
            return Ok(self.clone());
        }
        let family = self.settings.namespaces.get();
        let mut clients = family.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(client) = clients.get(&namespace) {
            return Ok(client.clone());
        }
        let schema = self
            .settings
            .table
            .schema
            .clone()
            .in_namespace(namespace.clone());
        schema.validate()?;
        let client = LockClient::from_settings(
            self.settings
                .with_table(self.settings.table.with_schema(schema)),
        );
        clients.insert(namespace, client.clone());
        Ok(client)
    }

    /// The live locks of `namespace`: one Query of the namespace index (and one more per megabyte
    /// of items), never a Scan. The index is eventually consistent: a lock taken or released a
    /// moment ago may be missing or still listed; [`status`](LockClient::status) reads one
    /// lock strongly. The table needs the index ([`TableSchema::namespace_index`](crate::TableSchema::namespace_index);
    /// [`create_table`](LockClient::create_table) makes it).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(client: ddb_lock::LockClient) -> Result<(), ddb_lock::Error> {
    /// for listed in client.list(&"billing".parse()?).await? {
    ///     println!("{}: {:?}", listed.resource, listed.status);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list(&self, namespace: &Namespace) -> Result<Vec<ListedLock>, Error> {
        crate::ops::list::list(&self.settings.table, namespace).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for good in ["a", "billing", "tenant-42", "a.b_c", &"x".repeat(64)] {
            assert_eq!(Namespace::new(good).unwrap().as_str(), good);
        }
        for bad in ["", "a#b", "a b", "ünï", "a/b", &"x".repeat(65)] {
            let err = Namespace::new(bad).unwrap_err();
            assert_eq!(err.field(), "namespace", "{bad}");
            assert!(err.to_string().contains("1 to 64"), "{err}");
        }
    }

    /// A namespace's client asked for again is the same client (one memory), another
    /// namespace's is not.
    #[test]
    fn a_namespace_has_one_client() {
        let dynamodb = aws_sdk_dynamodb::Client::from_conf(
            aws_sdk_dynamodb::Config::builder()
                .behavior_version_latest()
                .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
                .build(),
        );
        let client = LockClient::builder(dynamodb)
            .table_name("locks")
            .build()
            .unwrap();
        let billing = || client.in_namespace("billing".parse().unwrap()).unwrap();
        let (first, again) = (billing(), billing());
        assert!(std::sync::Arc::ptr_eq(first.table(), again.table()));
        let clone = client.clone();
        let from_a_clone = clone.in_namespace("billing".parse().unwrap()).unwrap();
        assert!(std::sync::Arc::ptr_eq(first.table(), from_a_clone.table()));
        let shipping = client.in_namespace("shipping".parse().unwrap()).unwrap();
        assert!(!std::sync::Arc::ptr_eq(first.table(), shipping.table()));
        assert_eq!(
            shipping.namespace().map(Namespace::as_str),
            Some("shipping")
        );
        // Of a namespace's client: itself for its own namespace, the family's for another.
        let itself = first.in_namespace("billing".parse().unwrap()).unwrap();
        assert!(std::sync::Arc::ptr_eq(first.table(), itself.table()));
        let from_shipping = shipping.in_namespace("billing".parse().unwrap()).unwrap();
        assert!(std::sync::Arc::ptr_eq(first.table(), from_shipping.table()));
        // The built client dropped: a namespace's client keeps its own.
        drop((client, clone, again, itself, from_shipping, first));
        let (a, b) = (
            shipping.in_namespace("audit".parse().unwrap()).unwrap(),
            shipping.in_namespace("audit".parse().unwrap()).unwrap(),
        );
        assert!(std::sync::Arc::ptr_eq(a.table(), b.table()));
    }
}
