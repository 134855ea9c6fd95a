//! The nightly side of npugate: sweeps (a plan of devices × runtimes × models run cell by cell,
//! resumable, sharded and merged), the matrix report of a sweep, the SQLite history of sweeps with
//! trends and device health, and signed evidence bundles.

pub mod evidence;
pub mod history;
pub mod matrix;
pub mod sweep;
