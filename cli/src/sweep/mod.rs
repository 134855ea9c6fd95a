//! Planning and running a sweep (`npugate sweep`): the plan file read and each model looked at as
//! `npugate run` looks at it ([`plan`]), the cells run on the rack through the run pipeline every
//! command shares (`npugate_plan::run`) ([`execute`]), and the evidence bundle of a finished sweep
//! ([`evidence`]). The sweep's documents — cells, `sweep.json`, shards, their merge — and its matrix
//! and history are `npugate_sweeps`'s.

pub mod evidence;
pub mod execute;
pub mod plan;

#[cfg(test)]
mod merge_tests;

pub use execute::{aihub_targets, host_htp_targets, plan_units, resolve_devices, run_sweep, SweepOptions, SweepTarget};
pub use plan::SweepPlan;

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
