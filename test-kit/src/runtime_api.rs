//! A Lambda Runtime API emulator on loopback, and the real function binary run against it.
//!
//! It implements the four endpoints a custom runtime uses (`invocation/next`, `…/response`,
//! `…/error`, `init/error`), hands each queued invocation to whichever function process polls
//! next (as Lambda does across instances), and returns each answer to the caller of
//! [`RuntimeApi::invoke`].

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::routing::{get, post};
use axum::Router;
use serde_json::Value;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot, watch};

/// How an invocation ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The function answered.
    Response(Value),
    /// The function reported an error.
    Error {
        /// `errorType`.
        error_type: String,
        /// `errorMessage`.
        error_message: String,
    },
}

impl Outcome {
    /// The answer, or a panic naming the error.
    pub fn response(self) -> Value {
        match self {
            Outcome::Response(v) => v,
            Outcome::Error {
                error_type,
                error_message,
            } => {
                panic!("expected a response, got {error_type}: {error_message}")
            }
        }
    }

    /// The `errorType`, or a panic showing the response.
    pub fn error_type(self) -> String {
        match self {
            Outcome::Error { error_type, .. } => error_type,
            Outcome::Response(v) => panic!("expected an error, got {v}"),
        }
    }
}

struct Invocation {
    body: Vec<u8>,
    deadline_ms: u64,
    reply: oneshot::Sender<Outcome>,
}

struct Shared {
    queue: tokio::sync::Mutex<mpsc::UnboundedReceiver<Invocation>>,
    in_flight: Mutex<HashMap<String, oneshot::Sender<Outcome>>>,
    polls: watch::Sender<usize>,
    init_errors: Mutex<Vec<String>>,
}

/// A running emulator; stops when dropped.
pub struct RuntimeApi {
    addr: SocketAddr,
    submit: mpsc::UnboundedSender<Invocation>,
    shared: Arc<Shared>,
    polls: watch::Receiver<usize>,
    task: tokio::task::JoinHandle<()>,
}

impl RuntimeApi {
    /// Starts the emulator on a free loopback port.
    pub async fn start() -> RuntimeApi {
        let (submit, queue) = mpsc::unbounded_channel();
        let (polls_tx, polls) = watch::channel(0);
        let shared = Arc::new(Shared {
            queue: tokio::sync::Mutex::new(queue),
            in_flight: Mutex::new(HashMap::new()),
            polls: polls_tx,
            init_errors: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route(
                "/2018-06-01/runtime/invocation/{id}/response",
                post(response),
            )
            .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
            .route("/2018-06-01/runtime/init/error", post(init_error))
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        RuntimeApi {
            addr,
            submit,
            shared,
            polls,
            task,
        }
    }

    /// `host:port`, the value of `AWS_LAMBDA_RUNTIME_API`.
    pub fn address(&self) -> String {
        self.addr.to_string()
    }

    /// Invokes the function with a 60 s deadline and waits for its outcome.
    pub async fn invoke(&self, event: &Value) -> Outcome {
        self.invoke_raw(event.to_string().into_bytes(), now_ms() + 60_000)
            .await
    }

    /// Invokes with any body and deadline (epoch milliseconds).
    pub async fn invoke_raw(&self, body: Vec<u8>, deadline_ms: u64) -> Outcome {
        let (reply, outcome) = oneshot::channel();
        self.submit
            .send(Invocation {
                body,
                deadline_ms,
                reply,
            })
            .expect("emulator running");
        outcome.await.expect("the function answered")
    }

    /// Waits until the function processes have asked for work `count` times in all.
    pub async fn wait_for_polls(&self, count: usize) {
        let mut polls = self.polls.clone();
        polls
            .wait_for(|n| *n >= count)
            .await
            .expect("emulator running");
    }

    /// Initialization errors the function reported.
    pub fn init_errors(&self) -> Vec<String> {
        self.shared.init_errors.lock().expect("lock").clone()
    }
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn next(State(shared): State<Arc<Shared>>) -> (StatusCode, HeaderMap, Vec<u8>) {
    shared.polls.send_modify(|n| *n += 1);
    let invocation = shared.queue.lock().await.recv().await;
    let Some(invocation) = invocation else {
        return (StatusCode::GONE, HeaderMap::new(), Vec::new());
    };
    let id = uuid::Uuid::new_v4().to_string();
    shared
        .in_flight
        .lock()
        .expect("lock")
        .insert(id.clone(), invocation.reply);
    let mut headers = HeaderMap::new();
    let header = |v: &str| HeaderValue::from_str(v).expect("header value");
    headers.insert("lambda-runtime-aws-request-id", header(&id));
    headers.insert(
        "lambda-runtime-deadline-ms",
        header(&invocation.deadline_ms.to_string()),
    );
    headers.insert(
        "lambda-runtime-invoked-function-arn",
        header("arn:aws:lambda:us-east-1:000000000000:function:ddb-lock"),
    );
    headers.insert("content-type", header("application/json"));
    (StatusCode::OK, headers, invocation.body)
}

fn finish(shared: &Shared, id: &str, outcome: Outcome) -> StatusCode {
    match shared.in_flight.lock().expect("lock").remove(id) {
        Some(reply) => {
            let _ = reply.send(outcome);
            StatusCode::ACCEPTED
        }
        None => StatusCode::BAD_REQUEST,
    }
}

async fn response(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> StatusCode {
    let value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    finish(&shared, &id, Outcome::Response(value))
}

async fn error(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> StatusCode {
    let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let text = |key: &str| {
        value
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let outcome = Outcome::Error {
        error_type: text("errorType"),
        error_message: text("errorMessage"),
    };
    finish(&shared, &id, outcome)
}

async fn init_error(State(shared): State<Arc<Shared>>, body: Bytes) -> StatusCode {
    let text = String::from_utf8_lossy(&body).into_owned();
    shared.init_errors.lock().expect("lock").push(text);
    StatusCode::ACCEPTED
}

/// Collects the lines of a child's output stream as they come; the task ends with the stream.
fn collect_lines(
    stream: Option<impl tokio::io::AsyncRead + Unpin + Send + 'static>,
) -> (Arc<Mutex<Vec<String>>>, tokio::task::JoinHandle<()>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&lines);
    let reader = tokio::spawn(async move {
        let Some(stream) = stream else { return };
        let mut reader = BufReader::new(stream).lines();
        while let Ok(Some(line)) = reader.next_line().await {
            sink.lock().expect("lock").push(line);
        }
    });
    (lines, reader)
}

/// The current time in epoch milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// One function instance: the `bootstrap` binary, killed when dropped. Its standard output
/// (logs and metrics lines) and standard error are collected.
pub struct FunctionProcess {
    child: Child,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<String>>>,
    readers: Vec<tokio::task::JoinHandle<()>>,
}

impl FunctionProcess {
    /// Starts `binary` as a Lambda instance against `api`, with the lock table `table` on the
    /// DynamoDB endpoint `endpoint`, plus `env`.
    pub fn spawn(
        binary: &str,
        api: &RuntimeApi,
        endpoint: &str,
        table: &str,
        env: &[(&str, &str)],
    ) -> FunctionProcess {
        let mut command = Command::new(binary);
        command
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("AWS_LAMBDA_RUNTIME_API", api.address())
            .env("AWS_LAMBDA_FUNCTION_NAME", "ddb-lock")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/ddb-lock")
            .env("AWS_LAMBDA_LOG_STREAM_NAME", "local")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "local")
            .env("AWS_SECRET_ACCESS_KEY", "local")
            .env("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
            .env("DDB_LOCK_TABLE", table)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {binary}: {e}"));
        let (stdout, stdout_reader) = collect_lines(child.stdout.take());
        let (stderr, stderr_reader) = collect_lines(child.stderr.take());
        FunctionProcess {
            child,
            stdout,
            stderr,
            readers: vec![stdout_reader, stderr_reader],
        }
    }

    /// The lines the process wrote to standard error so far.
    pub fn stderr(&self) -> Vec<String> {
        self.stderr.lock().expect("lock").clone()
    }

    /// Waits for the process to exit and for its output to be read to the end.
    pub async fn exit_status(&mut self) -> std::process::ExitStatus {
        let status = self
            .child
            .wait()
            .await
            .expect("wait for the function process");
        for reader in self.readers.drain(..) {
            let _ = reader.await;
        }
        status
    }

    /// The lines the process wrote to standard output so far.
    pub fn stdout(&self) -> Vec<String> {
        self.stdout.lock().expect("lock").clone()
    }

    /// The process id, while it runs.
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}
