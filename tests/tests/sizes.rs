//! Sizes a model declares are checked before anything is allocated: a model whose input is
//! declared `[1048576, 1048576, 1048576]` floats (4 EiB, a static maximum as exporters write them)
//! is one line — the tensor, its shape, its size, the fix — exit 2, on every command, before any
//! ONNX Runtime or wine work where the host knows the memory; on a device, its harness says it
//! and a sweep goes on with its other cells. A harness that dies of a failed allocation anyway
//! is named by its signal and the size it tried.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use npugate_e2e::devices::Rig;
use npugate_e2e::sweeps::RUNTIMES;
use npugate_e2e::{bin, describe, model, run};
use npugate_engine::model::testing::identity_model;
use serde_json::Value;

/// The dims of the hostile input: 2^60 float32 elements, 2^62 bytes.
const HUGE: [Option<i64>; 3] = [Some(1 << 20), Some(1 << 20), Some(1 << 20)];

/// How every refusal of the hostile model starts, and how it ends (the fix).
const TENSOR: &str =
    "input \"x\" is float32[1048576, 1048576, 1048576]: 4611686018427387904 bytes (4.0 EiB), more than the ";
const FIX: &str = " (MemAvailable); the model itself fixes these dims (an exporter's static maximum?), so no flag can \
                   shrink them: export it with smaller or dynamic dims for \"x\", then pass --shape x=… with a size that fits";
/// The refusal on the host, which knows its own memory.
const ON_THE_HOST: [&str; 3] = [TENSOR, " GiB available on this machine", FIX];

/// `y = Identity(x)`, `x` of `dims`, written into `dir` as `huge.onnx` by the pure-Rust writer.
fn hostile_model(dir: &Path, dims: &[Option<i64>]) -> PathBuf {
    let path = dir.join("huge.onnx");
    identity_model(&path, dims);
    path
}

fn npugate(dir: &Path, args: &[&str]) -> Output {
    run(Command::new(bin("npugate")).current_dir(dir).args(args))
}

/// Asserts that `text` is one line holding `parts` in this order.
fn assert_in_order(text: &str, parts: &[&str]) {
    assert!(!text.contains('\n') && !text.contains("alloc::") && !text.contains("backtrace"), "{text}");
    let mut rest = text;
    for part in parts {
        let at = rest.find(part).unwrap_or_else(|| panic!("want {part:?} next in: {text}"));
        rest = &rest[at + part.len()..];
    }
}

/// Exit 2 and one error line that holds `parts` in order; returns that line.
fn refused_in_one_line(output: &Output, parts: &[&str]) -> String {
    assert_eq!(output.status.code(), Some(2), "{}", describe(output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let errors: Vec<&str> = stderr.lines().filter(|line| line.starts_with("npugate: error: ")).collect();
    assert_eq!(errors.len(), 1, "{}", describe(output));
    assert_in_order(errors[0], parts);
    errors[0].to_string()
}

#[test]
fn run_local_refuses_an_impossible_input_in_one_line_before_launching_the_harness() {
    let work = tempfile::tempdir().unwrap();
    let huge = hostile_model(work.path(), &HUGE);
    let output = npugate(work.path(), &["run", "--local", "--model", "huge.onnx", "--runs", "3"]);
    let line = refused_in_one_line(&output, &ON_THE_HOST);
    assert!(line.starts_with("npugate: error: model huge.onnx: input"), "{line}");
    assert!(!work.path().join("npugate-results").exists(), "nothing ran, so nothing is left");
    assert!(huge.is_file());

    // A dynamic input the user sized too large names the flag to change.
    let dynamic = model("dynamic.onnx");
    let output = npugate(
        work.path(),
        &["run", "--local", "--model", dynamic.to_str().unwrap(), "--shape", "x=1x3x100000x100000", "--runs", "3"],
    );
    refused_in_one_line(
        &output,
        &["input \"x\" is float32[1, 3, 100000, 100000]: 120000000000 bytes (111.8 GiB)", "pass a smaller --shape x=…"],
    );
}

#[test]
fn preflight_refuses_it_before_any_wine_work() {
    let work = tempfile::tempdir().unwrap();
    hostile_model(work.path(), &HUGE);
    let out = work.path().join("preflight");
    let output =
        npugate(work.path(), &["preflight", "--soc", "SM8650", "--model", "huge.onnx", "--out", out.to_str().unwrap()]);
    refused_in_one_line(&output, &ON_THE_HOST);
    assert!(!out.exists(), "no job was planned");
}

#[test]
fn numerics_refuses_it_before_the_reference_run() {
    let work = tempfile::tempdir().unwrap();
    hostile_model(work.path(), &HUGE);
    let out = work.path().join("numerics");
    let output = npugate(work.path(), &["numerics", "--local", "--model", "huge.onnx", "--out", out.to_str().unwrap()]);
    refused_in_one_line(&output, &ON_THE_HOST);
    assert!(!out.exists(), "no reference run, no instrumented copies");
}

#[test]
fn a_sweep_cell_of_it_fails_in_one_line_from_the_device_and_the_sweep_goes_on() {
    let rig = Rig::up(&[6201]);
    let work = tempfile::tempdir().unwrap();
    let huge = hostile_model(work.path(), &HUGE);
    let plan = work.path().join("sweep.toml");
    let mut text = format!(
        "name = \"sizes\"\nruntimes = [{:?}]\n\n[settings]\nruns = 5\nwarmup = 1\nprofile_runs = 1\n\n[[device]]\nserial = {:?}\n",
        RUNTIMES[0],
        Rig::serial(6201)
    );
    for path in [huge, model("smallcnn.onnx")] {
        text.push_str(&format!(
            "\n[[model]]\npath = {:?}\nrules = {{ cv_pct = 100000 }}\n",
            path.display().to_string()
        ));
    }
    std::fs::write(&plan, text).unwrap();
    let out = work.path().join("night");
    let mut command = rig.command(bin("npugate"));
    command.arg("sweep").arg("--plan").arg(&plan).arg("--out").arg(&out);
    command.arg("--history").arg(work.path().join("history.sqlite")).args(["--night", "2026-03-01"]);
    let output = run(&mut command);
    assert_eq!(output.status.code(), Some(2), "a cell could not be judged: {}", describe(&output));
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(out.join("sweep.json")).unwrap()).unwrap();
    let cells = summary["cells"].as_array().expect("cells");
    let cell = |model: &str| {
        cells.iter().find(|c| c["key"]["model"] == model).unwrap_or_else(|| panic!("no {model} in {summary:#}"))
    };
    assert_eq!(cell("smallcnn")["state"], "finished", "{summary:#}");
    let failed = cell("huge");
    assert_eq!(failed["state"], "failed", "{summary:#}");
    // The device's harness checked against the device's own memory.
    let on_the_device = [
        "the harness failed (exit 2) before measuring anything: ",
        TENSOR,
        " GiB available where the harness runs",
        FIX,
    ];
    assert_in_order(failed["error"].as_str().unwrap(), &on_the_device);
}

#[test]
fn a_harness_that_dies_of_a_failed_allocation_is_named_by_its_signal_and_the_size_it_tried() {
    // 256 MiB passes the check against the memory available, but not the 195 MiB of address space
    // the harness gets here: its allocation fails and Rust aborts, as on a device short of memory.
    // One intra-op thread: a thread stack per core would take the address space first on a big box.
    let work = tempfile::tempdir().unwrap();
    hostile_model(work.path(), &[Some(1), Some(64), Some(1024), Some(1024)]);
    let script = format!(
        "ulimit -v 200000; exec {} run --local --model huge.onnx --runs 3 --intra-threads 1",
        bin("npugate").display()
    );
    let output = run(Command::new("sh").current_dir(work.path()).args(["-c", &script]));
    refused_in_one_line(
        &output,
        &["the harness failed (killed by SIGABRT) before measuring anything: out of memory: the harness failed to \
           allocate 268435456 bytes (256.0 MiB) at once"],
    );
}
