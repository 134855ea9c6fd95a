//! From stored cells to trends: one series per model × SoC × device × runtime, a point per night,
//! and what changed since the previous night — judged like the gate judges a baseline, on the
//! bootstrap interval of the median ratio (`npugate_gate::stats::median_ratio`), not on a fixed percentage.

use std::collections::BTreeMap;

use npugate_gate::stats::{median_ratio, MedianRatio};
use serde::Serialize;

use super::health::DeviceHealth;
use super::store::{CellAxes, GenerationFigures, HistoryFilter, ResourceFigures, StoredCell};

/// Schema of `npugate history --json`.
pub const HISTORY_SCHEMA: &str = "npugate.history/1";

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
    /// One point per night, oldest first (the latest sweep when a night has several).
    pub points: Vec<Point>,
    /// The last night against the one before it; absent with fewer than two points.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change: Option<Change>,
}

impl Series {
    /// The median of each of `nights` (`None` where the series has no point), for sparklines.
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
    /// Median latency (ns); an LLM folder's median decode step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub median_ns: Option<f64>,
    /// An LLM folder's median TTFT and tokens per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<GenerationFigures>,
    /// Peak memory, its growth and energy per inference, where recorded.
    pub resources: ResourceFigures,
    /// CV (%).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cv_pct: Option<f64>,
    /// Share of FLOPs on the preferred EP (%).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub npu_flops_pct: Option<f64>,
    /// Unexpected fallback nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_nodes: Option<i64>,
    /// What the cell ran with that night (model digest, QNN build, ONNX Runtime, device fingerprint).
    pub axes: CellAxes,
    /// Every timed run (ns); kept for the change statistics, not printed.
    #[serde(skip)]
    pub latencies_ns: Vec<u64>,
}

/// How the latest night compares with the night before.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    /// The earlier night.
    pub from_night: String,
    /// The latest night.
    pub to_night: String,
    /// Median ratio (latest / earlier) with its 95% bootstrap interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub median_ratio: Option<MedianRatio>,
    /// The judgement of the latency change.
    pub latency: LatencyChange,
    /// `pass → fail` when the gate outcome changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
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
}

impl Change {
    /// True when anything changed: latency beyond the tolerance, outcome, fallback count or an axis the cell ran with.
    pub fn is_notable(&self) -> bool {
        matches!(self.latency, LatencyChange::Slower | LatencyChange::Faster)
            || self.outcome.is_some()
            || self.fallback_nodes.is_some()
            || !self.axes.is_empty()
    }

    /// One line: `×1.064 (95% CI 1.021–1.105) slower since 2026-01-02; pass → fail`.
    pub fn sentence(&self) -> String {
        let mut parts = Vec::new();
        let verdict = match self.latency {
            LatencyChange::Slower => "slower",
            LatencyChange::Faster => "faster",
            LatencyChange::Unchanged => "unchanged",
            LatencyChange::Unknown => "not comparable",
        };
        match &self.median_ratio {
            Some(r) => parts.push(format!(
                "×{:.3} (95% CI {:.3}–{:.3}) {verdict} since {}",
                r.ratio, r.ci.lower, r.ci.upper, self.from_night
            )),
            None => parts.push(format!("{verdict} since {}", self.from_night)),
        }
        if let Some(outcome) = &self.outcome {
            parts.push(format!("gate {outcome}"));
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
    let mut grouped: BTreeMap<(String, String, String, String), BTreeMap<String, Point>> = BTreeMap::new();
    for cell in cells {
        let key = (cell.model, cell.soc, cell.device, cell.runtime);
        // Cells come sorted by night and start time, so a later sweep of the same night wins.
        grouped.entry(key).or_default().insert(
            cell.night.clone(),
            Point {
                night: cell.night,
                sweep: cell.sweep,
                outcome: cell.outcome,
                runs: cell.latencies_ns.len(),
                median_ns: cell.median_ns,
                generation: cell.generation,
                resources: cell.resources,
                cv_pct: cell.cv_pct,
                npu_flops_pct: cell.npu_flops_pct,
                fallback_nodes: cell.fallback_nodes,
                axes: cell.axes,
                latencies_ns: cell.latencies_ns,
            },
        );
    }
    let series = grouped
        .into_iter()
        .map(|((model, soc, device, runtime), by_night)| {
            let points: Vec<Point> = by_night.into_values().collect();
            let change = match points.as_slice() {
                [.., before, last] => Some(change(before, last, tolerance_pct)),
                _ => None,
            };
            Series { model, soc, device, runtime, points, change }
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

/// `last` against `before`.
fn change(before: &Point, last: &Point, tolerance_pct: f64) -> Change {
    let ratio = median_ratio(&last.latencies_ns, &before.latencies_ns);
    let tolerance = tolerance_pct / 100.0;
    let latency = match &ratio {
        None => LatencyChange::Unknown,
        Some(r) if r.ci.lower > 1.0 + tolerance => LatencyChange::Slower,
        Some(r) if r.ci.upper < 1.0 - tolerance => LatencyChange::Faster,
        Some(_) => LatencyChange::Unchanged,
    };
    let differs = |a: String, b: String| (a != b).then(|| format!("{a} → {b}"));
    let fallback = |n: Option<i64>| n.map(|n| n.to_string()).unwrap_or_else(|| "?".into());
    Change {
        from_night: before.night.clone(),
        to_night: last.night.clone(),
        median_ratio: ratio,
        latency,
        outcome: differs(before.outcome.clone(), last.outcome.clone()),
        fallback_nodes: differs(fallback(before.fallback_nodes), fallback(last.fallback_nodes)),
        axes: last.axes.changes_from(&before.axes),
    }
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

    fn cell(night: &str, latencies_ns: Vec<u64>, outcome: &str) -> StoredCell {
        StoredCell {
            sweep: "nightly".into(),
            night: night.into(),
            started_at: format!("{night}T01:00:00Z"),
            device: "dev".into(),
            serial: "dev".into(),
            soc: "SM8650".into(),
            runtime: "rt".into(),
            model: "m".into(),
            axes: CellAxes {
                model_digest: "abc".into(),
                qnn_build: Some("v2.49.40.260810104044".into()),
                ort_version: "1.31.1".into(),
                device_fingerprint: None,
            },
            outcome: outcome.into(),
            median_ns: None,
            cv_pct: None,
            npu_flops_pct: None,
            fallback_nodes: Some(0),
            latencies_ns,
            generation: None,
            resources: Default::default(),
        }
    }

    /// Latencies around `center` ns with ±1% deterministic jitter.
    fn around(center: u64) -> Vec<u64> {
        (0..40).map(|i| center + (i * 7 % 21) * center / 1000).collect()
    }

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
    fn sparklines_span_lowest_to_highest() {
        assert_eq!(sparkline(&[Some(1.0), Some(2.0), None, Some(8.0)]), "▁▂·█");
        assert_eq!(sparkline(&[Some(3.0), Some(3.0)]), "▄▄");
    }
}
