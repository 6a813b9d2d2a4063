//! Rewriting a user's expressions to carry the fence: the fence condition `AND`ed after the
//! request's own condition, the token's assignment added to the update expression's `SET` clause
//! and the tombstone marker's removal to its `REMOVE` clause, and the purge condition of old
//! tombstones.
//!
//! The rewriting is textual, so it relies on DynamoDB's grammar: clause keywords are reserved
//! words (a bare `SET` outside a placeholder is the keyword) and each clause appears once. The
//! placeholders it adds (`#ddb_lock_fence`, `:ddb_lock_fence`, …) must not be used by the caller.

/// The expression attribute name placeholder of the fence attribute.
pub(super) const NAME: &str = "#ddb_lock_fence";
/// The expression attribute value placeholder of the writer's token.
pub(super) const VALUE: &str = ":ddb_lock_fence";
/// The fence: the item was never written with a token, or only with tokens no higher than ours.
pub(super) const CONDITION: &str =
    "(attribute_not_exists(#ddb_lock_fence) OR #ddb_lock_fence <= :ddb_lock_fence)";
/// The update action that records our token.
const ASSIGNMENT: &str = "#ddb_lock_fence = :ddb_lock_fence";

/// The expression attribute name placeholder of the tombstone marker.
pub(super) const TOMBSTONE_NAME: &str = "#ddb_lock_tombstone";
/// The expression attribute value placeholder of the purge's token bound.
pub(super) const PURGE_BEFORE: &str = ":ddb_lock_purge_before";
/// A tombstone whose token was issued before the bound.
pub(super) const PURGE_CONDITION: &str =
    "attribute_exists(#ddb_lock_tombstone) AND #ddb_lock_fence < :ddb_lock_purge_before";

/// The fence condition, after the caller's own condition (if any) with `AND`.
pub(super) fn fenced_condition(existing: Option<&str>) -> String {
    match existing.map(str::trim).filter(|c| !c.is_empty()) {
        Some(own) => format!("({own}) AND {CONDITION}"),
        None => CONDITION.to_owned(),
    }
}

/// The update expression with the fence assignment added to its SET clause, which is created if
/// absent. Clause keywords are reserved words, so a bare word `SET` (any case) outside a
/// placeholder is the keyword; DynamoDB allows each clause once, in any order.
pub(super) fn fenced_update_expression(existing: Option<&str>) -> String {
    let existing = existing.unwrap_or("").trim_end();
    if existing.trim().is_empty() {
        return format!("SET {ASSIGNMENT}");
    }
    with_action(existing, "SET", ASSIGNMENT)
}

/// The update expression with the tombstone marker added to its REMOVE clause, which is created
/// if absent: a fenced update of a tombstone writes the item again, as an UpdateItem of an absent
/// item creates it. Left, the marker hid the newer holder's write from readers, and a purge
/// of old tombstones then deleted the live item with its data and fence.
pub(super) fn reviving_update_expression(fenced: &str) -> String {
    with_action(fenced, "REMOVE", TOMBSTONE_NAME)
}

/// `expression` with `action` first in its `keyword` clause, or in a clause of its own at the end.
fn with_action(expression: &str, keyword: &str, action: &str) -> String {
    match find_keyword(expression, keyword) {
        Some(at) => {
            let (head, rest) = expression.split_at(at + keyword.len());
            let separator = if rest.starts_with(char::is_whitespace) {
                ""
            } else {
                " "
            };
            format!("{head} {action},{separator}{rest}")
        }
        None => format!("{expression} {keyword} {action}"),
    }
}

/// The byte offset of the clause keyword `keyword` (upper case): in any case, as a whole word (a
/// maximal run of letters, digits and underscores) that does not follow the `#` of a name
/// placeholder or the `:` of a value placeholder.
fn find_keyword(expression: &str, keyword: &str) -> Option<usize> {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut word_start = None;
    let mut previous = None;
    for (i, c) in expression.char_indices().chain([(expression.len(), ' ')]) {
        match (is_word(c), word_start) {
            (true, None) => word_start = Some((i, previous)),
            (false, Some((start, before))) => {
                let placeholder = matches!(before, Some('#' | ':'));
                if !placeholder && expression[start..i].eq_ignore_ascii_case(keyword) {
                    return Some(start);
                }
                word_start = None;
            }
            _ => {}
        }
        previous = Some(c);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_empty_update_expression_becomes_a_set_clause() {
        let expected = "SET #ddb_lock_fence = :ddb_lock_fence";
        assert_eq!(fenced_update_expression(None), expected);
        assert_eq!(fenced_update_expression(Some("")), expected);
        assert_eq!(fenced_update_expression(Some("  ")), expected);
    }

    #[test]
    fn the_fence_joins_an_existing_set_clause() {
        assert_eq!(
            fenced_update_expression(Some("SET a = :a")),
            "SET #ddb_lock_fence = :ddb_lock_fence, a = :a"
        );
    }

    #[test]
    fn a_lowercase_set_clause_before_another_clause_is_found() {
        assert_eq!(
            fenced_update_expression(Some("set a = :a REMOVE b")),
            "set #ddb_lock_fence = :ddb_lock_fence, a = :a REMOVE b"
        );
    }

    #[test]
    fn a_set_clause_after_another_clause_is_found() {
        assert_eq!(
            fenced_update_expression(Some("REMOVE b SET a = :a")),
            "REMOVE b SET #ddb_lock_fence = :ddb_lock_fence, a = :a"
        );
    }

    #[test]
    fn a_set_clause_is_appended_when_there_is_none() {
        assert_eq!(
            fenced_update_expression(Some("ADD n :one")),
            "ADD n :one SET #ddb_lock_fence = :ddb_lock_fence"
        );
    }

    #[test]
    fn placeholders_and_names_containing_set_are_not_the_keyword() {
        assert_eq!(
            fenced_update_expression(Some("REMOVE #SETTINGS, #SET, SETUP ADD n :SET")),
            "REMOVE #SETTINGS, #SET, SETUP ADD n :SET SET #ddb_lock_fence = :ddb_lock_fence"
        );
        assert_eq!(
            fenced_update_expression(Some("REMOVE #SETTINGS SET #SETTINGS2 = :set")),
            "REMOVE #SETTINGS SET #ddb_lock_fence = :ddb_lock_fence, #SETTINGS2 = :set"
        );
    }

    #[test]
    fn a_set_keyword_followed_directly_by_a_placeholder_is_found() {
        assert_eq!(
            fenced_update_expression(Some("SET#a = :a")),
            "SET #ddb_lock_fence = :ddb_lock_fence, #a = :a"
        );
    }

    #[test]
    fn the_tombstone_marker_joins_or_makes_a_remove_clause() {
        assert_eq!(
            reviving_update_expression("SET #ddb_lock_fence = :ddb_lock_fence, a = :a"),
            "SET #ddb_lock_fence = :ddb_lock_fence, a = :a REMOVE #ddb_lock_tombstone"
        );
        assert_eq!(
            reviving_update_expression("SET a = :a remove b, #REMOVED"),
            "SET a = :a remove #ddb_lock_tombstone, b, #REMOVED"
        );
        assert_eq!(
            reviving_update_expression("REMOVE#b SET a = :a"),
            "REMOVE #ddb_lock_tombstone, #b SET a = :a"
        );
    }

    #[test]
    fn the_fence_is_anded_to_an_existing_condition() {
        assert_eq!(fenced_condition(None), CONDITION);
        assert_eq!(fenced_condition(Some(" ")), CONDITION);
        assert_eq!(
            fenced_condition(Some("a = :a OR b = :b")),
            format!("(a = :a OR b = :b) AND {CONDITION}")
        );
    }
}
