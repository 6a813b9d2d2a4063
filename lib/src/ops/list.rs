//! Listing a namespace's live locks: a Query of the namespace index, page after page.
//!
//! The index is a global secondary index keyed on the `Namespace` attribute, which only the items
//! of clients in a namespace carry (see [`namespace`](crate::namespace)): a sparse index, so the
//! Query reads the namespace's lock items and nothing else, however large the table. It projects
//! every attribute, since a shared holder's entry has an attribute name of its own
//! (`Shared:<LockID>`) that no fixed projection could name. Each item found is judged as
//! [`status`](super::inspect::status) judges one, by this client's clock; a free one (released
//! and kept, or expired) is left out, and so is a malformed one, with a warning.

use super::inspect::item_status;
use crate::error::Error;
use crate::item::{s, Item};
use crate::lock_table::LockTable;
use crate::namespace::{ListedLock, Namespace};
use crate::outcome::LockStatus;
use tracing::warn;

/// The Query's key condition.
const NAMESPACE_IS: &str = "#namespace = :namespace";

/// The live locks of `namespace`, in the order the index returns them, sorted by resource.
pub(crate) async fn list(
    table: &LockTable,
    namespace: &Namespace,
) -> Result<Vec<ListedLock>, Error> {
    let schema = table.schema.clone().in_namespace(namespace.clone());
    schema.validate()?;
    let mut pages = table
        .dynamodb
        .query()
        .table_name(&table.name)
        .index_name(schema.namespace_index_name())
        .key_condition_expression(NAMESPACE_IS)
        .set_expression_attribute_names(Some(schema.names_for(&[NAMESPACE_IS])))
        .expression_attribute_values(":namespace", s(namespace.as_str()))
        .into_paginator()
        .send();
    let now = table.now();
    let mut listed = Vec::new();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| Error::backend("Query", e))?;
        for item in page.items() {
            if let Some(lock) = listed_lock(table, &schema, item, now) {
                listed.push(lock);
            }
        }
    }
    listed.sort_by(|a, b| a.resource.cmp(&b.resource));
    Ok(listed)
}

/// The lock `item` holds, if it is a live lock item of the namespace `schema` is in.
fn listed_lock(
    table: &LockTable,
    schema: &crate::TableSchema,
    item: &Item,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<ListedLock> {
    let resource = schema.resource_of(item)?;
    match item_status(table, &resource, Some(item), now) {
        Ok(LockStatus::Free) => None,
        Ok(status) => Some(ListedLock { resource, status }),
        Err(malformed) => {
            warn!(resource, %malformed, "list skipped a malformed lock item");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::tests::assert_every_placeholder_named;

    #[test]
    fn the_key_condition_names_its_attribute() {
        assert_every_placeholder_named(NAMESPACE_IS);
    }
}
