//! History of sweeps: an embedded SQLite store of every finished cell (with its raw latencies),
//! trends per model × SoC × device × runtime, the change since the previous night judged on the
//! bootstrap interval of the median ratio, and pictures of it (inline SVG, terminal sparklines);
//! each device's noise floor learned from its own cells, flagged when it drifts above its peers'.

pub mod chart;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod health;
pub mod store;
pub mod trend;

pub use store::{default_path, HistoryFilter, HistoryStore};
pub use trend::HistoryReport;
