//! The benchmark harness: runs every contender's driver against the same local endpoint, each
//! behind its own counting proxy, and writes `docs/benchmarks.md` and `docs/benchmarks.svg`.
//!
//! ```text
//! bench [--quick] [--runs N] [--out DIR]
//! ```
//!
//! Needs `DYNAMODB_ENDPOINT`, the drivers (`bench-driver` next to this binary, the Python venv in
//! `bench/python/.venv`, `bench/node/node_modules`) and, for the Lambda figures, `bootstrap` next to
//! this binary. `scripts/bench.sh` prepares all of that.

mod figures;
mod report;

use clap::Parser;
use ddb_lock_tests::proxy::Proxy;
use figures::{Contender, Figures, Sizes};
use std::path::PathBuf;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The command line.
#[derive(Debug, Parser)]
#[command(name = "bench", about = "Runs ddb-lock and its peers side by side")]
struct Options {
    /// Every scenario of every contender once, briefly; nothing written.
    #[arg(long)]
    quick: bool,
    /// Runs per contender (default: 1 with --quick, else 3).
    #[arg(long)]
    runs: Option<usize>,
    /// Where benchmarks.md and benchmarks.svg go (default: the repository's docs/).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[tokio::main]
async fn main() {
    let options = Options::parse();
    let runs_each = options.runs.unwrap_or(if options.quick { 1 } else { 3 });
    let out = options.out.unwrap_or_else(|| repo_root().join("docs"));
    let endpoint = ddb_lock_tests::endpoint();
    let here = std::env::current_exe().expect("own path");
    let driver = here.with_file_name("bench-driver");
    let root = repo_root();
    let contenders = Contender::all(&driver, &root);
    let sizes = if options.quick {
        Sizes::QUICK
    } else {
        Sizes::FULL
    };
    println!(
        "benchmarks: {} contenders, {} run(s) each, {} mode\n",
        contenders.len(),
        runs_each,
        if options.quick { "quick" } else { "full" }
    );

    // Run by run, every contender in each, so that a drift of the endpoint over time (the
    // emulator slows down as it ages) weighs on every contender alike.
    let mut results: Vec<(Contender, Vec<Figures>)> =
        contenders.into_iter().map(|c| (c, Vec::new())).collect();
    let mut ceilings = Vec::new();
    for run in 0..runs_each {
        for (contender, runs) in &mut results {
            let proxy = Proxy::start(&endpoint).await;
            match figures::measure(contender, &proxy, sizes, run).await {
                Ok(figures) => {
                    println!(
                        "{:<34} run {}: {}",
                        contender.name,
                        run + 1,
                        figures.summary()
                    );
                    runs.push(figures);
                }
                Err(err) => {
                    println!("{:<34} run {}: FAILED: {err}", contender.name, run + 1);
                }
            }
        }
        let ceiling = figures::Ceiling {
            unconditional: figures::raw_ceiling(&endpoint, sizes, false).await,
            conditional: figures::raw_ceiling(&endpoint, sizes, true).await,
        };
        println!(
            "{:<34} run {}: {:.0} unconditional, {:.0} conditional pairs/s",
            "endpoint ceiling",
            run + 1,
            ceiling.unconditional,
            ceiling.conditional
        );
        ceilings.push(ceiling);
    }
    let lambda = figures::lambda_figures(&here, &endpoint).await;

    let failed: Vec<&str> = results
        .iter()
        .filter(|(_, runs)| runs.is_empty())
        .map(|(c, _)| c.name.as_str())
        .collect();
    let markdown = report::markdown(&results, &ceilings, &lambda, sizes, options.quick);
    println!("\n{markdown}");
    if !options.quick {
        std::fs::create_dir_all(&out).expect("output directory");
        std::fs::write(out.join("benchmarks.md"), &markdown).expect("write report");
        std::fs::write(out.join("benchmarks.svg"), report::svg(&results)).expect("write plot");
        println!("wrote {}", out.join("benchmarks.md").display());
    }
    if !failed.is_empty() {
        eprintln!("contenders that failed every run: {failed:?}");
        std::process::exit(1);
    }
}
