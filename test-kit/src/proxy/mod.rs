//! A TCP proxy between a client and the endpoint that counts DynamoDB operations and injects the
//! faults of a network: a dropped answer after the request was applied, added latency, a cut-off
//! client (partition), throttling answers from a busy service (or another error of the
//! service's), a request that arrives late (held by the proxy, delivered when the test says) and
//! one that arrives twice (a copy delivered again when the test says).
//!
//! Requests are recognized by their `X-Amz-Target: DynamoDB_20120810.<Operation>` header, and
//! forwarded whole once their body (`Content-Length`) has arrived. An SDK client sends one request
//! at a time per connection, so the next bytes the endpoint sends on that connection are that
//! request's answer.
//!
//! Besides the counts, the proxy keeps, for every request it forwards, when it received the
//! request and which access key signed it ([`Proxy::requests_by_caller`]): clients that sign with
//! keys of their own can tell their requests apart through one proxy.

mod held;
mod wire;

use crate::clocks::monotonic_ns;
use held::{send_on, Captured, DropRule, Gate, Hold, HoldRule};
pub use held::{HeldRequest, WithheldAnswer};

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};
use wire::{access_key_id, find, operations_in, whole_request_len};

/// Counts of one operation seen by the proxy.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct OpCounts {
    /// Requests forwarded to the endpoint.
    pub requests: usize,
    /// Answers relayed back to the client.
    pub answered: usize,
    /// Answers received from the endpoint and thrown away.
    pub dropped: usize,
    /// Requests answered with throttling (or another error of the service's) instead of
    /// forwarded.
    pub throttled: usize,
    /// Requests held back, not forwarded ([`Proxy::delay_next_request`]).
    pub held: usize,
}

/// One request the proxy forwarded to the endpoint: when it arrived and which access key signed
/// it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerRequest {
    /// When the proxy had received the whole request: `CLOCK_MONOTONIC` in nanoseconds
    /// ([`crate::clocks::monotonic_ns`]), comparable with the time stamps of other
    /// processes of the machine.
    pub received_ns: u64,
    /// The access key id of the request's `Authorization` header (`Credential=<AKID>/…`), `None`
    /// if it has none.
    pub access_key_id: Option<String>,
    /// The operation (`PutItem`, …).
    pub operation: String,
}

/// A running proxy; stops when dropped.
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    upstream: SocketAddr,
    counts: watch::Receiver<HashMap<String, OpCounts>>,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Debug)]
struct Shared {
    counts: watch::Sender<HashMap<String, OpCounts>>,
    /// Operations whose next answer is to be dropped.
    drop_next: Mutex<Vec<DropRule>>,
    /// Operations whose next request is to be held (delayed) or copied (duplicated).
    hold_next: Mutex<Vec<HoldRule>>,
    /// Operations whose next request is answered with an error of the service's, and not
    /// forwarded: the operation, the error's type.
    /// Requests to answer with an error: the operation, text the request must contain (if any),
    /// and the error's type.
    refuse_next: Mutex<Vec<(String, Option<String>, String)>>,
    /// The faults applied to every request now.
    faults: Mutex<Faults>,
    /// Requests seen, for the every-n-th faults.
    requests: AtomicU64,
    /// Every request forwarded, in the order forwarded.
    forwarded: Mutex<Vec<CallerRequest>>,
}

impl Shared {
    /// Counts `request` as forwarded (its operation's `requests`) and keeps its caller.
    fn forwarding(&self, request: CallerRequest) {
        self.counts
            .send_modify(|c| c.entry(request.operation.clone()).or_default().requests += 1);
        self.forwarded.lock().expect("proxy lock").push(request);
    }
}

/// Faults the proxy applies to every request from the moment they are set until changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    /// Every request's connection is closed instead of forwarded (a partition).
    pub cut_off: bool,
    /// Added before each answer is relayed.
    pub latency: Duration,
    /// When not 0, the answer of every n-th request is dropped after the request was applied.
    pub drop_every: u64,
    /// When not 0, every n-th request is answered with a `ThrottlingException` (HTTP 400) and not
    /// forwarded.
    pub throttle_every: u64,
}

/// What DynamoDB answers when it throttles a request; the SDK retries it.
const THROTTLED: &str = "HTTP/1.1 400 Bad Request\r\nContent-Type: application/x-amz-json-1.0\r\nx-amzn-RequestId: ddb-lock-proxy\r\nConnection: close\r\nContent-Length: 91\r\n\r\n{\"__type\":\"com.amazonaws.dynamodb.v20120810#ThrottlingException\",\"message\":\"Rate exceeded\"}";

/// The body of DynamoDB's error `error_type`.
fn error_body(error_type: &str) -> String {
    format!(
        "{{\"__type\":\"com.amazonaws.dynamodb.v20120810#{error_type}\",\"message\":\"refused by the test proxy\"}}"
    )
}

/// An HTTP 400 answer carrying the error `body`.
fn service_error(body: &str) -> String {
    format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: application/x-amz-json-1.0\r\nx-amzn-RequestId: ddb-lock-proxy\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

impl Proxy {
    /// Starts a proxy on loopback in front of the endpoint URL `upstream` (`http://host:port`).
    pub async fn start(upstream: &str) -> Proxy {
        let upstream: SocketAddr = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .parse()
            .expect("endpoint is http://<ip>:<port>");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let (counts_tx, counts) = watch::channel(HashMap::new());
        let shared = Arc::new(Shared {
            counts: counts_tx,
            drop_next: Mutex::new(Vec::new()),
            hold_next: Mutex::new(Vec::new()),
            refuse_next: Mutex::new(Vec::new()),
            faults: Mutex::new(Faults::default()),
            requests: AtomicU64::new(0),
            forwarded: Mutex::new(Vec::new()),
        });
        let accept_shared = Arc::clone(&shared);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let shared = Arc::clone(&accept_shared);
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(upstream).await {
                        relay(client, server, &shared).await;
                    }
                });
            }
        });
        Proxy {
            addr,
            upstream,
            counts,
            shared,
            task,
        }
    }

    /// The proxy's endpoint URL.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Forward the next `operation` request, then throw its answer away and close the connection.
    pub fn drop_next_answer(&self, operation: &str) {
        self.queue_drop(operation, None);
    }

    /// Forward the next `operation` request and keep its answer: the client waits, its
    /// connection open, until [`WithheldAnswer::drop_it`] closes it without an answer. Meanwhile
    /// a test can change the world the client's retry will find.
    pub fn withhold_next_answer(&self, operation: &str) -> WithheldAnswer {
        let (withheld_tx, withheld_rx) = oneshot::channel();
        let (gate_tx, gate_rx) = oneshot::channel();
        self.queue_drop(
            operation,
            Some(Hold {
                withheld: withheld_tx,
                gate: gate_rx,
            }),
        );
        WithheldAnswer {
            withheld: Some(withheld_rx),
            gate: Some(gate_tx),
        }
    }

    /// Hold the next `operation` request back: it is not forwarded (its client waits for an
    /// answer that never comes, until it gives up) and reaches the endpoint only when the test
    /// [`deliver`](HeldRequest::deliver)s it, as a request delayed in the network would, late.
    /// Dropping the [`HeldRequest`] before a request was caught withdraws the rule.
    pub fn delay_next_request(&self, operation: &str) -> HeldRequest {
        self.queue_hold(operation, None, false)
    }

    /// [`delay_next_request`](Self::delay_next_request) for the next `operation` request whose
    /// bytes contain `text` (an expression, say: extensions and releases are both UpdateItems
    /// where items are kept).
    pub fn delay_next_request_containing(&self, operation: &str, text: &str) -> HeldRequest {
        self.queue_hold(operation, Some(text), false)
    }

    /// Forward the next `operation` request as usual, and keep a copy that reaches the endpoint
    /// again when the test [`deliver`](HeldRequest::deliver)s it: a request that arrives twice.
    pub fn duplicate_next_request(&self, operation: &str) -> HeldRequest {
        self.queue_hold(operation, None, true)
    }

    /// [`duplicate_next_request`](Self::duplicate_next_request) for the next `operation` request
    /// whose bytes contain `text`.
    pub fn duplicate_next_request_containing(&self, operation: &str, text: &str) -> HeldRequest {
        self.queue_hold(operation, Some(text), true)
    }

    fn queue_hold(&self, operation: &str, containing: Option<&str>, forward: bool) -> HeldRequest {
        let (captured_tx, captured_rx) = oneshot::channel();
        self.shared
            .hold_next
            .lock()
            .expect("proxy lock")
            .push(HoldRule {
                operation: operation.to_owned(),
                containing: containing.map(str::to_owned),
                forward,
                captured: captured_tx,
            });
        HeldRequest {
            upstream: self.upstream,
            operation: operation.to_owned(),
            pending: Some(captured_rx),
            captured: None,
        }
    }

    fn queue_drop(&self, operation: &str, hold: Option<Hold>) {
        self.shared
            .drop_next
            .lock()
            .expect("proxy lock")
            .push(DropRule {
                operation: operation.to_owned(),
                hold,
            });
    }

    /// Answers the next `operation` request with the service's error `error_type` (such as
    /// `TransactionConflictException`, which DynamoDB answers a write to an item a transaction is
    /// writing), without forwarding it. Counted as throttled.
    pub fn refuse_next(&self, operation: &str, error_type: &str) {
        self.refuse(operation, None, error_body(error_type));
    }

    /// Answers the next TransactWriteItems with a `TransactionCanceledException` whose
    /// cancellation reasons have the codes `codes` (`"None"` for an item that passed), one per
    /// item in order, as DynamoDB cancels a transaction, without forwarding it: nothing of it is
    /// written. Counted as throttled.
    pub fn cancel_next_transaction(&self, codes: &[&str]) {
        let reasons: Vec<String> = codes
            .iter()
            .map(|code| format!("{{\"Code\":\"{code}\"}}"))
            .collect();
        let body = format!(
            "{{\"__type\":\"com.amazonaws.dynamodb.v20120810#TransactionCanceledException\",\"message\":\"Transaction cancelled by the test proxy\",\"CancellationReasons\":[{}]}}",
            reasons.join(",")
        );
        self.refuse("TransactWriteItems", None, body);
    }

    /// [`refuse_next`](Self::refuse_next) for the next `operation` request whose bytes contain
    /// `text` (a resource's name, say).
    pub fn refuse_next_containing(&self, operation: &str, text: &str, error_type: &str) {
        self.refuse(operation, Some(text), error_body(error_type));
    }

    fn refuse(&self, operation: &str, containing: Option<&str>, body: String) {
        self.shared.refuse_next.lock().expect("proxy lock").push((
            operation.to_owned(),
            containing.map(str::to_owned),
            body,
        ));
    }

    /// Cuts the client off, as a network partition would: from now on every request, on a new
    /// or a pooled connection, gets its connection closed instead of an answer.
    pub fn cut_off(&self) {
        self.set_faults(Faults {
            cut_off: true,
            ..self.faults()
        });
    }

    /// Applies `faults` to every request from now on.
    pub fn set_faults(&self, faults: Faults) {
        *self.shared.faults.lock().expect("proxy lock") = faults;
    }

    /// The faults applied now.
    pub fn faults(&self) -> Faults {
        *self.shared.faults.lock().expect("proxy lock")
    }

    /// Requests of every operation forwarded so far.
    pub fn total_requests(&self) -> usize {
        self.counts.borrow().values().map(|c| c.requests).sum()
    }

    /// Every request forwarded so far, in the order forwarded: when it was received and which
    /// access key signed it. A request held back and delivered later
    /// ([`delay_next_request`](Self::delay_next_request)) is listed once delivered, with the time
    /// it was received; copies delivered again ([`duplicate_next_request`](Self::duplicate_next_request))
    /// are sent by the test, not forwarded, and not listed.
    pub fn requests_by_caller(&self) -> Vec<CallerRequest> {
        self.shared.forwarded.lock().expect("proxy lock").clone()
    }

    /// Counts of `operation` so far.
    pub fn counts(&self, operation: &str) -> OpCounts {
        self.counts
            .borrow()
            .get(operation)
            .copied()
            .unwrap_or_default()
    }

    /// Waits until `operation`'s counts satisfy `done`.
    pub async fn wait_for(&self, operation: &str, done: impl Fn(OpCounts) -> bool) {
        let mut counts = self.counts.clone();
        counts
            .wait_for(|all| done(all.get(operation).copied().unwrap_or_default()))
            .await
            .expect("proxy running");
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn relay(mut client: TcpStream, mut server: TcpStream, shared: &Shared) {
    let mut from_client = vec![0u8; 64 * 1024];
    let mut from_server = vec![0u8; 64 * 1024];
    // The bytes of the request being received, forwarded once whole.
    let mut request: Vec<u8> = Vec::new();
    // The operation awaiting its answer, and the rule to drop that answer if there is one.
    let mut pending: Option<(String, Option<DropRule>)> = None;
    // A request held back, until the test delivers it: its caller, bytes and delivery.
    let mut held: Option<(
        CallerRequest,
        Vec<u8>,
        oneshot::Receiver<oneshot::Sender<()>>,
    )> = None;
    // Told when the answer of a delivered request has come back.
    let mut delivered: Option<oneshot::Sender<()>> = None;
    loop {
        tokio::select! {
            deliver = async { held.as_mut().map(|(_, _, deliver)| deliver).expect("held").await }, if held.is_some() => {
                let Some((caller, request, _)) = held.take() else { return };
                let Ok(answered) = deliver else { continue };
                let operation = caller.operation.clone();
                shared.forwarding(caller);
                pending = Some((operation, None));
                delivered = Some(answered);
                if server.write_all(&request).await.is_err() { return; }
            }
            read = client.read(&mut from_client) => {
                let n = match read {
                    Ok(0) | Err(_) => {
                        // The client gave up; a request held back still arrives when delivered.
                        if let Some((_, request, deliver)) = held.take() {
                            tokio::spawn(async move {
                                if let Ok(answered) = deliver.await {
                                    if send_on(&mut server, &request).await {
                                        let _ = answered.send(());
                                    }
                                }
                            });
                        }
                        return;
                    }
                    Ok(n) => n,
                };
                let faults = *shared.faults.lock().expect("proxy lock");
                if faults.cut_off {
                    return;
                }
                request.extend_from_slice(&from_client[..n]);
                while let Some(len) = whole_request_len(&request) {
                    let whole: Vec<u8> = request.drain(..len).collect();
                    let Some(operation) = operations_in(&whole, 0).into_iter().next() else {
                        if server.write_all(&whole).await.is_err() { return; }
                        continue;
                    };
                    let caller = CallerRequest {
                        received_ns: monotonic_ns(),
                        access_key_id: access_key_id(&whole),
                        operation: operation.clone(),
                    };
                    let nth = shared.requests.fetch_add(1, Ordering::SeqCst) + 1;
                    let refusal = {
                        let mut refuse_next = shared.refuse_next.lock().expect("proxy lock");
                        refuse_next
                            .iter()
                            .position(|(op, containing, _)| {
                                *op == operation
                                    && containing.as_ref().is_none_or(|text| {
                                        find(&whole, text.as_bytes()).is_some()
                                    })
                            })
                            .map(|i| refuse_next.remove(i).2)
                    };
                    if let Some(body) = refusal {
                        shared.counts.send_modify(|c| c.entry(operation.clone()).or_default().throttled += 1);
                        let _ = client.write_all(service_error(&body).as_bytes()).await;
                        return;
                    }
                    if faults.throttle_every > 0 && nth % faults.throttle_every == 0 {
                        shared.counts.send_modify(|c| c.entry(operation.clone()).or_default().throttled += 1);
                        let _ = client.write_all(THROTTLED.as_bytes()).await;
                        return;
                    }
                    let hold = {
                        let mut hold_next = shared.hold_next.lock().expect("proxy lock");
                        // A rule whose HeldRequest was dropped unused holds nothing back.
                        hold_next.retain(|rule| !rule.captured.is_closed());
                        hold_next
                            .iter()
                            .position(|rule| {
                                rule.operation == operation
                                    && rule.containing.as_ref().is_none_or(|text| {
                                        find(&whole, text.as_bytes()).is_some()
                                    })
                            })
                            .map(|i| hold_next.remove(i))
                    };
                    if let Some(hold) = hold {
                        if hold.forward {
                            let _ = hold.captured.send(Captured { request: whole.clone(), deliver: None });
                        } else {
                            // Held back: the client's connection stays open with no answer.
                            let (deliver_tx, deliver_rx) = oneshot::channel();
                            let _ = hold.captured.send(Captured { request: Vec::new(), deliver: Some(deliver_tx) });
                            shared.counts.send_modify(|c| c.entry(operation.clone()).or_default().held += 1);
                            held = Some((caller, whole, deliver_rx));
                            continue;
                        }
                    }
                    let drop_answer = {
                        let mut drop_next = shared.drop_next.lock().expect("proxy lock");
                        drop_next
                            .iter()
                            .position(|rule| rule.operation == operation)
                            .map(|i| drop_next.remove(i))
                    }
                    .or_else(|| {
                        (faults.drop_every > 0 && nth % faults.drop_every == 0).then(|| DropRule {
                            operation: operation.clone(),
                            hold: None,
                        })
                    });
                    shared.forwarding(caller);
                    pending = Some((operation, drop_answer));
                    if server.write_all(&whole).await.is_err() { return; }
                }
            }
            read = server.read(&mut from_server) => {
                let n = match read { Ok(0) | Err(_) => return, Ok(n) => n };
                match pending.take() {
                    Some((operation, Some(rule))) => {
                        shared.counts.send_modify(|c| c.entry(operation.clone()).or_default().dropped += 1);
                        let gate = match rule.hold {
                            Some(hold) => {
                                let _ = hold.withheld.send(());
                                hold.gate.await.unwrap_or(Gate::Drop)
                            }
                            None => Gate::Drop,
                        };
                        match gate {
                            Gate::Deliver => {}
                            // Closes both connections without answering the client.
                            Gate::Drop => return,
                            Gate::Truncate => {
                                let answer = &from_server[..n];
                                let body = find(answer, b"\r\n\r\n").map_or(answer.len(), |at| at + 4);
                                let cut = body + (answer.len() - body) / 2;
                                let _ = client.write_all(&answer[..cut]).await;
                                return;
                            }
                        }
                        shared.counts.send_modify(|c| {
                            let counts = c.entry(operation).or_default();
                            counts.dropped -= 1;
                            counts.answered += 1;
                        });
                    }
                    Some((operation, None)) => {
                        let latency = shared.faults.lock().expect("proxy lock").latency;
                        if !latency.is_zero() {
                            tokio::time::sleep(latency).await;
                        }
                        shared.counts.send_modify(|c| c.entry(operation).or_default().answered += 1);
                    }
                    None => {}
                }
                if let Some(answered) = delivered.take() {
                    let _ = answered.send(());
                }
                if client.write_all(&from_server[..n]).await.is_err() { return; }
            }
        }
    }
}
