//! The contenders: each lock implementation of the benchmark, and the command that runs its
//! driver.

use std::path::Path;

/// A lock implementation and the command that runs its driver.
#[derive(Debug, Clone)]
pub struct Contender {
    /// Its name in the report.
    pub name: String,
    /// Whether it is ours (the ratios compare ours with the best peer).
    pub ours: bool,
    /// Whether the waiting workers of its process line up inside the library (one client shared
    /// by the workers, with an in-process queue) instead of contending through DynamoDB only, as
    /// separate processes would. The hand-off figures are compared within each kind too.
    pub queues_in_process: bool,
    /// The driver command, before the common arguments.
    pub command: Vec<String>,
    /// A table of its own, in the schema it wants.
    pub table: String,
    /// Whether its driver takes the lock kinds (`--shared`, `--permits`): ddb-lock's library.
    pub kinds: bool,
    /// Whether its driver runs the `set` scenario.
    pub sets: bool,
}

impl Contender {
    /// Every contender, peers with their default poll period and with one tuned setting.
    pub fn all(driver: &Path, root: &Path) -> Vec<Contender> {
        let driver = driver.display().to_string();
        let rust =
            |name: &str, contender: &str, ours: bool, queues: bool, extra: &[&str]| Contender {
                name: name.into(),
                ours,
                queues_in_process: queues,
                command: [driver.as_str(), "--contender", contender]
                    .iter()
                    .chain(extra)
                    .map(|s| (*s).to_owned())
                    .collect(),
                table: format!("bench-{contender}"),
                kinds: contender == "ddb-lock",
                sets: contender != "ddb-lock-lambda",
            };
        let python = root.join("bench/python");
        let node = root.join("bench/node");
        let py = |name: &str, extra: &[&str]| Contender {
            name: name.into(),
            ours: false,
            queues_in_process: false,
            command: [
                python.join(".venv/bin/python").display().to_string(),
                python.join("driver.py").display().to_string(),
            ]
            .into_iter()
            .chain(extra.iter().map(|s| (*s).to_owned()))
            .collect(),
            table: "bench-python-dynamodb-lock".into(),
            kinds: false,
            sets: false,
        };
        let js = |name: &str, extra: &[&str]| Contender {
            name: name.into(),
            ours: false,
            queues_in_process: false,
            command: [
                "node".to_owned(),
                node.join("driver.js").display().to_string(),
            ]
            .into_iter()
            .chain(extra.iter().map(|s| (*s).to_owned()))
            .collect(),
            table: "bench-dynamodb-lock-client".into(),
            kinds: false,
            sets: false,
        };
        vec![
            rust("ddb-lock", "ddb-lock", true, true, &[]),
            rust(
                "ddb-lock, one client per worker",
                "ddb-lock",
                true,
                false,
                &["--client-per-worker"],
            ),
            rust(
                "ddb-lock, one client per worker, 20 ms mean backoff",
                "ddb-lock",
                true,
                false,
                &["--client-per-worker", "--poll-ms", "20"],
            ),
            // Waiters in the lock's line, across clients as across processes; the mutex
            // scenarios only (a fair acquisition is exclusive, and sets do not queue).
            Contender {
                kinds: false,
                sets: false,
                ..rust(
                    "ddb-lock, one client per worker, fair",
                    "ddb-lock",
                    true,
                    false,
                    &["--client-per-worker", "--fair"],
                )
            },
            rust(
                "ddb-lock Lambda handler (in-process)",
                "ddb-lock-lambda",
                true,
                true,
                &[],
            ),
            rust("dynamodb-lease 0.22", "dynamodb-lease", false, false, &[]),
            rust(
                "dynamodb-lease 0.22, 20 ms cooldown",
                "dynamodb-lease",
                false,
                false,
                &["--poll-ms", "20"],
            ),
            rust(
                "dynamodb-lease 0.22, 20 ms cooldown, shared client",
                "dynamodb-lease",
                false,
                true,
                &["--poll-ms", "20", "--shared-lease-client"],
            ),
            py("python_dynamodb_lock 0.9.1", &[]),
            py(
                "python_dynamodb_lock 0.9.1, 20 ms retry",
                &["--poll-ms", "20"],
            ),
            js("dynamodb-lock-client 0.7 (npm), FailClosed", &[]),
            js(
                "dynamodb-lock-client 0.7 (npm), FailClosed, 20 ms retry",
                &["--poll-ms", "20"],
            ),
            js(
                "dynamodb-lock-client 0.7 (npm), FailOpen",
                &["--mode", "fail-open"],
            ),
        ]
    }
}
