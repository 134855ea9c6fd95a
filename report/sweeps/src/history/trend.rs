//! From stored cells to trends: one series per model × SoC × device × runtime, a point per night,
//! and what changed since the previous night — a device's latency judged like the gate judges a
//! baseline, on the bootstrap interval of the median ratio (`npugate_gate::stats::median_ratio`),
//! not on a fixed percentage; besides it the gate's outcome, the compile, where the nodes ran and
//! how the outputs agree with the CPU reference. An emulated cell's latency is host time: never a
//! change, a trend or a chart; it is judged on everything else.

use std::collections::BTreeMap;

use npugate_gate::stats::{median_ratio, MedianRatio};
use serde::Serialize;

use super::health::DeviceHealth;
use super::store::{CellAxes, GenerationFigures, HistoryFilter, ResourceFigures, StoredCell};
use crate::sweep::cell::{Findings, OutputAgreement};

/// Schema of `npugate history --json`.
pub const HISTORY_SCHEMA: &str = "npugate.history/1";
/// How many dB the worst output's SQNR must move between two nights to count as a change (the
/// emulator and the CPU reference are deterministic on the same inputs; this leaves rounding out).
pub const SQNR_CHANGE_DB: f64 = 1.0;

/// `npugate history --json`: the matching series over the nights asked for.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryReport {
    /// Always [`HISTORY_SCHEMA`].
    pub schema: String,
    /// The query.
    pub filter: HistoryFilter,
    /// Tolerance of the change judgement, percent (the gate's `baseline_median_pct`).
    pub tolerance_pct: f64,
    /// Every night with a matching sweep, oldest first.
    pub nights: Vec<String>,
    /// One series per model × SoC × device × runtime.
    pub series: Vec<Series>,
    /// Each device's noise floor over the last nights, flagged when it drifted above its peers'.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceHealth>,
}

/// One model on one device with one runtime, night by night.
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    /// Model name.
    pub model: String,
    /// Device class (SoC).
    pub soc: String,
    /// Device directory name (the serial, made safe).
    pub device: String,
    /// Runtime name.
    pub runtime: String,
    /// True when its cells ran on an emulator (Qualcomm's HTP emulator): their latency is host
    /// time, so the series is judged on the gate's outcome, compile, placement and outputs only.
    pub emulated: bool,
    /// One point per night, oldest first (the latest sweep when a night has several).
    pub points: Vec<Point>,
    /// The last night against the one before it; absent with fewer than two points.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change: Option<Change>,
}

impl Series {
    /// The device median of each of `nights` (`None` where the series has no point, and for every
    /// night of an emulated series), for sparklines.
    pub fn medians_by_night(&self, nights: &[String]) -> Vec<Option<f64>> {
        nights.iter().map(|night| self.points.iter().find(|p| &p.night == night).and_then(|p| p.median_ns)).collect()
    }
}

/// One night of a series.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// The night.
    pub night: String,
    /// The sweep it comes from.
    pub sweep: String,
    /// `pass`, `fail` or `error`.
    pub outcome: String,
    /// Timed runs (an LLM folder's decode steps).
    pub runs: usize,
    /// Median latency (ns) on the device; an LLM folder's median decode step. Absent for an
    /// emulated cell (see `host_median_ns`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub median_ns: Option<f64>,
    /// An emulated cell's median (ns): host time, which says nothing about a device — kept for
    /// reference, never charted or compared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_median_ns: Option<f64>,
    /// An LLM folder's median TTFT and tokens per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<GenerationFigures>,
    /// Peak memory, its growth and energy per inference, where recorded (an emulated cell's memory
    /// is the emulator process's).
    pub resources: ResourceFigures,
    /// CV (%) on the device (absent for an emulated cell).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cv_pct: Option<f64>,
    /// Share of FLOPs on the preferred EP (%).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub npu_flops_pct: Option<f64>,
    /// Unexpected fallback nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_nodes: Option<i64>,
    /// Compile, node share, the fallback nodes by name, the worst output.
    #[serde(flatten)]
    pub findings: Findings,
    /// What the cell ran with that night (model digest, QNN build, ONNX Runtime, device fingerprint).
    pub axes: CellAxes,
    /// Every timed run (ns); kept for the change statistics, not printed.
    #[serde(skip)]
    pub latencies_ns: Vec<u64>,
}

impl Point {
    /// An emulated point in words: `pass, compiled, NPU nodes 100.0%, NPU FLOPs 100.0%, fallback 0,
    /// worst output SQNR y 48.1 dB; host time 21.4 ms (not a device latency)`.
    pub fn emulated_sentence(&self) -> String {
        let findings = &self.findings;
        let pct = |value: Option<f64>| value.map_or_else(|| "–".into(), |v| format!("{v:.1}%"));
        let outputs = findings.outputs.as_ref().map(|o| format!("worst output SQNR {}", o.label()));
        let host = self
            .host_median_ns
            .map(|ns| format!("; host time {} (not a device latency)", npugate_gate::units::fmt_ms(ns)));
        format!(
            "{}, {}, NPU nodes {}, NPU FLOPs {}, fallback {}, {}{}",
            self.outcome,
            findings.compile_label(),
            pct(findings.npu_nodes_pct),
            pct(self.npu_flops_pct),
            findings.fallback_label(self.fallback_nodes.map(|n| n as usize)),
            outputs.unwrap_or_else(|| "outputs not checked".into()),
            host.unwrap_or_default()
        )
    }
}

/// How the latest night compares with the night before.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    /// The earlier night.
    pub from_night: String,
    /// The latest night.
    pub to_night: String,
    /// Median ratio (latest / earlier) with its 95% bootstrap interval (absent for emulated cells).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub median_ratio: Option<MedianRatio>,
    /// The judgement of the latency change.
    pub latency: LatencyChange,
    /// `pass → fail` when the gate outcome changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// `compiled → not compiled` when whether the backend compiled the graph changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compile: Option<String>,
    /// How where the nodes ran changed: `NPU nodes 100.0% → 83.3%`, `NPU FLOPs …`, `lppool (LpPool)
    /// moved to CPUExecutionProvider`, `… back on the preferred EP`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub placement: Vec<String>,
    /// `worst output SQNR out 48.1 dB → out 31.0 dB` when it moved by at least [`SQNR_CHANGE_DB`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outputs: Option<String>,
    /// `0 → 2` when the number of fallback nodes changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_nodes: Option<String>,
    /// What the cell ran with that changed between the two nights (`QNN build … → …`, `model digest …`,
    /// `ONNX Runtime …`, `device fingerprint …`): the axis that explains a flip.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub axes: Vec<String>,
}

/// A latency change, judged on the interval of the median ratio.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LatencyChange {
    /// The whole interval lies above 1 + tolerance.
    Slower,
    /// The whole interval lies below 1 − tolerance.
    Faster,
    /// The interval reaches into the tolerance band.
    Unchanged,
    /// A night has no latencies.
    Unknown,
    /// The cells ran on an emulator: their latency is host time, never compared.
    Emulated,
}

impl Change {
    /// True when anything changed: a device's latency beyond the tolerance, the outcome, the
    /// compile, the placement, the outputs, the fallback count or an axis the cell ran with.
    pub fn is_notable(&self) -> bool {
        matches!(self.latency, LatencyChange::Slower | LatencyChange::Faster)
            || self.outcome.is_some()
            || self.compile.is_some()
            || !self.placement.is_empty()
            || self.outputs.is_some()
            || self.fallback_nodes.is_some()
            || !self.axes.is_empty()
    }

    /// One line: `×1.064 (95% CI 1.021–1.105) slower since 2026-01-02; pass → fail`; for emulated
    /// cells `changed since 2026-01-02 (emulated: host time not compared); placement: …`.
    pub fn sentence(&self) -> String {
        let mut parts = Vec::new();
        let verdict = match self.latency {
            LatencyChange::Slower => "slower",
            LatencyChange::Faster => "faster",
            LatencyChange::Unchanged => "unchanged",
            LatencyChange::Unknown => "not comparable",
            LatencyChange::Emulated if self.is_notable() => "changed",
            LatencyChange::Emulated => "unchanged",
        };
        match &self.median_ratio {
            Some(r) => parts.push(format!(
                "×{:.3} (95% CI {:.3}–{:.3}) {verdict} since {}",
                r.ratio, r.ci.lower, r.ci.upper, self.from_night
            )),
            None if self.latency == LatencyChange::Emulated => {
                parts.push(format!("{verdict} since {} (emulated: host time not compared)", self.from_night))
            }
            None => parts.push(format!("{verdict} since {}", self.from_night)),
        }
        if let Some(outcome) = &self.outcome {
            parts.push(format!("gate {outcome}"));
        }
        if let Some(compile) = &self.compile {
            parts.push(format!("compile: {compile}"));
        }
        if !self.placement.is_empty() {
            parts.push(format!("placement: {}", self.placement.join(", ")));
        }
        if let Some(outputs) = &self.outputs {
            parts.push(outputs.clone());
        }
        if !self.axes.is_empty() {
            parts.push(format!("changed: {}", self.axes.join(", ")));
        }
        if let Some(fallback) = &self.fallback_nodes {
            parts.push(format!("fallback nodes {fallback}"));
        }
        parts.join("; ")
    }
}

/// The tolerance of the change judgement: the gate's default `baseline_median_pct`.
pub fn default_tolerance_pct() -> f64 {
    npugate_gate::Rules::default().baseline_median_pct.unwrap_or(0.0)
}

/// Groups stored cells into series and judges each series' last change.
pub fn build(filter: &HistoryFilter, cells: Vec<StoredCell>, tolerance_pct: f64) -> HistoryReport {
    let mut nights: Vec<String> = cells.iter().map(|c| c.night.clone()).collect();
    nights.dedup();
    type Nights = BTreeMap<String, (bool, Point)>;
    let mut grouped: BTreeMap<(String, String, String, String), Nights> = BTreeMap::new();
    for cell in cells {
        let key = (cell.model, cell.soc, cell.device, cell.runtime);
        let emulated = cell.emulated.is_some();
        let device_only = |value: Option<f64>| value.filter(|_| !emulated);
        // Cells come sorted by night and start time, so a later sweep of the same night wins.
        grouped.entry(key).or_default().insert(
            cell.night.clone(),
            (
                emulated,
                Point {
                    night: cell.night,
                    sweep: cell.sweep,
                    outcome: cell.outcome,
                    runs: cell.latencies_ns.len(),
                    median_ns: device_only(cell.median_ns),
                    host_median_ns: cell.median_ns.filter(|_| emulated),
                    generation: cell.generation,
                    resources: cell.resources,
                    cv_pct: device_only(cell.cv_pct),
                    npu_flops_pct: cell.npu_flops_pct,
                    fallback_nodes: cell.fallback_nodes,
                    findings: cell.findings,
                    axes: cell.axes,
                    latencies_ns: cell.latencies_ns,
                },
            ),
        );
    }
    let series = grouped
        .into_iter()
        .map(|((model, soc, device, runtime), by_night)| {
            let emulated = by_night.values().any(|(emulated, _)| *emulated);
            let points: Vec<Point> = by_night.into_values().map(|(_, point)| point).collect();
            let change = match points.as_slice() {
                [.., before, last] => Some(change(before, last, tolerance_pct, emulated)),
                _ => None,
            };
            Series { model, soc, device, runtime, emulated, points, change }
        })
        .collect();
    HistoryReport {
        schema: HISTORY_SCHEMA.into(),
        filter: filter.clone(),
        tolerance_pct,
        nights,
        series,
        devices: Vec::new(),
    }
}

/// `last` against `before`; the latencies of `emulated` cells are not compared.
fn change(before: &Point, last: &Point, tolerance_pct: f64, emulated: bool) -> Change {
    let ratio = (!emulated).then(|| median_ratio(&last.latencies_ns, &before.latencies_ns)).flatten();
    let tolerance = tolerance_pct / 100.0;
    let latency = match &ratio {
        None if emulated => LatencyChange::Emulated,
        None => LatencyChange::Unknown,
        Some(r) if r.ci.lower > 1.0 + tolerance => LatencyChange::Slower,
        Some(r) if r.ci.upper < 1.0 - tolerance => LatencyChange::Faster,
        Some(_) => LatencyChange::Unchanged,
    };
    let differs = |a: String, b: String| (a != b).then(|| format!("{a} → {b}"));
    let fallback = |n: Option<i64>| n.map(|n| n.to_string()).unwrap_or_else(|| "?".into());
    let compiled = |p: &Point| if p.findings.compile_error.is_none() { "compiled" } else { "not compiled" };
    Change {
        from_night: before.night.clone(),
        to_night: last.night.clone(),
        median_ratio: ratio,
        latency,
        outcome: differs(before.outcome.clone(), last.outcome.clone()),
        compile: differs(compiled(before).into(), compiled(last).into()),
        placement: placement_changes(before, last),
        outputs: outputs_change(before.findings.outputs.as_ref(), last.findings.outputs.as_ref()),
        fallback_nodes: differs(fallback(before.fallback_nodes), fallback(last.fallback_nodes)),
        axes: last.axes.changes_from(&before.axes),
    }
}

/// What changed in where the nodes ran: the shares of nodes and FLOPs on the preferred EP (as
/// shown, one decimal), and — when both nights recorded their fallback nodes (store version 5) —
/// each node that left the preferred EP or came back to it.
fn placement_changes(before: &Point, last: &Point) -> Vec<String> {
    let share = |name: &str, a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if format!("{a:.1}") != format!("{b:.1}") => Some(format!("{name} {a:.1}% → {b:.1}%")),
        _ => None,
    };
    let (was, now) = (&before.findings, &last.findings);
    let mut changes: Vec<String> = [
        share("NPU nodes", was.npu_nodes_pct, now.npu_nodes_pct),
        share("NPU FLOPs", before.npu_flops_pct, last.npu_flops_pct),
    ]
    .into_iter()
    .flatten()
    .collect();
    if was.npu_nodes_pct.is_some() && now.npu_nodes_pct.is_some() {
        let off = |list: &[crate::sweep::cell::Fallback], node: &str| list.iter().any(|n| n.node == node);
        let left = now.fallback.iter().filter(|n| !off(&was.fallback, &n.node));
        changes.extend(left.map(|n| format!("{} moved to {}", n.label(), n.ep)));
        let back = was.fallback.iter().filter(|n| !off(&now.fallback, &n.node));
        changes.extend(back.map(|n| format!("{} back on the preferred EP", n.label())));
    }
    changes
}

/// `worst output SQNR out 48.1 dB → out 31.0 dB` when both nights checked their outputs and the
/// worst SQNR moved by at least [`SQNR_CHANGE_DB`] (or to or from infinite or NaN).
fn outputs_change(before: Option<&OutputAgreement>, last: Option<&OutputAgreement>) -> Option<String> {
    let (was, now) = (before?, last?);
    let (a, b) = (was.sqnr_db, now.sqnr_db);
    let same = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() < SQNR_CHANGE_DB;
    (!same).then(|| format!("worst output SQNR {} → {}", was.label(), now.label()))
}

/// A terminal sparkline of `values` (▁ lowest … █ highest; `·` where a value is missing).
pub fn sparkline(values: &[Option<f64>]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let known: Vec<f64> = values.iter().flatten().copied().collect();
    let lo = known.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = known.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    values
        .iter()
        .map(|value| match value {
            None => '·',
            Some(_) if hi - lo <= f64::EPSILON * hi.abs() => BARS[3],
            Some(v) => BARS[(((v - lo) / (hi - lo)) * 7.0).round() as usize],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::fixtures::{around, cell, emulated};

    #[test]
    fn the_last_night_is_judged_on_the_interval_of_the_median_ratio() {
        let filter = HistoryFilter { nights: 30, ..Default::default() };
        let slower = build(
            &filter,
            vec![cell("2026-01-01", around(1_000_000), "pass"), cell("2026-01-02", around(1_300_000), "fail")],
            10.0,
        );
        let change = slower.series[0].change.as_ref().unwrap();
        assert_eq!(change.latency, LatencyChange::Slower);
        assert_eq!(change.outcome.as_deref(), Some("pass → fail"));
        assert!(change.sentence().starts_with("×1.3"), "{}", change.sentence());

        let small = build(
            &filter,
            vec![cell("2026-01-01", around(1_000_000), "pass"), cell("2026-01-02", around(1_050_000), "pass")],
            10.0,
        );
        let change = small.series[0].change.as_ref().unwrap();
        assert_eq!(change.latency, LatencyChange::Unchanged, "5% is inside the 10% tolerance");
        assert!(!change.is_notable());
        let strict = build(
            &filter,
            vec![cell("2026-01-01", around(1_000_000), "pass"), cell("2026-01-02", around(1_050_000), "pass")],
            0.0,
        );
        assert_eq!(
            strict.series[0].change.as_ref().unwrap().latency,
            LatencyChange::Slower,
            "without tolerance the interval decides"
        );
    }

    #[test]
    fn a_flip_names_the_axis_that_changed_beside_the_verdict() {
        let filter = HistoryFilter { nights: 30, ..Default::default() };
        let mut later = cell("2026-01-02", around(1_000_000), "fail");
        later.axes.qnn_build = Some("v2.51.0.260929181845".into());
        let report = build(&filter, vec![cell("2026-01-01", around(1_000_000), "pass"), later], 10.0);
        let change = report.series[0].change.as_ref().unwrap();
        assert_eq!(change.axes, ["QNN build v2.49.40.260810104044 → v2.51.0.260929181845"]);
        assert!(
            change
                .sentence()
                .ends_with("gate pass → fail; changed: QNN build v2.49.40.260810104044 → v2.51.0.260929181845"),
            "{}",
            change.sentence()
        );
        let mut unknown = cell("2026-01-02", around(1_000_000), "pass");
        unknown.axes.qnn_build = None;
        let report = build(&filter, vec![cell("2026-01-01", around(1_000_000), "pass"), unknown], 10.0);
        assert!(
            report.series[0].change.as_ref().unwrap().axes.is_empty(),
            "an axis unknown on one night is not compared"
        );
    }

    #[test]
    fn a_later_sweep_of_the_same_night_replaces_the_earlier_point() {
        let filter = HistoryFilter { nights: 30, ..Default::default() };
        let mut later = cell("2026-01-01", around(2_000_000), "fail");
        later.started_at = "2026-01-01T05:00:00Z".into();
        let report = build(&filter, vec![cell("2026-01-01", around(1_000_000), "pass"), later], 10.0);
        assert_eq!(report.series[0].points.len(), 1);
        assert_eq!(report.series[0].points[0].outcome, "fail");
        assert!(report.series[0].change.is_none());
    }

    #[test]
    fn an_emulated_cell_is_never_slower_or_faster_whatever_its_host_time() {
        let filter = HistoryFilter { nights: 30, ..Default::default() };
        // The issue's ×0.381: a busy host one night, an idle one the next.
        let report = build(
            &filter,
            vec![emulated("2026-11-26", around(56_000_000)), emulated("2026-11-27", around(21_400_000))],
            10.0,
        );
        let series = &report.series[0];
        let change = series.change.as_ref().unwrap();
        assert!(series.emulated);
        assert_eq!((change.latency, change.median_ratio.as_ref()), (LatencyChange::Emulated, None));
        assert!(!change.is_notable(), "{change:?}");
        assert_eq!(change.sentence(), "unchanged since 2026-11-26 (emulated: host time not compared)");
        let last = series.points.last().unwrap();
        assert_eq!((last.median_ns, last.cv_pct), (None, None), "no device latency for an emulated point");
        assert!(last.host_median_ns.is_some_and(|ns| (ns - 21_400_000.0).abs() < 1e6), "{last:?}");
        assert_eq!(series.medians_by_night(&report.nights), [None, None], "nothing to draw a sparkline of");
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["series"][0]["emulated"], true);
        assert_eq!(json["series"][0]["change"]["latency"], "emulated");
        assert_eq!(json["series"][0]["points"][1]["outputs"]["sqnr_db"], 48.13);
    }

    #[test]
    fn an_emulated_cell_is_judged_on_placement_compile_and_outputs_naming_what_changed() {
        let filter = HistoryFilter { nights: 30, ..Default::default() };
        let mut rejected = emulated("2026-11-27", around(21_000_000));
        rejected.outcome = "fail".into();
        rejected.npu_flops_pct = Some(99.84);
        rejected.fallback_nodes = Some(1);
        rejected.findings.npu_nodes_pct = Some(83.3);
        rejected.findings.fallback = vec![crate::sweep::cell::Fallback {
            node: "lppool".into(),
            op_type: "LpPool".into(),
            ep: "CPUExecutionProvider".into(),
        }];
        rejected.findings.outputs.as_mut().unwrap().sqnr_db = 31.0;
        let report = build(&filter, vec![emulated("2026-11-26", around(56_000_000)), rejected], 10.0);
        let change = report.series[0].change.as_ref().unwrap();
        assert!(change.is_notable());
        assert_eq!(
            change.placement,
            ["NPU nodes 100.0% → 83.3%", "NPU FLOPs 100.0% → 99.8%", "lppool (LpPool) moved to CPUExecutionProvider"]
        );
        assert_eq!(change.outputs.as_deref(), Some("worst output SQNR y 48.1 dB → y 31.0 dB"));
        assert_eq!(
            change.sentence(),
            "changed since 2026-11-26 (emulated: host time not compared); gate pass → fail; placement: NPU nodes 100.0% → 83.3%, \
             NPU FLOPs 100.0% → 99.8%, lppool (LpPool) moved to CPUExecutionProvider; worst output SQNR y 48.1 dB → y 31.0 dB; \
             fallback nodes 0 → 1"
        );

        let mut refused = emulated("2026-11-27", Vec::new());
        refused.outcome = "error".into();
        refused.findings =
            Findings { compile_error: Some("Failed to finalize QNN graph".into()), ..Findings::default() };
        let report = build(&filter, vec![emulated("2026-11-26", around(1_000_000)), refused], 10.0);
        let change = report.series[0].change.as_ref().unwrap();
        assert_eq!(change.compile.as_deref(), Some("compiled → not compiled"));
        assert!(change.placement.is_empty() && change.outputs.is_none(), "nothing to compare without a session");

        let mut rounding = emulated("2026-11-27", around(1_000_000));
        rounding.findings.outputs.as_mut().unwrap().sqnr_db = 48.6;
        let report = build(&filter, vec![emulated("2026-11-26", around(1_000_000)), rounding], 10.0);
        assert!(!report.series[0].change.as_ref().unwrap().is_notable(), "0.5 dB is within SQNR_CHANGE_DB");
    }

    #[test]
    fn sparklines_span_lowest_to_highest() {
        assert_eq!(sparkline(&[Some(1.0), Some(2.0), None, Some(8.0)]), "▁▂·█");
        assert_eq!(sparkline(&[Some(3.0), Some(3.0)]), "▄▄");
    }
}
