//! The same work on several targets in parallel — devices of `run --device …` and `compare
//! --device …`, the SoC × QNN targets of the host HTP emulator —, each target's result in
//! `<out>/<name>/` as soon as it is judged, and `rack.json` next to them.

use std::collections::BTreeSet;
use std::path::Path;

use npugate_result::{contract, files};

use crate::layout::Ownership;
use crate::progress::{Event, Progress};
use crate::rack::{self, Attempted, Rack, RackPolicy};
use crate::targets::Target;

/// What [`on_plan`] ran: its one target's result, or a rack.
#[derive(Debug)]
pub enum Ran<R> {
    /// The one target, whose work went into `out` itself.
    One(R),
    /// Every target, each in `out/<name>/`, with `out/rack.json`.
    Rack(Rack<R>),
}

/// The split of every command that runs or compares models on a plan's targets: with `one` (this
/// machine, or one emulated SoC) the only target works in `out` itself; otherwise every target works
/// in parallel in `out/<name>/` ([`on_targets`], each result handed to `on_done`). Either way its
/// progress goes to the policy's reporter.
pub fn on_plan<R: Attempted + Send>(
    targets: &[&dyn Target],
    one: bool,
    out: &Path,
    policy: &RackPolicy,
    work: impl Fn(usize, &dyn Target, &Path, &Progress<'_>) -> anyhow::Result<R> + Sync,
    on_done: &(dyn Fn(&dyn Target, &R) + Sync),
) -> anyhow::Result<Ran<R>> {
    let (true, [target]) = (one, targets) else {
        return on_targets(targets, out, policy, work, on_done).map(Ran::Rack);
    };
    let reporter = policy.reporter.as_ref();
    reporter.report(&Event::Began { targets: vec![target.name()] });
    let done = work(0, *target, out, &Progress::new(target.name(), reporter));
    let (exit_code, summary) = match &done {
        Ok(done) => (
            done.exit_code(),
            if done.exit_code() == 0 { "done".to_string() } else { format!("exit {}", done.exit_code()) },
        ),
        Err(error) => (npugate_result::contract::EXIT_ERROR, format!("{error:#}")),
    };
    reporter.report(&Event::Finished { target: target.name(), exit_code, summary: &summary });
    reporter.report(&Event::Ended);
    done.map(Ran::One)
}

/// Does `work(index, target, dir, progress)` on every target in parallel, `dir` being
/// `out/<name>/` (made safe); hands each finished result to `on_done` one target at a time; writes
/// `out/rack.json` and returns the rack.
pub fn on_targets<'t, R: Attempted + Send>(
    targets: &[&'t dyn Target],
    out: &Path,
    policy: &RackPolicy,
    work: impl Fn(usize, &dyn Target, &Path, &Progress<'_>) -> anyhow::Result<R> + Sync,
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
