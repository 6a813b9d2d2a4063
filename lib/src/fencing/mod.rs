//! Fencing tokens: numbers that strictly increase with every fenced acquisition of a resource, so
//! that a store receiving writes from lock holders can refuse a write from a holder that has been
//! superseded (paused past its lease, cut off, or force-released) after a newer holder wrote.
//!
//! A lease alone cannot stop a stale write: a holder can pause (a garbage collection, a frozen
//! Lambda, a slow network) past its lease, a newer holder acquires the lock and writes, and then
//! the old holder wakes up and overwrites the newer write, still believing it holds the lock. No
//! check the old holder makes before writing closes that gap; only the store that receives the
//! write can. [`FencedWrite`] makes a DynamoDB item that lock holders write into such a store: the
//! item keeps the highest token that has written it (in [`FENCE_ATTRIBUTE`] by default), and every
//! fenced write is conditional on its token being at least that high, so DynamoDB itself refuses
//! the late write of a superseded holder with a `ConditionalCheckFailedException`.
//!
//! Deleting a fenced item would erase the token it keeps, and a superseded holder's late write
//! would then recreate it. So a fenced delete writes a *tombstone* instead
//! ([`FencedWrite::tombstone`]): the item's key, the token, and [`TOMBSTONE_ATTRIBUTE`], which
//! readers treat as "no item". A tombstone can be purged ([`TombstonePurge`]) once no holder with
//! an older token can still write.

//!
//! The module is split by role: this file is the token and the attribute names a fenced store
//! shares with its readers; [`write`] builds and sends fenced writes to the user's items, [`purge`]
//! deletes their tombstones; `expr`
//! rewrites the user's expressions to carry the fence. The lock side of fencing (issuing tokens in
//! the acquire transaction) is an operation, in `ops/fenced_acquire.rs`.

mod expr;
mod purge;
#[cfg(test)]
mod test_builders;
mod write;

pub use purge::TombstonePurge;
pub use write::{FencedOutcome, FencedWrite};

use std::fmt;

/// The fencing token of one fenced acquisition: larger than the token of every earlier fenced
/// acquisition of the same resource, across release, expiry, takeover, force release and TTL
/// deletion of the lock item.
///
/// # Examples
///
/// ```
/// use ddb_lock::FencingToken;
///
/// let older = FencingToken::new(41);
/// let newer = FencingToken::new(42);
/// assert!(newer > older);
/// assert_eq!(newer.value(), 42);
/// assert_eq!(newer.to_string(), "42");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken(u64);

impl FencingToken {
    /// A token from its number, as received from elsewhere (an event, a message).
    pub fn new(value: u64) -> Self {
        FencingToken(value)
    }

    /// The token's number.
    pub fn value(self) -> u64 {
        self.0
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The default attribute of a fenced item that keeps the highest token that has written it.
///
/// # Examples
///
/// ```
/// use ddb_lock::{FencedWrite, FencingToken, FENCE_ATTRIBUTE};
///
/// assert_eq!(FENCE_ATTRIBUTE, "FencingToken");
/// let fence = FencedWrite::new(FencingToken::new(7));
/// assert_eq!(fence.attribute_name(), FENCE_ATTRIBUTE);
/// ```
pub const FENCE_ATTRIBUTE: &str = "FencingToken";

/// The attribute (a boolean, `true`) that marks a fenced item as deleted: see
/// [`FencedWrite::tombstone`]. Readers of a fenced store treat an item carrying it as absent.
///
/// # Examples
///
/// ```
/// use aws_sdk_dynamodb::types::AttributeValue;
/// use ddb_lock::TOMBSTONE_ATTRIBUTE;
///
/// # let item = std::collections::HashMap::from([(TOMBSTONE_ATTRIBUTE.to_owned(), AttributeValue::Bool(true))]);
/// // `item` as read back by a GetItem of your own:
/// let deleted = item.get(TOMBSTONE_ATTRIBUTE) == Some(&AttributeValue::Bool(true));
/// assert!(deleted);
/// ```
pub const TOMBSTONE_ATTRIBUTE: &str = "FencedTombstone";
