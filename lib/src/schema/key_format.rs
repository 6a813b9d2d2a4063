//! A key value made of a resource name between a prefix and a suffix, and when two such formats
//! can make the same key (which [`validate`](super::TableSchema::validate) refuses for a lock and
//! a fence format).

use crate::namespace::{Namespace, NAMESPACE_KEY_PREFIX};

/// A partition key value made of a resource name: `prefix + resource + suffix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KeyFormat {
    pub(super) prefix: String,
    pub(super) suffix: String,
}

impl KeyFormat {
    pub(super) fn key(&self, resource: &str) -> String {
        format!("{}{resource}{}", self.prefix, self.suffix)
    }

    pub(super) fn affix_bytes(&self) -> usize {
        self.prefix.len() + self.suffix.len()
    }

    /// This format inside `namespace`: `NS#<namespace>#` before the prefix.
    pub(super) fn in_namespace(&self, namespace: Option<&Namespace>) -> KeyFormat {
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
    pub(super) fn can_collide_with(&self, other: &KeyFormat) -> bool {
        let comparable = |a: &str, b: &str| a.starts_with(b) || b.starts_with(a);
        let comparable_end = |a: &str, b: &str| a.ends_with(b) || b.ends_with(a);
        comparable(&self.prefix, &other.prefix) && comparable_end(&self.suffix, &other.suffix)
    }
}
