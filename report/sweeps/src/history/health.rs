//! Device health: each device's noise floor, learned from its own past sweep cells in the history
//! (devices only: an emulated cell's latency is host time, not a device's),
//! and a flag when it has drifted well above its peers' — so one hot or failing phone can be seen
//! (`npugate devices`, `npugate history`) and left out of a rack (`--skip-noisy`) instead of
//! failing everyone's pull requests.
//!
//! A device's noise floor is the larger of two robust figures over the last [`HEALTH_NIGHTS`]
//! nights: the median CV of its cells (noise within a run), and the median over its series — one
//! model with one runtime — of the spread of the nightly medians (MAD × 1.4826 / median: noise
//! between runs). Its peers are the other devices with the same SoC, or every other device when
//! none shares it. A device is flagged noisy when its floor exceeds [`NOISY_FACTOR`] × the median
//! of its peers' floors and lies at least [`NOISY_MARGIN_PCT`] points above it.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use npugate_gate::stats::median;
use serde::{Deserialize, Serialize};

use super::store::{HistoryFilter, HistoryStore, StoredCell};

/// Nights of history the noise floors are learned from.
pub const HEALTH_NIGHTS: usize = 14;
/// How many times its peers' noise floor a device's must reach to be flagged.
pub const NOISY_FACTOR: f64 = 2.0;
/// How many percentage points above its peers' noise floor a device's must lie to be flagged (so a
/// 0.4% device next to 0.1% peers is not).
pub const NOISY_MARGIN_PCT: f64 = 2.0;
/// Scale that makes the median absolute deviation estimate σ for normal data.
const MAD_SCALE: f64 = 1.4826;

/// One device's noise floor and whether it drifted above its peers'.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DeviceHealth {
    /// adb serial.
    pub serial: String,
    /// Its SoC, as the history recorded it.
    pub soc: String,
    /// Cells (model × runtime × night) it was learned from.
    pub cells: usize,
    /// Median CV of its cells, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cv_pct: Option<f64>,
    /// Median over its series of the spread of the nightly medians, percent (needs two nights).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_spread_pct: Option<f64>,
    /// The larger of the two, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_floor_pct: Option<f64>,
    /// The devices it was compared with.
    pub peers: Vec<String>,
    /// Median of the peers' noise floors, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_noise_floor_pct: Option<f64>,
    /// True when its floor drifted well above its peers'.
    pub noisy: bool,
    /// One sentence: the floor, its parts and the peers'.
    pub summary: String,
}

/// The health of every device in the history store at `path`, learned from the last
/// [`HEALTH_NIGHTS`] nights; `None` when there is no history yet.
pub fn load(path: &Path) -> Result<Option<Vec<DeviceHealth>>> {
    if !path.is_file() {
        return Ok(None);
    }
    let store = HistoryStore::open(path)?;
    let cells = store.cells(&HistoryFilter { nights: HEALTH_NIGHTS, ..Default::default() })?;
    Ok(Some(assess(&cells)))
}

/// What a device's own cells say, before it is compared with its peers.
struct OwnNoise {
    serial: String,
    soc: String,
    cells: usize,
    cv_pct: Option<f64>,
    median_spread_pct: Option<f64>,
}

impl OwnNoise {
    /// The larger of the CV and the spread of medians.
    fn floor(&self) -> Option<f64> {
        match (self.cv_pct, self.median_spread_pct) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The health of every device that has cells, in serial order; emulated cells (a host-HTP SoC)
/// are no device and are left out.
pub fn assess(cells: &[StoredCell]) -> Vec<DeviceHealth> {
    let mut by_device: BTreeMap<&str, Vec<&StoredCell>> = BTreeMap::new();
    for cell in cells.iter().filter(|cell| cell.emulated.is_none()) {
        by_device.entry(cell.serial.as_str()).or_default().push(cell);
    }
    let own: Vec<OwnNoise> = by_device
        .iter()
        .map(|(serial, cells)| {
            let cvs: Vec<f64> = cells.iter().filter_map(|c| c.cv_pct).collect();
            let mut series: BTreeMap<(&str, &str), Vec<f64>> = BTreeMap::new();
            for cell in cells {
                if let Some(m) = cell.median_ns {
                    series.entry((cell.model.as_str(), cell.runtime.as_str())).or_default().push(m);
                }
            }
            let spreads: Vec<f64> =
                series.values().filter(|medians| medians.len() >= 2).filter_map(|m| relative_spread_pct(m)).collect();
            OwnNoise {
                serial: serial.to_string(),
                soc: cells[0].soc.clone(),
                cells: cells.len(),
                cv_pct: median(&cvs),
                median_spread_pct: median(&spreads),
            }
        })
        .collect();
    own.iter()
        .map(|device| {
            let others = || own.iter().filter(|o| o.serial != device.serial);
            let same_soc: Vec<&OwnNoise> = others().filter(|o| o.soc.eq_ignore_ascii_case(&device.soc)).collect();
            let peers = if same_soc.is_empty() { others().collect() } else { same_soc };
            let peer_floors: Vec<f64> = peers.iter().filter_map(|p| p.floor()).collect();
            let (mine, theirs) = (device.floor(), median(&peer_floors));
            let noisy =
                matches!((mine, theirs), (Some(m), Some(t)) if m > NOISY_FACTOR * t && m - t >= NOISY_MARGIN_PCT);
            DeviceHealth {
                serial: device.serial.clone(),
                soc: device.soc.clone(),
                cells: device.cells,
                cv_pct: device.cv_pct,
                median_spread_pct: device.median_spread_pct,
                noise_floor_pct: mine,
                peers: peers.iter().map(|p| p.serial.clone()).collect(),
                peer_noise_floor_pct: theirs,
                noisy,
                summary: summary(mine, device.cv_pct, device.median_spread_pct, theirs, peers.len(), noisy),
            }
        })
        .collect()
}

/// One line per device, `  SERIAL  NOISY  noise floor …` (`ok` when not flagged).
pub fn lines(health: &[DeviceHealth]) -> String {
    let width = health.iter().map(|h| h.serial.len()).max().unwrap_or(0);
    health
        .iter()
        .map(|h| format!("  {:width$}  {:5}  {}\n", h.serial, if h.noisy { "NOISY" } else { "ok" }, h.summary))
        .collect()
}

/// MAD × 1.4826 / median of a device's nightly medians, percent.
fn relative_spread_pct(medians: &[f64]) -> Option<f64> {
    let center = median(medians)?;
    let deviations: Vec<f64> = medians.iter().map(|m| (m - center).abs()).collect();
    (center > 0.0).then(|| median(&deviations).unwrap_or(0.0) * MAD_SCALE / center * 100.0)
}

/// `noise floor 9.4% (CV 9.4%, spread of medians 3.1%), 4.7× its 2 peers' 2.0%: noisy`.
fn summary(
    mine: Option<f64>,
    cv: Option<f64>,
    spread: Option<f64>,
    theirs: Option<f64>,
    peers: usize,
    noisy: bool,
) -> String {
    let Some(mine) = mine else { return "no noise floor yet (no finished sweep cells)".into() };
    let part = |v: Option<f64>| v.map_or_else(|| "–".into(), |v| format!("{v:.1}%"));
    let parts = format!("CV {}, spread of medians {}", part(cv), part(spread));
    match theirs {
        Some(t) if t > 0.0 => {
            let verdict = if noisy { "noisy" } else { "ok" };
            format!("noise floor {mine:.1}% ({parts}), {:.1}× its {peers} peer(s)' {t:.1}%: {verdict}", mine / t)
        }
        Some(t) => format!("noise floor {mine:.1}% ({parts}), its {peers} peer(s)' {t:.1}%"),
        None => format!("noise floor {mine:.1}% ({parts}); no peers to compare with"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(serial: &str, soc: &str, night: &str, model: &str, cv_pct: f64, median_ms: f64) -> StoredCell {
        StoredCell {
            sweep: "nightly".into(),
            night: night.into(),
            started_at: format!("{night}T01:00:00Z"),
            device: serial.into(),
            serial: serial.into(),
            soc: soc.into(),
            runtime: "rt".into(),
            model: model.into(),
            axes: Default::default(),
            outcome: "pass".into(),
            median_ns: Some(median_ms * 1e6),
            cv_pct: Some(cv_pct),
            npu_flops_pct: Some(100.0),
            fallback_nodes: Some(0),
            latencies_ns: vec![],
            generation: None,
            emulated: None,
            findings: Default::default(),
            resources: Default::default(),
        }
    }

    /// Three SM8650 phones over four nights with two models; `noisy` gets `cv` and wandering medians.
    fn history(noisy_cv: f64, wander: f64) -> Vec<StoredCell> {
        let mut cells = Vec::new();
        for (n, night) in ["2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04"].iter().enumerate() {
            for model in ["det", "rec"] {
                cells.push(cell("quiet-1", "SM8650", night, model, 1.0, 8.0 + 0.05 * n as f64));
                cells.push(cell("quiet-2", "SM8650", night, model, 1.4, 8.1));
                let up = if n % 2 == 0 { 1.0 + wander } else { 1.0 - wander };
                cells.push(cell("hot", "SM8650", night, model, noisy_cv, 8.0 * up));
            }
        }
        cells.push(cell("alone", "SM8550", "2026-01-04", "det", 1.2, 5.0));
        cells
    }

    #[test]
    fn a_device_with_noisy_history_is_flagged_and_its_quiet_peers_are_not() {
        let health = assess(&history(9.0, 0.0));
        let by = |serial: &str| health.iter().find(|h| h.serial == serial).unwrap();
        assert!(by("hot").noisy, "{:?}", by("hot"));
        assert_eq!(by("hot").peers, ["quiet-1", "quiet-2"], "peers share the SoC");
        assert!(
            by("hot").summary.ends_with(": noisy") && by("hot").summary.starts_with("noise floor 9.0% (CV 9.0%"),
            "{}",
            by("hot").summary
        );
        assert!(!by("quiet-1").noisy && !by("quiet-2").noisy && !by("alone").noisy);
        assert_eq!(by("alone").peers.len(), 3, "a SoC of its own compares with every other device");
        assert_eq!(by("quiet-1").cells, 8);
    }

    #[test]
    fn emulated_cells_are_no_device_and_get_no_noise_floor() {
        let mut cells = history(1.0, 0.0);
        for night in ["2026-01-01", "2026-01-02", "2026-01-03"] {
            // Host time on a busy build machine: noisy, and wandering night to night.
            let mut emulated =
                cell("htp-SM8650", "SM8650", night, "det", 45.0, if night == "2026-01-02" { 84.0 } else { 21.0 });
            emulated.emulated = Some("Qualcomm's HTP emulator".into());
            cells.push(emulated);
        }
        let health = assess(&cells);
        assert!(
            health.iter().all(|h| h.serial != "htp-SM8650" && !h.peers.contains(&"htp-SM8650".to_string())),
            "{health:?}"
        );
        assert_eq!(health.len(), 4, "the three SM8650 phones and the SM8550 one");
        assert!(health.iter().all(|h| !h.noisy), "the emulator's host time raises no device's peers: {health:?}");
    }

    #[test]
    fn medians_that_wander_night_to_night_raise_the_floor_even_with_a_steady_cv() {
        let health = assess(&history(1.0, 0.08));
        let hot = health.iter().find(|h| h.serial == "hot").unwrap();
        assert!((hot.median_spread_pct.unwrap() - 8.0 * MAD_SCALE).abs() < 0.5, "{hot:?}");
        assert!(hot.noisy, "{hot:?}");
        // A little more noise than the peers is not a flag: 2× and 2 points are both needed.
        let health = assess(&history(2.5, 0.0));
        assert!(health.iter().all(|h| !h.noisy), "{health:?}");
    }
}
