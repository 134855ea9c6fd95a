//! Nightly sweeps: a matrix of devices × runtimes × models from a plan (`sweep.toml`), run on the
//! rack (devices in parallel, cells on a device one after another), resumable after a kill, laid
//! out as `<sweep-dir>/<device>/<runtime>/<model>/` (a result dir with `verdict.json`,
//! `report.html` and the completion marker `cell.json`) plus `<sweep-dir>/sweep.json`.

pub mod cell;
pub mod execute;
pub mod night;
pub mod plan;
pub mod summary;

pub use cell::CellRecord;
pub use execute::{host_htp_targets, resolve_devices, run_sweep, SweepOptions, SweepTarget};
pub use night::{now_rfc3339, parse_night, today};
pub use plan::SweepPlan;
pub use summary::{finished_cells, FinishedCell, SweepSummary};
