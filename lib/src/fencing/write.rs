//! Fenced writes to a user's own items: [`FencedWrite`] adds the fence to a PutItem or
//! UpdateItem (or writes a tombstone in place of a delete) and sends it, telling a refusal from an
//! ambiguous retry. Tombstones are purged by [`TombstonePurge`](super::TombstonePurge).
//!
//! The library only builds the requests on the user's own builders, so every parameter the user
//! set is kept; the price is that the user must not use the library's placeholders nor set the
//! fence attribute.

use super::expr::{
    fenced_condition, fenced_update_expression, reviving_update_expression, NAME, TOMBSTONE_NAME,
    VALUE,
};
use super::{FencingToken, FENCE_ATTRIBUTE, TOMBSTONE_ATTRIBUTE};
use crate::conditional::{answer, Answer, Transmissions};
use crate::error::Error;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::builders::PutItemFluentBuilder;
use aws_sdk_dynamodb::operation::put_item::{PutItemError, PutItemOutput};
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::operation::update_item::{UpdateItemError, UpdateItemOutput};
use aws_sdk_dynamodb::types::AttributeValue;

/// What a fenced write sent with [`FencedWrite::send_update`] (or `send_put`, `send_delete`) did.
#[derive(Debug, Clone, PartialEq)]
pub enum FencedOutcome<T> {
    /// The write was applied; DynamoDB's answer.
    Written(T),
    /// The write was refused and changed nothing: a newer holder has written the item, or the
    /// request's own condition failed.
    Refused,
    /// A retry of the request was refused after an earlier attempt got no answer: that attempt
    /// may have been applied before a newer holder wrote. Written or not, the writer has been
    /// superseded.
    Unknown,
}

impl<T> FencedOutcome<T> {
    /// Whether the write certainly happened.
    pub fn is_written(&self) -> bool {
        matches!(self, FencedOutcome::Written(_))
    }
}

/// Reads a fenced write's answer: a refusal is [`FencedOutcome::Refused`] only if the request
/// was sent once.
fn fenced_outcome<O, E>(
    operation: &'static str,
    result: Result<O, SdkError<E, HttpResponse>>,
    transmissions: &Transmissions,
    is_refusal: impl Fn(&E) -> bool,
) -> Result<FencedOutcome<O>, Error>
where
    aws_sdk_dynamodb::Error: From<SdkError<E, HttpResponse>>,
{
    let answer = answer(operation, result, |err| is_refusal(err).then_some(()))?;
    Ok(match answer {
        Answer::Applied(output) => FencedOutcome::Written(output),
        Answer::Refused(()) => refused(transmissions.retried()),
    })
}

/// What a refused fenced write says, `retried` telling whether the SDK sent it more than once.
fn refused<T>(retried: bool) -> FencedOutcome<T> {
    if retried {
        FencedOutcome::Unknown
    } else {
        FencedOutcome::Refused
    }
}

/// A fenced write to an item of your own (not the lock item): a PutItem, UpdateItem or DeleteItem
/// that DynamoDB refuses if the item has already been written with a higher fencing token.
///
/// Give it the token of your acquisition and the request you have built; it stores the token as a
/// number in the item's fence attribute ([`FENCE_ATTRIBUTE`] unless you name another) and adds the
/// condition `attribute_not_exists(fence) OR fence <= token`, joined with `AND` to any condition
/// expression you set. A write with the same token as the last one is accepted, so a holder may
/// write many times; a write with a lower token fails with a `ConditionalCheckFailedException`
/// (the same error as when your own condition fails): a newer holder has written, so the caller
/// must stop rather than retry.
///
/// The request's expression attribute names and values are kept; the helper adds the placeholders
/// `#ddb_lock_fence` and `:ddb_lock_fence`, which your expressions must not use. Use expressions, not
/// the legacy `Expected` or `AttributeUpdates` parameters (DynamoDB refuses a request mixing both),
/// and do not set the fence attribute yourself.
///
/// # Examples
///
/// A fenced UpdateItem, and how to recognise the refusal:
///
/// ```no_run
/// use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
/// use aws_sdk_dynamodb::types::AttributeValue;
/// use ddb_lock::{FencedWrite, FencingToken};
///
/// # async fn run(dynamodb: aws_sdk_dynamodb::Client, token: FencingToken) -> Result<(), Box<dyn std::error::Error>> {
/// // `token` is the fencing token of our acquisition of the lock that guards account 42.
/// let result = FencedWrite::new(token)
///     .update(
///         dynamodb
///             .update_item()
///             .table_name("accounts")
///             .key("id", AttributeValue::S("42".into()))
///             .update_expression("SET balance = :b")
///             .expression_attribute_values(":b", AttributeValue::N("10".into())),
///     )
///     .send()
///     .await;
/// match result {
///     Ok(_) => println!("written with token {token}"),
///     Err(err)
///         if matches!(
///             err.as_service_error(),
///             Some(UpdateItemError::ConditionalCheckFailedException(_))
///         ) =>
///     {
///         println!("a newer holder has written account 42: we lost the lock, stop");
///     }
///     Err(err) => return Err(err.into()),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FencedWrite {
    token: FencingToken,
    attribute: String,
}

impl FencedWrite {
    /// Fenced writes carrying `token`, kept in the attribute [`FENCE_ATTRIBUTE`].
    ///
    /// # Examples
    ///
    /// ```
    /// use ddb_lock::{FencedWrite, FencingToken};
    ///
    /// let fence = FencedWrite::new(FencingToken::new(7));
    /// assert_eq!(fence.token(), FencingToken::new(7));
    /// assert_eq!(fence.attribute_name(), "FencingToken");
    /// ```
    pub fn new(token: FencingToken) -> Self {
        FencedWrite {
            token,
            attribute: FENCE_ATTRIBUTE.to_owned(),
        }
    }

    /// Keeps the token in the attribute `name` instead of [`FENCE_ATTRIBUTE`]. Every writer of
    /// an item must use the same attribute for the fence to hold.
    ///
    /// # Examples
    ///
    /// ```
    /// use ddb_lock::{FencedWrite, FencingToken};
    ///
    /// let fence = FencedWrite::new(FencingToken::new(7)).attribute("LastWriterToken");
    /// assert_eq!(fence.attribute_name(), "LastWriterToken");
    /// ```
    pub fn attribute(mut self, name: impl Into<String>) -> Self {
        self.attribute = name.into();
        self
    }

    /// The token the writes carry.
    ///
    /// # Examples
    ///
    /// ```
    /// use ddb_lock::{FencedWrite, FencingToken};
    ///
    /// assert_eq!(FencedWrite::new(FencingToken::new(3)).token().value(), 3);
    /// ```
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// The attribute that keeps the highest token that has written the item.
    ///
    /// # Examples
    ///
    /// ```
    /// use ddb_lock::{FencedWrite, FencingToken, FENCE_ATTRIBUTE};
    ///
    /// let fence = FencedWrite::new(FencingToken::new(3));
    /// assert_eq!(fence.attribute_name(), FENCE_ATTRIBUTE);
    /// ```
    pub fn attribute_name(&self) -> &str {
        &self.attribute
    }

    /// Fences a PutItem: adds the token to the item and the fence to its condition (after any
    /// condition already set, with `AND`).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use aws_sdk_dynamodb::types::AttributeValue;
    /// use ddb_lock::{FencedWrite, FencingToken};
    ///
    /// # async fn run(dynamodb: aws_sdk_dynamodb::Client, token: FencingToken) -> Result<(), aws_sdk_dynamodb::Error> {
    /// FencedWrite::new(token)
    ///     .put(
    ///         dynamodb
    ///             .put_item()
    ///             .table_name("accounts")
    ///             .item("id", AttributeValue::S("42".into()))
    ///             .item("balance", AttributeValue::N("10".into())),
    ///     )
    ///     .send()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn put(&self, put: PutItemFluentBuilder) -> PutItemFluentBuilder {
        let condition = fenced_condition(put.get_condition_expression().as_deref());
        put.item(self.attribute.clone(), self.value())
            .condition_expression(condition)
            .expression_attribute_names(NAME, self.attribute.clone())
            .expression_attribute_values(VALUE, self.value())
    }

    /// Fences an UpdateItem: adds `#ddb_lock_fence = :ddb_lock_fence` to the update expression's
    /// SET clause (creating the clause if there is none), the removal of [`TOMBSTONE_ATTRIBUTE`]
    /// to its REMOVE clause (likewise: an update of a deleted item writes it again, as an
    /// UpdateItem of an absent item creates it), and the fence to its condition (after any
    /// condition already set, with `AND`). A condition of the caller's sees a tombstone as an
    /// item: `attribute_exists` holds on it.
    ///
    /// # Examples
    ///
    /// ```
    /// use aws_sdk_dynamodb::types::AttributeValue;
    /// use ddb_lock::{FencedWrite, FencingToken};
    ///
    /// # let config = aws_sdk_dynamodb::Config::builder()
    /// #     .behavior_version_latest()
    /// #     .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
    /// #     .build();
    /// # let dynamodb = aws_sdk_dynamodb::Client::from_conf(config);
    /// let update = FencedWrite::new(FencingToken::new(7)).update(
    ///     dynamodb
    ///         .update_item()
    ///         .table_name("accounts")
    ///         .key("id", AttributeValue::S("42".into()))
    ///         .update_expression("SET balance = :b")
    ///         .expression_attribute_values(":b", AttributeValue::N("10".into())),
    /// );
    /// assert_eq!(
    ///     update.get_update_expression().as_deref(),
    ///     Some("SET #ddb_lock_fence = :ddb_lock_fence, balance = :b REMOVE #ddb_lock_tombstone")
    /// );
    /// ```
    pub fn update(&self, update: UpdateItemFluentBuilder) -> UpdateItemFluentBuilder {
        // An expression that already names the marker (a caller's own revival: DynamoDB refuses
        // two actions on one path) is left to it.
        let revives = !names_the_marker(&update);
        let mut expression = fenced_update_expression(update.get_update_expression().as_deref());
        if revives {
            expression = reviving_update_expression(&expression);
        }
        let condition = fenced_condition(update.get_condition_expression().as_deref());
        let mut update = update
            .update_expression(expression)
            .condition_expression(condition)
            .expression_attribute_names(NAME, self.attribute.clone())
            .expression_attribute_values(VALUE, self.value());
        if revives {
            update = update.expression_attribute_names(TOMBSTONE_NAME, TOMBSTONE_ATTRIBUTE);
        }
        update
    }

    /// A fenced delete: a PutItem that replaces the item with a *tombstone* (the attributes the
    /// given PutItem sets, normally just the key, plus the token and [`TOMBSTONE_ATTRIBUTE`]),
    /// fenced like [`put`](Self::put).
    ///
    /// A DeleteItem would erase the token the item keeps, and a superseded holder's late write
    /// (whose condition is `attribute_not_exists(fence) OR fence <= token`) would then recreate the
    /// item. The tombstone keeps the token, so that late write is refused like any other; a newer
    /// holder's fenced put replaces the tombstone. Readers treat an item carrying
    /// [`TOMBSTONE_ATTRIBUTE`] as absent; [`TombstonePurge`](super::TombstonePurge) removes old
    /// tombstones.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use aws_sdk_dynamodb::types::AttributeValue;
    /// use ddb_lock::{FencedWrite, FencingToken};
    ///
    /// # async fn run(dynamodb: aws_sdk_dynamodb::Client, token: FencingToken) -> Result<(), Box<dyn std::error::Error>> {
    /// let outcome = FencedWrite::new(token)
    ///     .send_tombstone(
    ///         dynamodb
    ///             .put_item()
    ///             .table_name("accounts")
    ///             .item("id", AttributeValue::S("42".into())),
    ///     )
    ///     .await?;
    /// println!("{}", if outcome.is_written() { "deleted" } else { "not deleted, or not known" });
    /// # Ok(()) }
    /// ```
    pub fn tombstone(&self, put: PutItemFluentBuilder) -> PutItemFluentBuilder {
        self.put(put.item(TOMBSTONE_ATTRIBUTE, AttributeValue::Bool(true)))
    }

    /// Fences and sends an UpdateItem, telling a refusal apart from an ambiguous retry.
    ///
    /// If the SDK had to retry the request (an answer was lost) and the retry was refused, the
    /// earlier attempt may have been applied before a newer holder wrote: that is
    /// [`FencedOutcome::Unknown`], not [`FencedOutcome::Refused`]. Counting the retried request as
    /// refused would miscount a write that happened.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use aws_sdk_dynamodb::types::AttributeValue;
    /// use ddb_lock::{FencedOutcome, FencedWrite, FencingToken};
    ///
    /// # async fn run(dynamodb: aws_sdk_dynamodb::Client, token: FencingToken) -> Result<(), Box<dyn std::error::Error>> {
    /// let outcome = FencedWrite::new(token)
    ///     .send_update(
    ///         dynamodb
    ///             .update_item()
    ///             .table_name("accounts")
    ///             .key("id", AttributeValue::S("42".into()))
    ///             .update_expression("SET balance = :b")
    ///             .expression_attribute_values(":b", AttributeValue::N("10".into())),
    ///     )
    ///     .await?;
    /// match outcome {
    ///     FencedOutcome::Written(_) => {}
    ///     FencedOutcome::Refused => println!("a newer holder has written: stop"),
    ///     FencedOutcome::Unknown => println!("maybe written, then superseded: stop, and re-read"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn send_update(
        &self,
        update: UpdateItemFluentBuilder,
    ) -> Result<FencedOutcome<UpdateItemOutput>, Error> {
        let transmissions = Transmissions::default();
        let request = self
            .update(update)
            .customize()
            .interceptor(transmissions.clone())
            .send();
        fenced_outcome("UpdateItem", request.await, &transmissions, |e| {
            matches!(e, UpdateItemError::ConditionalCheckFailedException(_))
        })
    }

    /// [`send_update`](Self::send_update) for a PutItem.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use aws_sdk_dynamodb::types::AttributeValue;
    /// use ddb_lock::{FencedWrite, FencingToken};
    ///
    /// # async fn run(dynamodb: aws_sdk_dynamodb::Client, token: FencingToken) -> Result<(), Box<dyn std::error::Error>> {
    /// let put = dynamodb.put_item().table_name("accounts").item("id", AttributeValue::S("42".into()));
    /// let outcome = FencedWrite::new(token).send_put(put).await?;
    /// assert!(outcome.is_written());
    /// # Ok(()) }
    /// ```
    pub async fn send_put(
        &self,
        put: PutItemFluentBuilder,
    ) -> Result<FencedOutcome<PutItemOutput>, Error> {
        let transmissions = Transmissions::default();
        let request = self
            .put(put)
            .customize()
            .interceptor(transmissions.clone())
            .send();
        fenced_outcome("PutItem", request.await, &transmissions, |e| {
            matches!(e, PutItemError::ConditionalCheckFailedException(_))
        })
    }

    /// [`send_update`](Self::send_update) for a [`tombstone`](Self::tombstone).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use aws_sdk_dynamodb::types::AttributeValue;
    /// use ddb_lock::{FencedWrite, FencingToken};
    ///
    /// # async fn run(dynamodb: aws_sdk_dynamodb::Client, token: FencingToken) -> Result<(), Box<dyn std::error::Error>> {
    /// let key_only = dynamodb.put_item().table_name("accounts").item("id", AttributeValue::S("42".into()));
    /// let outcome = FencedWrite::new(token).send_tombstone(key_only).await?;
    /// println!("{}", if outcome.is_written() { "deleted" } else { "not deleted, or not known" });
    /// # Ok(()) }
    /// ```
    pub async fn send_tombstone(
        &self,
        put: PutItemFluentBuilder,
    ) -> Result<FencedOutcome<PutItemOutput>, Error> {
        self.send_put(put.item(TOMBSTONE_ATTRIBUTE, AttributeValue::Bool(true)))
            .await
    }

    /// The token as DynamoDB stores it: a number.
    fn value(&self) -> AttributeValue {
        AttributeValue::N(self.token.value().to_string())
    }
}

/// Whether `update`'s own expression names the tombstone marker, by its name or through a
/// placeholder of its own.
fn names_the_marker(update: &UpdateItemFluentBuilder) -> bool {
    let Some(own) = update.get_update_expression().as_deref() else {
        return false;
    };
    own.contains(TOMBSTONE_ATTRIBUTE)
        || update
            .get_expression_attribute_names()
            .as_ref()
            .is_some_and(|names| {
                names.iter().any(|(name, attribute)| {
                    attribute == TOMBSTONE_ATTRIBUTE && own.contains(name.as_str())
                })
            })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fencing::expr::CONDITION;
    use crate::fencing::test_builders::{client, n, names, values};

    #[test]
    fn a_fenced_put_stores_the_token_and_keeps_the_callers_condition_and_placeholders() {
        let put = FencedWrite::new(FencingToken::new(7)).put(
            client()
                .put_item()
                .table_name("t")
                .item("id", AttributeValue::S("1".into()))
                .condition_expression("#s = :s")
                .expression_attribute_names("#s", "State")
                .expression_attribute_values(":s", AttributeValue::S("open".into())),
        );
        assert_eq!(
            put.get_item(),
            &values(&[
                ("id", AttributeValue::S("1".into())),
                ("FencingToken", n("7"))
            ])
        );
        assert_eq!(
            put.get_condition_expression().as_deref(),
            Some(
                "(#s = :s) AND (attribute_not_exists(#ddb_lock_fence) \
                 OR #ddb_lock_fence <= :ddb_lock_fence)"
            )
        );
        assert_eq!(
            put.get_expression_attribute_names(),
            &names(&[("#s", "State"), ("#ddb_lock_fence", "FencingToken")])
        );
        assert_eq!(
            put.get_expression_attribute_values(),
            &values(&[
                (":s", AttributeValue::S("open".into())),
                (":ddb_lock_fence", n("7"))
            ])
        );
    }

    #[test]
    fn a_fenced_put_without_a_condition_gets_only_the_fence() {
        let put = FencedWrite::new(FencingToken::new(0))
            .attribute("Fence")
            .put(client().put_item().table_name("t"));
        assert_eq!(put.get_item(), &values(&[("Fence", n("0"))]));
        assert_eq!(put.get_condition_expression().as_deref(), Some(CONDITION));
        assert_eq!(
            put.get_expression_attribute_names(),
            &names(&[("#ddb_lock_fence", "Fence")])
        );
        assert_eq!(
            put.get_expression_attribute_values(),
            &values(&[(":ddb_lock_fence", n("0"))])
        );
    }

    #[test]
    fn a_fenced_update_sets_the_token_and_keeps_the_callers_condition_and_placeholders() {
        let update = FencedWrite::new(FencingToken::new(u64::MAX))
            .attribute("Fence")
            .update(
                client()
                    .update_item()
                    .table_name("t")
                    .key("id", AttributeValue::S("1".into()))
                    .update_expression("REMOVE #old SET balance = :b")
                    .condition_expression("attribute_exists(id)")
                    .expression_attribute_names("#old", "Old")
                    .expression_attribute_values(":b", n("10")),
            );
        assert_eq!(
            update.get_update_expression().as_deref(),
            Some(
                "REMOVE #ddb_lock_tombstone, #old SET #ddb_lock_fence = :ddb_lock_fence, balance = :b"
            )
        );
        assert_eq!(
            update.get_condition_expression().as_deref(),
            Some(format!("(attribute_exists(id)) AND {CONDITION}").as_str())
        );
        assert_eq!(
            update.get_expression_attribute_names(),
            &names(&[
                ("#old", "Old"),
                ("#ddb_lock_fence", "Fence"),
                ("#ddb_lock_tombstone", TOMBSTONE_ATTRIBUTE)
            ])
        );
        assert_eq!(
            update.get_expression_attribute_values(),
            &values(&[
                (":b", n("10")),
                (":ddb_lock_fence", n("18446744073709551615"))
            ])
        );
    }

    #[test]
    fn an_update_that_removes_the_marker_itself_is_left_to_it() {
        for (expression, names) in [
            ("SET balance = :b REMOVE FencedTombstone", vec![]),
            (
                "SET balance = :b REMOVE #t",
                vec![("#t", TOMBSTONE_ATTRIBUTE)],
            ),
        ] {
            let mut own = client().update_item().update_expression(expression);
            for (name, attribute) in names {
                own = own.expression_attribute_names(name, attribute);
            }
            let update = FencedWrite::new(FencingToken::new(5)).update(own);
            let fenced = update.get_update_expression().clone().unwrap();
            assert!(!fenced.contains("#ddb_lock_tombstone"), "{fenced}");
            assert!(!update
                .get_expression_attribute_names()
                .clone()
                .unwrap_or_default()
                .contains_key("#ddb_lock_tombstone"));
        }
    }

    #[test]
    fn a_fenced_update_without_expressions_sets_the_token_and_clears_a_tombstone() {
        let update = FencedWrite::new(FencingToken::new(5)).update(client().update_item());
        assert_eq!(
            update.get_update_expression().as_deref(),
            Some("SET #ddb_lock_fence = :ddb_lock_fence REMOVE #ddb_lock_tombstone")
        );
        assert_eq!(
            update.get_condition_expression().as_deref(),
            Some(CONDITION)
        );
        assert_eq!(
            update.get_expression_attribute_names(),
            &names(&[
                ("#ddb_lock_fence", "FencingToken"),
                ("#ddb_lock_tombstone", TOMBSTONE_ATTRIBUTE)
            ])
        );
        assert_eq!(
            update.get_expression_attribute_values(),
            &values(&[(":ddb_lock_fence", n("5"))])
        );
    }

    #[test]
    fn a_tombstone_is_a_fenced_put_of_the_key_and_the_marker() {
        let put = FencedWrite::new(FencingToken::new(9)).tombstone(
            client()
                .put_item()
                .table_name("t")
                .item("id", AttributeValue::S("1".into())),
        );
        let item = put.get_item().clone().unwrap_or_default();
        assert_eq!(item.len(), 3, "{item:?}");
        assert_eq!(item[TOMBSTONE_ATTRIBUTE], AttributeValue::Bool(true));
        assert_eq!(item[FENCE_ATTRIBUTE], n("9"));
        assert_eq!(put.get_condition_expression().as_deref(), Some(CONDITION));
    }

    #[test]
    fn a_refused_write_is_unknown_after_a_retry() {
        assert_eq!(refused::<()>(false), FencedOutcome::Refused);
        assert_eq!(refused::<()>(true), FencedOutcome::Unknown);
    }
}
