//! A self-contained HTML report (built with [`crate::page`]): no scripts, no external resources,
//! every picture inline SVG — latency histogram, latency over run index, placement by EP, the graph
//! strip with partitions and boundaries, and the fallback table.

use maud::{html, Markup};
use npugate_profile::report::PlacementReport;

use super::{
    compare_estimate_rows, difference_rows, ep_rows, fallback_rows, latency_rows, limit_text, measured_text,
    placement_side_rows, qnn_op_rows, qnn_ops_line, resource_rows, round_rows, shape_lines, COMPARE_ESTIMATE_HEADER,
    DIFFERENCE_HEADER, EP_HEADER, FALLBACK_HEADER, PLACEMENT_SIDE_HEADER, QNN_OP_HEADER, RESOURCE_HEADER, ROUND_HEADER,
};
use crate::compare::CompareVerdict;
use crate::confirm::{Confirmation, ATTEMPT_HEADER};
use crate::page::{self, Plot, Px, CPU_COLOR, HALF, OTHER_COLORS, PREFERRED_COLOR, WIDE};
use crate::rules::Rules;
use crate::stats::LatencyStats;
use crate::units::ms_number;
use crate::verdict::{Check, CheckStatus, Outcome, Verdict, NO_RULES};

/// The CPU EP's name.
const CPU_EP: &str = "CPUExecutionProvider";

fn ep_color(ep: &str, preferred: &str, others: &[String]) -> &'static str {
    if ep == preferred {
        PREFERRED_COLOR
    } else if ep == CPU_EP {
        CPU_COLOR
    } else {
        let index = others.iter().position(|o| o == ep).unwrap_or(0);
        OTHER_COLORS[index % OTHER_COLORS.len()]
    }
}

/// EPs other than the preferred one and the CPU, in report order (for stable colours).
fn other_eps(report: &PlacementReport) -> Vec<String> {
    report.per_ep.iter().map(|e| e.ep.clone()).filter(|ep| *ep != report.preferred_ep && ep != CPU_EP).collect()
}

/// Colour of a latency: by cluster when bimodal, else the preferred colour.
fn cluster_color(stats: &LatencyStats, ns: f64) -> &'static str {
    match stats.bimodal_split() {
        Some(split) if ns > split.fast.max_ns => CPU_COLOR,
        _ => PREFERRED_COLOR,
    }
}

/// The timed runs the latency rules judged, and how many were set aside as contended with the
/// slowest of them (ns): the histogram bins the first and names the others beside it.
fn judged_and_set_aside(v: &Verdict) -> (Vec<u64>, usize, u64) {
    let contended =
        |index: usize| v.contention.as_ref().and_then(|c| c.runs.as_ref()).is_some_and(|c| c.is_contended(index));
    let (set_aside, judged): (Vec<_>, Vec<_>) =
        v.latencies_ns.iter().enumerate().partition(|(index, _)| contended(*index));
    let slowest = set_aside.iter().map(|(_, &ns)| ns).max().unwrap_or(0);
    (judged.into_iter().map(|(_, &ns)| ns).collect(), set_aside.len(), slowest)
}

/// `; N contended runs set aside, not binned` when the verdict set runs aside.
fn set_aside_caption(v: &Verdict) -> String {
    match v.contention.as_ref().map_or(0, |c| c.set_aside()) {
        0 => String::new(),
        n => format!("; {n} contended runs set aside, not binned"),
    }
}

fn histogram(stats: &LatencyStats, v: &Verdict) -> Markup {
    let (judged, set_aside, slowest_set_aside) = judged_and_set_aside(v);
    let bins = ((judged.len() as f64).sqrt() * 2.0).clamp(10.0, 80.0) as usize;
    // The range of what is binned: every judged run falls inside it, none is clamped into a bin.
    let lo = judged.iter().copied().min().unwrap_or(0) as f64 / 1e6;
    let hi = judged.iter().copied().max().unwrap_or(0) as f64 / 1e6;
    let width = ((hi - lo) / bins as f64).max(1e-9);
    let mut counts = vec![0usize; bins];
    let mut colors = vec![PREFERRED_COLOR; bins];
    for &v in &judged {
        let ms = v as f64 / 1e6;
        let i = (((ms - lo) / width) as usize).min(bins - 1);
        counts[i] += 1;
        colors[i] = cluster_color(stats, v as f64);
    }
    let top = counts.iter().copied().max().unwrap_or(1) as f64 * 1.15;
    let mut plot = Plot::new(HALF, 300.0, (lo, lo + width * bins as f64), (0.0, top));
    plot.axes("latency (ms)", "runs", ms_number, |c| format!("{c:.0}"));
    for (i, (&count, color)) in counts.iter().zip(&colors).enumerate() {
        if count == 0 {
            continue;
        }
        let (x0, x1) = (plot.px(lo + width * i as f64), plot.px(lo + width * (i + 1) as f64));
        let (y0, y1) = (plot.py(count as f64), plot.py(0.0));
        plot.draw(html! {
            rect x=(Px(x0 + 0.5)) y=(Px(y0)) width=(Px((x1 - x0 - 1.0).max(1.0))) height=(Px(y1 - y0)) fill=(color) fill-opacity="0.85" {
                title { (count) " runs" }
            }
        });
    }
    plot.vline(stats.median_ns / 1e6, "#212529", &format!("median {}", ms_number(stats.median_ns / 1e6)));
    if let Some(split) = stats.bimodal_split() {
        // Legend in the top-right corner: one swatch per cluster.
        let right = plot.width - plot.right;
        for (row, (cluster, color)) in
            [(&split.fast, PREFERRED_COLOR), (&split.slow, CPU_COLOR)].into_iter().enumerate()
        {
            let y = plot.top + 6.0 + 16.0 * row as f64;
            let label = format!("{:.0}% of runs at {} ms", cluster.share_pct, ms_number(cluster.median_ns / 1e6));
            plot.draw(html! {
                rect x=(Px(right - 10.0)) y=(Px(y - 9.0)) width="10" height="10" fill=(color) {}
                text x=(Px(right - 14.0)) y=(Px(y)) text-anchor="end" font-weight="600" { (label) }
            });
        }
    }
    if set_aside > 0 {
        let note = format!(
            "{set_aside} contended runs set aside (up to {} ms), not shown",
            ms_number(slowest_set_aside as f64 / 1e6)
        );
        let (x, y) = (plot.width - plot.right, plot.top + 6.0 + 16.0 * 2.0);
        plot.draw(html! { text x=(Px(x)) y=(Px(y)) text-anchor="end" fill=(CPU_COLOR) { (note) } });
    }
    plot.finish("latency histogram")
}

fn run_chart(stats: &LatencyStats, latencies_ns: &[u64]) -> Markup {
    let n = latencies_ns.len();
    // Every run is drawn, the set-aside ones too: the range is the whole series'.
    let min_ns = latencies_ns.iter().copied().min().map_or(stats.min_ns, |ns| ns as f64);
    let max_ns = latencies_ns.iter().copied().max().map_or(stats.max_ns, |ns| ns as f64);
    let pad = ((max_ns - min_ns) / 1e6 * 0.08).max(stats.median_ns / 1e6 * 0.01);
    let (lo, hi) = (min_ns / 1e6 - pad, max_ns / 1e6 + pad);
    let mut plot = Plot::new(HALF, 300.0, (0.0, (n.max(2) - 1) as f64), (lo.max(0.0), hi));
    plot.axes("run index", "latency (ms)", |x| format!("{x:.0}"), ms_number);
    if let Some(d) = &stats.drift {
        let third = d.runs_per_third as f64;
        for (start, end) in [(0.0, third - 1.0), ((n as f64) - third, (n - 1) as f64)] {
            let (x0, x1) = (plot.px(start), plot.px(end));
            let height = plot.height - plot.top - plot.bottom;
            plot.draw(html! {
                rect x=(Px(x0)) y=(plot.top) width=(Px((x1 - x0).max(1.0))) height=(Px(height)) fill="#f1f3f5" {}
            });
        }
        let first = format!("first third {}", ms_number(d.first_third_median_ns / 1e6));
        plot.hline(0.0, third - 1.0, d.first_third_median_ns / 1e6, "#495057", &first);
        let last = format!("last third {} ({:+.1}%)", ms_number(d.last_third_median_ns / 1e6), d.change_pct);
        let start = (n as f64 - third).min((n as f64) * 0.6);
        plot.hline(start, (n - 1) as f64, d.last_third_median_ns / 1e6, "#495057", &last);
    }
    let radius = if n > 2000 { 1.2 } else { 2.2 };
    for (i, &v) in latencies_ns.iter().enumerate() {
        let (x, y) = (plot.px(i as f64), plot.py(v as f64 / 1e6));
        plot.draw(html! {
            circle cx=(Px(x)) cy=(Px(y)) r=(radius) fill=(cluster_color(stats, v as f64)) fill-opacity="0.75" {}
        });
    }
    plot.finish("latency over run index")
}

/// The segments of a 100% bar `width` pixels wide starting at `start`: each EP with its share,
/// its x and its width, one after the other.
fn segments<'a>(shares: &[(&'a str, f64)], start: f64, width: f64) -> Vec<(&'a str, f64, f64, f64)> {
    let mut x = start;
    shares
        .iter()
        .map(|&(ep, pct)| {
            let (at, w) = (x, width * pct / 100.0);
            x += w;
            (ep, pct, at, w)
        })
        .collect()
}

/// Three 100% bars (nodes, FLOPs, kernel time) split by EP.
fn ep_bars(report: &PlacementReport) -> Markup {
    let others = other_eps(report);
    let mut rows: Vec<(&str, Vec<(&str, f64)>)> = vec![
        ("nodes", report.per_ep.iter().map(|e| (e.ep.as_str(), e.nodes_pct)).collect()),
        ("FLOPs", report.per_ep.iter().map(|e| (e.ep.as_str(), e.flops_pct)).collect()),
    ];
    if report.per_ep.iter().any(|e| e.time_pct.is_some()) {
        rows.push(("kernel time", report.per_ep.iter().map(|e| (e.ep.as_str(), e.time_pct.unwrap_or(0.0))).collect()));
    }
    let (label_w, bar_w, row_h) = (100.0, WIDE - 120.0, 34.0);
    let height = rows.len() as f64 * row_h + 36.0;
    // Legend entries follow each other like the segments of a bar.
    let mut legend_x = label_w;
    let legend: Vec<(f64, &str)> = report
        .per_ep
        .iter()
        .map(|e| {
            let x = legend_x;
            legend_x += 28.0 + e.ep.len() as f64 * 6.6;
            (x, e.ep.as_str())
        })
        .collect();
    let content = html! {
        @for (r, (name, shares)) in rows.iter().enumerate() {
            @let y = 6.0 + r as f64 * row_h;
            text x="0" y=(Px(y + 17.0)) font-weight="600" { (name) }
            @for (ep, pct, x, w) in segments(shares, label_w, bar_w) {
                rect x=(Px(x)) y=(Px(y)) width=(Px(w)) height="24" fill=(ep_color(ep, &report.preferred_ep, &others)) {
                    title { (ep) " " (format!("{pct:.1}")) "%" }
                }
                @if w > 44.0 {
                    text x=(Px(x + 6.0)) y=(Px(y + 16.0)) fill="#fff" style="fill:#fff" font-weight="600" { (format!("{pct:.1}")) "%" }
                }
            }
        }
        @for (x, ep) in legend {
            rect x=(Px(x)) y=(Px(height - 22.0)) width="12" height="12" fill=(ep_color(ep, &report.preferred_ep, &others)) {}
            text x=(Px(x + 16.0)) y=(Px(height - 12.0)) { (ep) }
        }
    };
    page::svg(WIDE, height, "placement by EP", content)
}

/// Nodes in graph order coloured by EP, partitions as brackets above, EP switches as dashed lines,
/// blamed fallback nodes marked below.
/// The label of a fallback node under the node strip: its row's baseline, its words, and whether it
/// ends at its mark (at the right edge) rather than starting there.
struct FallbackLabel {
    y: f64,
    text: String,
    ends_at_mark: bool,
}

fn graph_strip(report: &PlacementReport, rules: &Rules) -> Markup {
    let others = other_eps(report);
    let n = report.nodes.len().max(1) as f64;
    let (left, strip_w, strip_y, strip_h) = (10.0, WIDE - 20.0, 70.0, 34.0);
    let x_of = |i: usize| left + strip_w * i as f64 / n;
    let index_of = |name: &str| report.nodes.iter().position(|node| node.name == name);
    let brackets: Vec<(usize, f64, f64, usize)> = report
        .partitions
        .iter()
        .enumerate()
        .filter_map(|(p_index, p)| {
            let positions: Vec<usize> = p.nodes.iter().filter_map(|name| index_of(name)).collect();
            let (first, last) = (positions.iter().min()?, positions.iter().max()?);
            Some((p_index, x_of(*first), x_of(last + 1), p.nodes.len()))
        })
        .collect();
    let boundary_index = |kernel: &str| {
        index_of(kernel).or_else(|| {
            report
                .partitions
                .iter()
                .find(|p| p.fused_name == kernel)
                .and_then(|p| p.nodes.iter().filter_map(|name| index_of(name)).max())
        })
    };
    let switches: Vec<(f64, &str, &str)> = report
        .boundaries
        .transitions
        .iter()
        .filter_map(|t| boundary_index(&t.after).map(|i| (x_of(i + 1), t.from_ep.as_str(), t.to_ep.as_str())))
        .collect();
    let blamed: Vec<_> = report.fallback.iter().filter(|f| !f.expected && !rules.allows(&f.name, &f.op_type)).collect();
    let label_y = strip_y + strip_h + 22.0;
    // Marks under blamed nodes; each label on the first of three rows where it stays clear of the
    // labels before it (its width taken generously for 11 px text, a gap after it), none where no
    // row has room; a label that would leave the strip on the right ends at its mark instead.
    let mut placed: Vec<(f64, String)> = blamed
        .iter()
        .filter_map(|f| Some((x_of(index_of(&f.name)?) + strip_w / n / 2.0, format!("{} {}", f.op_type, f.name))))
        .collect();
    placed.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut marks: Vec<(f64, Option<FallbackLabel>)> = Vec::new();
    let mut row_free = [f64::NEG_INFINITY; 3];
    for (x, text) in placed {
        let width = text.chars().count() as f64 * 7.0;
        let ends_at_mark = x + width > left + strip_w;
        let (start, end) = if ends_at_mark { (x - width, x) } else { (x, x + width) };
        let label = row_free.iter().position(|free| start > *free).map(|row| {
            row_free[row] = end + 12.0;
            FallbackLabel { y: label_y + 14.0 * row as f64, text, ends_at_mark }
        });
        marks.push((x, label));
    }
    let per_run = report.boundaries.per_run.iter().copied().max().unwrap_or(report.boundaries.transitions.len());
    let height = label_y + 44.0;
    let content = html! {
        @for (i, node) in report.nodes.iter().enumerate() {
            rect x=(format!("{:.2}", x_of(i))) y=(strip_y) width=(format!("{:.2}", (strip_w / n).max(0.6))) height=(strip_h)
                fill=(ep_color(&node.ep, &report.preferred_ep, &others)) {
                title { (node.name) " (" (node.op_type) ") on " (node.ep) }
            }
        }
        @for (p_index, x0, x1, count) in brackets {
            @let level = 52.0 - (p_index % 2) as f64 * 16.0;
            path d=(format!("M{} {} V{} H{} V{}", Px(x0), Px(level + 10.0), Px(level), Px(x1), Px(level + 10.0))) fill="none" stroke="#343a40" stroke-width="1.5" {}
            text x=(Px(x0 + 4.0)) y=(Px(level - 4.0)) { "partition #" (p_index + 1) " · " (count) " nodes" }
        }
        @for (x, from, to) in switches {
            line x1=(Px(x)) y1=(Px(strip_y - 4.0)) x2=(Px(x)) y2=(Px(strip_y + strip_h + 4.0)) stroke="#212529" stroke-width="1.5" stroke-dasharray="3 2" {
                title { (from) " → " (to) }
            }
        }
        @for (x, label) in marks {
            path d=(format!("M{} {} l-5 8 h10 z", Px(x), Px(strip_y + strip_h + 3.0))) fill="#e03131" {}
            @if let Some(label) = label {
                text x=(Px(x)) y=(Px(label.y)) fill="#c92a2a" text-anchor=(if label.ends_at_mark { "end" } else { "start" }) { (label.text) }
            }
        }
        text x=(left) y="12" font-weight="600" {
            (report.nodes.len()) " nodes in graph order · " (report.partitions.len()) " partition(s) · " (per_run)
            " EP switch(es) per run (dashed) · " (blamed.len()) " fallback node(s) marked ▲"
        }
    };
    page::svg(WIDE, height, "partitions and boundaries along the graph", content)
}

fn status_pill(status: CheckStatus) -> Markup {
    let class = match status {
        CheckStatus::Pass => "pill pass",
        CheckStatus::Fail => "pill fail",
        CheckStatus::Unjudged | CheckStatus::NotJudged => "pill unjudged",
        CheckStatus::NotApplicable => "pill na",
    };
    html! { span class=(class) { (status.label()) } }
}

/// The rules section: the rule table, then the errors and warnings.
fn rules_section(checks: &[Check], errors: &[String], warnings: &[String]) -> Markup {
    html! {
        section {
            h2 { "Rules" }
            (rule_table(checks))
            (notes(errors, warnings))
        }
    }
}

/// A measure-only run's rules section: none, and the errors and warnings.
fn no_rules_section(errors: &[String], warnings: &[String]) -> Markup {
    html! {
        section {
            h2 { "Rules" }
            div { (NO_RULES) }
            (notes(errors, warnings))
        }
    }
}

/// The errors and warnings under a report's rules, as a list.
fn notes(errors: &[String], warnings: &[String]) -> Markup {
    html! {
        @if !errors.is_empty() || !warnings.is_empty() {
            ul {
                @for e in errors { li.err { (e) } }
                @for w in warnings { li.warn { (w) } }
            }
        }
    }
}

/// One row per check: status, rule, measured, limit, detail.
fn rule_table(checks: &[Check]) -> Markup {
    html! {
        table {
            tr { th { "status" } th { "rule" } th { "measured" } th { "limit" } th { "detail" } }
            @for c in checks {
                tr {
                    td { (status_pill(c.status)) }
                    td { code { (c.rule.as_str()) } }
                    td.num { (measured_text(c)) }
                    td.num { (limit_text(c)) }
                    td { (c.message) }
                }
            }
        }
    }
}

/// The attempts of a confirmed run, with the decision.
fn confirmation_section(confirmation: Option<&Confirmation>) -> Markup {
    let Some(c) = confirmation else { return html! {} };
    html! {
        section {
            h2 { "Confirmation: " (c.sentence()) }
            (page::table(&ATTEMPT_HEADER, &c.rows(), &[]))
        }
    }
}

/// Both models' round medians over the session: drift shows as both lines moving together.
fn round_chart(v: &CompareVerdict) -> Markup {
    let n = v.rounds.len().max(1) as f64;
    let all = v.rounds.iter().flat_map(|r| [r.baseline_median_ns / 1e6, r.candidate_median_ns / 1e6]);
    let (lo, hi) = all.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), ms| (lo.min(ms), hi.max(ms)));
    let pad = ((hi - lo) * 0.1).max(hi.abs() * 0.01).max(1e-6);
    let mut plot = Plot::new(HALF, 300.0, (0.5, n + 0.5), ((lo - pad).max(0.0), hi + pad));
    plot.axes("round", "median (ms)", |x| format!("{x:.0}"), ms_number);
    for (color, label, median) in [
        (PREFERRED_COLOR, "baseline (A)", (|r| r.baseline_median_ns) as fn(&crate::compare::Round) -> f64),
        (CPU_COLOR, "candidate (B)", |r| r.candidate_median_ns),
    ] {
        let points: Vec<(f64, f64)> =
            v.rounds.iter().map(|r| (plot.px(r.round as f64), plot.py(median(r) / 1e6))).collect();
        let path: Vec<String> = points.iter().map(|(x, y)| format!("{},{}", Px(*x), Px(*y))).collect();
        let legend_y = if color == PREFERRED_COLOR { plot.top + 4.0 } else { plot.top + 20.0 };
        let right = plot.width - plot.right;
        plot.draw(html! {
            polyline points=(path.join(" ")) fill="none" stroke=(color) stroke-width="1.5" {}
            @for (x, y) in &points { circle cx=(Px(*x)) cy=(Px(*y)) r="3" fill=(color) {} }
            rect x=(Px(right - 10.0)) y=(Px(legend_y - 9.0)) width="10" height="10" fill=(color) {}
            text x=(Px(right - 14.0)) y=(Px(legend_y)) text-anchor="end" font-weight="600" { (label) }
        });
    }
    plot.finish("round medians of both models")
}

/// Each round's ratio B/A, the paired interval as a band, 1× and the slowdown limit as lines.
fn ratio_chart(v: &CompareVerdict) -> Markup {
    let n = v.rounds.len().max(1) as f64;
    let limit = v.rules.max_slowdown_pct.map(|pct| 1.0 + pct / 100.0);
    let values = v
        .rounds
        .iter()
        .map(|r| r.ratio)
        .chain([1.0])
        .chain(limit)
        .chain(v.paired.iter().flat_map(|p| [p.ci.lower, p.ci.upper]));
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), r| (lo.min(r), hi.max(r)));
    let pad = ((hi - lo) * 0.1).max(0.005);
    let mut plot = Plot::new(HALF, 300.0, (0.5, n + 0.5), (lo - pad, hi + pad));
    plot.axes("round", "B / A", |x| format!("{x:.0}"), |y| format!("{y:.3}"));
    if let Some(p) = &v.paired {
        let (top, bottom) = (plot.py(p.ci.upper), plot.py(p.ci.lower));
        let (left, right) = (plot.px(0.5), plot.px(n + 0.5));
        plot.draw(html! {
            rect x=(Px(left)) y=(Px(top)) width=(Px(right - left)) height=(Px((bottom - top).max(1.0))) fill=(PREFERRED_COLOR) fill-opacity="0.15" {
                title { (format!("paired {:.1}% interval", p.ci.level * 100.0)) }
            }
        });
        plot.hline(0.5, n + 0.5, p.ratio, PREFERRED_COLOR, &format!("paired {:.3}×", p.ratio));
    }
    plot.hline(0.5, n + 0.5, 1.0, "#495057", "1×");
    if let Some(limit) = limit {
        plot.hline(0.5, n + 0.5, limit, "#e03131", &format!("limit {limit:.2}×"));
    }
    for r in &v.rounds {
        let (x, y) = (plot.px(r.round as f64), plot.py(r.ratio));
        plot.draw(html! { circle cx=(Px(x)) cy=(Px(y)) r="3.5" fill="#212529" { title { "round " (r.round) " (" (r.first.label()) "): " (format!("{:.3}", r.ratio)) "×" } } });
    }
    plot.finish("round ratios and the paired interval")
}

/// Columns of one latency table: seven fit a 1280-px page with the widest values.
const LATENCY_COLUMNS: usize = 7;

fn latency_section(v: &Verdict, s: &LatencyStats) -> Markup {
    let (names, values): (Vec<&str>, Vec<String>) = latency_rows(v, s).into_iter().unzip();
    let clusters = if s.bimodal_split().is_some() { "; blue and orange: the two clusters" } else { "" };
    html! {
        section {
            h2 { "Latency" }
            // In tables of at most LATENCY_COLUMNS columns: 14 in one row overflow a 1280-px page.
            @for (names, values) in names.chunks(LATENCY_COLUMNS).zip(values.chunks(LATENCY_COLUMNS)) {
                (page::table(names, &[values], &(0..names.len()).collect::<Vec<_>>()))
            }
            ul { @for line in shape_lines(s) { li { (line) } } }
            div.charts {
                figure { (histogram(s, v)) figcaption { "Histogram of the timed runs the latency rules judged" (set_aside_caption(v)) (clusters) } }
                figure {
                    (run_chart(s, &v.latencies_ns))
                    figcaption { "Latency by run index; shaded: first and last third with their medians (drift)" }
                }
            }
        }
    }
}

/// The memory the harness held and the energy per inference, when the run recorded them.
fn resource_section(v: &Verdict) -> Markup {
    let rows = resource_rows(v);
    if rows.is_empty() {
        return html! {};
    }
    html! {
        section {
            h2 { "Memory and energy" }
            (page::table(&RESOURCE_HEADER, &rows, &[]))
        }
    }
}

fn placement_section(v: &Verdict, report: &PlacementReport) -> Markup {
    html! {
        section {
            h2 { "Placement — preferred EP " code { (report.preferred_ep) } }
            @if let Some(predicted) = &report.predicted { p.warn { (predicted) } }
            (page::table(&EP_HEADER, &ep_rows(report), &[1, 2, 3, 4, 5, 6]))
            figure { (ep_bars(report)) figcaption { "Share by EP: nodes, FLOPs and measured kernel time" } }
            p.muted { (super::terminal::flops_coverage(&report.totals)) }
            @if let Some(note) = super::profiled_time_note(v, report) { p.muted { (note) } }
            @if !report.nodes.is_empty() {
                figure {
                    (graph_strip(report, &v.rules))
                    figcaption { "The graph, node by node in order, coloured by EP; brackets: fused partitions; dashed: EP switches" }
                }
            }
            @if let Some(line) = qnn_ops_line(report) {
                h2 { "QNN ops" }
                p.muted { (line) }
                (page::table(&QNN_OP_HEADER, &qnn_op_rows(report, usize::MAX, usize::MAX), &[3, 4]))
            }
            h2 { "Fallback (" (report.fallback.len()) " node(s))" }
            @if report.fallback.is_empty() {
                p.muted { "Every node ran on the preferred EP." }
            } @else {
                @if !report.rejections.is_empty() {
                    ul { @for cause in &report.rejections { li.warn { (cause.describe()) } } }
                }
                (page::table(&FALLBACK_HEADER, &fallback_rows(report, &v.rules), &[3, 4]))
            }
            @for w in &report.warnings { p.warn { (w) } }
        }
    }
}

fn baseline_section(v: &Verdict) -> Markup {
    let Some(b) = &v.baseline else { return html! {} };
    html! {
        section {
            h2 { "Baseline " code { (b.source) } }
            ul {
                @if let Some(r) = &b.median_ratio {
                    li { (format!("median ratio {:.3}× (95% CI {:.3}–{:.3}×)", r.ratio, r.ci.lower, r.ci.upper)) }
                }
                @for d in &b.fingerprint_differences { li.warn { "fingerprint: " (d) } }
                @for node in &b.moved_off_preferred { li.err { (node.describe()) } }
            }
        }
    }
}

/// A run's verdict as a self-contained HTML page.
pub(super) fn verdict(v: &Verdict) -> String {
    let body = html! {
        section {
            h1 { (page::badge(v.outcome)) (v.title()) }
            div { (v.subject.summary()) }
            div.muted { "model digest " (v.subject.fingerprint.model_digest) }
        }
        (confirmation_section(v.confirmation.as_ref()))
        @if v.outcome == Outcome::Measured { (no_rules_section(&v.errors, &v.warnings)) }
        @else { (rules_section(&v.checks, &v.errors, &v.warnings)) }
        @if let Some(s) = &v.latency { (latency_section(v, s)) }
        (resource_section(v))
        @if let Some(report) = &v.placement { (placement_section(v, report)) }
        (baseline_section(v))
    };
    let title = format!("{}: {}", v.title(), v.outcome.label());
    page::page(&title, body, &format!("{} · generated by {}", v.schema, v.title()))
}

/// A comparison of two models as a self-contained HTML page.
pub(super) fn compare(v: &CompareVerdict) -> String {
    let placements =
        [("baseline (A)", v.baseline.placement.as_ref()), ("candidate (B)", v.candidate.placement.as_ref())];
    let body = html! {
        section {
            h1 { (page::badge(v.outcome)) "npugate compare" }
            div { (v.summary()) }
            div { strong { (v.paired_sentence()) } }
            div.muted { "A " (v.baseline.model) " (digest " (v.baseline.subject.fingerprint.model_digest) ")" }
            div.muted { "B " (v.candidate.model) " (digest " (v.candidate.subject.fingerprint.model_digest) ")" }
        }
        (confirmation_section(v.confirmation.as_ref()))
        (rules_section(&v.checks, &v.errors, &v.warnings))
        section {
            h2 { "Rounds (ABBA order, each a fresh harness session; cold runs excluded)" }
            div.charts {
                figure { (round_chart(v)) figcaption { "Each round's median of both models: drift moves both lines together" } }
                figure { (ratio_chart(v)) figcaption { "Each round's ratio B/A; band: the paired 95% interval" } }
            }
            (page::table(&ROUND_HEADER, &round_rows(v), &[0, 2, 3, 4]))
        }
        section {
            h2 { "Latency (the clean timed runs of every round)" }
            (page::table(&COMPARE_ESTIMATE_HEADER, &compare_estimate_rows(v), &[1, 2]))
        }
        section {
            h2 { "Placement" }
            (page::table(&PLACEMENT_SIDE_HEADER, &placement_side_rows(v), &[1, 2]))
            @for (label, placement) in placements {
                @if let Some(report) = placement {
                    figure { (ep_bars(report)) figcaption { (label) ": share by EP (nodes, FLOPs, kernel time)" } }
                }
            }
            h2 { "Nodes on another EP in the candidate (" (v.placement_differences.len()) ")" }
            @if v.placement_differences.is_empty() {
                p.muted { "Every node runs on the same EP in both." }
            } @else {
                (page::table(&DIFFERENCE_HEADER, &difference_rows(v), &[4]))
            }
        }
    };
    let title = format!("npugate compare: {}", v.outcome.label());
    page::page(&title, body, &format!("{} · generated by npugate compare", v.schema))
}
