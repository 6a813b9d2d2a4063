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

use crate::error::InvalidInput;
use crate::item::{
    self, Item, ACQUIRED_AT, DATA, EXPIRES_AT, FENCE_SK_VALUE, FENCING_TOKEN, INTENT_EXCLUSIVE,
    INTENT_SHARED, LEASE_MS, LOCK_ID, NAMESPACE, OWNER, PK, SHARED, SK, SK_VALUE, TTL, VERSION,
    WINDOW, WRITER_WAITING,
};
use crate::limits::{
    MAX_ATTRIBUTE_NAME_BYTES, MAX_INDEX_NAME_BYTES, MAX_KEY_ATTRIBUTE_NAME_BYTES,
    MAX_PARTITION_KEY_BYTES, MAX_SORT_KEY_BYTES,
};
use crate::namespace::{Namespace, NAMESPACE_KEY_PREFIX};
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;

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

/// A partition key value made of a resource name: `prefix + resource + suffix`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KeyFormat {
    prefix: String,
    suffix: String,
}

impl KeyFormat {
    fn key(&self, resource: &str) -> String {
        format!("{}{resource}{}", self.prefix, self.suffix)
    }

    fn affix_bytes(&self) -> usize {
        self.prefix.len() + self.suffix.len()
    }

    /// This format inside `namespace`: `NS#<namespace>#` before the prefix.
    fn in_namespace(&self, namespace: Option<&Namespace>) -> KeyFormat {
        match namespace {
            Some(namespace) => KeyFormat {
                prefix: format!("{NAMESPACE_KEY_PREFIX}{namespace}#{}", self.prefix),
                suffix: self.suffix.clone(),
            },
            None => self.clone(),
        }
    }

    /// Whether some resource name under `self` and some under `other` make the same key. They
    /// cannot when the prefixes differ at a byte both have (neither is a prefix of the other):
    /// the keys differ there; nor, likewise, when the suffixes do. Otherwise they can: with
    /// `P + E = P' + E'` and `G + S = G' + S'` (each `E`, `G` the part the shorter affix lacks,
    /// or empty), the names `E + x + G` and `E' + x + G'` give the same key (a unit test builds
    /// them).
    fn can_collide_with(&self, other: &KeyFormat) -> bool {
        let comparable = |a: &str, b: &str| a.starts_with(b) || b.starts_with(a);
        let comparable_end = |a: &str, b: &str| a.ends_with(b) || b.ends_with(a);
        comparable(&self.prefix, &other.prefix) && comparable_end(&self.suffix, &other.suffix)
    }
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

/// The lock item's own attributes, whose names a key or TTL attribute must not take.
const LOCK_ATTRIBUTES: [&str; 19] = [
    LOCK_ID,
    OWNER,
    ACQUIRED_AT,
    EXPIRES_AT,
    VERSION,
    LEASE_MS,
    FENCING_TOKEN,
    DATA,
    SHARED,
    WRITER_WAITING,
    INTENT_SHARED,
    INTENT_EXCLUSIVE,
    NAMESPACE,
    WINDOW,
    crate::tasks::TASK_QUEUE,
    crate::tasks::TASK_STATUS,
    crate::tasks::CLAIMABLE_AT,
    crate::tasks::CLAIMED_BY,
    crate::tasks::CLAIM_TOKEN,
];

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

    /// Checks the schema: names within DynamoDB's limits and distinct from each other and from the
    /// lock item's own attributes, key formats that leave room for a resource name, and fence keys
    /// that can never be a lock item's key. [`LockClientBuilder::build`](crate::LockClientBuilder::build)
    /// calls it; call it yourself to check a schema read from configuration before building.
    /// The error names the setting ([`InvalidInput::field`]): `partition_key`, `sort_key`,
    /// `sort_key_value`, `fence_sort_key_value`, `fence_key`, `key_prefix` or `ttl_attribute`.
    ///
    /// # Examples
    ///
    /// ```
    /// use ddb_lock::TableSchema;
    ///
    /// assert!(TableSchema::new().partition_key("pk").validate().is_ok());
    /// let clash = TableSchema::new().partition_key("Owner").validate().unwrap_err();
    /// assert_eq!(clash.field(), "partition_key");
    /// ```
    pub fn validate(&self) -> Result<(), InvalidInput> {
        within_limit(
            "partition_key",
            &self.partition_key,
            MAX_KEY_ATTRIBUTE_NAME_BYTES,
        )?;
        let mut taken: Vec<&str> = LOCK_ATTRIBUTES.to_vec();
        not_taken("partition_key", &self.partition_key, &taken)?;
        taken.push(&self.partition_key);
        if let Some(sk) = &self.sort_key {
            within_limit("sort_key", &sk.name, MAX_KEY_ATTRIBUTE_NAME_BYTES)?;
            not_taken("sort_key", &sk.name, &taken)?;
            taken.push(&sk.name);
            within_limit("sort_key_value", &sk.lock_value, MAX_SORT_KEY_BYTES)?;
            within_limit("fence_sort_key_value", &sk.fence_value, MAX_SORT_KEY_BYTES)?;
            if sk.fence_value == sk.lock_value {
                return Err(InvalidInput::KeysOverlap {
                    field: "fence_sort_key_value",
                });
            }
        } else if self.lock_key.can_collide_with(&self.fence_key) {
            return Err(InvalidInput::KeysOverlap { field: "fence_key" });
        }
        if self.namespace.is_some() && !self.namespaced_keys_are_apart() {
            return Err(InvalidInput::NamespaceOverlap);
        }
        within_limit(
            "namespace_index",
            &self.namespace_index,
            MAX_INDEX_NAME_BYTES,
        )?;
        if let Some(ttl) = &self.ttl_attribute {
            within_limit("ttl_attribute", ttl, MAX_ATTRIBUTE_NAME_BYTES)?;
            not_taken("ttl_attribute", ttl, &taken)?;
        }
        if self.max_resource_bytes() == 0 {
            return Err(InvalidInput::TooLarge {
                field: "key_prefix",
                bytes: self.lock_format().affix_bytes(),
                limit: MAX_PARTITION_KEY_BYTES - 1,
            });
        }
        Ok(())
    }
}

impl TableSchema {
    /// Whether this namespace's keys can never equal the keys of the schema without a namespace
    /// (the formats of lock items, and of fence items without a sort key), nor each other. Two
    /// namespaces' keys never can: their prefixes differ where one namespace has a character
    /// and the other the `#` that ends it.
    fn namespaced_keys_are_apart(&self) -> bool {
        let mut plain = vec![&self.lock_key];
        let mut namespaced = vec![self.lock_format()];
        if self.sort_key.is_none() {
            plain.push(&self.fence_key);
            namespaced.push(self.fence_format());
        }
        let apart_from_plain = namespaced
            .iter()
            .all(|ns| plain.iter().all(|format| !ns.can_collide_with(format)));
        let apart_from_each_other = match namespaced.as_slice() {
            [lock, fence] => !lock.can_collide_with(fence),
            _ => true,
        };
        apart_from_plain && apart_from_each_other
    }
}

/// Whether `expr` uses `placeholder` as a whole word (`#pk` is not in `#pkx`).
fn uses(expr: &str, placeholder: &str) -> bool {
    expr.match_indices(placeholder).any(|(at, _)| {
        let next = expr[at + placeholder.len()..].chars().next();
        !next.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// Checks an attribute name or key value: not empty, within `limit` bytes.
fn within_limit(field: &'static str, value: &str, limit: usize) -> Result<(), InvalidInput> {
    if value.is_empty() {
        return Err(InvalidInput::Empty { field });
    }
    if value.len() > limit {
        return Err(InvalidInput::TooLarge {
            field,
            bytes: value.len(),
            limit,
        });
    }
    Ok(())
}

/// Checks that `value` does not name an attribute in `taken` already.
fn not_taken(field: &'static str, value: &str, taken: &[&str]) -> Result<(), InvalidInput> {
    if taken.contains(&value) {
        return Err(InvalidInput::NameTaken {
            field,
            name: value.to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Asserts that `names_for` names exactly the placeholders `expr` uses, under the default
    /// schema and a schema without sort key or TTL: each operation's tests call it for its own
    /// expressions.
    pub(crate) fn assert_every_placeholder_named(expr: &str) {
        let used: std::collections::HashSet<&str> = expr
            .split(|c: char| !(c.is_alphanumeric() || c == '#' || c == '_'))
            .filter(|word| word.starts_with('#'))
            .collect();
        let names = TableSchema::new().names_for(&[expr]);
        assert_eq!(names.len(), used.len(), "{expr}: {names:?}");
        assert!(used.iter().all(|p| names.contains_key(*p)), "{expr}");
    }

    #[test]
    fn names_are_only_those_used() {
        let names = TableSchema::new().names_for(&["#lock_id = :lock_id AND #owner = :owner"]);
        assert_eq!(names.len(), 2);
        assert_eq!(names["#owner"], OWNER);
    }

    #[test]
    fn a_placeholder_is_matched_as_a_whole_word() {
        assert_eq!(
            TableSchema::new()
                .names_for(&["#pk = :a AND #pkx = :b"])
                .len(),
            1
        );
        assert_every_placeholder_named("#pk, #sk, #lock_id, #expires_at");
    }

    #[test]
    fn key_and_ttl_placeholders_name_the_schemas_attributes() {
        let schema = TableSchema::new()
            .partition_key("key")
            .sort_key("name", "lock")
            .ttl_attribute("ttl");
        let names = schema.names_for(&["#pk #sk #ttl #owner"]);
        assert_eq!(names["#pk"], "key");
        assert_eq!(names["#sk"], "name");
        assert_eq!(names["#ttl"], "ttl");
        assert_eq!(names["#owner"], OWNER);
    }

    #[test]
    fn the_default_schema_is_the_historical_layout() {
        let schema = TableSchema::new();
        assert_eq!(
            schema.lock_key("a"),
            HashMap::from([
                (PK.to_owned(), item::s("LOCK#a")),
                (SK.to_owned(), item::s("LOCK"))
            ])
        );
        assert_eq!(
            schema.fence_key("a"),
            HashMap::from([
                (PK.to_owned(), item::s("LOCK#a")),
                (SK.to_owned(), item::s("FENCE"))
            ])
        );
        assert!(schema.validate().is_ok());
        assert!(schema.is_lock_key(&schema.lock_key("a")));
        assert!(!schema.is_lock_key(&schema.fence_key("a")));
    }

    #[test]
    fn validation_names_the_field() {
        let field = |schema: TableSchema| schema.validate().unwrap_err().field();
        assert_eq!(field(TableSchema::new().partition_key("")), "partition_key");
        assert_eq!(
            field(TableSchema::new().partition_key("p".repeat(256))),
            "partition_key"
        );
        assert_eq!(
            field(TableSchema::new().partition_key("Owner")),
            "partition_key"
        );
        assert_eq!(field(TableSchema::new().sort_key("PK", "LOCK")), "sort_key");
        assert_eq!(
            field(TableSchema::new().sort_key("sk", "")),
            "sort_key_value"
        );
        assert_eq!(
            field(TableSchema::new().sort_key("sk", "FENCE")),
            "fence_sort_key_value"
        );
        assert_eq!(
            field(TableSchema::new().ttl_attribute("PK")),
            "ttl_attribute"
        );
        assert_eq!(
            field(TableSchema::new().ttl_attribute("ExpiresAt")),
            "ttl_attribute"
        );
        assert_eq!(
            field(TableSchema::new().ttl_attribute("t".repeat(65_536))),
            "ttl_attribute"
        );
        assert_eq!(
            field(TableSchema::new().key_prefix("p".repeat(MAX_PARTITION_KEY_BYTES))),
            "key_prefix"
        );
        let id_only = TableSchema::new().partition_key("id").without_sort_key();
        assert_eq!(field(id_only.clone().key_prefix("")), "fence_key");
        assert_eq!(
            field(id_only.clone().fence_key_format("LOCK#", "")),
            "fence_key"
        );
        assert!(id_only
            .key_prefix("")
            .key_suffix("#LOCK")
            .fence_key_format("", "#FENCE")
            .validate()
            .is_ok());
    }

    /// Key formats of the shapes a user would choose: short affixes over a small alphabet, so
    /// that overlaps are common.
    fn format() -> impl Strategy<Value = KeyFormat> {
        ("[LF#]{0,3}", "[LF#]{0,3}").prop_map(|(prefix, suffix)| KeyFormat { prefix, suffix })
    }

    proptest! {
        /// Without a sort key, no fence key of any resource equals the lock key of any resource,
        /// whatever formats validation accepts.
        #[test]
        fn a_fence_key_is_never_a_lock_key(
            lock in format(),
            fence in format(),
            a in "[LF#x]{1,6}",
            b in "[LF#x]{1,6}",
        ) {
            let schema = TableSchema {
                lock_key: lock,
                fence_key: fence,
                ..TableSchema::new().without_sort_key()
            };
            if schema.validate().is_ok() {
                prop_assert_ne!(schema.lock_key(&a), schema.fence_key(&b));
                prop_assert!(!schema.is_lock_key(&schema.fence_key(&b)));
            }
        }

        /// The default formats never collide, for any resource names.
        #[test]
        fn default_fence_keys_are_never_lock_keys(a in ".{1,20}", b in ".{1,20}") {
            let schema = TableSchema::new().partition_key("id").without_sort_key();
            prop_assert_ne!(schema.lock_key(&a), schema.fence_key(&b));
        }

        /// Validation rejects a pair of formats exactly when some pair of resource names gives the
        /// same key: what it accepts is safe (above), and what it refuses is not over-cautious.
        #[test]
        fn refused_formats_do_collide(lock in format(), fence in format()) {
            let schema = TableSchema {
                lock_key: lock.clone(),
                fence_key: fence.clone(),
                ..TableSchema::new().without_sort_key()
            };
            if schema.validate().is_err() {
                prop_assert!(collision(&lock, &fence).is_some(), "{lock:?} {fence:?}");
            }
        }
    }

    proptest! {
        /// With namespaces, no two items have one key: for every pair of key formats in play
        /// (lock and fence formats, without a namespace and in the namespaces `a`, `ab`, `b`),
        /// the names that would make their keys equal if the formats were comparable (see
        /// [`collision`]) make different keys, over formats validation accepts, with and
        /// without a sort key. And `resource_of` reads a namespaced lock key back.
        #[test]
        fn namespaced_keys_are_apart(lock in format(), fence in format(), sorted in any::<bool>()) {
            let base = TableSchema {
                lock_key: lock,
                fence_key: fence,
                ..if sorted { TableSchema::new() } else { TableSchema::new().without_sort_key() }
            };
            let schemas: Vec<TableSchema> = std::iter::once(base.clone())
                .chain(["a", "ab", "b"].map(|ns| base.clone().in_namespace(Namespace::new(ns).unwrap())))
                .collect();
            prop_assume!(schemas.iter().all(|schema| schema.validate().is_ok()));
            // (schema, is a fence item): every kind of item in play.
            let items: Vec<(&TableSchema, bool)> =
                schemas.iter().flat_map(|schema| [(schema, false), (schema, true)]).collect();
            let key = |(schema, fence): (&TableSchema, bool), name: &str| {
                if fence { schema.fence_key(name) } else { schema.lock_key(name) }
            };
            let format = |(schema, fence): (&TableSchema, bool)| {
                if fence && schema.sort_key.is_none() { schema.fence_format() } else { schema.lock_format() }
            };
            for (i, &one) in items.iter().enumerate() {
                for &other in &items[i + 1..] {
                    if let Some((a, b)) = collision(&format(one), &format(other)) {
                        prop_assert_ne!(key(one, &a), key(other, &b), "{:?} {:?}", one, other);
                    }
                }
                if !one.1 {
                    prop_assert_eq!(one.0.resource_of(&one.0.lock_key("x#y")), Some("x#y".to_owned()));
                }
            }
        }
    }

    #[test]
    fn a_namespace_shortens_the_longest_resource_name() {
        let plain = TableSchema::new();
        let ns = plain
            .clone()
            .in_namespace(Namespace::new("billing").unwrap());
        assert_eq!(
            plain.max_resource_bytes() - ns.max_resource_bytes(),
            "NS#billing#".len()
        );
    }

    /// A pair of resource names (`under_lock`, `under_fence`) with the same key, if the affixes
    /// are comparable: see `KeyFormat::can_collide_with`.
    fn collision(lock: &KeyFormat, fence: &KeyFormat) -> Option<(String, String)> {
        let x = "x";
        let (lock_pre, fence_pre) = split_longer(&lock.prefix, &fence.prefix, str::strip_prefix)?;
        let (lock_suf, fence_suf) = split_longer(&lock.suffix, &fence.suffix, str::strip_suffix)?;
        let under_lock = format!("{lock_pre}{x}{lock_suf}");
        let under_fence = format!("{fence_pre}{x}{fence_suf}");
        let found =
            (lock.key(&under_lock) == fence.key(&under_fence)).then_some((under_lock, under_fence));
        assert!(found.is_some(), "{lock:?} {fence:?}");
        found
    }

    /// For two comparable affixes `a` (the lock's) and `b` (the fence's), what each needs added
    /// (on the side of the resource name) to equal the other: (rest, `""`) or (`""`, rest).
    fn split_longer<'a>(
        a: &'a str,
        b: &'a str,
        strip: fn(&'a str, &'a str) -> Option<&'a str>,
    ) -> Option<(&'a str, &'a str)> {
        match (strip(b, a), strip(a, b)) {
            (Some(rest), _) => Some((rest, "")),
            (None, Some(rest)) => Some(("", rest)),
            (None, None) => None,
        }
    }
}
