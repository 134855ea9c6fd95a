//! Nightly sweeps: a matrix of devices × runtimes × models from a plan (`sweep.toml`), run on the
//! rack (devices in parallel, cells on a device one after another), resumable after a kill, laid
//! out as `<sweep-dir>/<device>/<runtime>/<model>/` (a result dir with `verdict.json`,
//! `report.html` and the completion marker `cell.json`) plus `<sweep-dir>/sweep.json`.

pub mod cell;
pub mod execute;
pub mod plan;
pub mod summary;

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use cell::CellRecord;
pub use execute::{run_sweep, SweepOptions};
pub use plan::SweepPlan;
pub use summary::SweepSummary;

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
        anyhow::anyhow!("{} holds no sweep ({} missing or not {})", sweep_dir.display(), summary::SWEEP_FILE, summary::SWEEP_SCHEMA)
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

/// Now as RFC 3339 UTC with seconds (`2026-11-22T01:20:36Z`).
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Today's UTC date, `YYYY-MM-DD`.
pub fn today() -> String {
    chrono::Utc::now().date_naive().format("%Y-%m-%d").to_string()
}

/// Checks a `--night` value: a calendar date `YYYY-MM-DD`.
pub fn parse_night(text: &str) -> Result<String, String> {
    chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .map(|date| date.format("%Y-%m-%d").to_string())
        .map_err(|_| format!("{text:?} is not a date; write YYYY-MM-DD, e.g. 2026-01-31"))
}

/// Writes `value` as pretty JSON to `path` atomically: a temp file in the same directory, synced,
/// then renamed over `path`. A reader (or a killed writer) never sees half a file.
pub fn write_json_atomically<T: Serialize>(path: &Path, value: &T) -> anyhow::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut file = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(dir)
        .map_err(|e| anyhow::anyhow!("cannot create a temp file in {}: {e}", dir.display()))?;
    file.write_all(&serde_json::to_vec_pretty(value)?)?;
    file.as_file().sync_all()?;
    file.persist(path).map_err(|e| anyhow::anyhow!("cannot write {}: {}", path.display(), e.error))?;
    Ok(())
}
