//! The report: `docs/benchmarks.md` (tables of min / median / max over runs, and ratios to the best
//! peer) and `docs/benchmarks.svg` (hand-off throughput and crash takeover, side by side).

use crate::contenders::Contender;
use crate::figures::{
    Figures, Sizes, CONTENDED_WORKERS, LEASE_MS, PERMITS, SET_SIZE, VARYING_HOLD_MS,
};
use crate::lambda::LambdaFigures;
use crate::load::{Ceiling, Level, Sweep};
use crate::settings::settings_tables;
use serde_json::Value;
use std::fmt::Write as _;

/// Whether a larger value of a figure is better.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Better {
    Higher,
    Lower,
}

/// The figures of the tables: name, unit, which way is better, and how to read it.
type Column = (&'static str, Better, fn(&Figures) -> f64);

const COLUMNS: [Column; 17] = [
    ("requests / acquire+release", Better::Lower, |f| {
        f.requests_per_round
    }),
    ("acquire+release p50 ms", Better::Lower, |f| f.round_ms.0),
    ("acquire+release p99 ms", Better::Lower, |f| f.round_ms.1),
    ("hand-off acquisitions/s", Better::Higher, |f| {
        f.handoff_per_s
    }),
    ("release→acquire gap p50 ms", Better::Lower, |f| {
        f.gap_ms.0
    }),
    ("release→acquire gap p99 ms", Better::Lower, |f| {
        f.gap_ms.1
    }),
    ("requests / contended acquisition", Better::Lower, |f| {
        f.requests_per_acquisition
    }),
    (
        "requests to acquire / contended acquisition",
        Better::Lower,
        |f| f.acquire_requests_per_acquisition,
    ),
    ("longest wait ms", Better::Lower, |f| f.longest_wait_ms),
    ("64 resources acquisitions/s", Better::Higher, |f| {
        f.many_per_s
    }),
    ("crash takeover ms", Better::Lower, |f| f.takeover_ms),
    (
        "holds 1-30 ms: hand-off acquisitions/s",
        Better::Higher,
        |f| f.varying.per_s,
    ),
    ("holds 1-30 ms: gap p50 ms", Better::Lower, |f| {
        f.varying.gap_ms.0
    }),
    ("holds 1-30 ms: gap p99 ms", Better::Lower, |f| {
        f.varying.gap_ms.1
    }),
    (
        "holds 1-30 ms: requests / contended acquisition",
        Better::Lower,
        |f| f.varying.requests_per_acquisition,
    ),
    (
        "holds 1-30 ms: requests to acquire / contended acquisition",
        Better::Lower,
        |f| f.varying.acquire_requests_per_acquisition,
    ),
    ("holds 1-30 ms: longest wait ms", Better::Lower, |f| {
        f.varying.longest_wait_ms
    }),
];

fn stats(values: &[f64]) -> Option<(f64, f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some((v[0], v[v.len() / 2], v[v.len() - 1]))
}

fn number(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn median(runs: &[Figures], read: fn(&Figures) -> f64) -> Option<f64> {
    stats(&runs.iter().map(read).collect::<Vec<_>>()).map(|s| s.1)
}

/// The best peer's median of a figure.
fn best_peer(results: &[(Contender, Vec<Figures>)], column: &Column) -> Option<f64> {
    let medians = results
        .iter()
        .filter(|(c, _)| !c.ours)
        .filter_map(|(_, runs)| median(runs, column.2));
    match column.1 {
        Better::Higher => medians.fold(None, |best: Option<f64>, m| {
            Some(best.map_or(m, |b| b.max(m)))
        }),
        Better::Lower => medians.fold(None, |best: Option<f64>, m| {
            Some(best.map_or(m, |b| b.min(m)))
        }),
    }
}

/// The hand-off columns.
const HANDOFF: [&str; 6] = [
    "hand-off acquisitions/s",
    "release→acquire gap p50 ms",
    "release→acquire gap p99 ms",
    "requests / contended acquisition",
    "requests to acquire / contended acquisition",
    "longest wait ms",
];

/// The hand-off figures within each way of waiting: workers of one process lined up inside the
/// library, or contending through DynamoDB only (as separate processes do), each of ours against
/// the best peer of its kind.
fn like_for_like(md: &mut String, results: &[(Contender, Vec<Figures>)]) {
    let columns: Vec<&Column> = COLUMNS.iter().filter(|c| HANDOFF.contains(&c.0)).collect();
    let _ = writeln!(
        md,
        "### Hand-off, like for like
"
    );
    let _ = writeln!(
        md,
        "Medians. A library that lines up the waiting workers of one process (a shared client) \
         is compared with peers that do the same; one whose workers each have a client, or \
         whose shared client does not queue, contends through DynamoDB only, as separate \
         processes (Lambda functions) always do.\n"
    );
    for (queues, title) in [
        (true, "workers of one process lined up in the library"),
        (false, "contending through DynamoDB only"),
    ] {
        let kind: Vec<_> = results
            .iter()
            .filter(|(c, _)| c.queues_in_process == queues)
            .cloned()
            .collect();
        let _ = write!(md, "| {title} |");
        for column in &columns {
            let _ = write!(md, " {} |", column.0);
        }
        let _ = write!(md, "\n|---|");
        for _ in &columns {
            let _ = write!(md, "---:|");
        }
        let _ = writeln!(md);
        for (contender, runs) in &kind {
            let _ = write!(md, "| {} |", contender.name);
            for column in &columns {
                let _ = match median(runs, column.2) {
                    Some(m) => write!(md, " {} |", number(m)),
                    None => write!(md, " – |"),
                };
            }
            let _ = writeln!(md);
        }
        for (contender, runs) in kind.iter().filter(|(c, _)| c.ours) {
            let _ = write!(md, "| *{} vs best peer of this kind* |", contender.name);
            for column in &columns {
                let _ = match ratio(runs, &kind, column) {
                    Some(r) => write!(md, " ×{} |", number(r)),
                    None => write!(md, " – |"),
                };
            }
            let _ = writeln!(md);
        }
        let _ = writeln!(md);
    }
}

/// A figure of the lock kinds: name, which way is better, how to read it of a contender that has
/// the kind, and what stands in for it in one that has not (a peer's mutex, through which its
/// readers or semaphore holders can only take turns).
struct KindColumn {
    name: &'static str,
    better: Better,
    read: fn(&Figures) -> f64,
    stand_in: Option<fn(&Figures) -> f64>,
}

const KIND_COLUMNS: [KindColumn; 5] = [
    KindColumn {
        name: "readers/s, 8 on one lock",
        better: Better::Higher,
        read: |f| f.readers_per_s,
        stand_in: Some(|f| f.handoff_per_s),
    },
    KindColumn {
        name: "semaphore of 4: acquisitions/s, 8 workers",
        better: Better::Higher,
        read: |f| f.semaphore_per_s,
        stand_in: Some(|f| f.handoff_per_s),
    },
    KindColumn {
        name: "10 resources together: acquire+release p50 ms",
        better: Better::Lower,
        read: |f| f.set_round_ms.0,
        stand_in: None,
    },
    KindColumn {
        name: "10 resources: p99 ms",
        better: Better::Lower,
        read: |f| f.set_round_ms.1,
        stand_in: None,
    },
    KindColumn {
        name: "requests / 10 resources",
        better: Better::Lower,
        read: |f| f.requests_per_set,
        stand_in: None,
    },
];

/// The lock kinds: readers and a semaphore (ours) against the peers' mutex, which their readers
/// can only take in turn, and ten resources taken together (our lock set, one transaction)
/// against a peer taking ten leases one after another.
fn kinds_section(md: &mut String, results: &[(Contender, Vec<Figures>)], sizes: Sizes) {
    let _ = writeln!(
        md,
        "
## Lock kinds
"
    );
    let _ = writeln!(
        md,
        "Medians. Readers: {CONTENDED_WORKERS} workers on one lock in shared mode, {} \
         acquisitions each, holding {} ms; semaphore: the same with {PERMITS} permits (never more \
         than {PERMITS} holders at once, checked on the time stamps). The peers have no shared \
         mode: their figure (*mutex*) is their contended hand-off rate, the most a reader \
         workload can get from them. Ten resources: one worker takes `PREFIX/0` … `PREFIX/{}` \
         together and releases them, {} times: ddb-lock as one lock set (one \
         TransactWriteItems), dynamodb-lease one lease after another in name order; the Python \
         and Node drivers have no such scenario (–).\n",
        sizes.contended,
        sizes.hold_ms,
        SET_SIZE - 1,
        sizes.sets
    );
    let _ = write!(md, "| contender |");
    for column in &KIND_COLUMNS {
        let _ = write!(md, " {} |", column.name);
    }
    let _ = write!(md, "\n|---|");
    for _ in &KIND_COLUMNS {
        let _ = write!(md, "---:|");
    }
    let _ = writeln!(md);
    // A peer without the kind is shown, and compared, by its stand-in.
    let figure = |contender: &Contender, runs: &[Figures], column: &KindColumn| {
        median(runs, column.read).map(|m| (m, false)).or_else(|| {
            column
                .stand_in
                .filter(|_| !contender.ours)
                .and_then(|stand_in| median(runs, stand_in))
                .map(|m| (m, true))
        })
    };
    for (contender, runs) in results {
        let _ = write!(md, "| {} |", contender.name);
        for column in &KIND_COLUMNS {
            let _ = match figure(contender, runs, column) {
                Some((m, false)) => write!(md, " {} |", number(m)),
                Some((m, true)) => write!(md, " {} *mutex* |", number(m)),
                None => write!(md, " – |"),
            };
        }
        let _ = writeln!(md);
    }
    for (contender, runs) in results.iter().filter(|(c, _)| c.ours) {
        let _ = write!(md, "| *{} vs best peer* |", contender.name);
        for column in &KIND_COLUMNS {
            let ours = median(runs, column.read);
            let peers = results
                .iter()
                .filter(|(c, _)| !c.ours)
                .filter_map(|(c, runs)| figure(c, runs, column).map(|(m, _)| m));
            let best = match column.better {
                Better::Higher => peers.reduce(f64::max),
                Better::Lower => peers.reduce(f64::min),
            };
            let ratio = ours.zip(best).map(|(ours, best)| match column.better {
                Better::Higher => ours / best,
                Better::Lower => best / ours,
            });
            let _ = match ratio.filter(|r| r.is_finite()) {
                Some(r) => write!(md, " ×{} |", number(r)),
                None => write!(md, " – |"),
            };
        }
        let _ = writeln!(md);
    }
}

/// Our median against the best peer's, oriented so that above 1 is better for us.
fn ratio(runs: &[Figures], peers: &[(Contender, Vec<Figures>)], column: &Column) -> Option<f64> {
    median(runs, column.2)
        .zip(best_peer(peers, column))
        .map(|(ours, best)| match column.1 {
            Better::Higher => ours / best,
            Better::Lower => best / ours,
        })
        .filter(|r| r.is_finite())
}

/// The markdown report.
pub fn markdown(
    results: &[(Contender, Vec<Figures>)],
    ceilings: &[Ceiling],
    lambda: &LambdaFigures,
    sizes: Sizes,
    quick: bool,
    cores: usize,
) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Benchmarks: ddb-lock and its peers, side by side\n");
    let _ = writeln!(
        md,
        "Produced by `scripts/bench.sh{}` on {} against a local endpoint ({}). Every contender ran \
         against the same endpoint in the same run, each behind its own counting TCP proxy \
         (requests are counted there, not by the contenders). Each figure is min / median / max \
         over the runs; ratios compare ddb-lock's median with the best peer's median (above 1 is \
         better for ddb-lock).\n",
        if quick { " --quick" } else { "" },
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
        std::env::var("DYNAMODB_ENDPOINT_KIND").unwrap_or_else(|_| "not described".into()),
    );
    let _ = writeln!(
        md,
        "Scenarios: lease {LEASE_MS} ms for everyone; uncontended: {} acquire + release rounds; \
         contended: 8 workers on one resource, {} acquisitions each, holding {} ms; holds {}-{} ms: \
         the contended scenario with holds that vary, the same sequence through that range for \
         every contender; many: 64 workers on 64 resources, {} acquisitions each; takeover: the \
         holder is SIGKILLed while another process waits.\n",
        sizes.uncontended,
        sizes.contended,
        sizes.hold_ms,
        VARYING_HOLD_MS.0,
        VARYING_HOLD_MS.1,
        sizes.many
    );
    let _ = writeln!(
        md,
        "Requests / contended acquisition: every request of the contended scenario, its releases' \
         included, over its acquisitions. Requests to acquire / contended acquisition: only the \
         requests a worker sent while it was acquiring (from the start of its wait to its \
         acquisition, by the drivers' time stamps and the proxy's), its releases' apart; the \
         proxy tells the workers' requests apart by the access key each worker's SDK client \
         signs with (`worker<i>`), so the figure is there only for contenders whose workers \
         have clients of their own (– where they share one).\n"
    );
    let _ = writeln!(md, "## Contenders and settings\n");
    // From the first run's uncontended scenario.
    let settings: Vec<(&str, Option<&Value>)> = results
        .iter()
        .map(|(contender, runs)| (contender.name.as_str(), runs.first().map(|f| &f.settings)))
        .collect();
    settings_tables(&mut md, &settings);
    let _ = writeln!(md, "\n## Figures\n");
    for chunk in COLUMNS.chunks(5) {
        let _ = write!(md, "| contender |");
        for column in chunk {
            let _ = write!(md, " {} |", column.0);
        }
        let _ = write!(md, "\n|---|");
        for _ in chunk {
            let _ = write!(md, "---:|");
        }
        let _ = writeln!(md);
        for (contender, runs) in results {
            let _ = write!(md, "| {} |", contender.name);
            for column in chunk {
                match stats(&runs.iter().map(column.2).collect::<Vec<_>>()) {
                    Some((min, med, max)) => {
                        let _ = write!(
                            md,
                            " {} / **{}** / {} |",
                            number(min),
                            number(med),
                            number(max)
                        );
                    }
                    None if column.0 == "crash takeover ms" => {
                        let _ = write!(md, " never |");
                    }
                    None => {
                        let _ = write!(md, " – |");
                    }
                }
            }
            let _ = writeln!(md);
        }
        for (contender, runs) in results.iter().filter(|(c, _)| c.ours) {
            let _ = write!(md, "| *{} vs best peer* |", contender.name);
            for column in chunk {
                let _ = match ratio(runs, results, column) {
                    Some(r) => write!(md, " ×{} |", number(r)),
                    None => write!(md, " – |"),
                };
            }
            let _ = writeln!(md);
        }
        let _ = writeln!(md);
    }
    like_for_like(&mut md, results);
    kinds_section(&mut md, results, sizes);
    ceiling_section(&mut md, results, ceilings, cores);
    let _ = writeln!(md, "\n## The Lambda function\n");
    let _ = writeln!(md, "| figure | value |");
    let _ = writeln!(md, "|---|---|");
    let _ = writeln!(
        md,
        "| release binary, arm64 (`cargo lambda build --release --arm64`) | {} |",
        lambda
            .arm64_bytes
            .map_or("not built in this run".to_owned(), |b| format!(
                "{b} bytes ({:.1} MiB)",
                b as f64 / 1048576.0
            ))
    );
    let _ = writeln!(
        md,
        "| start to first Runtime API poll (median of 5, `{}`) | {:.1} ms |",
        short(&lambda.measured_binary),
        lambda.ready_ms
    );
    let _ = writeln!(
        md,
        "| start to first invocation answered (median of 5) | {:.1} ms |",
        lambda.first_answer_ms
    );
    let _ = writeln!(
        md,
        "| peak memory (VmHWM) after 200 invocations | {} |",
        lambda.peak_rss_kib.map_or("–".to_owned(), |k| format!(
            "{:.1} MiB",
            k as f64 / 1024.0
        ))
    );
    let _ = writeln!(
        md,
        "\n![hand-off throughput and crash takeover](benchmarks.svg)"
    );
    md
}

/// The median over runs of what `read` says of each run's sweep (by level, or of the best).
fn median_of(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    stats(&values.flatten().collect::<Vec<_>>()).map(|s| s.1)
}

fn or_dash(value: Option<f64>) -> String {
    value.map_or("–".to_owned(), number)
}

/// The endpoint's ceiling: the load generator's best rate of each kind of pair, where the CPU
/// went, and the contenders' many-resources rate against it.
fn ceiling_section(
    md: &mut String,
    results: &[(Contender, Vec<Figures>)],
    ceilings: &[Ceiling],
    cores: usize,
) {
    type Pick = fn(&Ceiling) -> &Sweep;
    let kinds: [(&str, Pick); 2] = [
        ("unconditional", |c| &c.unconditional),
        ("conditional", |c| &c.conditional),
    ];
    let best = |pick: Pick, read: fn(&Level) -> Option<f64>| {
        median_of(ceilings.iter().map(|c| pick(c).best().and_then(read)))
    };
    let Some(levels) = ceilings.first().map(|c| {
        c.unconditional
            .levels
            .iter()
            .map(|l| l.workers)
            .collect::<Vec<_>>()
    }) else {
        return;
    };
    let _ = writeln!(md, "### The endpoint's ceiling\n");
    let _ = writeln!(
        md,
        "What the endpoint itself sustains, measured after the contenders in each run: PutItem + \
         DeleteItem pairs, each worker on a key of its own, at {} concurrent workers, the best \
         level kept. The load generator sends the requests straight to the endpoint (no proxy) \
         over keep-alive HTTP/1.1 connections, bodies formatted in place and no signing, so that \
         it spends a small fraction of the CPU time the engine does; the engine's and the \
         generator's CPU time are read from `/proc` (this machine has {cores} cores, shared by \
         both). Unconditional pairs, and pairs with the least conditions a lock needs \
         (`attribute_not_exists(PK)` on the put, `LockID = :id` on the delete). Medians over the \
         runs.\n",
        levels
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    );
    let _ = write!(md, "| workers |");
    for (kind, _) in kinds {
        let _ = write!(
            md,
            " {kind} pairs/s | engine cores | engine CPU ms/pair | generator cores |"
        );
    }
    let _ = write!(md, "\n|---:|");
    for _ in kinds {
        let _ = write!(md, "---:|---:|---:|---:|");
    }
    let _ = writeln!(md);
    for (index, workers) in levels.iter().enumerate() {
        let _ = write!(md, "| {workers} |");
        for (_, pick) in kinds {
            let at = |read: fn(&Level) -> Option<f64>| {
                median_of(
                    ceilings
                        .iter()
                        .map(|c| pick(c).levels.get(index).and_then(read)),
                )
            };
            let _ = write!(
                md,
                " {} | {} | {} | {} |",
                or_dash(at(|l| Some(l.pairs_per_s))),
                or_dash(at(Level::engine_cores)),
                or_dash(at(Level::engine_ms_per_pair)),
                or_dash(at(|l| Some(l.generator_cores()))),
            );
        }
        let _ = writeln!(md);
    }
    let _ = writeln!(md);
    for (kind, pick) in kinds {
        let _ = writeln!(
            md,
            "- {kind}: ceiling {} pairs/s; at the best level the engine kept {} cores busy and \
             the generator {}.",
            or_dash(best(pick, |l| Some(l.pairs_per_s))),
            or_dash(best(pick, Level::engine_cores)),
            or_dash(best(pick, |l| Some(l.generator_cores()))),
        );
    }
    let unconditional = best(|c| &c.unconditional, |l| Some(l.pairs_per_s));
    let conditional = best(|c| &c.conditional, |l| Some(l.pairs_per_s));
    if let (Some(unconditional), Some(conditional)) = (unconditional, conditional) {
        let _ = writeln!(md);
        for (contender, runs) in results.iter().filter(|(c, _)| c.ours) {
            if let Some(m) = median(runs, |f| f.many_per_s) {
                let _ = writeln!(
                    md,
                    "- {}: {} acquisitions/s on 64 resources (through its proxy) = {:.0} % of \
                     the unconditional ceiling, {:.0} % of the conditional one.",
                    contender.name,
                    number(m),
                    100.0 * m / unconditional,
                    100.0 * m / conditional,
                );
            }
        }
    }
}

fn short(path: &str) -> &str {
    path.rsplit_once("target/").map_or(path, |(_, rest)| rest)
}

/// A chart: its title and the figure it shows.
type Panel = (&'static str, fn(&Figures) -> f64);

/// Two horizontal bar charts: contended hand-off acquisitions/s, and crash takeover ms.
pub fn svg(results: &[(Contender, Vec<Figures>)]) -> String {
    let panels: [Panel; 2] = [
        (
            "contended hand-off, acquisitions/s (higher is better)",
            |f| f.handoff_per_s,
        ),
        ("crash takeover, ms (lower is better)", |f| f.takeover_ms),
    ];
    let row = 22.0;
    let label = 330.0;
    let bar_space = 300.0;
    let panel_height = row * results.len() as f64 + 40.0;
    let height = panel_height * panels.len() as f64 + 10.0;
    let width = label + bar_space + 90.0;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    for (p, (title, read)) in panels.iter().enumerate() {
        let top = p as f64 * panel_height + 10.0;
        let _ = writeln!(
            svg,
            r#"<text x="10" y="{}" font-weight="bold">{title}</text>"#,
            top + 12.0
        );
        let values: Vec<Option<f64>> = results
            .iter()
            .map(|(_, runs)| median(runs, *read))
            .collect();
        let max = values
            .iter()
            .flatten()
            .copied()
            .fold(0.0, f64::max)
            .max(1e-9);
        for (i, ((contender, _), value)) in results.iter().zip(&values).enumerate() {
            let y = top + 24.0 + i as f64 * row;
            let colour = if contender.ours { "#d9480f" } else { "#868e96" };
            let _ = writeln!(
                svg,
                r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
                label - 6.0,
                y + 13.0,
                contender.name.replace('&', "&amp;")
            );
            if let Some(v) = value {
                let w = (v / max * bar_space).max(1.0);
                let _ = writeln!(
                    svg,
                    r#"<rect x="{label}" y="{y}" width="{w:.1}" height="{}" fill="{colour}"/><text x="{}" y="{}">{}</text>"#,
                    row - 6.0,
                    label + w + 4.0,
                    y + 13.0,
                    number(*v)
                );
            }
        }
    }
    let _ = writeln!(svg, "</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contender(name: &str) -> Contender {
        Contender {
            name: name.into(),
            ours: false,
            queues_in_process: false,
            command: Vec::new(),
            table: String::new(),
            kinds: false,
            sets: false,
        }
    }

    fn figures(settings: Value) -> Figures {
        Figures {
            settings,
            requests_per_round: 2.0,
            round_ms: (1.0, 2.0),
            handoff_per_s: 1.0,
            gap_ms: (1.0, 2.0),
            requests_per_acquisition: 1.0,
            acquire_requests_per_acquisition: f64::NAN,
            longest_wait_ms: 1.0,
            many_per_s: 1.0,
            takeover_ms: 1.0,
            readers_per_s: f64::NAN,
            semaphore_per_s: f64::NAN,
            set_round_ms: (f64::NAN, f64::NAN),
            requests_per_set: f64::NAN,
            varying: crate::figures::Handoff {
                per_s: 1.0,
                gap_ms: (1.0, 2.0),
                requests_per_acquisition: 1.0,
                acquire_requests_per_acquisition: f64::NAN,
                longest_wait_ms: 1.0,
            },
        }
    }

    #[test]
    fn the_varying_columns_name_the_range_of_holds() {
        let range = format!("holds {}-{} ms: ", VARYING_HOLD_MS.0, VARYING_HOLD_MS.1);
        let varying: Vec<_> = COLUMNS
            .iter()
            .filter(|c| c.0.starts_with("holds "))
            .collect();
        assert_eq!(varying.len(), 6);
        assert!(varying.iter().all(|c| c.0.starts_with(&range)));
    }

    #[test]
    fn kinds_compare_ours_with_the_peers_mutex_and_their_sets() {
        let ours = Contender {
            ours: true,
            kinds: true,
            sets: true,
            ..contender("ours")
        };
        let ours_figures = Figures {
            readers_per_s: 400.0,
            semaphore_per_s: 200.0,
            set_round_ms: (10.0, 20.0),
            requests_per_set: 2.0,
            ..figures(Value::Null)
        };
        let peer_figures = Figures {
            handoff_per_s: 50.0,
            set_round_ms: (40.0, 80.0),
            requests_per_set: 20.0,
            ..figures(Value::Null)
        };
        let results = vec![
            (ours, vec![ours_figures]),
            (contender("peer"), vec![peer_figures]),
            (contender("other"), vec![figures(Value::Null)]),
        ];
        let mut md = String::new();
        kinds_section(&mut md, &results, Sizes::QUICK);
        assert!(
            md.contains("| ours | 400 | 200 | 10.0 | 20.0 | 2.00 |"),
            "{md}"
        );
        assert!(
            md.contains("| peer | 50.0 *mutex* | 50.0 *mutex* | 40.0 | 80.0 | 20.0 |"),
            "{md}"
        );
        assert!(
            md.contains("| other | 1.00 *mutex* | 1.00 *mutex* | – | – | – |"),
            "{md}"
        );
        assert!(
            md.contains("| *ours vs best peer* | ×8.00 | ×4.00 | ×4.00 | ×4.00 | ×10.0 |"),
            "{md}"
        );
    }
}
