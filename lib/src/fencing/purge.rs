//! Purging tombstones: [`TombstonePurge`] deletes tombstones old enough that no holder with an
//! older token can still write.

use super::expr::{NAME, PURGE_BEFORE, PURGE_CONDITION, TOMBSTONE_NAME};
use super::{FENCE_ATTRIBUTE, TOMBSTONE_ATTRIBUTE};
use aws_sdk_dynamodb::operation::delete_item::builders::DeleteItemFluentBuilder;
use aws_sdk_dynamodb::types::AttributeValue;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Deletes a [tombstone](crate::FencedWrite::tombstone) once no holder with an older token can
/// still write: a DeleteItem conditioned on the item being a tombstone whose token was issued
/// more than `older_than` ago.
///
/// Purging brings the gap back for any holder whose token is lower than the tombstone's: its late
/// write would recreate the item. A token is issued no earlier than its value read as microseconds
/// since the epoch on the issuing client's clock, so every holder with a lower token acquired more
/// than `older_than` ago (give or take the clients' clock skew). Choose `older_than` longer than
/// the longest lease, plus the longest pause a holder may survive, plus the clock skew you allow;
/// a purge that comes too soon is as unsafe as an unfenced delete.
///
/// # Examples
///
/// ```no_run
/// use aws_sdk_dynamodb::types::AttributeValue;
/// use ddb_lock::TombstonePurge;
/// use std::time::Duration;
///
/// # async fn run(dynamodb: aws_sdk_dynamodb::Client) -> Result<(), aws_sdk_dynamodb::Error> {
/// // Leases of at most 5 minutes, no holder survives a pause of a day: purge after a week.
/// let purge = TombstonePurge::new(Duration::from_secs(7 * 24 * 3600));
/// let result = purge
///     .delete(dynamodb.delete_item().table_name("accounts").key("id", AttributeValue::S("42".into())))
///     .send()
///     .await;
/// // A ConditionalCheckFailedException: not a tombstone, or a recent one. Both are kept.
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TombstonePurge {
    older_than: Duration,
    attribute: String,
}

impl TombstonePurge {
    /// A purge of tombstones whose token was issued more than `older_than` ago, with the fence in
    /// [`FENCE_ATTRIBUTE`].
    ///
    /// # Examples
    ///
    /// ```
    /// use ddb_lock::TombstonePurge;
    /// use std::time::Duration;
    ///
    /// let purge = TombstonePurge::new(Duration::from_secs(86_400)).attribute("Fence");
    /// assert_eq!(purge.older_than(), Duration::from_secs(86_400));
    /// ```
    pub fn new(older_than: Duration) -> Self {
        TombstonePurge {
            older_than,
            attribute: FENCE_ATTRIBUTE.to_owned(),
        }
    }

    /// Reads the token from `name` instead (as
    /// [`FencedWrite::attribute`](crate::FencedWrite::attribute)).
    pub fn attribute(mut self, name: impl Into<String>) -> Self {
        self.attribute = name.into();
        self
    }

    /// How old a tombstone's token must be to be purged.
    pub fn older_than(&self) -> Duration {
        self.older_than
    }

    /// Adds the purge condition to a DeleteItem of the item (after any condition already set,
    /// with `AND`), counting `older_than` back from this machine's clock.
    pub fn delete(&self, delete: DeleteItemFluentBuilder) -> DeleteItemFluentBuilder {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let bound = now.saturating_sub(self.older_than).as_micros();
        let condition = match delete.get_condition_expression().as_deref().map(str::trim) {
            Some(own) if !own.is_empty() => format!("({own}) AND {PURGE_CONDITION}"),
            _ => PURGE_CONDITION.to_owned(),
        };
        delete
            .condition_expression(condition)
            .expression_attribute_names(NAME, self.attribute.clone())
            .expression_attribute_names(TOMBSTONE_NAME, TOMBSTONE_ATTRIBUTE)
            .expression_attribute_values(PURGE_BEFORE, AttributeValue::N(bound.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fencing::test_builders::{client, n, names};

    #[test]
    fn a_purge_deletes_only_a_tombstone_whose_token_is_old_enough() {
        let delete = TombstonePurge::new(Duration::from_secs(3600)).delete(
            client()
                .delete_item()
                .table_name("t")
                .key("id", AttributeValue::S("1".into()))
                .condition_expression("#v = :v")
                .expression_attribute_names("#v", "Version")
                .expression_attribute_values(":v", n("3")),
        );
        assert_eq!(
            delete.get_condition_expression().as_deref(),
            Some(format!("(#v = :v) AND {PURGE_CONDITION}").as_str())
        );
        assert_eq!(
            delete.get_expression_attribute_names(),
            &names(&[
                ("#v", "Version"),
                ("#ddb_lock_fence", "FencingToken"),
                ("#ddb_lock_tombstone", TOMBSTONE_ATTRIBUTE)
            ])
        );
        let values = delete
            .get_expression_attribute_values()
            .clone()
            .unwrap_or_default();
        let bound: u128 = values[PURGE_BEFORE].as_n().unwrap().parse().unwrap();
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        assert!(bound <= (now - Duration::from_secs(3600)).as_micros());
    }
}
