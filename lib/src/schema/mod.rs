//! The lock table's key schema and TTL attribute, so that lock items can live in a table the
//! application already has (a single-table design keyed `pk`/`sk`, or `id` alone, with a TTL
//! attribute of its own).
//!
//! Only the key attributes, the key values and the TTL attribute are configurable; the lock's own
//! attributes (`LockID`, `Owner`, `ExpiresAt`, …, see [`item`](crate::item)) keep their names.
//! Every expression names every attribute through a placeholder (`#pk`, `#sk`, `#ttl`, …), so any
//! legal name works, DynamoDB's reserved words (`key`, `name`, `owner`, `ttl`) included.
//!
//! The defaults are the library's historical layout, so a table made before schemas existed keeps
//! working unchanged: partition key `PK` = `LOCK#<resource>`, sort key `SK` = `LOCK` (the fence
//! item `FENCE`), TTL on `TTL`.
//!
//! A resource's fence item (its fencing-token counter, see [`FencingToken`](crate::FencingToken))
//! must have a key that no lock item can ever have. With a sort key it shares the lock item's
//! partition key under its own sort-key value; without one it needs a partition key of its own,
//! made by a second key format (default `FENCE#<resource>`). [`TableSchema`] refuses, when the
//! client is built, a pair of formats that could produce the same key for two resource names.

use crate::item::{self, Item, FENCE_SK_VALUE, PK, SK, SK_VALUE, TTL};
use crate::limits::MAX_PARTITION_KEY_BYTES;
use crate::namespace::Namespace;
use aws_sdk_dynamodb::types::AttributeValue;
use key_format::KeyFormat;
use std::collections::HashMap;

mod key_format;
mod validate;

/// The default prefix of a lock item's partition key.
pub const DEFAULT_KEY_PREFIX: &str = "LOCK#";
/// The default prefix of a fence item's partition key in a table without a sort key.
pub const DEFAULT_FENCE_KEY_PREFIX: &str = "FENCE#";
/// The default name of the namespace index, see [`TableSchema::namespace_index`].
pub const DEFAULT_NAMESPACE_INDEX: &str = "Namespace";

/// Where lock items live in the table: the key attributes and values, and the TTL attribute.
/// Hand it to [`LockClientBuilder::schema`](crate::LockClientBuilder::schema); the builder's
/// [`build`](crate::LockClientBuilder::build) validates it.
///
/// # Examples
///
/// A single-table design keyed `pk`/`sk`, whose TTL attribute is `expires`:
///
/// ```
/// use ddb_lock::TableSchema;
///
/// let schema = TableSchema::new()
///     .partition_key("pk")
///     .sort_key("sk", "LOCK")
///     .key_prefix("MUTEX#")
///     .ttl_attribute("expires");
/// assert_eq!(schema.describe_key(&schema.lock_key("orders/42")), "pk=MUTEX#orders/42, sk=LOCK");
/// ```
///
/// A table keyed by `id` alone, without TTL:
///
/// ```
/// use ddb_lock::TableSchema;
///
/// let schema = TableSchema::new().partition_key("id").without_sort_key().without_ttl();
/// assert_eq!(schema.describe_key(&schema.lock_key("orders/42")), "id=LOCK#orders/42");
/// assert_eq!(schema.describe_key(&schema.fence_key("orders/42")), "id=FENCE#orders/42");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSchema {
    partition_key: String,
    sort_key: Option<SortKey>,
    lock_key: KeyFormat,
    fence_key: KeyFormat,
    ttl_attribute: Option<String>,
    /// The namespace of the client, whose keys start with `NS#<namespace>#` before the formats.
    namespace: Option<Namespace>,
    namespace_index: String,
}

/// The sort key attribute and the values lock and fence items use.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SortKey {
    name: String,
    lock_value: String,
    fence_value: String,
}

impl Default for TableSchema {
    fn default() -> Self {
        TableSchema {
            partition_key: PK.to_owned(),
            sort_key: Some(SortKey {
                name: SK.to_owned(),
                lock_value: SK_VALUE.to_owned(),
                fence_value: FENCE_SK_VALUE.to_owned(),
            }),
            lock_key: KeyFormat {
                prefix: DEFAULT_KEY_PREFIX.to_owned(),
                suffix: String::new(),
            },
            fence_key: KeyFormat {
                prefix: DEFAULT_FENCE_KEY_PREFIX.to_owned(),
                suffix: String::new(),
            },
            ttl_attribute: Some(TTL.to_owned()),
            namespace: None,
            namespace_index: DEFAULT_NAMESPACE_INDEX.to_owned(),
        }
    }
}

impl TableSchema {
    /// The library's historical layout: `PK` = `LOCK#<resource>`, `SK` = `LOCK`, TTL on `TTL`.
    ///
    /// # Examples
    ///
    /// ```
    /// use ddb_lock::TableSchema;
    ///
    /// let schema = TableSchema::new();
    /// assert_eq!(schema.partition_key_name(), "PK");
    /// assert_eq!(schema.sort_key_name(), Some("SK"));
    /// assert_eq!(schema.ttl_attribute_name(), Some("TTL"));
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// The partition key attribute (default `PK`).
    ///
    /// # Examples
    ///
    /// ```
    /// let schema = ddb_lock::TableSchema::new().partition_key("pk");
    /// assert_eq!(schema.partition_key_name(), "pk");
    /// ```
    pub fn partition_key(mut self, name: impl Into<String>) -> Self {
        self.partition_key = name.into();
        self
    }

    /// The sort key attribute and the value of lock items (default `SK` = `LOCK`). The fence item
    /// of a resource has the same partition key and the sort-key value
    /// [`fence_sort_key_value`](Self::fence_sort_key_value) (default `FENCE`).
    ///
    /// # Examples
    ///
    /// ```
    /// let schema = ddb_lock::TableSchema::new().sort_key("sk", "META#LOCK");
    /// assert_eq!(schema.sort_key_name(), Some("sk"));
    /// ```
    pub fn sort_key(mut self, name: impl Into<String>, lock_value: impl Into<String>) -> Self {
        let fence_value = self
            .sort_key
            .take()
            .map_or_else(|| FENCE_SK_VALUE.to_owned(), |sk| sk.fence_value);
        self.sort_key = Some(SortKey {
            name: name.into(),
            lock_value: lock_value.into(),
            fence_value,
        });
        self
    }

    /// The sort-key value of fence items (default `FENCE`); only with a sort key, and it must
    /// differ from the lock items' value.
    ///
    /// # Examples
    ///
    /// ```
    /// let schema = ddb_lock::TableSchema::new().sort_key("sk", "LOCK").fence_sort_key_value("TOKEN");
    /// assert_eq!(schema.describe_key(&schema.fence_key("a")), "PK=LOCK#a, sk=TOKEN");
    /// ```
    pub fn fence_sort_key_value(mut self, value: impl Into<String>) -> Self {
        if let Some(sort_key) = self.sort_key.as_mut() {
            sort_key.fence_value = value.into();
        }
        self
    }

    /// A table keyed by its partition key alone. Fence items then get a partition key of their
    /// own, see [`fence_key_format`](Self::fence_key_format).
    ///
    /// # Examples
    ///
    /// ```
    /// let schema = ddb_lock::TableSchema::new().partition_key("id").without_sort_key();
    /// assert_eq!(schema.sort_key_name(), None);
    /// ```
    pub fn without_sort_key(mut self) -> Self {
        self.sort_key = None;
        self
    }

    /// What comes before the resource name in a lock item's partition key (default `LOCK#`).
    /// The same as [`LockClientBuilder::key_prefix`](crate::LockClientBuilder::key_prefix).
    ///
    /// # Examples
    ///
    /// ```
    /// let schema = ddb_lock::TableSchema::new().key_prefix("MUTEX#");
    /// assert_eq!(schema.describe_key(&schema.lock_key("a")), "PK=MUTEX#a, SK=LOCK");
    /// ```
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.lock_key.prefix = prefix.into();
        self
    }

    /// What comes after the resource name in a lock item's partition key (default: nothing).
    ///
    /// # Examples
    ///
    /// ```
    /// let schema = ddb_lock::TableSchema::new().key_prefix("ORDER#").key_suffix("#LOCK");
    /// assert_eq!(schema.describe_key(&schema.lock_key("42")), "PK=ORDER#42#LOCK, SK=LOCK");
    /// ```
    pub fn key_suffix(mut self, suffix: impl Into<String>) -> Self {
        self.lock_key.suffix = suffix.into();
        self
    }

    /// The partition key of fence items in a table without a sort key: `prefix + resource +
    /// suffix` (default `FENCE#<resource>`). It must never equal a lock item's key: the two
    /// prefixes must differ at a position both have, or the two suffixes must.
    ///
    /// # Examples
    ///
    /// ```
    /// let schema = ddb_lock::TableSchema::new()
    ///     .partition_key("id")
    ///     .without_sort_key()
    ///     .key_prefix("")
    ///     .key_suffix("#LOCK")
    ///     .fence_key_format("", "#FENCE");
    /// assert_eq!(schema.describe_key(&schema.fence_key("42")), "id=42#FENCE");
    /// ```
    pub fn fence_key_format(
        mut self,
        prefix: impl Into<String>,
        suffix: impl Into<String>,
    ) -> Self {
        self.fence_key = KeyFormat {
            prefix: prefix.into(),
            suffix: suffix.into(),
        };
        self
    }

    /// The attribute DynamoDB's time to live deletes expired lock items by (default `TTL`).
    ///
    /// # Examples
    ///
    /// ```
    /// let schema = ddb_lock::TableSchema::new().ttl_attribute("expires");
    /// assert_eq!(schema.ttl_attribute_name(), Some("expires"));
    /// ```
    pub fn ttl_attribute(mut self, name: impl Into<String>) -> Self {
        self.ttl_attribute = Some(name.into());
        self
    }

    /// Lock items carry no TTL attribute, and the table needs no time to live: expired items stay
    /// until the next acquire replaces them or
    /// [`delete_expired`](crate::LockClient::delete_expired) removes them.
    ///
    /// # Examples
    ///
    /// ```
    /// let schema = ddb_lock::TableSchema::new().without_ttl();
    /// assert_eq!(schema.ttl_attribute_name(), None);
    /// ```
    pub fn without_ttl(mut self) -> Self {
        self.ttl_attribute = None;
        self
    }

    /// Lock items in `namespace`: their partition keys start with `NS#<namespace>#` before the
    /// lock key format, and they carry a `Namespace` attribute for the namespace index. Usually
    /// set through [`LockClientBuilder::namespace`](crate::LockClientBuilder::namespace) or
    /// [`LockClient::in_namespace`](crate::LockClient::in_namespace).
    ///
    /// # Examples
    ///
    /// ```
    /// let schema = ddb_lock::TableSchema::new().in_namespace("billing".parse()?);
    /// assert_eq!(schema.describe_key(&schema.lock_key("a")), "PK=NS#billing#LOCK#a, SK=LOCK");
    /// # Ok::<(), ddb_lock::InvalidInput>(())
    /// ```
    pub fn in_namespace(mut self, namespace: Namespace) -> Self {
        self.namespace = Some(namespace);
        self
    }

    /// The name of the global secondary index [`list`](crate::LockClient::list) queries (default
    /// `Namespace`): partition key `Namespace` (a string), projecting all attributes. Only items
    /// of clients in a namespace carry the attribute, so the index holds nothing else.
    ///
    /// # Examples
    ///
    /// ```
    /// let schema = ddb_lock::TableSchema::new().namespace_index("locks-by-namespace");
    /// assert_eq!(schema.namespace_index_name(), "locks-by-namespace");
    /// ```
    pub fn namespace_index(mut self, name: impl Into<String>) -> Self {
        self.namespace_index = name.into();
        self
    }

    /// The namespace, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(ddb_lock::TableSchema::new().namespace(), None);
    /// ```
    pub fn namespace(&self) -> Option<&Namespace> {
        self.namespace.as_ref()
    }

    /// The name of the namespace index.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(ddb_lock::TableSchema::new().namespace_index_name(), "Namespace");
    /// ```
    pub fn namespace_index_name(&self) -> &str {
        &self.namespace_index
    }

    /// The namespace's name, as lock items store it.
    pub(crate) fn namespace_name(&self) -> Option<&str> {
        self.namespace.as_ref().map(Namespace::as_str)
    }

    /// The partition key attribute.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(ddb_lock::TableSchema::new().partition_key_name(), "PK");
    /// ```
    pub fn partition_key_name(&self) -> &str {
        &self.partition_key
    }

    /// The sort key attribute, if the table has one.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(ddb_lock::TableSchema::new().sort_key_name(), Some("SK"));
    /// ```
    pub fn sort_key_name(&self) -> Option<&str> {
        self.sort_key.as_ref().map(|sk| sk.name.as_str())
    }

    /// The TTL attribute, if lock items carry one.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(ddb_lock::TableSchema::new().ttl_attribute_name(), Some("TTL"));
    /// ```
    pub fn ttl_attribute_name(&self) -> Option<&str> {
        self.ttl_attribute.as_deref()
    }

    /// The primary key of `resource`'s lock item, for tools that read the table.
    ///
    /// # Examples
    ///
    /// ```
    /// use aws_sdk_dynamodb::types::AttributeValue;
    ///
    /// let key = ddb_lock::TableSchema::new().lock_key("orders/42");
    /// assert_eq!(key["PK"], AttributeValue::S("LOCK#orders/42".into()));
    /// assert_eq!(key["SK"], AttributeValue::S("LOCK".into()));
    /// ```
    pub fn lock_key(&self, resource: &str) -> HashMap<String, AttributeValue> {
        let sort = self.sort_key.as_ref().map(|sk| (&sk.name, &sk.lock_value));
        self.key_of(self.lock_format().key(resource), sort)
    }

    /// The primary key of `resource`'s fence item (its fencing-token counter).
    ///
    /// # Examples
    ///
    /// ```
    /// use aws_sdk_dynamodb::types::AttributeValue;
    ///
    /// let key = ddb_lock::TableSchema::new().fence_key("orders/42");
    /// assert_eq!(key["PK"], AttributeValue::S("LOCK#orders/42".into()));
    /// assert_eq!(key["SK"], AttributeValue::S("FENCE".into()));
    /// ```
    pub fn fence_key(&self, resource: &str) -> HashMap<String, AttributeValue> {
        match &self.sort_key {
            Some(sk) => self.key_of(
                self.lock_format().key(resource),
                Some((&sk.name, &sk.fence_value)),
            ),
            None => self.key_of(self.fence_format().key(resource), None),
        }
    }

    /// A key as a person reads it, partition key first: `pk=ORDER#1, sk=LOCK`.
    ///
    /// # Examples
    ///
    /// ```
    /// let schema = ddb_lock::TableSchema::new();
    /// assert_eq!(schema.describe_key(&schema.lock_key("a")), "PK=LOCK#a, SK=LOCK");
    /// ```
    pub fn describe_key(&self, key: &HashMap<String, AttributeValue>) -> String {
        let part = |name: &str| {
            let value = match key.get(name) {
                Some(AttributeValue::S(v)) => v.clone(),
                Some(other) => format!("{other:?}"),
                None => "?".to_owned(),
            };
            format!("{name}={value}")
        };
        std::iter::once(self.partition_key.as_str())
            .chain(self.sort_key_name())
            .map(part)
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn key_of(&self, partition: String, sort: Option<(&String, &String)>) -> Item {
        let mut key = HashMap::from([(self.partition_key.clone(), item::s(partition))]);
        if let Some((name, value)) = sort {
            key.insert(name.clone(), item::s(value.as_str()));
        }
        key
    }

    /// The key attributes of `found` (any item a scan returned), or `None` if it lacks one.
    pub(crate) fn key_attributes(&self, found: &Item) -> Option<Item> {
        std::iter::once(&self.partition_key)
            .chain(self.sort_key.as_ref().map(|sk| &sk.name))
            .map(|name| Some((name.clone(), found.get(name)?.clone())))
            .collect()
    }

    /// Whether `key` is the key of some resource's lock item.
    pub(crate) fn is_lock_key(&self, key: &Item) -> bool {
        self.resource_of(key).is_some()
    }

    /// Whether `key` is a lock item's key in this schema's namespace or, for a schema of no
    /// namespace, in any namespace (`NS#<namespace>#` before the lock key format).
    pub(crate) fn is_lock_key_in_any_namespace(&self, key: &Item) -> bool {
        if self.is_lock_key(key) {
            return true;
        }
        if self.namespace.is_some() {
            return false;
        }
        key.get(&self.partition_key)
            .and_then(|v| v.as_s().ok())
            .and_then(|pk| pk.strip_prefix(crate::namespace::NAMESPACE_KEY_PREFIX))
            .and_then(|rest| rest.split_once('#'))
            .and_then(|(name, _)| name.parse::<Namespace>().ok())
            .is_some_and(|namespace| self.clone().in_namespace(namespace).is_lock_key(key))
    }

    /// The resource whose lock item has `key` (any item's key attributes), if it is one.
    pub(crate) fn resource_of(&self, key: &Item) -> Option<String> {
        let string = |name: &str| key.get(name).and_then(|v| v.as_s().ok());
        let sort_matches = self
            .sort_key
            .as_ref()
            .is_none_or(|sk| string(&sk.name) == Some(&sk.lock_value));
        let format = self.lock_format();
        let resource = string(&self.partition_key).and_then(|pk| {
            pk.strip_prefix(format.prefix.as_str())?
                .strip_suffix(format.suffix.as_str())
        });
        resource
            .filter(|r| sort_matches && !r.is_empty())
            .map(str::to_owned)
    }

    /// The prefix every lock item's partition key starts with.
    pub(crate) fn lock_key_prefix(&self) -> String {
        self.lock_format().prefix
    }

    /// The format of lock items' partition keys, in the namespace.
    fn lock_format(&self) -> KeyFormat {
        self.lock_key.in_namespace(self.namespace.as_ref())
    }

    /// The format of fence items' partition keys without a sort key, in the namespace.
    fn fence_format(&self) -> KeyFormat {
        self.fence_key.in_namespace(self.namespace.as_ref())
    }

    /// The sort-key value of lock items, if the table has a sort key.
    pub(crate) fn lock_sort_key_value(&self) -> Option<&str> {
        self.sort_key.as_ref().map(|sk| sk.lock_value.as_str())
    }

    /// The longest resource name whose lock and fence keys fit DynamoDB's partition key limit.
    pub(crate) fn max_resource_bytes(&self) -> usize {
        let fence = match self.sort_key {
            Some(_) => 0,
            None => self.fence_format().affix_bytes(),
        };
        MAX_PARTITION_KEY_BYTES.saturating_sub(self.lock_format().affix_bytes().max(fence))
    }

    /// The attribute each placeholder of the expressions stands for under this schema.
    fn placeholders(&self) -> Vec<(&'static str, &str)> {
        let mut placeholders = vec![("#pk", self.partition_key.as_str())];
        placeholders.extend(self.sort_key_name().map(|name| ("#sk", name)));
        placeholders.extend(self.ttl_attribute_name().map(|name| ("#ttl", name)));
        placeholders.extend(item::LOCK_PLACEHOLDERS);
        placeholders
    }

    /// The expression attribute names for exactly the placeholders that `expressions` use:
    /// DynamoDB rejects a request that names an attribute none of its expressions use.
    pub(crate) fn names_for(&self, expressions: &[&str]) -> HashMap<String, String> {
        self.placeholders()
            .into_iter()
            .filter(|(placeholder, _)| expressions.iter().any(|e| uses(e, placeholder)))
            .map(|(placeholder, attribute)| (placeholder.to_owned(), attribute.to_owned()))
            .collect()
    }
}

/// Whether `expr` uses `placeholder` as a whole word (`#pk` is not in `#pkx`).
fn uses(expr: &str, placeholder: &str) -> bool {
    expr.match_indices(placeholder).any(|(at, _)| {
        let next = expr[at + placeholder.len()..].chars().next();
        !next.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

#[cfg(test)]
pub(crate) mod tests;
