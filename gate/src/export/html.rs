//! A self-contained HTML report: no scripts, no external resources, every picture inline SVG —
//! latency histogram, latency over run index, placement by EP, the graph strip with partitions and
//! boundaries, and the fallback table.

use std::fmt::Write as _;

use profile_parser::report::PlacementReport;

use super::{ep_rows, fallback_rows, latency_rows, limit_text, measured_text, shape_lines, xml_escape, Exporter, EP_HEADER, FALLBACK_HEADER};
use crate::stats::LatencyStats;
use crate::units::ms_number;
use crate::verdict::{CheckStatus, Outcome, Verdict};

/// HTML report.
#[derive(Debug, Clone, Copy)]
pub struct HtmlExporter;

/// Colour of the preferred EP (and of the fast cluster).
pub const PREFERRED_COLOR: &str = "#1c7ed6";
/// Colour of the CPU EP off the preferred EP (and of the slow cluster).
pub const CPU_COLOR: &str = "#f76707";
/// Colours of any further EPs.
pub const OTHER_COLORS: [&str; 4] = ["#7048e8", "#0ca678", "#e64980", "#868e96"];
/// Chart width for full-width pictures.
pub const WIDE: f64 = 1180.0;
/// Chart width for side-by-side pictures.
pub const HALF: f64 = 575.0;

/// The page style every npugate HTML report shares (sections, tables, pills, badges).
pub const STYLE: &str = "
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#212529;margin:0;background:#f1f3f5}
main{max-width:1220px;margin:0 auto;padding:20px}
section{background:#fff;border:1px solid #dee2e6;border-radius:8px;padding:14px 18px;margin:14px 0}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:0 0 10px}
.badge{display:inline-block;padding:2px 12px;border-radius:14px;color:#fff;font-weight:700;margin-right:8px}
.pass{background:#2f9e44}.fail{background:#e03131}.error,.unjudged{background:#f08c00}
.pill{display:inline-block;min-width:64px;text-align:center;padding:0 6px;border-radius:10px;color:#fff;font-size:12px;font-weight:600}
table{border-collapse:collapse;width:100%} th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #e9ecef;vertical-align:top}
th{font-size:12px;color:#495057;background:#f8f9fa} td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.muted{color:#868e96}.charts{display:flex;flex-wrap:wrap;gap:12px} figure{margin:0} figcaption{font-size:12px;color:#495057}
ul{margin:6px 0;padding-left:20px} figure+h2{margin-top:16px} .err{color:#c92a2a}.warn{color:#e67700}
svg text{font:11px system-ui,sans-serif;fill:#343a40}
";

fn ep_color(ep: &str, preferred: &str, others: &[String]) -> &'static str {
    if ep == preferred {
        PREFERRED_COLOR
    } else if ep == "CPUExecutionProvider" {
        CPU_COLOR
    } else {
        let index = others.iter().position(|o| o == ep).unwrap_or(0);
        OTHER_COLORS[index % OTHER_COLORS.len()]
    }
}

/// EPs other than the preferred one and the CPU, in report order (for stable colours).
fn other_eps(report: &PlacementReport) -> Vec<String> {
    report
        .per_ep
        .iter()
        .map(|e| e.ep.clone())
        .filter(|ep| *ep != report.preferred_ep && ep != "CPUExecutionProvider")
        .collect()
}

/// About `count` round tick values (1, 2 or 5 × 10ᵏ apart) covering `lo..=hi`.
fn nice_ticks(lo: f64, hi: f64, count: usize) -> Vec<f64> {
    let span = (hi - lo).max(f64::EPSILON);
    let raw = span / count.max(1) as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * magnitude).find(|s| *s >= raw).unwrap_or(10.0 * magnitude);
    let mut ticks = Vec::new();
    let mut t = (lo / step).ceil() * step;
    while t <= hi + step * 1e-9 {
        ticks.push(t);
        t += step;
    }
    ticks
}

/// A plot area with linear scales, drawing into an SVG string.
pub struct Plot {
    /// Width in pixels.
    pub width: f64,
    /// Height in pixels.
    pub height: f64,
    /// Left margin (y tick labels).
    pub left: f64,
    /// Right margin.
    pub right: f64,
    /// Top margin.
    pub top: f64,
    /// Bottom margin (x tick labels).
    pub bottom: f64,
    /// Data range on x.
    pub x: (f64, f64),
    /// Data range on y.
    pub y: (f64, f64),
    /// The SVG elements drawn so far.
    pub svg: String,
}

impl Plot {
    /// An empty plot of `width`×`height` pixels showing the data ranges `x` and `y`.
    pub fn new(width: f64, height: f64, x: (f64, f64), y: (f64, f64)) -> Plot {
        let x = if x.1 > x.0 { x } else { (x.0 - 1.0, x.0 + 1.0) };
        let y = if y.1 > y.0 { y } else { (y.0 - 1.0, y.0 + 1.0) };
        Plot { width, height, left: 56.0, right: 14.0, top: 22.0, bottom: 40.0, x, y, svg: String::new() }
    }

    /// Pixel x of a data x.
    pub fn px(&self, x: f64) -> f64 {
        self.left + (x - self.x.0) / (self.x.1 - self.x.0) * (self.width - self.left - self.right)
    }

    /// Pixel y of a data y.
    pub fn py(&self, y: f64) -> f64 {
        self.height - self.bottom - (y - self.y.0) / (self.y.1 - self.y.0) * (self.height - self.top - self.bottom)
    }

    /// Both axes with round ticks, grid lines and labels.
    pub fn axes(&mut self, x_label: &str, y_label: &str, x_fmt: impl Fn(f64) -> String, y_fmt: impl Fn(f64) -> String) {
        let (x0, x1, y0, y1) = (self.left, self.width - self.right, self.top, self.height - self.bottom);
        for t in nice_ticks(self.y.0, self.y.1, 5) {
            let y = self.py(t);
            let _ = write!(
                self.svg,
                r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#e9ecef"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                x0 - 6.0,
                y + 4.0,
                y_fmt(t)
            );
        }
        for t in nice_ticks(self.x.0, self.x.1, 8) {
            let x = self.px(t);
            let _ = write!(
                self.svg,
                r##"<line x1="{x:.1}" y1="{y1}" x2="{x:.1}" y2="{:.1}" stroke="#adb5bd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                y1 + 4.0,
                y1 + 16.0,
                x_fmt(t)
            );
        }
        let _ = write!(
            self.svg,
            r##"<line x1="{x0}" y1="{y1}" x2="{x1}" y2="{y1}" stroke="#495057"/><line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="#495057"/><text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text transform="translate(14 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"##,
            (x0 + x1) / 2.0,
            self.height - 6.0,
            xml_escape(x_label),
            (y0 + y1) / 2.0,
            xml_escape(y_label)
        );
    }

    /// A vertical marker line with a label at the top.
    pub fn vline(&mut self, x: f64, color: &str, label: &str) {
        let px = self.px(x);
        let _ = write!(
            self.svg,
            r##"<line x1="{px:.1}" y1="{}" x2="{px:.1}" y2="{}" stroke="{color}" stroke-dasharray="4 3"/><text x="{:.1}" y="{}" fill="{color}">{}</text>"##,
            self.top,
            self.height - self.bottom,
            px + 3.0,
            self.top - 6.0,
            xml_escape(label)
        );
    }

    /// A horizontal marker line from `x0` to `x1` with a label at its left end.
    pub fn hline(&mut self, x0: f64, x1: f64, y: f64, color: &str, label: &str) {
        let (a, b, py) = (self.px(x0), self.px(x1), self.py(y));
        let _ = write!(
            self.svg,
            r##"<line x1="{a:.1}" y1="{py:.1}" x2="{b:.1}" y2="{py:.1}" stroke="{color}" stroke-width="2"/><text x="{:.1}" y="{:.1}" fill="{color}">{}</text>"##,
            a + 2.0,
            py - 5.0,
            xml_escape(label)
        );
    }

    /// The complete `<svg>` element; `title` is its accessible label.
    pub fn finish(self, title: &str) -> String {
        format!(
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="{t}">{}</svg>"##,
            self.svg,
            w = self.width,
            h = self.height,
            t = xml_escape(title)
        )
    }
}

/// Colour of a latency: by cluster when bimodal, else the preferred colour.
fn cluster_color(stats: &LatencyStats, ns: f64) -> &'static str {
    match stats.bimodal_split() {
        Some(split) if ns > split.fast.max_ns => CPU_COLOR,
        _ => PREFERRED_COLOR,
    }
}

fn histogram(stats: &LatencyStats, latencies_ns: &[u64]) -> String {
    let bins = ((stats.n as f64).sqrt() * 2.0).clamp(10.0, 80.0) as usize;
    let (lo, hi) = (stats.min_ns / 1e6, stats.max_ns / 1e6);
    let width = ((hi - lo) / bins as f64).max(1e-9);
    let mut counts = vec![0usize; bins];
    let mut colors = vec![PREFERRED_COLOR; bins];
    for &v in latencies_ns {
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
        let _ = write!(
            plot.svg,
            r##"<rect x="{:.1}" y="{y0:.1}" width="{:.1}" height="{:.1}" fill="{color}" fill-opacity="0.85"><title>{count} runs</title></rect>"##,
            x0 + 0.5,
            (x1 - x0 - 1.0).max(1.0),
            y1 - y0
        );
    }
    plot.vline(stats.median_ns / 1e6, "#212529", &format!("median {}", ms_number(stats.median_ns / 1e6)));
    if let Some(split) = stats.bimodal_split() {
        // Legend in the top-right corner: one swatch per cluster.
        let right = plot.width - plot.right;
        for (row, (cluster, color)) in [(&split.fast, PREFERRED_COLOR), (&split.slow, CPU_COLOR)].into_iter().enumerate() {
            let y = plot.top + 6.0 + 16.0 * row as f64;
            let _ = write!(
                plot.svg,
                r##"<rect x="{:.1}" y="{:.1}" width="10" height="10" fill="{color}"/><text x="{:.1}" y="{:.1}" text-anchor="end" font-weight="600">{:.0}% of runs at {} ms</text>"##,
                right - 10.0,
                y - 9.0,
                right - 14.0,
                y,
                cluster.share_pct,
                ms_number(cluster.median_ns / 1e6)
            );
        }
    }
    plot.finish("latency histogram")
}

fn run_chart(stats: &LatencyStats, latencies_ns: &[u64]) -> String {
    let n = latencies_ns.len();
    let pad = ((stats.max_ns - stats.min_ns) / 1e6 * 0.08).max(stats.median_ns / 1e6 * 0.01);
    let (lo, hi) = (stats.min_ns / 1e6 - pad, stats.max_ns / 1e6 + pad);
    let mut plot = Plot::new(HALF, 300.0, (0.0, (n.max(2) - 1) as f64), (lo.max(0.0), hi));
    plot.axes("run index", "latency (ms)", |x| format!("{x:.0}"), ms_number);
    if let Some(d) = &stats.drift {
        let third = d.runs_per_third as f64;
        for (start, end) in [(0.0, third - 1.0), ((n as f64) - third, (n - 1) as f64)] {
            let (x0, x1) = (plot.px(start), plot.px(end));
            let _ = write!(
                plot.svg,
                r##"<rect x="{x0:.1}" y="{}" width="{:.1}" height="{:.1}" fill="#f1f3f5"/>"##,
                plot.top,
                (x1 - x0).max(1.0),
                plot.height - plot.top - plot.bottom
            );
        }
        plot.hline(0.0, third - 1.0, d.first_third_median_ns / 1e6, "#495057", &format!("first third {}", ms_number(d.first_third_median_ns / 1e6)));
        let label = format!("last third {} ({:+.1}%)", ms_number(d.last_third_median_ns / 1e6), d.change_pct);
        let start = (n as f64 - third).min((n as f64) * 0.6);
        plot.hline(start, (n - 1) as f64, d.last_third_median_ns / 1e6, "#495057", &label);
    }
    let radius = if n > 2000 { 1.2 } else { 2.2 };
    for (i, &v) in latencies_ns.iter().enumerate() {
        let _ = write!(
            plot.svg,
            r##"<circle cx="{:.1}" cy="{:.1}" r="{radius}" fill="{}" fill-opacity="0.75"/>"##,
            plot.px(i as f64),
            plot.py(v as f64 / 1e6),
            cluster_color(stats, v as f64)
        );
    }
    plot.finish("latency over run index")
}

/// Three 100% bars (nodes, FLOPs, kernel time) split by EP.
fn ep_bars(report: &PlacementReport) -> String {
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
    let mut svg = String::new();
    for (r, (name, shares)) in rows.iter().enumerate() {
        let y = 6.0 + r as f64 * row_h;
        let _ = write!(svg, r##"<text x="0" y="{:.1}" font-weight="600">{name}</text>"##, y + 17.0);
        let mut x = label_w;
        for (ep, pct) in shares {
            let w = bar_w * pct / 100.0;
            let color = ep_color(ep, &report.preferred_ep, &others);
            let _ = write!(
                svg,
                r##"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="24" fill="{color}"><title>{} {pct:.1}%</title></rect>"##,
                xml_escape(ep)
            );
            if w > 44.0 {
                let _ = write!(svg, r##"<text x="{:.1}" y="{:.1}" fill="#fff" style="fill:#fff" font-weight="600">{pct:.1}%</text>"##, x + 6.0, y + 16.0);
            }
            x += w;
        }
    }
    let mut x = label_w;
    for e in &report.per_ep {
        let color = ep_color(&e.ep, &report.preferred_ep, &others);
        let _ = write!(
            svg,
            r##"<rect x="{x:.1}" y="{:.1}" width="12" height="12" fill="{color}"/><text x="{:.1}" y="{:.1}">{}</text>"##,
            height - 22.0,
            x + 16.0,
            height - 12.0,
            xml_escape(&e.ep)
        );
        x += 28.0 + e.ep.len() as f64 * 6.6;
    }
    format!(r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDE}" height="{height}" viewBox="0 0 {WIDE} {height}" role="img" aria-label="placement by EP">{svg}</svg>"##)
}

/// Nodes in graph order coloured by EP, partitions as brackets above, EP switches as dashed lines,
/// blamed fallback nodes marked below.
fn graph_strip(report: &PlacementReport, rules: &crate::rules::Rules) -> String {
    let others = other_eps(report);
    let n = report.nodes.len().max(1) as f64;
    let (left, strip_w, strip_y, strip_h) = (10.0, WIDE - 20.0, 70.0, 34.0);
    let x_of = |i: usize| left + strip_w * i as f64 / n;
    let index_of = |name: &str| report.nodes.iter().position(|node| node.name == name);
    let mut svg = String::new();
    for (i, node) in report.nodes.iter().enumerate() {
        let color = ep_color(&node.ep, &report.preferred_ep, &others);
        let _ = write!(
            svg,
            r##"<rect x="{:.2}" y="{strip_y}" width="{:.2}" height="{strip_h}" fill="{color}"><title>{} ({}) on {}</title></rect>"##,
            x_of(i),
            (strip_w / n).max(0.6),
            xml_escape(&node.name),
            xml_escape(&node.op_type),
            xml_escape(&node.ep)
        );
    }
    for (p_index, p) in report.partitions.iter().enumerate() {
        let positions: Vec<usize> = p.nodes.iter().filter_map(|name| index_of(name)).collect();
        let (Some(&first), Some(&last)) = (positions.iter().min(), positions.iter().max()) else { continue };
        let (x0, x1) = (x_of(first), x_of(last + 1));
        let level = 52.0 - (p_index % 2) as f64 * 16.0;
        let _ = write!(
            svg,
            r##"<path d="M{x0:.1} {:.1} V{level:.1} H{x1:.1} V{:.1}" fill="none" stroke="#343a40" stroke-width="1.5"/><text x="{:.1}" y="{:.1}">partition #{} · {} nodes</text>"##,
            level + 10.0,
            level + 10.0,
            x0 + 4.0,
            level - 4.0,
            p_index + 1,
            p.nodes.len()
        );
    }
    let boundary_index = |kernel: &str| {
        index_of(kernel).or_else(|| {
            report.partitions.iter().find(|p| p.fused_name == kernel).and_then(|p| p.nodes.iter().filter_map(|name| index_of(name)).max())
        })
    };
    for t in &report.boundaries.transitions {
        if let Some(i) = boundary_index(&t.after) {
            let x = x_of(i + 1);
            let _ = write!(
                svg,
                r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#212529" stroke-width="1.5" stroke-dasharray="3 2"><title>{} → {}</title></line>"##,
                strip_y - 4.0,
                strip_y + strip_h + 4.0,
                xml_escape(&t.from_ep),
                xml_escape(&t.to_ep)
            );
        }
    }
    let blamed: Vec<_> = report.fallback.iter().filter(|f| !f.expected && !rules.allows(&f.name, &f.op_type)).collect();
    let label_y = strip_y + strip_h + 22.0;
    let mut next_free = f64::NEG_INFINITY;
    let mut row = 0usize;
    for f in &blamed {
        let Some(i) = index_of(&f.name) else { continue };
        let x = x_of(i) + strip_w / n / 2.0;
        let _ = write!(
            svg,
            r##"<path d="M{x:.1} {:.1} l-5 8 h10 z" fill="#e03131"/>"##,
            strip_y + strip_h + 3.0
        );
        if x > next_free {
            row = 0;
        } else {
            row += 1;
        }
        if row < 3 {
            let label = format!("{} {}", f.op_type, f.name);
            let _ = write!(svg, r##"<text x="{x:.1}" y="{:.1}" fill="#c92a2a">{}</text>"##, label_y + 14.0 * row as f64, xml_escape(&label));
            next_free = next_free.max(x + label.len() as f64 * 6.2);
        }
    }
    let switches = report.boundaries.per_run.iter().copied().max().unwrap_or(report.boundaries.transitions.len());
    let _ = write!(
        svg,
        r##"<text x="{left}" y="12" font-weight="600">{} nodes in graph order · {} partition(s) · {switches} EP switch(es) per run (dashed) · {} fallback node(s) marked ▲</text>"##,
        report.nodes.len(),
        report.partitions.len(),
        blamed.len()
    );
    let height = label_y + 44.0;
    format!(r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDE}" height="{height}" viewBox="0 0 {WIDE} {height}" role="img" aria-label="partitions and boundaries along the graph">{svg}</svg>"##)
}

/// An HTML table; cells are escaped, columns in `numeric` right-aligned.
pub fn html_table<R: AsRef<[String]>>(header: &[&str], rows: &[R], numeric: &[usize]) -> String {
    let mut out = String::from("<table><tr>");
    for h in header {
        let _ = write!(out, "<th>{}</th>", xml_escape(h));
    }
    out.push_str("</tr>");
    for row in rows {
        out.push_str("<tr>");
        for (i, cell) in row.as_ref().iter().enumerate() {
            let class = if numeric.contains(&i) { " class=\"num\"" } else { "" };
            let _ = write!(out, "<td{class}>{}</td>", xml_escape(cell));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    out
}

fn status_pill(status: CheckStatus) -> String {
    let class = match status {
        CheckStatus::Pass => "pass",
        CheckStatus::Fail => "fail",
        CheckStatus::Unjudged => "unjudged",
    };
    format!("<span class=\"pill {class}\">{}</span>", status.label())
}

fn rules_section(v: &Verdict) -> String {
    let mut out = String::from("<section><h2>Rules</h2><table><tr><th>status</th><th>rule</th><th>measured</th><th>limit</th><th>detail</th></tr>");
    for c in &v.checks {
        let _ = write!(
            out,
            "<tr><td>{}</td><td><code>{}</code></td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
            status_pill(c.status),
            c.rule,
            xml_escape(&measured_text(c)),
            xml_escape(&limit_text(c)),
            xml_escape(&c.message)
        );
    }
    out.push_str("</table>");
    let notes: String = v
        .errors
        .iter()
        .map(|e| format!("<li class=\"err\">{}</li>", xml_escape(e)))
        .chain(v.warnings.iter().map(|w| format!("<li class=\"warn\">{}</li>", xml_escape(w))))
        .collect();
    if !notes.is_empty() {
        let _ = write!(out, "<ul>{notes}</ul>");
    }
    out.push_str("</section>");
    out
}

fn latency_section(v: &Verdict, s: &LatencyStats) -> String {
    let (names, values): (Vec<&str>, Vec<String>) = latency_rows(v, s).into_iter().unzip();
    let shape: String = shape_lines(s).iter().map(|l| format!("<li>{}</li>", xml_escape(l))).collect();
    format!(
        "<section><h2>Latency</h2>{}<ul>{shape}</ul>\
         <div class=\"charts\"><figure>{}<figcaption>Histogram of the timed runs{}</figcaption></figure>\
         <figure>{}<figcaption>Latency by run index; shaded: first and last third with their medians (drift)</figcaption></figure></div></section>",
        html_table(&names, &[values], &(0..names.len()).collect::<Vec<_>>()),
        histogram(s, &v.latencies_ns),
        if s.bimodal_split().is_some() { "; blue and orange: the two clusters" } else { "" },
        run_chart(s, &v.latencies_ns)
    )
}

fn placement_section(v: &Verdict, report: &PlacementReport) -> String {
    let mut out = format!(
        "<section><h2>Placement — preferred EP <code>{}</code></h2>",
        xml_escape(&report.preferred_ep)
    );
    if let Some(predicted) = &report.predicted {
        let _ = write!(out, "<p class=\"warn\">{}</p>", xml_escape(predicted));
    }
    out.push_str(&html_table(&EP_HEADER, &ep_rows(report), &[1, 2, 3, 4, 5, 6]));
    let _ = write!(
        out,
        "<figure>{}<figcaption>Share by EP: nodes, FLOPs and measured kernel time</figcaption></figure>",
        ep_bars(report)
    );
    if !report.nodes.is_empty() {
        let _ = write!(
            out,
            "<figure>{}<figcaption>The graph, node by node in order, coloured by EP; brackets: fused partitions; dashed: EP switches</figcaption></figure>",
            graph_strip(report, &v.rules)
        );
    }
    let _ = write!(out, "<h2>Fallback ({} node(s))</h2>", report.fallback.len());
    if report.fallback.is_empty() {
        out.push_str("<p class=\"muted\">Every node ran on the preferred EP.</p>");
    } else {
        out.push_str(&html_table(&FALLBACK_HEADER, &fallback_rows(report, &v.rules), &[3, 4]));
    }
    for w in &report.warnings {
        let _ = write!(out, "<p class=\"warn\">{}</p>", xml_escape(w));
    }
    out.push_str("</section>");
    out
}

fn baseline_section(v: &Verdict) -> String {
    let Some(b) = &v.baseline else { return String::new() };
    let mut items = String::new();
    if let Some(r) = &b.median_ratio {
        let _ = write!(items, "<li>median ratio {:.3}× (95% CI {:.3}–{:.3}×)</li>", r.ratio, r.ci.lower, r.ci.upper);
    }
    for d in &b.fingerprint_differences {
        let _ = write!(items, "<li class=\"warn\">fingerprint: {}</li>", xml_escape(d));
    }
    for node in &b.moved_off_preferred {
        let _ = write!(items, "<li class=\"err\">{}</li>", xml_escape(&node.describe()));
    }
    format!("<section><h2>Baseline <code>{}</code></h2><ul>{items}</ul></section>", xml_escape(&b.source))
}

impl Exporter for HtmlExporter {
    fn render(&self, v: &Verdict) -> String {
        let badge = match v.outcome {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Error => "error",
        };
        let latency = v.latency.as_ref().map(|s| latency_section(v, s)).unwrap_or_default();
        let placement = v.placement.as_ref().map(|p| placement_section(v, p)).unwrap_or_default();
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>npugate gate: {label}</title><style>{STYLE}</style></head>\
             <body><main><section><h1><span class=\"badge {badge}\">{label}</span>npugate gate</h1><div>{subject}</div>\
             <div class=\"muted\">model sha256 {sha}</div></section>{rules}{latency}{placement}{baseline}\
             <p class=\"muted\">{schema} · generated by npugate gate</p></main></body></html>\n",
            label = v.outcome.label(),
            subject = xml_escape(&v.subject.summary()),
            sha = xml_escape(&v.subject.fingerprint.model_sha256),
            rules = rules_section(v),
            baseline = baseline_section(v),
            schema = v.schema,
        )
    }
}
