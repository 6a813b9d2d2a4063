//! Which lock an invocation takes: its key, read from the request (a JSON pointer into a Lambda
//! event, or a closure), and the [`Scope`] that turns it into the lock's full key,
//! `lock:{function}:{key}` or `lock:{key}`.
//!
//! The full key is the lock's resource name in the table (its item is `PK = LOCK#<full key>`), and
//! the key the system functions ([`SystemFunctions`](crate::SystemFunctions)) take.

use lambda_runtime::LambdaEvent;
use serde::Serialize;
use serde_json::Value;
use std::fmt;
use std::sync::Arc;

/// The prefix of every full key.
pub const KEY_PREFIX: &str = "lock:";

/// Whose invocations a lock keeps apart.
///
/// # Examples
///
/// ```
/// use ddb_lock_layer::Scope;
///
/// assert_eq!(Scope::Function.full_key("payments.charge", "user:123"), "lock:payments.charge:user:123");
/// assert_eq!(Scope::Global.full_key("payments.charge", "billing:report"), "lock:billing:report");
/// assert_eq!(Scope::default(), Scope::Function);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The key is the function's own (`lock:{function}:{key}`): the same key in two functions is
    /// two locks. The default.
    #[default]
    Function,
    /// The key is shared by every function (`lock:{key}`), for cross-function exclusion.
    Global,
}

impl Scope {
    /// The full key of `key` in this scope, for the function named `function` (ignored in
    /// [`Scope::Global`]).
    pub fn full_key(self, function: &str, key: &str) -> String {
        match self {
            Scope::Function => format!("{KEY_PREFIX}{function}:{key}"),
            Scope::Global => format!("{KEY_PREFIX}{key}"),
        }
    }

    /// `function` or `global`, as the response data says it.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Function => "function",
            Scope::Global => "global",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why no key could be read from an event; names the field (the JSON pointer, or `key` for a
/// closure).
///
/// # Examples
///
/// ```
/// use ddb_lock_layer::KeyError;
///
/// let missing = KeyError::Missing { field: "/order/id".into() };
/// assert_eq!(missing.field(), "/order/id");
/// assert_eq!(missing.to_string(), "`/order/id`: no lock key in the event");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The event has nothing at the field (or the closure returned `None`).
    #[error("`{field}`: no lock key in the event")]
    Missing {
        /// The JSON pointer, or `key`.
        field: String,
    },
    /// The value at the field is not a string.
    #[error("`{field}`: the lock key must be a string, found {found}")]
    NotAString {
        /// The JSON pointer.
        field: String,
        /// The JSON type found: `number`, `object`, …
        found: &'static str,
    },
    /// The key is the empty string.
    #[error("`{field}`: the lock key must not be empty")]
    Empty {
        /// The JSON pointer, or `key`.
        field: String,
    },
}

impl KeyError {
    /// The field at fault: the JSON pointer, or `key` for a closure.
    pub fn field(&self) -> &str {
        match self {
            KeyError::Missing { field }
            | KeyError::NotAString { field, .. }
            | KeyError::Empty { field } => field,
        }
    }
}

/// How a layer reads an invocation's key from its request: a JSON pointer or the user's closure,
/// either way checked non-empty.
pub(crate) type KeySource<R> = Arc<dyn Fn(&R) -> Result<String, KeyError> + Send + Sync>;

/// The key source of a user's closure; `None` is [`KeyError::Missing`] naming `key`.
pub(crate) fn closure<R, F>(key: F) -> KeySource<R>
where
    F: Fn(&R) -> Option<String> + Send + Sync + 'static,
{
    Arc::new(move |request| {
        let key = key(request).ok_or_else(|| KeyError::Missing {
            field: "key".into(),
        })?;
        non_empty(key, "key")
    })
}

/// The key source of a JSON pointer (RFC 6901) into a Lambda event's JSON payload, which must
/// reach a non-empty string.
pub(crate) fn pointer(pointer: String) -> KeySource<LambdaEvent<Value>> {
    Arc::new(move |event| {
        let key = match event.payload.pointer(&pointer) {
            None | Some(Value::Null) => Err(KeyError::Missing {
                field: pointer.clone(),
            }),
            Some(Value::String(key)) => Ok(key.clone()),
            Some(other) => Err(KeyError::NotAString {
                field: pointer.clone(),
                found: json_type(other),
            }),
        }?;
        non_empty(key, &pointer)
    })
}

fn non_empty(key: String, field: &str) -> Result<String, KeyError> {
    if key.is_empty() {
        return Err(KeyError::Empty {
            field: field.into(),
        });
    }
    Ok(key)
}

/// The JSON type of `value`, as an error names it.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
