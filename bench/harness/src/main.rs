//! The benchmark harness: runs every contender's driver against the same local endpoint, each
//! behind its own counting proxy, and writes `docs/benchmarks.md` and `docs/benchmarks.svg`.
//!
//! ```text
//! bench [--quick] [--runs N] [--out DIR]
//! bench probe [--engine-pid PID] [--rounds N] [--block N]
//! bench ceiling [--engine-pid PID] [--quick]
//! ```
//!
//! `probe` measures each request shape of an uncontended acquire + release on its own (latency,
//! and CPU time of the client and of the engine); `ceiling` runs only the endpoint's ceiling.
//!
//! Needs `DYNAMODB_ENDPOINT`, the drivers (`bench-driver` next to this binary, the Python venv in
//! `bench/python/.venv`, `bench/node/node_modules`) and, for the Lambda figures, `bootstrap` next to
//! this binary. `scripts/bench.sh` prepares all of that.

mod acquiring;
mod contenders;
mod cpu;
mod figures;
mod lambda;
mod load;
mod probe;
mod report;
mod settings;

use clap::{Parser, Subcommand};
use contenders::Contender;
use ddb_lock_test_kit::proxy::Proxy;
use figures::{Figures, Sizes};
use load::{Ceiling, Plan};
use std::path::PathBuf;

/// The machine's cores, as the report gives them next to the engine's CPU use.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

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
    /// Only the contenders whose name contains one of these (repeatable), for a partial run
    /// (best written elsewhere with `--out`): `--only fair --only dynamodb-lease`.
    #[arg(long)]
    only: Vec<String>,
    /// A single measurement instead of the benchmark.
    #[command(subcommand)]
    command: Option<Command>,
}

/// The single measurements.
#[derive(Debug, Subcommand)]
enum Command {
    /// Latency and CPU cost of each request shape of an uncontended acquire + release.
    Probe {
        /// The engine's process id (default: `DYNAMODB_ENDPOINT_PID`, else the endpoint's
        /// listener).
        #[arg(long)]
        engine_pid: Option<u32>,
        /// Rounds of every shape, interleaved.
        #[arg(long, default_value_t = 8)]
        rounds: usize,
        /// Put + delete pairs per shape and round.
        #[arg(long, default_value_t = 50)]
        block: usize,
    },
    /// The endpoint's ceiling alone: PutItem + DeleteItem pairs at several concurrency levels.
    Ceiling {
        /// The engine's process id (default: `DYNAMODB_ENDPOINT_PID`, else the endpoint's
        /// listener).
        #[arg(long)]
        engine_pid: Option<u32>,
        /// The quick plan (four levels, 1 s windows) instead of the documented one.
        #[arg(long)]
        quick: bool,
    },
}

#[tokio::main]
async fn main() {
    let options = Options::parse();
    if let Some(command) = options.command {
        let endpoint = ddb_lock_test_kit::endpoint();
        match command {
            Command::Probe {
                engine_pid,
                rounds,
                block,
            } => {
                let engine = cpu::engine_pid(engine_pid, &endpoint);
                probe::run(&endpoint, engine, rounds, block).await;
            }
            Command::Ceiling { engine_pid, quick } => {
                let engine = cpu::engine_pid(engine_pid, &endpoint);
                let plan = if quick { Plan::quick() } else { Plan::full() };
                println!(
                    "ceiling: {endpoint}, engine pid {}, {} cores",
                    engine.map_or("unknown".to_owned(), |p| p.to_string()),
                    cores()
                );
                match Ceiling::measure(&endpoint, &plan, engine).await {
                    Ok(ceiling) => {
                        load::print("unconditional pairs", &ceiling.unconditional);
                        load::print("conditional pairs", &ceiling.conditional);
                    }
                    Err(e) => {
                        eprintln!("ceiling: {e}");
                        std::process::exit(1);
                    }
                }
            }
        }
        return;
    }
    let runs_each = options.runs.unwrap_or(if options.quick { 1 } else { 3 });
    let out = options.out.unwrap_or_else(|| repo_root().join("docs"));
    let endpoint = ddb_lock_test_kit::endpoint();
    let here = std::env::current_exe().expect("own path");
    let driver = here.with_file_name("bench-driver");
    let root = repo_root();
    let contenders: Vec<Contender> = Contender::all(&driver, &root)
        .into_iter()
        .filter(|c| options.only.is_empty() || options.only.iter().any(|o| c.name.contains(o)))
        .collect();
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

    let engine = cpu::engine_pid(None, &endpoint);
    let plan = if options.quick {
        Plan::quick()
    } else {
        Plan::full()
    };
    // DynamoDB Local is a JVM: a request path is slow until it has been compiled, and a contender
    // measured first on a fresh process paid for that (ddb-lock, first in the list, came out
    // 40 % slower than a peer on a quick run). The load generator warms the engine first.
    println!("warming the endpoint up with the load generator (not measured)");
    if let Err(e) = Ceiling::measure(&endpoint, &Plan::quick(), engine).await {
        eprintln!("endpoint warm-up: {e}");
        std::process::exit(1);
    }

    // Run by run, every contender in each, so that a drift of the endpoint over time (the
    // emulator slows down as it ages) weighs on every contender alike; the order rotates from run
    // to run, so that no contender always comes first.
    let mut results: Vec<(Contender, Vec<Figures>)> =
        contenders.into_iter().map(|c| (c, Vec::new())).collect();
    let mut ceilings = Vec::new();
    for run in 0..runs_each {
        let count = results.len();
        for k in 0..count {
            let (contender, runs) = &mut results[(k + run) % count];
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
        match Ceiling::measure(&endpoint, &plan, engine).await {
            Ok(ceiling) => {
                let best = |sweep: &load::Sweep| {
                    sweep.best().map_or("?".to_owned(), |l| {
                        format!("{:.0} ({} workers)", l.pairs_per_s, l.workers)
                    })
                };
                println!(
                    "{:<34} run {}: {} unconditional, {} conditional pairs/s",
                    "endpoint ceiling",
                    run + 1,
                    best(&ceiling.unconditional),
                    best(&ceiling.conditional)
                );
                ceilings.push(ceiling);
            }
            Err(e) => println!("{:<34} run {}: FAILED: {e}", "endpoint ceiling", run + 1),
        }
    }
    let lambda = lambda::lambda_figures(&here, &endpoint).await;

    let failed: Vec<&str> = results
        .iter()
        .filter(|(_, runs)| runs.is_empty())
        .map(|(c, _)| c.name.as_str())
        .collect();
    let markdown = report::markdown(&results, &ceilings, &lambda, sizes, options.quick, cores());
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
