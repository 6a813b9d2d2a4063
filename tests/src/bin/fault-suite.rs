//! The fault suite: runs every fault scenario against the local endpoint and prints a table of
//! fault × runs × violations. Exits 1 if any run broke a guarantee.
//!
//! ```text
//! fault-suite [--runs N] [--duration-ms MS] [--lease-ms MS] [--clients N] [--resources N]
//!             [--report FILE]
//! ```
//!
//! Needs `DYNAMODB_ENDPOINT` (as `scripts/test.sh` and `scripts/soak.sh` set it) and the
//! `fault-client` binary next to this one (`cargo build --bins -p ddb-lock-tests`).

use ddb_lock_tests::faults::suite::{self, Fault, Settings};
use std::fmt::Write as _;
use std::time::Duration;

struct Options {
    runs: u32,
    settings: Settings,
    report: Option<String>,
}

fn options() -> Options {
    let mut options = Options {
        runs: 1,
        settings: Settings {
            clients: 4,
            resources: 2,
            lease: Duration::from_millis(1000),
            duration: Duration::from_millis(6000),
        },
        report: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .unwrap_or_else(|| panic!("{flag} needs a value"));
        let number = || -> u64 {
            value
                .parse()
                .unwrap_or_else(|_| panic!("{flag} takes a number, not {value:?}"))
        };
        match flag.as_str() {
            "--runs" => options.runs = u32::try_from(number()).expect("a small number of runs"),
            "--duration-ms" => options.settings.duration = Duration::from_millis(number()),
            "--lease-ms" => options.settings.lease = Duration::from_millis(number()),
            "--clients" => options.settings.clients = number() as usize,
            "--resources" => options.settings.resources = number() as usize,
            "--report" => options.report = Some(value),
            other => panic!("unknown option {other}"),
        }
    }
    options
}

#[tokio::main]
async fn main() {
    let options = options();
    let endpoint = ddb_lock_tests::endpoint();
    let client_bin = std::env::current_exe()
        .expect("own path")
        .with_file_name("fault-client");
    assert!(
        client_bin.exists(),
        "{} is missing: cargo build --bins -p ddb-lock-tests",
        client_bin.display()
    );
    let workdir = std::env::temp_dir().join(format!("ddb-lock-faults-{}", std::process::id()));
    std::fs::create_dir_all(&workdir).expect("work directory");
    let Settings {
        clients,
        resources,
        lease,
        duration,
    } = options.settings;
    println!(
        "fault suite: {clients} client processes, {resources} resources, lease {lease:?}, {duration:?} per run, {} run(s) per fault\n",
        options.runs
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
                suite::run(fault, options.settings, &endpoint, &client_bin, &workdir).await;
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
            "Produced by `{command}` on {}, against the endpoint `{endpoint}`: {clients} client processes, {resources} resources, lease {lease:?}, {duration:?} per run.\n\n{table}",
            chrono::Utc::now().format("%Y-%m-%d %H:%M UTC")
        );
        std::fs::write(&path, text).expect("report written");
    }
    if !all_violations.is_empty() {
        std::process::exit(1);
    }
}
