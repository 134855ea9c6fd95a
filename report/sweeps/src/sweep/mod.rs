//! The documents of a nightly sweep — a matrix of devices × runtimes × models from a plan
//! (`sweep.toml`), run on the rack by `npugate sweep`, resumable after a kill — laid out as
//! `<sweep-dir>/<device>/<runtime>/<model>/` (a result dir with `verdict.json`, `report.html` and
//! the completion marker `cell.json`) plus `<sweep-dir>/sweep.json`. A plan can be run as N shards
//! (`--shard I/N`, one per CI matrix job or host) and merged back into one sweep.

pub mod cell;
pub mod merge;
pub mod night;
pub mod shard;
pub mod summary;
pub mod unit;

pub use cell::CellRecord;
pub use merge::merge;
pub use night::{now_rfc3339, parse_night, today};
pub use shard::{Cut, Shard};
pub use summary::{finished_cells, FinishedCell, SweepSummary};
