//! The nightly side of npugate: sweeps (a plan of devices × runtimes × models run cell by cell,
//! resumable, sharded and merged), the matrix report of a sweep, the SQLite history of sweeps with
//! trends and device health, and the signed evidence bundle of a sweep (the bundle itself is
//! `npugate_engine::evidence`).

pub mod evidence;
pub mod history;
pub mod matrix;
pub mod sweep;
