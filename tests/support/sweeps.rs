//! Sweeps from the tests' side: plan files on the rig's devices, cell markers on disk, and the
//! headless-Chromium screenshot of an HTML report (kept so a person can look at it).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The two real x86_64 ONNX Runtimes a host sweep compares (the "firmware axis" of the rig).
pub const RUNTIMES: [&str; 2] = ["ort-1.31.1-linux-x86_64", "ort-1.24.4-linux-x86_64"];

/// Writes `sweep.toml` into `dir`: `serials` × [`RUNTIMES`] × `models` (test model names), 20 runs.
/// Timing noise of a shared CI machine is not under test, so the CV rule is relaxed.
pub fn write_plan(dir: &Path, serials: &[String], models: &[&str]) -> PathBuf {
    let mut plan = format!(
        "name = \"nightly\"\nruntimes = {:?}\n\n[settings]\nruns = 20\nmax_runs = 20\nwarmup = 2\nprofile_runs = 2\n",
        RUNTIMES
    );
    for serial in serials {
        plan.push_str(&format!("\n[[device]]\nserial = {serial:?}\n"));
    }
    for name in models {
        let path = crate::model(&format!("{name}.onnx"));
        plan.push_str(&format!(
            "\n[[model]]\npath = {:?}\nrules = {{ cv_pct = 100000 }}\n",
            path.display().to_string()
        ));
    }
    let file = dir.join("sweep.toml");
    std::fs::write(&file, plan).expect("write the plan");
    file
}

/// Every cell directory below `sweep_dir` that holds a completion marker (`cell.json`).
pub fn finished_cells(sweep_dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for device in children(sweep_dir) {
        for runtime in children(&device) {
            found.extend(children(&runtime).into_iter().filter(|cell| cell.join("cell.json").is_file()));
        }
    }
    found.sort();
    found
}

/// Starts the sweep and SIGKILLs it as soon as the first cell is marked finished.
pub fn start_and_kill_after_first_cell(mut command: Command, out: &Path) {
    let mut child = command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("start npugate sweep");
    let start = Instant::now();
    while finished_cells(out).is_empty() {
        assert!(start.elapsed() < Duration::from_secs(300), "no cell finished within 300 s");
        assert!(child.try_wait().unwrap().is_none(), "the sweep ended before any cell was marked finished");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().expect("SIGKILL npugate");
    child.wait().unwrap();
}

fn children(dir: &Path) -> Vec<PathBuf> {
    let entries = std::fs::read_dir(dir).into_iter().flatten().flatten();
    entries
        .map(|e| e.path())
        .filter(|p| p.is_dir() && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect()
}
