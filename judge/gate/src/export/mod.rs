//! The two reports the gate judges — a run's [`Verdict`] and a comparison's [`CompareVerdict`] —
//! as kinds of the one report stream (`npugate_result::report::Report`, implemented in `report`):
//! each renders every format (terminal, JSON, Markdown, GitHub annotations, JUnit, HTML), one file
//! per format here (as hyperfine does), and the rows every human-facing format shares so they
//! cannot disagree.

use npugate_profile::report::PlacementReport;

use crate::compare::CompareVerdict;
use crate::outputs::fmt_metric;
use crate::stats::LatencyStats;
use crate::units::{fmt_limit, fmt_ms, fmt_ms_from_us, fmt_pct, Unit};
use crate::verdict::{Check, Verdict};
use npugate_result::resources::MB;

mod consistency;
mod github;
mod html;
mod junit;
pub mod markdown;
mod report;
mod terminal;

pub use consistency::DeviceOutputs;
pub use markdown::consistency_markdown;
pub use terminal::{consistency_text, outcome_style, paint, placement_text, text_table, BOLD, DIM, GREEN, RED, YELLOW};

/// The measured value of a check with its unit (`56.1%`, `8.10 ms`, `3 nodes`), or `—`.
fn measured_text(check: &Check) -> String {
    check.measured.map_or_else(
        || "—".to_string(),
        |v| match check.unit {
            Unit::Percent => fmt_pct(v),
            Unit::Ms => fmt_ms(v * 1e6),
            Unit::Db => format!("{} dB", fmt_metric(v, 1)),
            Unit::Cosine | Unit::Abs => fmt_metric(v, 6),
            Unit::TokensPerSecond => format!("{v:.1} tok/s"),
            Unit::Mb => format!("{v:.1} MiB"),
            Unit::Mj => format!("{v:.3} mJ"),
            Unit::Runs | Unit::Nodes | Unit::Partitions | Unit::Switches | Unit::Tokens => {
                format!("{} {}", fmt_limit(v), check.unit)
            }
        },
    )
}

/// The limit of a check as configured (`8%`, `20 ms`, `1 partitions`).
fn limit_text(check: &Check) -> String {
    check.limit.map_or_else(
        || "—".to_string(),
        |v| match check.unit {
            Unit::Percent => format!("{}%", fmt_limit(v)),
            Unit::Cosine | Unit::Abs => fmt_limit(v),
            Unit::Ms
            | Unit::Db
            | Unit::Runs
            | Unit::Nodes
            | Unit::Partitions
            | Unit::Switches
            | Unit::Mb
            | Unit::Mj
            | Unit::Tokens
            | Unit::TokensPerSecond => {
                format!("{} {}", fmt_limit(v), check.unit)
            }
        },
    )
}

/// Named latency estimates of a run in display order, shared by the terminal, Markdown and HTML reports.
fn latency_rows(v: &Verdict, s: &LatencyStats) -> Vec<(&'static str, String)> {
    let mut rows: Vec<(&str, String)> = ESTIMATES.into_iter().zip(estimates(s)).collect();
    rows.push(("session creation", fmt_ms(v.session_create_ns as f64)));
    // A run that times no first inference of its own (an AI Hub profile) has none to show.
    if v.first_inference_ns > 0 {
        rows.push(("first inference (cold)", fmt_ms(v.first_inference_ns as f64)));
    }
    rows
}

/// Names of [`estimates`].
const ESTIMATES: [&str; 12] =
    ["N", "median", "median 95% CI (bootstrap)", "mean", "stdev", "CV", "MAD", "min", "p90", "p95", "p99", "max"];

/// The estimates of a latency series, in the order of [`ESTIMATES`].
fn estimates(s: &LatencyStats) -> [String; 12] {
    [
        s.n.to_string(),
        fmt_ms(s.median_ns),
        format!("{} – {}", fmt_ms(s.median_ci.lower), fmt_ms(s.median_ci.upper)),
        fmt_ms(s.mean_ns),
        fmt_ms(s.stdev_ns),
        fmt_pct(s.cv_pct),
        fmt_ms(s.mad_ns),
        fmt_ms(s.min_ns),
        fmt_ms(s.p90_ns),
        fmt_ms(s.p95_ns),
        fmt_ms(s.p99_ns),
        fmt_ms(s.max_ns),
    ]
}

/// Shape lines: bimodality and drift, shared by the human-facing reports.
fn shape_lines(s: &LatencyStats) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(m) = &s.modality {
        let split = &m.split;
        let verdict = if m.bimodal { "bimodal" } else { "unimodal" };
        lines.push(format!(
            "{verdict}: best two-cluster split {:.0}% at {} / {:.0}% at {} (gap {}, Ashman's D {:.1}, bimodality coefficient {:.2})",
            split.fast.share_pct,
            fmt_ms(split.fast.median_ns),
            split.slow.share_pct,
            fmt_ms(split.slow.median_ns),
            fmt_ms(split.gap_ns),
            split.ashman_d,
            m.coefficient
        ));
    }
    if let Some(d) = &s.drift {
        lines.push(format!(
            "drift: last third {:+.1}% vs first third ({} → {}, {} runs each)",
            d.change_pct,
            fmt_ms(d.first_third_median_ns),
            fmt_ms(d.last_third_median_ns),
            d.runs_per_third
        ));
    }
    lines
}

/// Header of [`ep_rows`].
const EP_HEADER: [&str; 7] = ["EP", "nodes", "nodes %", "GFLOPs", "FLOPs %", "ms/run", "time %"];

/// Per-EP rows of a placement report, shared by the terminal, Markdown and HTML reports.
fn ep_rows(report: &PlacementReport) -> Vec<[String; 7]> {
    report
        .per_ep
        .iter()
        .map(|e| {
            [
                e.ep.clone(),
                e.nodes.to_string(),
                fmt_pct(e.nodes_pct),
                format!("{:.3}", e.flops as f64 / 1e9),
                fmt_pct(e.flops_pct),
                e.time_us_per_run.map_or_else(|| "—".into(), fmt_ms_from_us),
                e.time_pct.map_or_else(|| "—".into(), fmt_pct),
            ]
        })
        .collect()
}

/// Header of [`fallback_rows`].
const FALLBACK_HEADER: [&str; 8] = ["op type", "node", "EP", "FLOPs %", "ms/run", "status", "reason", "hint"];

/// Fallback rows of a placement report, shared by the terminal, Markdown and HTML reports.
fn fallback_rows(report: &PlacementReport, rules: &crate::rules::Rules) -> Vec<[String; 8]> {
    report
        .fallback
        .iter()
        .map(|f| {
            let status = if f.expected {
                "expected"
            } else if rules.allows(&f.name, &f.op_type) {
                "allowed"
            } else {
                "fallback"
            };
            [
                f.op_type.clone(),
                f.name.clone(),
                f.ep.clone(),
                fmt_pct(f.flops_pct),
                f.time_us_per_run.map_or_else(|| "—".into(), fmt_ms_from_us),
                status.to_string(),
                f.reason.clone().unwrap_or_default(),
                f.hint.clone().unwrap_or_default(),
            ]
        })
        .collect()
}

/// Header of [`resource_rows`].
const RESOURCE_HEADER: [&str; 2] = ["measure", "value"];

/// The memory the harness held and the energy per inference, shared by the terminal, Markdown and
/// HTML reports; empty when the run recorded neither.
fn resource_rows(v: &Verdict) -> Vec<[String; 2]> {
    let mib = |bytes: u64| format!("{:.1} MiB", bytes as f64 / MB);
    let mut rows = Vec::new();
    let whose = match v.subject.emulated {
        Some(_) => " (the emulator process's, not a device's)",
        None => "",
    };
    if let Some(m) = &v.memory {
        if let Some(peak) = m.peak_bytes {
            let created = m.peak_after_create_bytes.map(|b| format!("; after session creation {}", mib(b)));
            rows.push(["peak resident memory".into(), format!("{}{}{whose}", mib(peak), created.unwrap_or_default())]);
        }
        if let Some(resident) = m.resident_bytes {
            rows.push(["resident after the timed runs".into(), mib(resident)]);
        }
        match (&m.dmabuf, &m.dmabuf_absent) {
            (Some(d), _) if d.buffers > 0 => rows.push([
                "DMA-BUF held".into(),
                format!(
                    "{} in {} buffer(s) ({}); after session creation {}",
                    mib(d.after_runs_bytes),
                    d.buffers,
                    d.exporters.join(", "),
                    mib(d.after_create_bytes)
                ),
            ]),
            (None, Some(why)) if v.subject.emulated.is_none() => {
                rows.push(["DMA-BUF held".into(), format!("not shown: {why}")])
            }
            _ => {}
        }
        if let Some(leak) = &m.leak_check {
            let after: Vec<String> = leak.resident_bytes.iter().map(|&b| format!("{:.1}", b as f64 / MB)).collect();
            rows.push([
                "memory growth".into(),
                format!(
                    "{:+.1} MiB over {} session re-creations (resident after each drop: {} MiB)",
                    leak.growth_bytes as f64 / MB,
                    leak.recreations,
                    after.join(", ")
                ),
            ]);
        }
    }
    if let Some(energy) = &v.energy {
        rows.push(["energy per inference".into(), energy.describe()]);
        if let Some(m) = &energy.measured {
            rows.push(["energy method".into(), m.method.clone()]);
        }
    }
    rows
}

/// Header of [`qnn_op_rows`].
const QNN_OP_HEADER: [&str; 5] = ["QNN op", "type", "model nodes", "per execute", "share"];

/// The QNN ops of a placement, most expensive first where profiled (in the EP's order otherwise),
/// at most `limit`, each with the model nodes it came from; shared by the human-facing reports.
fn qnn_op_rows(report: &PlacementReport, limit: usize, nodes_shown: usize) -> Vec<[String; 5]> {
    let mut ops: Vec<&npugate_profile::report::QnnOp> = report.partitions.iter().flat_map(|p| &p.backend_ops).collect();
    ops.sort_by(|a, b| b.value.unwrap_or(0.0).total_cmp(&a.value.unwrap_or(0.0)));
    let total: f64 = ops.iter().filter_map(|o| o.value).sum();
    ops.into_iter()
        .take(limit)
        .map(|op| {
            let id =
                op.op_id.map(|id| format!(":OpId_{id}")).filter(|_| !op.name.contains("OpId_")).unwrap_or_default();
            let nodes = match op.model_nodes.len() {
                0 => format!("— ({})", attribution_text(op.attribution)),
                n if n > nodes_shown => {
                    format!("{} (+{} more)", op.model_nodes[..nodes_shown].join(", "), n - nodes_shown)
                }
                _ => op.model_nodes.join(", "),
            };
            let nodes = match op.attribution {
                npugate_profile::report::OpAttribution::Adjacent => format!("{nodes} (inserted beside them)"),
                _ => nodes,
            };
            [
                format!("{}{id}", op.name),
                op.qnn_type.clone(),
                nodes,
                op.value.map_or_else(|| "—".into(), |value| format!("{value:.0} {}", op.unit.to_lowercase())),
                op.value.filter(|_| total > 0.0).map_or_else(|| "—".into(), |value| fmt_pct(100.0 * value / total)),
            ]
        })
        .collect()
}

/// How an op without model nodes is described.
fn attribution_text(attribution: npugate_profile::report::OpAttribution) -> &'static str {
    use npugate_profile::report::OpAttribution;
    match attribution {
        OpAttribution::GraphIo => "QNN's graph input/output",
        OpAttribution::Unattributed => "no ONNX source: added by the HTP compiler or inserted",
        OpAttribution::Traced | OpAttribution::Named | OpAttribution::Adjacent => "traced",
    }
}

/// The line above the QNN op table: how many ops, how they were attributed, what the times are.
fn qnn_ops_line(report: &PlacementReport) -> Option<String> {
    let summary = report.qnn_ops.as_ref()?;
    let by = match summary.sources.as_str() {
        "trace" => "the QNN EP's op trace",
        "compile_trace" => "the op trace recorded when the model was compiled",
        _ => "their names (no op trace)",
    };
    let times = match (summary.executes, &summary.emulated) {
        (0, _) => "; no QNN profiling (--qnn-profiling detailed gives their times)".to_string(),
        (n, Some(emulated)) => format!("; times: median of {n} execute(s), {emulated}"),
        (n, None) => format!("; times: median of {n} execute(s) on the device"),
    };
    Some(format!("{} ops, {} tied to model nodes by {by}{times}", summary.ops, summary.attributed))
}

/// Header of [`compare_estimate_rows`].
const COMPARE_ESTIMATE_HEADER: [&str; 3] = ["estimate", "baseline (A)", "candidate (B)"];

/// Both models' estimates side by side (every timed run of every round), then the median cold
/// first inference of their rounds.
fn compare_estimate_rows(c: &CompareVerdict) -> Vec<[String; 3]> {
    let values = |side: &crate::compare::Side| {
        let mut values =
            side.latency.as_ref().map_or_else(|| vec!["—".to_string(); ESTIMATES.len()], |s| estimates(s).to_vec());
        let first: Vec<f64> = side.first_inference_ns.iter().map(|&v| v as f64).collect();
        values.push(crate::stats::median(&first).map_or_else(|| "—".into(), fmt_ms));
        values
    };
    ESTIMATES
        .into_iter()
        .chain(["first inference (cold, median of rounds)"])
        .zip(values(&c.baseline).into_iter().zip(values(&c.candidate)))
        .map(|(name, (a, b))| [name.to_string(), a, b])
        .collect()
}

/// Header of [`round_rows`].
const ROUND_HEADER: [&str; 5] = ["round", "order", "baseline median", "candidate median", "B/A"];

/// One row per round of a comparison.
fn round_rows(c: &CompareVerdict) -> Vec<[String; 5]> {
    c.rounds
        .iter()
        .map(|r| {
            [
                r.round.to_string(),
                r.first.label().to_string(),
                fmt_ms(r.baseline_median_ns),
                fmt_ms(r.candidate_median_ns),
                format!("{:.3}×", r.ratio),
            ]
        })
        .collect()
}

/// Header of [`placement_side_rows`].
const PLACEMENT_SIDE_HEADER: [&str; 3] = ["placement", "baseline (A)", "candidate (B)"];

/// Both placements side by side: preferred EP, shares on it, fallback nodes, partitions, switches.
fn placement_side_rows(c: &CompareVerdict) -> Vec<[String; 3]> {
    type Cell = fn(&PlacementReport) -> String;
    let cells: [(&str, Cell); 7] = [
        ("preferred EP", |p| p.preferred_ep.clone()),
        ("nodes on it", |p| fmt_pct(p.preferred_nodes_pct)),
        ("FLOPs on it", |p| fmt_pct(p.preferred_flops_pct)),
        ("kernel time on it", |p| p.preferred_time_pct.map_or_else(|| "—".into(), fmt_pct)),
        ("nodes off it (expected)", |p| {
            format!("{} ({})", p.fallback.len(), p.fallback.iter().filter(|f| f.expected).count())
        }),
        ("partitions", |p| p.partitions.len().to_string()),
        ("EP switches per run", |p| {
            p.boundaries.per_run.iter().copied().max().unwrap_or(p.boundaries.transitions.len()).to_string()
        }),
    ];
    let value = |p: Option<&PlacementReport>, cell: Cell| p.map_or_else(|| "—".into(), cell);
    cells
        .iter()
        .map(|(name, cell)| {
            [
                name.to_string(),
                value(c.baseline.placement.as_ref(), *cell),
                value(c.candidate.placement.as_ref(), *cell),
            ]
        })
        .collect()
}

/// Header of [`difference_rows`].
const DIFFERENCE_HEADER: [&str; 6] = ["op type", "node", "baseline EP", "candidate EP", "FLOPs %", "reason"];

/// Every node whose EP differs between the two placements.
fn difference_rows(c: &CompareVerdict) -> Vec<[String; 6]> {
    c.placement_differences
        .iter()
        .map(|n| {
            [
                n.op_type.clone(),
                n.name.clone(),
                n.baseline_ep.clone().unwrap_or_else(|| "(not in A)".into()),
                n.ep.clone(),
                n.flops_pct.map_or_else(|| "—".into(), fmt_pct),
                n.reason.clone().unwrap_or_default(),
            ]
        })
        .collect()
}

/// Said when the profiled runs' kernel time per run exceeds the timed median by half: ORT's
/// profiler, recording every node, slowed them (a Loop of many small nodes: slanet-plus 180.7 ms
/// of kernels per profiled run against a 49.4 ms median), so their times are shares, not latency.
pub(super) fn profiled_time_note(v: &Verdict, report: &PlacementReport) -> Option<String> {
    let kernel_ms = report.totals.time_us_per_run? / 1e3;
    let median_ms = v.latency.as_ref()?.median_ns / 1e6;
    (kernel_ms > 1.5 * median_ms).then(|| {
        format!(
            "Kernel times come from the {} profiled run(s), which ORT's profiler slowed to {kernel_ms:.1} ms of kernels per run against a timed median of {median_ms:.1} ms: read them as shares of a run, not as its latency.",
            report.runs_profiled
        )
    })
}
