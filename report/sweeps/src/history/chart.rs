//! Pictures of history as inline SVG (drawn with the gate's page API, so every npugate report looks
//! alike): a trend chart of median latency per night, one line per device series, with failed
//! nights ringed in red; emulated series in a table of their own (gate by night, compile,
//! placement, outputs, host time labelled), never charted; and the `npugate history --html` page.

use maud::{html, Markup};
use npugate_gate::page::{self, series_color, Plot, Px, WIDE};
use npugate_gate::units::ms_number;

use super::trend::{HistoryReport, Point, Series};
use crate::sweep::cell::{emulated_header, EMULATED_COLUMNS, EMULATED_NOTE};

/// Median latency (ms) per night for each series; x is the night's position in `nights`.
pub fn trend_chart(nights: &[String], series: &[&Series], title: &str) -> Markup {
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
            near.then(|| nights.get(index as usize))
                .flatten()
                .filter(|_| (index as usize).is_multiple_of(label_every))
                .cloned()
                .unwrap_or_default()
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
        let points: Vec<(f64, f64, f64, &Point)> = s
            .points
            .iter()
            .filter_map(|p| p.median_ns.map(|m| (plot.px(position(&p.night)), plot.py(m / 1e6), m, p)))
            .collect();
        let line: Vec<String> = points.iter().map(|(x, y, _, _)| format!("{},{}", Px(*x), Px(*y))).collect();
        let legend_y = height - plot.bottom + 40.0 + 16.0 * index as f64;
        let change = s.change.as_ref().map(|c| format!(" — {}", c.sentence())).unwrap_or_default();
        plot.draw(html! {
            polyline points=(line.join(" ")) fill="none" stroke=(color) stroke-width="2" stroke-dasharray=(dash) {}
            @for (x, y, median, p) in &points {
                @let failed = p.outcome != "pass";
                circle cx=(Px(*x)) cy=(Px(*y)) r="4" fill=(color) stroke=[failed.then_some("#e03131")] stroke-width=[failed.then_some("3")] {
                    title { (s.runtime) " " (p.night) ": median " (ms_number(median / 1e6)) " ms, " (p.outcome) }
                }
            }
            line x1=(plot.left) y1=(Px(legend_y - 4.0)) x2=(plot.left + 24.0) y2=(Px(legend_y - 4.0)) stroke=(color) stroke-width="3" stroke-dasharray=(dash) {}
            text x=(plot.left + 30.0) y=(Px(legend_y)) { (s.device) " · " (s.runtime) (change) }
        });
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
pub fn by_class_and_model<'s>(
    series: impl IntoIterator<Item = &'s Series>,
) -> Vec<((String, String), Vec<&'s Series>)> {
    grouped(series, |s| (s.soc.clone(), s.model.clone()))
}

/// The series grouped by `key`, groups and members in first-seen order.
fn grouped<'s, K: PartialEq>(
    series: impl IntoIterator<Item = &'s Series>,
    key: impl Fn(&Series) -> K,
) -> Vec<(K, Vec<&'s Series>)> {
    let mut groups: Vec<(K, Vec<&Series>)> = Vec::new();
    for s in series {
        let key = key(s);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(s),
            None => groups.push((key, vec![s])),
        }
    }
    groups
}

/// Rows of the series table: device, runtime, nights, latest median, an LLM folder's latest TTFT,
/// CV, outcome, change.
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
                last.and_then(|p| p.generation.and_then(|g| g.ttft_ns))
                    .map(|t| ms_number(t / 1e6))
                    .unwrap_or_else(|| "–".into()),
                last.and_then(|p| p.cv_pct).map(|cv| format!("{cv:.1}")).unwrap_or_else(|| "–".into()),
                last.map(|p| p.outcome.clone()).unwrap_or_default(),
                s.change.as_ref().map(|c| c.sentence()).unwrap_or_else(|| "first night".into()),
            ]
        })
        .collect()
}

/// Header of [`series_rows`].
const SERIES_HEADER: [&str; 8] =
    ["device", "runtime", "nights", "median (ms)", "TTFT (ms)", "CV (%)", "gate", "since the night before"];

/// Rows of the emulated series' table: emulator, runtime, the gate's outcome night by night, the
/// latest night's findings and host time, the change.
fn emulated_rows(nights: &[String], series: &[&Series]) -> Vec<Vec<String>> {
    series
        .iter()
        .map(|s| {
            let mut row = vec![s.device.clone(), s.runtime.clone(), outcomes_by_night(s, nights)];
            match s.points.last() {
                Some(last) => row.extend(last.findings.columns(
                    last.npu_flops_pct,
                    last.fallback_nodes.map(|n| n as usize),
                    last.host_median_ns,
                )),
                None => row.extend(std::iter::repeat_n("–".to_string(), EMULATED_COLUMNS.len())),
            }
            row.push(s.change.as_ref().map(|c| c.sentence()).unwrap_or_else(|| "first night".into()));
            row
        })
        .collect()
}

/// The gate's outcome of each of `nights`, oldest first: `pass · pass · fail` (`–` where the
/// series has no point).
pub fn outcomes_by_night(series: &Series, nights: &[String]) -> String {
    let outcome = |night: &String| series.points.iter().find(|p| &p.night == night).map(|p| p.outcome.as_str());
    nights.iter().map(|night| outcome(night).unwrap_or("–")).collect::<Vec<_>>().join(" · ")
}

/// Per device class and model: a heading, the trend chart and the table of its device series;
/// then per model the table of its emulated series on every SoC, never charted (the caller wraps
/// each group: a `section` on a page of its own, a `div` inside another section).
pub fn trend_groups(report: &HistoryReport) -> Vec<Markup> {
    let devices = by_class_and_model(report.series.iter().filter(|s| !s.emulated));
    let devices = devices.into_iter().map(|((soc, model), members)| {
        let title = format!("{model} on {soc} over the nights");
        html! {
            h2 { (model) " on SoC " (soc) }
            figure {
                (trend_chart(&report.nights, &members, &title))
                figcaption { "Median latency per night, colour: runtime, dash pattern: device; red ring: the gate did not pass that night" }
            }
            (page::table(&SERIES_HEADER, &series_rows(&members), &[2, 3, 4, 5]))
        }
    });
    let header = emulated_header(["emulator", "runtime", "gate by night"], "since the night before");
    let emulated = grouped(report.series.iter().filter(|s| s.emulated), |s| s.model.clone());
    let emulated = emulated.into_iter().map(|(model, members)| {
        html! {
            h2 { (model) " on the host HTP emulator" }
            (page::table(&header, &emulated_rows(&report.nights, &members), &[4, 5, 8]))
        }
    });
    devices.chain(emulated).collect()
}

/// The note on emulated cells, when `report` has any.
pub fn emulated_note(report: &HistoryReport) -> Markup {
    html! { @if report.series.iter().any(|s| s.emulated) { p.muted { (EMULATED_NOTE) } } }
}

/// `npugate history --html`: one section per device class and model with its trend chart and table.
pub fn history_page(report: &HistoryReport) -> String {
    let body = html! {
        section {
            h1 { "npugate history" }
            div { (report.nights.len()) " night(s): " (report.nights.join(", ")) }
            div.muted { "device latency changes judged on the 95% interval of the median ratio, tolerance " (report.tolerance_pct) "%" }
            (emulated_note(report))
        }
        @for group in trend_groups(report) { section { (group) } }
        @if report.series.is_empty() {
            section { p.muted { "No sweep in the history matches." } }
        }
    };
    page::page("npugate history", body, &format!("{} · generated by npugate history", report.schema))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::fixtures::{around, device_and_emulator, emulated};
    use crate::history::{trend, HistoryFilter};

    #[test]
    fn the_history_page_charts_device_latency_only() {
        let cells = device_and_emulator([56, 21]);
        let report = trend::build(&HistoryFilter { nights: 30, ..Default::default() }, cells, 10.0);
        let page = history_page(&report);
        assert_eq!(page.matches("<svg").count(), 1, "one trend chart: the device's");
        assert_eq!(page.matches("<polyline").count(), 1);
        let chart = &page[page.find("<svg").unwrap()..page.find("</svg>").unwrap()];
        assert!(!chart.contains("htp-SM8650"), "the emulator is not in the chart");
        let host = report.series.iter().find(|s| s.emulated).unwrap().points[1].host_median_ns.unwrap();
        let host = format!(">{}<", ms_number(host / 1e6));
        assert!(page.contains("m on the host HTP emulator") && page.contains(&host), "host time in its table");
        let emulated_only = trend::build(
            &HistoryFilter { nights: 30, ..Default::default() },
            vec![emulated("2026-11-26", around(56_000_000)), emulated("2026-11-27", around(21_000_000))],
            10.0,
        );
        assert!(!history_page(&emulated_only).contains("<svg"), "no latency chart for emulated cells");
    }
}
