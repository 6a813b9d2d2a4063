//! The fault suite: runs every fault scenario against the local endpoint and prints a table of
//! fault × runs × violations. Exits 1 if any run broke a guarantee.
//!
//! ```text
//! fault-suite [--runs N] [--duration-ms MS] [--lease-ms MS] [--clients N] [--resources N]
//!             [--schema default|id-only] [--report FILE]
//! ```
//!
//! Needs `DYNAMODB_ENDPOINT` (as `scripts/test.sh` and `scripts/soak.sh` set it) and the
//! `fault-client` binary next to this one (`cargo build --bins -p ddb-lock-fault-suite`).

use clap::Parser;
use ddb_lock_fault_suite::layout::Layout;
use ddb_lock_fault_suite::suite::{self, Fault, Settings};
use std::fmt::Write as _;
use std::time::Duration;

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "fault-suite",
    about = "Runs every fault scenario against the local endpoint"
)]
struct Options {
    /// Runs per fault.
    #[arg(long, default_value_t = 1)]
    runs: u32,
    /// How long each run lasts, in milliseconds.
    #[arg(long, default_value_t = 6000)]
    duration_ms: u64,
    /// The lease of every acquisition, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    lease_ms: u64,
    /// Client processes per run.
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// Resources the clients contend for.
    #[arg(long, default_value_t = 2)]
    resources: usize,
    /// The table layout: `default` (PK/SK) or `id-only` (a table keyed by `id` alone).
    #[arg(long, default_value_t = Layout::Default)]
    schema: Layout,
    /// Also write the table, with the command that produced it, to this file.
    #[arg(long)]
    report: Option<String>,
}

impl Options {
    fn settings(&self) -> Settings {
        Settings {
            clients: self.clients,
            resources: self.resources,
            lease: Duration::from_millis(self.lease_ms),
            duration: Duration::from_millis(self.duration_ms),
            layout: self.schema,
        }
    }
}

#[tokio::main]
async fn main() {
    let options = Options::parse();
    let endpoint = ddb_lock_test_kit::endpoint();
    let client_bin = std::env::current_exe()
        .expect("own path")
        .with_file_name("fault-client");
    assert!(
        client_bin.exists(),
        "{} is missing: cargo build --bins -p ddb-lock-fault-suite",
        client_bin.display()
    );
    let workdir = std::env::temp_dir().join(format!("ddb-lock-faults-{}", std::process::id()));
    std::fs::create_dir_all(&workdir).expect("work directory");
    let Settings {
        clients,
        resources,
        lease,
        duration,
        layout,
    } = options.settings();
    println!(
        "fault suite: {clients} client processes, {resources} resources, lease {lease:?}, {duration:?} per run, {} run(s) per fault, table layout {layout} ({})\n",
        options.runs,
        layout.table()
    );

    let mut table = String::new();
    let _ = writeln!(
        table,
        "| fault | runs | faults injected | critical sections | violations |"
    );
    let _ = writeln!(table, "|---|---:|---:|---:|---:|");
    let mut all_violations = Vec::new();
    for fault in Fault::ALL {
        let (mut injected, mut sections, mut violations, mut runs) = (0, 0, 0, 0);
        let mut skipped = false;
        for _ in 0..options.runs {
            let report =
                suite::run(fault, options.settings(), &endpoint, &client_bin, &workdir).await;
            if report.skipped {
                skipped = true;
                break;
            }
            runs += 1;
            injected += report.injected;
            sections += report.critical_sections;
            violations += report.violations.len();
            if fault.expects_no_violation() {
                all_violations.extend(
                    report
                        .violations
                        .into_iter()
                        .map(|v| format!("{fault}: {v}")),
                );
            } else if report.violations.is_empty() {
                all_violations.push(format!("{fault}: the checks found nothing to report"));
            }
        }
        let row = if skipped {
            format!("| {fault} | skipped: the endpoint is external | | | |")
        } else {
            format!("| {fault} | {runs} | {injected} | {sections} | {violations} |")
        };
        println!("{row}");
        let _ = writeln!(table, "{row}");
    }
    let _ = std::fs::remove_dir_all(&workdir);
    for violation in &all_violations {
        eprintln!("VIOLATION {violation}");
    }
    if let Some(path) = options.report {
        // The command without the report's own path, and the binary without its directory.
        let args: Vec<String> = std::env::args().collect();
        let mut shown = vec!["fault-suite".to_owned()];
        let mut rest = args.iter().skip(1);
        while let Some(arg) = rest.next() {
            if arg == "--report" {
                rest.next();
            } else {
                shown.push(arg.clone());
            }
        }
        let command = shown.join(" ");
        let text = format!(
            "Produced by `{command}` on {}, against the endpoint `{endpoint}`: {clients} client processes, {resources} resources, lease {lease:?}, {duration:?} per run, table layout {layout}.\n\n{table}",
            chrono::Utc::now().format("%Y-%m-%d %H:%M UTC")
        );
        std::fs::write(&path, text).expect("report written");
    }
    if !all_violations.is_empty() {
        std::process::exit(1);
    }
}
