//! Checking a [`TableSchema`]: names within DynamoDB's limits, apart from each other and from the
//! lock item's own attributes, and key formats that can never give a fence item (or another
//! namespace's item) a lock item's key.

use super::TableSchema;
use crate::error::InvalidInput;
use crate::item::{
    ACQUIRED_AT, DATA, EXPIRES_AT, FENCING_TOKEN, GRANTED_BY, HOLD_MS, INTENT_EXCLUSIVE,
    INTENT_SHARED, LEASE_MS, LOCK_ID, NAMESPACE, OWNER, QUEUE, QUEUED_PREFIX, RELEASED_AT,
    RELEASED_BY, SHARED, SHARED_HOLDER_PREFIX, TURN_DEV_MS, TURN_MS, VERSION, WINDOW,
    WRITER_WAITING,
};
use crate::limits::{
    MAX_ATTRIBUTE_NAME_BYTES, MAX_INDEX_NAME_BYTES, MAX_KEY_ATTRIBUTE_NAME_BYTES,
    MAX_PARTITION_KEY_BYTES, MAX_SORT_KEY_BYTES,
};

/// The lock item's own attributes, whose names a key or TTL attribute must not take (a line's, a
/// kept item's record, the line's figures and a fenced write's tombstone marker among them: a TTL
/// on `Queue` made every release fail on a malformed line, one on `ReleasedAt` every kept
/// release).
const LOCK_ATTRIBUTES: [&str; 32] = [
    QUEUE,
    GRANTED_BY,
    RELEASED_BY,
    RELEASED_AT,
    HOLD_MS,
    TURN_MS,
    TURN_DEV_MS,
    crate::fencing::TOMBSTONE_ATTRIBUTE,
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
    crate::tasks::COMPLETED_CLAIM,
    crate::tasks::CLAIM_AT,
    crate::tasks::STATUS_WRITE,
    crate::tasks::STATUS_WRITE_AT,
    crate::tasks::REPLACED_STATUS_WRITE,
];

impl TableSchema {
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
    // The entries of shared holders and of waiters in line are named by a prefix and an id.
    let an_entry = [SHARED_HOLDER_PREFIX, QUEUED_PREFIX]
        .iter()
        .any(|prefix| value.starts_with(prefix));
    if taken.contains(&value) || an_entry {
        return Err(InvalidInput::NameTaken {
            field,
            name: value.to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::namespace::Namespace;
    use crate::schema::KeyFormat;
    use proptest::prelude::*;

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

    #[test]
    fn no_key_or_ttl_attribute_takes_a_name_the_lock_item_uses() {
        for name in [
            "Queue",
            "ReleasedBy",
            "ReleasedAt",
            "HoldMs",
            "TurnMs",
            "TurnDevMs",
            "FencedTombstone",
            "Shared:x",
            "Queued:x",
        ] {
            let refused = TableSchema::new().ttl_attribute(name).validate();
            assert!(
                matches!(
                    refused,
                    Err(InvalidInput::NameTaken {
                        field: "ttl_attribute",
                        ..
                    })
                ),
                "{name}: {refused:?}"
            );
            let refused = TableSchema::new().partition_key(name).validate();
            assert!(
                matches!(
                    refused,
                    Err(InvalidInput::NameTaken {
                        field: "partition_key",
                        ..
                    })
                ),
                "{name}: {refused:?}"
            );
        }
    }
}
