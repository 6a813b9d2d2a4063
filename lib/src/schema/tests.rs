//! The table schema's unit tests, and the placeholder check every operation's tests call.

use super::*;
use crate::item::OWNER;

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
