//! The nightly side of npugate, what a sweep leaves: its documents (each cell's record, `sweep.json`,
//! the shards of a plan and their merge), the matrix report of a sweep, and the SQLite history of
//! sweeps with trends and device health. Planning and running a sweep is the `npugate sweep`
//! command's (the cli crate's `sweep` module, on the run pipeline of `npugate_plan::run`).

pub mod history;
pub mod matrix;
pub mod sweep;
