//! Pictures of history as inline SVG (drawn with the gate's `Plot`, so every npugate report looks
//! alike): a trend chart of median latency per night, one line per series, with
//! failed nights ringed in red; and the `npugate history --html` page.

use std::fmt::Write as _;

use gate::export::html::{html_table, Plot, CPU_COLOR, OTHER_COLORS, PREFERRED_COLOR, STYLE, WIDE};
use gate::export::xml_escape;
use gate::units::ms_number;

use super::trend::{HistoryReport, Series};

/// Line colours, in series order.
pub fn series_color(index: usize) -> &'static str {
    let palette = [PREFERRED_COLOR, CPU_COLOR, OTHER_COLORS[0], OTHER_COLORS[1], OTHER_COLORS[2], OTHER_COLORS[3]];
    palette[index % palette.len()]
}

/// Median latency (ms) per night for each series; x is the night's position in `nights`.
pub fn trend_chart(nights: &[String], series: &[&Series], title: &str) -> String {
    let medians = series.iter().flat_map(|s| s.points.iter().filter_map(|p| p.median_ns)).map(|ns| ns / 1e6);
    let (lo, hi) = medians.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
    let pad = ((hi - lo) * 0.25).max(hi * 0.05);
    let height = 260.0 + 16.0 * series.len() as f64;
    let mut plot = Plot::new(WIDE, height, (-0.5, nights.len() as f64 - 0.5), ((lo - pad).max(0.0), hi + pad));
    plot.bottom = 48.0 + 16.0 * series.len() as f64;
    let label_every = nights.len().div_ceil(12).max(1);
    plot.axes(
        "",
        "median latency (ms)",
        |x| {
            let index = x.round();
            let near = (x - index).abs() < 1e-6 && index >= 0.0;
            near.then(|| nights.get(index as usize)).flatten().filter(|_| (index as usize).is_multiple_of(label_every)).cloned().unwrap_or_default()
        },
        ms_number,
    );
    let mut runtimes = distinct(series.iter().map(|s| s.runtime.as_str()));
    runtimes.sort(); // the matrix report colours runtimes in the same (sorted) order
    let devices = distinct(series.iter().map(|s| s.device.as_str()));
    for (index, s) in series.iter().enumerate() {
        // Colour by runtime, dash pattern by device: the same runtime reads alike on every device.
        let color = series_color(runtimes.iter().position(|r| *r == s.runtime).unwrap_or(0));
        let dash = ["", "8 4", "2 3", "12 3 2 3"][devices.iter().position(|d| *d == s.device).unwrap_or(0) % 4];
        let position = |night: &str| nights.iter().position(|n| n == night).unwrap_or(0) as f64;
        let line: Vec<String> = s
            .points
            .iter()
            .filter_map(|p| p.median_ns.map(|m| format!("{:.1},{:.1}", plot.px(position(&p.night)), plot.py(m / 1e6))))
            .collect();
        let _ = write!(plot.svg, r##"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/>"##, line.join(" "));
        for p in &s.points {
            let Some(median) = p.median_ns else { continue };
            let (x, y) = (plot.px(position(&p.night)), plot.py(median / 1e6));
            let ring = if p.outcome == "pass" { "" } else { r##" stroke="#e03131" stroke-width="3""## };
            let _ = write!(
                plot.svg,
                r##"<circle cx="{x:.1}" cy="{y:.1}" r="4" fill="{color}"{ring}><title>{} {}: median {} ms, {}</title></circle>"##,
                xml_escape(&s.runtime),
                p.night,
                ms_number(median / 1e6),
                p.outcome
            );
        }
        let legend_y = height - plot.bottom + 40.0 + 16.0 * index as f64;
        let change = s.change.as_ref().map(|c| format!(" — {}", c.sentence())).unwrap_or_default();
        let _ = write!(
            plot.svg,
            r##"<line x1="{}" y1="{:.1}" x2="{}" y2="{:.1}" stroke="{color}" stroke-width="3" stroke-dasharray="{dash}"/><text x="{}" y="{:.1}">{}</text>"##,
            plot.left,
            legend_y - 4.0,
            plot.left + 24.0,
            legend_y - 4.0,
            plot.left + 30.0,
            legend_y,
            xml_escape(&format!("{} · {}{change}", s.device, s.runtime))
        );
    }
    plot.finish(title)
}

/// The distinct values in first-seen order.
fn distinct<'s>(values: impl Iterator<Item = &'s str>) -> Vec<&'s str> {
    let mut out: Vec<&str> = Vec::new();
    for value in values {
        if !out.contains(&value) {
            out.push(value);
        }
    }
    out
}

/// The series grouped as the pictures show them: by device class (SoC), then model.
pub fn by_class_and_model(series: &[Series]) -> Vec<((String, String), Vec<&Series>)> {
    let mut groups: Vec<((String, String), Vec<&Series>)> = Vec::new();
    for s in series {
        let key = (s.soc.clone(), s.model.clone());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(s),
            None => groups.push((key, vec![s])),
        }
    }
    groups
}

/// Rows of the series table: device, runtime, nights, latest median, CV, outcome, change.
fn series_rows(series: &[&Series]) -> Vec<Vec<String>> {
    series
        .iter()
        .map(|s| {
            let last = s.points.last();
            vec![
                s.device.clone(),
                s.runtime.clone(),
                s.points.len().to_string(),
                last.and_then(|p| p.median_ns).map(|m| ms_number(m / 1e6)).unwrap_or_else(|| "–".into()),
                last.and_then(|p| p.cv_pct).map(|cv| format!("{cv:.1}")).unwrap_or_else(|| "–".into()),
                last.map(|p| p.outcome.clone()).unwrap_or_default(),
                s.change.as_ref().map(|c| c.sentence()).unwrap_or_else(|| "first night".into()),
            ]
        })
        .collect()
}

/// Header of [`series_rows`].
const SERIES_HEADER: [&str; 7] = ["device", "runtime", "nights", "median (ms)", "CV (%)", "gate", "since the night before"];

/// Per device class and model: a heading, the trend chart and the table of its series; each group
/// wrapped in `wrap` (`section` for a page of its own, `div` inside another section).
pub fn trend_groups(report: &HistoryReport, wrap: &str) -> String {
    let mut out = String::new();
    for ((soc, model), members) in by_class_and_model(&report.series) {
        let _ = write!(
            out,
            "<{wrap}><h2>{} on SoC {}</h2><figure>{}<figcaption>Median latency per night, colour: runtime, dash pattern: device; red ring: the gate did not pass that night</figcaption></figure>{}</{wrap}>",
            xml_escape(&model),
            xml_escape(&soc),
            trend_chart(&report.nights, &members, &format!("{model} on {soc} over the nights")),
            html_table(&SERIES_HEADER, &series_rows(&members), &[2, 3, 4])
        );
    }
    out
}

/// `npugate history --html`: one section per device class and model with its trend chart and table.
pub fn history_page(report: &HistoryReport) -> String {
    let mut body = trend_groups(report, "section");
    if report.series.is_empty() {
        body.push_str("<section><p class=\"muted\">No sweep in the history matches.</p></section>");
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>npugate history</title><style>{STYLE}</style></head>\
         <body><main><section><h1>npugate history</h1><div>{} night(s): {}</div><div class=\"muted\">changes judged on the 95% interval of the median ratio, tolerance {}%</div></section>{body}\
         <p class=\"muted\">{} · generated by npugate history</p></main></body></html>\n",
        report.nights.len(),
        xml_escape(&report.nights.join(", ")),
        report.tolerance_pct,
        report.schema
    )
}
