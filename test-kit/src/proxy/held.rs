//! What the proxy holds back: requests held until the test delivers them (late, or a second
//! time), and answers withheld until the test passes them on, drops or cuts them.

use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// What a withheld answer becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Gate {
    /// Passed on, late.
    Deliver,
    /// The connection closed without it.
    Drop,
    /// Its status and headers passed on, then half its body, then the connection closed.
    Truncate,
}

/// One answer to drop: of which operation, and whether to hold the connection open until told.
#[derive(Debug)]
pub(super) struct DropRule {
    pub(super) operation: String,
    pub(super) hold: Option<Hold>,
}

#[derive(Debug)]
pub(super) struct Hold {
    pub(super) withheld: oneshot::Sender<()>,
    /// What becomes of the answer (the sender gone: closed without it).
    pub(super) gate: oneshot::Receiver<Gate>,
}

/// One request to hold back or copy: of which operation, and where the test waits for it.
#[derive(Debug)]
pub(super) struct HoldRule {
    pub(super) operation: String,
    /// Only a request whose bytes contain this.
    pub(super) containing: Option<String>,
    /// Forward the request now as well (a duplicate), or only when delivered (a late request).
    pub(super) forward: bool,
    pub(super) captured: oneshot::Sender<Captured>,
}

/// A captured request: its bytes, and for one held back, the way to deliver it on its client's
/// connection (a sender for the signal that its answer came back).
#[derive(Debug)]
pub(super) struct Captured {
    pub(super) request: Vec<u8>,
    pub(super) deliver: Option<oneshot::Sender<oneshot::Sender<()>>>,
}

/// A request the proxy captured, to be delivered to the endpoint when the test says: the request
/// itself, held back ([`Proxy::delay_next_request`](super::Proxy::delay_next_request): delivered
/// on its client's connection, whose answer goes back to the client if it still waits), or a copy
/// of one forwarded at once
/// ([`Proxy::duplicate_next_request`](super::Proxy::duplicate_next_request): delivered on a
/// connection of its own, answer thrown away).
#[derive(Debug)]
pub struct HeldRequest {
    pub(super) upstream: SocketAddr,
    pub(super) operation: String,
    pub(super) pending: Option<oneshot::Receiver<Captured>>,
    pub(super) captured: Option<Captured>,
}

impl HeldRequest {
    /// The operation it captures.
    pub fn operation(&self) -> &str {
        &self.operation
    }

    /// Whether the client has sent the request and the proxy captured it.
    pub fn is_captured(&mut self) -> bool {
        if let Some(Ok(captured)) = self.pending.as_mut().map(oneshot::Receiver::try_recv) {
            self.captured = Some(captured);
            self.pending = None;
        }
        self.captured.is_some()
    }

    /// Waits until the client has sent the request and the proxy captured it.
    pub async fn captured(&mut self) {
        if let Some(pending) = self.pending.take() {
            self.captured = Some(pending.await.expect("proxy running"));
        }
    }

    /// Sends the captured request to the endpoint and waits for the endpoint's answer: the
    /// request has been applied, or refused, when this returns `true`. Nothing is sent if the
    /// client never sent it; `false` then.
    pub async fn deliver(mut self) -> bool {
        if !self.is_captured() {
            return false;
        }
        let Some(captured) = self.captured.take() else {
            return false;
        };
        match captured.deliver {
            Some(deliver) => {
                let (answered_tx, answered) = oneshot::channel();
                deliver.send(answered_tx).is_ok() && answered.await.is_ok()
            }
            None => send_alone(self.upstream, &captured.request).await,
        }
    }
}

/// Sends `request` to `upstream` on a connection of its own and reads the head of its answer:
/// whether one came.
async fn send_alone(upstream: SocketAddr, request: &[u8]) -> bool {
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return false;
    };
    send_on(&mut server, request).await
}

/// Sends `request` on `server` and reads the head of its answer: whether one came.
pub(super) async fn send_on(server: &mut TcpStream, request: &[u8]) -> bool {
    if server.write_all(request).await.is_err() {
        return false;
    }
    let mut answer = vec![0u8; 64 * 1024];
    matches!(server.read(&mut answer).await, Ok(n) if n > 0)
}

/// An answer the proxy has withheld, with the client's connection still open; see
/// [`Proxy::withhold_next_answer`](super::Proxy::withhold_next_answer).
#[derive(Debug)]
pub struct WithheldAnswer {
    pub(super) withheld: Option<oneshot::Receiver<()>>,
    pub(super) gate: Option<oneshot::Sender<Gate>>,
}

impl WithheldAnswer {
    /// Waits until the request has been applied by the endpoint and its answer withheld. Never
    /// completes if the request the rule caught was abandoned by its client before its answer
    /// came (a heartbeat's extension aborted with its guard, say): in a `select!` beside the
    /// future that was expected to send it, that future decides.
    pub async fn applied(&mut self) {
        if let Some(withheld) = self.withheld.take() {
            if withheld.await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Closes the client's connection without the answer, so that the client retries.
    pub fn drop_it(&mut self) {
        if let Some(gate) = self.gate.take() {
            let _ = gate.send(Gate::Drop);
        }
    }

    /// Passes the answer's status and headers on, then half of its body, and closes the
    /// connection: an answer cut on its way (a 200 whose body never arrived whole), which the
    /// client retries.
    pub fn truncate(&mut self) {
        if let Some(gate) = self.gate.take() {
            let _ = gate.send(Gate::Truncate);
        }
    }

    /// Passes the answer on to the client now, late: the request was decided when
    /// [`applied`](Self::applied) returned, its answer is read after whatever happened since.
    pub fn deliver(mut self) {
        if let Some(gate) = self.gate.take() {
            let _ = gate.send(Gate::Deliver);
        }
    }
}
