//! Nightly sweeps: a matrix of devices × runtimes × models from a plan (`sweep.toml`), run on the
//! rack (devices in parallel, cells on a device one after another), resumable after a kill, laid
//! out as `<sweep-dir>/<device>/<runtime>/<model>/` (a result dir with `verdict.json`,
//! `report.html` and the completion marker `cell.json`) plus `<sweep-dir>/sweep.json`. A plan can
//! be run as N shards (`--shard I/N`, one per CI matrix job or host) and merged back into one sweep.

pub mod cell;
pub mod execute;
pub mod merge;
pub mod night;
pub mod plan;
pub mod shard;
pub mod summary;
pub mod unit;

pub use cell::CellRecord;
pub use execute::{
    aihub_targets, host_htp_targets, plan_units, resolve_devices, run_sweep, SweepOptions, SweepTarget, TargetKind,
};
pub use merge::merge;
pub use night::{now_rfc3339, parse_night, today};
pub use plan::SweepPlan;
pub use shard::{Cut, Shard};
pub use summary::{finished_cells, FinishedCell, SweepSummary};

#[cfg(test)]
pub(crate) mod testing {
    use std::path::Path;

    use npugate_host::runtime::RuntimeManifest;

    /// A fake runtime directory under `dir` (a manifest and an empty library), for plans that only
    /// need to load; returns its path.
    pub(crate) fn runtime_dir(dir: &Path) -> String {
        let runtime = dir.join("rt");
        std::fs::create_dir_all(&runtime).unwrap();
        std::fs::write(runtime.join("libonnxruntime.so"), "lib").unwrap();
        RuntimeManifest::write_for_dir(
            &runtime,
            "rt-test",
            "x86_64-unknown-linux-gnu",
            "1.31.1",
            "libonnxruntime.so",
            None,
            vec![],
        )
        .unwrap();
        runtime.display().to_string()
    }
}
