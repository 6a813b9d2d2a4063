//! Captures the library's `tracing` events (targets under `ddb_lock`; not the AWS SDK's) on the
//! current thread, so tests can check what it logged and what it decided (for example the delay
//! it chose before retrying).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::subscriber::DefaultGuard;
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

/// One event: its fields as strings, the message under `"message"`.
pub type Fields = HashMap<String, String>;

/// Events captured while its guard lives. Use with a current-thread runtime (`#[tokio::test]`).
#[derive(Clone, Default)]
pub struct CapturedEvents(Arc<Mutex<Vec<Fields>>>);

impl CapturedEvents {
    /// Starts capturing on this thread until the guard is dropped.
    pub fn start() -> (CapturedEvents, DefaultGuard) {
        let captured = CapturedEvents::default();
        let subscriber = tracing_subscriber::registry().with(captured.clone());
        (captured, tracing::subscriber::set_default(subscriber))
    }

    /// Every event captured so far.
    pub fn all(&self) -> Vec<Fields> {
        self.0.lock().expect("events lock").clone()
    }

    /// The events whose message is `message`.
    pub fn with_message(&self, message: &str) -> Vec<Fields> {
        self.all()
            .into_iter()
            .filter(|e| e.get("message").map(String::as_str) == Some(message))
            .collect()
    }
}

impl<S: Subscriber> Layer<S> for CapturedEvents {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        if !event.metadata().target().starts_with("ddb_lock") {
            return;
        }
        let mut fields = FieldsVisitor(Fields::new());
        event.record(&mut fields);
        self.0.lock().expect("events lock").push(fields.0);
    }
}

struct FieldsVisitor(Fields);

impl Visit for FieldsVisitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}
