//! `sweep.json` (`npugate.sweep/1`): every cell of a sweep with its state and numbers, rewritten
//! atomically whenever a cell ends, so a killed sweep leaves a current summary.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use npugate_result::contract::{self, EXIT_ERROR, EXIT_PASS};
use npugate_result::files;

use super::cell::{CellKey, CellRecord};
use super::shard::{MergeInfo, ShardInfo};
use npugate_engine::rack::DeviceOutcome;

/// Schema of `sweep.json`.
pub const SWEEP_SCHEMA: &str = "npugate.sweep/1";

/// `sweep.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SweepSummary {
    /// Always [`SWEEP_SCHEMA`].
    pub schema: String,
    /// Sweep name (from the plan).
    pub name: String,
    /// The plan file.
    pub plan: String,
    /// The night this sweep belongs to (`YYYY-MM-DD`; `--night`, else the UTC date it started).
    pub night: String,
    /// When the sweep first started (RFC 3339, UTC); kept when a killed sweep is resumed.
    pub started_at: String,
    /// When the last invocation ended, absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// Runtimes in plan order.
    pub runtimes: Vec<String>,
    /// Models in plan order.
    pub models: Vec<String>,
    /// The devices the plan resolved to.
    pub devices: Vec<SweepDevice>,
    /// Every cell, device-major in plan order.
    pub cells: Vec<CellEntry>,
    /// 2 if any cell or device could not be judged, else 1 if any gate failed, else 0; absent while running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<u8>,
    /// A shard's result (`--shard I/N`): how the plan was cut and which part this is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardInfo>,
    /// A merged sweep (`npugate sweep merge`): the shards it was put together from, and the missing ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<MergeInfo>,
}

/// A device of the sweep.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SweepDevice {
    /// adb serial.
    pub serial: String,
    /// Its directory below the sweep dir.
    pub dir: String,
    /// SoC as probed, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soc: Option<String>,
    /// Product or board model, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The plan entry that chose it: `serial` or `soc=SM8650` (or `--device`).
    pub chosen_by: String,
    /// How its whole run ended (set when the rack is done).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<DeviceOutcome>,
}

/// One cell's state.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CellState {
    /// Not run yet, or interrupted (it will be redone).
    Pending,
    /// Judged and marked (`cell.json` exists); never redone.
    Finished,
    /// Could not produce a judged result (redone by the next invocation).
    Failed,
    /// In a merged sweep: its shard was not among the merged directories.
    Absent,
}

/// One cell in the summary.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CellEntry {
    /// Which cell.
    pub key: CellKey,
    /// Its result directory, relative to the sweep dir.
    pub dir: String,
    /// Pending, finished or failed.
    pub state: CellState,
    /// The numbers, when finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<CellRecord>,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl contract::Document for SweepSummary {
    const SCHEMA: contract::Schema = contract::Schema::new(SWEEP_SCHEMA);
}

impl SweepSummary {
    /// Reads `sweep.json` from `sweep_dir`, if there is a valid one.
    pub fn read(sweep_dir: &Path) -> Option<SweepSummary> {
        contract::read::<SweepSummary>(&sweep_dir.join(files::SWEEP)).ok()
    }

    /// Writes `sweep.json` into `sweep_dir` atomically.
    pub fn write(&self, sweep_dir: &Path) -> anyhow::Result<()> {
        let file = sweep_dir.join(files::SWEEP);
        contract::write_json(&file, self).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", file.display()))
    }

    /// The entry of `key`.
    pub fn cell_mut(&mut self, key: &CellKey) -> Option<&mut CellEntry> {
        self.cells.iter_mut().find(|c| &c.key == key)
    }

    /// The finished cells' records, in summary order.
    pub fn finished(&self) -> impl Iterator<Item = &CellRecord> {
        self.cells.iter().filter_map(|c| c.record.as_ref())
    }

    /// 2 if anything could not be judged (or, merged, a shard is missing), else 1 if any gate failed, else 0.
    pub fn overall_exit(&self) -> u8 {
        let cells = self.cells.iter().map(|c| c.record.as_ref().map_or(EXIT_ERROR, |record| record.exit_code));
        let devices = self.devices.iter().filter_map(|d| d.outcome.as_ref()).map(|o| o.exit_code);
        let missing = self.merged.iter().filter(|merged| !merged.missing.is_empty()).map(|_| EXIT_ERROR);
        cells.chain(devices).chain(missing).max().unwrap_or(EXIT_PASS)
    }
}

/// A finished cell of a sweep on disk: its record and its result directory.
#[derive(Debug, Clone)]
pub struct FinishedCell {
    /// The numbers and identity of the cell (`cell.json`).
    pub record: CellRecord,
    /// The cell's result directory (`result.json`, `verdict.json`, `report.html`, profiles, logs).
    pub dir: PathBuf,
}

/// Every finished cell of the sweep in `sweep_dir`, in `sweep.json` order; the completion marker on
/// disk is the authority (a cell listed as finished without one is left out). For tools that read a
/// finished sweep, e.g. evidence bundles.
pub fn finished_cells(sweep_dir: &Path) -> anyhow::Result<Vec<FinishedCell>> {
    let summary = SweepSummary::read(sweep_dir).ok_or_else(|| {
        anyhow::anyhow!(
            "{} holds no sweep ({} missing or not {})",
            sweep_dir.display(),
            npugate_result::files::SWEEP,
            SWEEP_SCHEMA
        )
    })?;
    Ok(summary
        .cells
        .iter()
        .filter_map(|entry| {
            let dir = entry.key.dir(sweep_dir);
            CellRecord::read_finished(&dir).map(|record| FinishedCell { record, dir })
        })
        .collect())
}
