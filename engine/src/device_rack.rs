//! The same work on several targets in parallel — devices of `run --device …` and `compare
//! --device …`, the SoC × QNN targets of the host HTP emulator —, each target's result in
//! `<out>/<name>/` as soon as it is judged, and `rack.json` next to them.

use std::collections::BTreeSet;
use std::path::Path;

use npugate_result::{contract, files};

use crate::confirm::run_confirmed;
use crate::layout::Ownership;
use crate::rack::{self, Attempted, Rack, RackPolicy};
use crate::run::{run_on, RunReport, RunSpec};
use crate::targets::{Progress, Target};

/// Runs `specs[i]` on `targets[i]` (a latency failure rerun `confirm` times, see
/// [`crate::confirm`]); each result lands in `out/<name>/` and is handed to `on_done` (one target
/// at a time, so reports do not interleave) as soon as it is judged. Writes `out/rack.json`.
pub fn run_on_targets(
    targets: &[&dyn Target],
    specs: &[RunSpec<'_>],
    confirm: u32,
    out: &Path,
    policy: &RackPolicy,
    on_done: &(dyn Fn(&dyn Target, &RunReport) + Sync),
) -> anyhow::Result<Rack<RunReport>> {
    anyhow::ensure!(targets.len() == specs.len(), "one run spec per target");
    on_targets(
        targets,
        out,
        policy,
        |index, target, dir, progress| run_confirmed(confirm, dir, |d| run_on(target, &specs[index], d, progress)),
        on_done,
    )
}

/// Does `work(index, target, dir, progress)` on every target in parallel, `dir` being
/// `out/<name>/` (made safe); hands each finished result to `on_done` one target at a time; writes
/// `out/rack.json` and returns the rack.
pub fn on_targets<'t, R: Attempted + Send>(
    targets: &[&'t dyn Target],
    out: &Path,
    policy: &RackPolicy,
    work: impl Fn(usize, &dyn Target, &Path, &dyn Progress) -> anyhow::Result<R> + Sync,
    on_done: &(dyn Fn(&dyn Target, &R) + Sync),
) -> anyhow::Result<Rack<R>> {
    const RACK_DIR: Ownership =
        Ownership { marker: files::RACK, what: "npugate rack", own_names: &[files::OUTPUT_REFERENCE_DIR] };
    let names: Vec<String> = targets.iter().map(|t| t.name().to_string()).collect();
    let dirs = result_dir_names(&names);
    RACK_DIR.check(out, "--out")?;
    std::fs::create_dir_all(out).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", out.display()))?;
    let printing = std::sync::Mutex::new(());
    let rack = rack::run_rack(targets, policy, |target, progress| {
        let index = targets.iter().position(|t| std::ptr::addr_eq(*t, target)).unwrap_or_default();
        let report = work(index, target, &out.join(&dirs[index]), progress)?;
        let _turn = printing.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        on_done(target, &report);
        Ok(report)
    });
    contract::write_json(&out.join(files::RACK), &rack.report)?;
    Ok(rack)
}

/// A host directory name per serial: characters outside `[A-Za-z0-9._-]` become `_`, and names
/// that would collide (or be `.`/`..`) get a numeric suffix.
pub fn result_dir_names(serials: &[String]) -> Vec<String> {
    let mut used = BTreeSet::new();
    serials
        .iter()
        .map(|serial| {
            let mut base: String =
                serial.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect();
            if base.is_empty() || base.chars().all(|c| c == '.') {
                base = format!("device{base}");
            }
            let mut name = base.clone();
            let mut n = 2;
            while !used.insert(name.clone()) {
                name = format!("{base}-{n}");
                n += 1;
            }
            name
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_serials_become_distinct_safe_directory_names() {
        let serials: Vec<String> =
            ["127.0.0.1:6101", "../../etc", "a b;rm -rf $(x)", "a:b", "a_b", "..", ""].map(String::from).to_vec();
        let names = result_dir_names(&serials);
        assert_eq!(names[0], "127.0.0.1_6101");
        assert_eq!(names[1], ".._.._etc");
        assert_eq!(names[2], "a_b_rm_-rf___x_");
        assert_eq!((names[3].as_str(), names[4].as_str()), ("a_b", "a_b-2"));
        assert_eq!((names[5].as_str(), names[6].as_str()), ("device..", "device"));
        assert!(names.iter().all(|n| !n.contains('/') && n != "." && n != ".."));
    }
}
