//! What the harness measures and how. `HarnessSettings` is flattened into the harness's command
//! line ([`HarnessCommand`], which the harness parses and the host builds), into `npugate run` (which
//! passes it through to the harness on any target) and read from a table (a sweep plan's
//! `[settings]`, turned into those flags and parsed by the same parser, [`table`]): one definition,
//! same names, same defaults, same validation everywhere. The rules between settings that clap
//! cannot state are [`HarnessSettings::check`], which every path calls.

pub mod command;
pub mod ep;
pub mod generation;

pub mod qnn;
pub mod spelling;
pub mod table;
pub mod values;

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use serde::Serialize;

pub use command::{HarnessCommand, InferenceProgress};
pub use ep::{EpDevice, EpKind};
pub use generation::GenerationSettings;
pub use qnn::QnnArgs;
pub use values::{InputFile, KeyValue, ShapeSpec};

/// Everything one harness run does: how its session is made ([`SessionSettings`], reachable
/// directly through `Deref`) and what the run measures. Repeatable options are typed values
/// ([`values`]), validated when they are constructed. In a table (a sweep plan's `[settings]`) every
/// field is a key of one flat table, the QNN options a `qnn` section ([`table`]).
#[derive(Debug, Clone, PartialEq, Args, Serialize)]
pub struct HarnessSettings {
    /// How the model is loaded, fed and placed.
    #[command(flatten)]
    #[serde(flatten)]
    pub session: SessionSettings,
    /// Timed runs (≥ 20 for the CV rule to be judged; the default is 1 on the HTP emulator, whose
    /// latency is not judged).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Timed runs at most: when runs waited for a CPU long enough to explain why they were slow
    /// (they are set aside), the harness keeps timing to replace them, until `--runs` runs are
    /// clean or it has timed this many (`timings.extension` says how many it took and why)
    /// [default: 4 × --runs; --runs 1 (one inference, no series) and --max-runs equal to --runs never
    /// extend]. For an LLM model folder: decode steps at most, whole generations added [default:
    /// 4 × --gen-tokens × --generations].
    #[arg(long, value_name = "N")]
    pub max_runs: Option<u32>,
    /// Warmup runs before timing (discarded; the default is 0 on the HTP emulator).
    #[arg(long, default_value_t = 3)]
    pub warmup: u32,
    /// Profiled runs in a separate, identically configured session after the timed runs (0 = no
    /// ORT profile, no time shares). Kept out of the timed session so profiling cannot distort latency.
    /// The default is 1 on the HTP emulator.
    #[arg(long, default_value_t = 10)]
    pub profile_runs: u32,
    /// Skip the reference pass (CPU EP, graph optimizations off, one profiled run) that gives every
    /// original node its shapes for FLOP accounting (FLOPs become unknown).
    #[arg(long)]
    pub no_reference_pass: bool,
    /// Create the session, record where its nodes were placed and stop: no runs, no library hashes (the
    /// EP's validation and compile only; with `ep.context_enable` the EP writes its context model).
    /// A session the EP refuses is recorded in result.json (`session_error`).
    #[arg(long)]
    pub session_only: bool,
    /// With `--session-only`: run one untimed inference after the session is created, so a graph
    /// that compiles and fails at run time is caught; a failed inference is recorded in result.json
    /// (`inference_error`). Needs inputs like a full run (`--input`, `--seed`).
    #[arg(long, requires = "session_only")]
    pub execute_once: bool,
    /// After the timed runs, run once more and save every output as `outputs/<name>.npy` for
    /// comparison with a reference; the timed loop is unchanged. With `--session-only
    /// --execute-once` the one inference's outputs are saved.
    #[arg(long)]
    pub check_outputs: bool,
    /// After everything else, create and drop the session N more times and record the memory
    /// still held after each drop (`memory.leak_check`; the `max_memory_growth_mb` rule reads its
    /// growth) [default: 0, no leak check].
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub leak_check: u32,
    /// How an LLM model folder is run as token generation (`--prompt-tokens`, `--gen-tokens`, …).
    #[command(flatten)]
    #[serde(flatten)]
    pub generation: GenerationSettings,
}

/// How a harness session is made: the EP and its options, the inputs, the graph optimizations.
/// Every command that creates a session takes these flags (`run`, `compare` and sweeps inside
/// [`HarnessSettings`]; `preflight`, `compile` and `numerics` alone, since they time nothing).
#[derive(Debug, Clone, PartialEq, Args, Serialize)]
pub struct SessionSettings {
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Execution provider: the preferred EP, which placement and the `npu_*` rules measure.
    #[arg(long, value_enum, ignore_case = true, default_value_t = EpKind::Cpu)]
    pub ep: EpKind,
    /// ORT name of a plugin EP (`--ep plugin`; the name its library is registered under). Known
    /// EPs default to their own name (`QNNExecutionProvider`, `OpenVINOExecutionProvider`, …).
    #[arg(long, value_name = "NAME")]
    pub ep_name: Option<String>,
    /// The device a plugin EP runs on, chosen explicitly: a plugin EP without a device of this
    /// type did not start (no silent fallback to another device) [QNN default: by --qnn-backend].
    #[arg(long, value_enum, ignore_case = true)]
    pub ep_device: Option<EpDevice>,
    /// EP option `key=value` (repeatable), passed to the EP unchanged (e.g. OpenVINO's `device_type=NPU`).
    #[arg(long = "ep-option", value_name = "KEY=VALUE")]
    pub ep_options: Vec<KeyValue>,
    /// Session configuration entry `key=value` (repeatable), e.g. `session.disable_cpu_ep_fallback=1`.
    #[arg(long = "session-config", value_name = "KEY=VALUE")]
    pub session_config: Vec<KeyValue>,
    /// Concrete shape for an input with dynamic dimensions, `name=1x3x224x224` (repeatable).
    #[arg(long = "shape", value_name = "NAME=DIMS")]
    pub shapes: Vec<ShapeSpec>,
    /// Real input data from a `.npy` file, `name=file.npy` (repeatable).
    #[arg(long = "input", value_name = "NAME=FILE")]
    pub inputs: Vec<InputFile>,
    /// Intra-op threads (0 = ONNX Runtime's default).
    #[arg(long, default_value_t = 0)]
    pub intra_threads: usize,
    /// Graph optimization level of the timed and profiled sessions.
    #[arg(long, value_enum, ignore_case = true, default_value_t = OptimizationLevel::All)]
    pub optimization: OptimizationLevel,
    /// Log level of the timed session (ONNX Runtime's and, through the EP, its backend's: QNN's):
    /// what an app logs at. The session that gives the VERBOSE account (assignment, the backend's
    /// reasons, ort.log) is another one, so nothing is logged per timed inference by default.
    #[arg(long, value_enum, ignore_case = true, default_value_t = OrtLogLevel::Warning)]
    pub ort_log_level: OrtLogLevel,
    /// Refuse CPU fallback: sets `session.disable_cpu_ep_fallback=1`, so a node the EP does not
    /// take (or a backend that did not start) fails session creation instead of running on CPU.
    #[arg(long)]
    pub strict: bool,
    /// EP context cache directory (on the target): the first run compiles the graph and writes a
    /// context model there (timed as cold creation), every run then times loading it (warm creation).
    #[arg(long, value_name = "DIR")]
    #[serde(serialize_with = "display_path")]
    pub context_cache: Option<PathBuf>,
    /// QNN execution provider options.
    #[command(flatten)]
    pub qnn: QnnArgs,
}

impl std::ops::Deref for HarnessSettings {
    type Target = SessionSettings;

    /// The session part: `settings.ep` reads `settings.session.ep`.
    fn deref(&self) -> &SessionSettings {
        &self.session
    }
}

impl std::ops::DerefMut for HarnessSettings {
    fn deref_mut(&mut self) -> &mut SessionSettings {
        &mut self.session
    }
}

/// Defaults from the clap attributes above: the command line is their one source of truth.
fn clap_defaults<T: Args + clap::FromArgMatches>() -> T {
    let matches = T::augment_args(clap::Command::new("defaults")).get_matches_from(["defaults"]);
    T::from_arg_matches(&matches).expect("the clap defaults of the settings parse")
}

impl Default for HarnessSettings {
    /// The command line's defaults.
    fn default() -> Self {
        clap_defaults()
    }
}

impl Default for SessionSettings {
    /// The command line's defaults.
    fn default() -> Self {
        clap_defaults()
    }
}

impl SessionSettings {
    /// The `--ep-option`s whose value is a file on this machine (onnxruntime-qnn's `op_affinity`,
    /// OpenVINO's `load_config`), with their index: a device gets them pushed beside the model.
    pub fn ep_option_files(&self) -> Vec<(usize, PathBuf)> {
        let files = self.ep_options.iter().enumerate().map(|(index, option)| (index, PathBuf::from(&option.value)));
        files.filter(|(_, path)| path.is_file()).collect()
    }
}

/// ONNX Runtime graph optimization levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OptimizationLevel {
    /// No graph optimizations.
    Disable,
    /// Constant folding and redundant node elimination.
    Basic,
    /// Basic plus node fusions.
    Extended,
    /// Everything, including layout optimizations.
    All,
}

impl OptimizationLevel {
    /// The command-line spelling.
    pub fn cli_name(self) -> &'static str {
        match self {
            OptimizationLevel::Disable => "disable",
            OptimizationLevel::Basic => "basic",
            OptimizationLevel::Extended => "extended",
            OptimizationLevel::All => "all",
        }
    }
}

impl From<SessionSettings> for HarnessSettings {
    /// A run of `session` with the default measurement settings.
    fn from(session: SessionSettings) -> HarnessSettings {
        HarnessSettings { session, ..HarnessSettings::default() }
    }
}

/// ONNX Runtime's log severities, least severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum OrtLogLevel {
    /// Everything, including per-inference traces of the EP and its backend.
    Verbose,
    /// Informational messages.
    Info,
    /// Warnings and errors (what apps usually log).
    Warning,
    /// Errors only.
    Error,
    /// Fatal errors only.
    Fatal,
}

impl OrtLogLevel {
    /// The command-line spelling.
    pub fn cli_name(self) -> &'static str {
        match self {
            OrtLogLevel::Verbose => "verbose",
            OrtLogLevel::Info => "info",
            OrtLogLevel::Warning => "warning",
            OrtLogLevel::Error => "error",
            OrtLogLevel::Fatal => "fatal",
        }
    }
}

impl HarnessSettings {
    /// Timed runs the harness may take to replace the runs set aside: `--max-runs`, by default
    /// four times `--runs` — but one run (`--runs 1`: an inference, not a series the latency rules
    /// judge — a reference run, a preflight, the HTP emulator's) is never extended.
    pub fn run_budget(&self) -> u32 {
        let default = if self.runs == 1 { 1 } else { self.runs.saturating_mul(4) };
        self.max_runs.unwrap_or(default).max(self.runs)
    }

    /// Decode steps a model folder's generations may time to replace the steps set aside, when
    /// `steps` were asked for (`--gen-tokens` × `--generations`): `--max-runs`, by default four
    /// times `steps`; whole generations are added while another fits.
    pub fn decode_step_budget(&self, steps: u32) -> u32 {
        self.max_runs.unwrap_or(steps.saturating_mul(4)).max(steps)
    }

    /// The same settings with every `--input` file replaced by `map(file)` (e.g. its path on a target).
    pub fn with_input_paths(&self, mut map: impl FnMut(&InputFile) -> PathBuf) -> HarnessSettings {
        let mut settings = self.clone();
        for input in &mut settings.inputs {
            input.path = map(input);
        }
        settings
    }

    /// The same settings with each `--ep-option` that names a file ([`SessionSettings::ep_option_files`])
    /// given `map(index, file)` as its value (e.g. the file's path on a device).
    pub fn with_ep_option_files(&self, mut map: impl FnMut(usize, &Path) -> String) -> HarnessSettings {
        let mut settings = self.clone();
        for (index, file) in self.ep_option_files() {
            settings.session.ep_options[index].value = map(index, &file);
        }
        settings
    }

    /// The flags that reproduce these settings on a harness command line (see [`HarnessCommand`]).
    pub fn to_flags(&self) -> Vec<String> {
        table::to_argv(self)
    }

    /// Settings from a table (a sweep plan's `[settings]`): parsed as the command line is, then
    /// [`HarnessSettings::check`]ed; the error names the field.
    pub fn from_table(settings: &impl Serialize) -> Result<HarnessSettings, table::FieldError> {
        let parsed: HarnessSettings = table::parse(settings)?;
        parsed.check().map_err(|misfit| misfit.in_table())?;
        Ok(parsed)
    }

    /// The rules between settings that the flags alone cannot state: options of an EP other than
    /// the one chosen, CPU-EP runs with accelerator options, QNN profiling without a profiled pass.
    /// The harness, `npugate run`/`compare` and a sweep plan's load all call this.
    pub fn check(&self) -> Result<(), Misfit> {
        if let Some(max) = self.max_runs.filter(|&max| max < self.runs) {
            return Err(Misfit::new(
                "--max-runs",
                format!("--max-runs {max} is below --runs {}: pass --max-runs {} or more", self.runs, self.runs),
            ));
        }
        if self.ep != EpKind::Qnn {
            if let Some(flag) = self.qnn.given_flags().into_iter().next() {
                return Err(Misfit::new(&flag, format!("{flag} applies to --ep qnn only; drop it or pass --ep qnn")));
            }
        }
        if !self.ep.is_accelerator() {
            for (flag, given) in [("--strict", self.strict), ("--context-cache", self.context_cache.is_some())] {
                if given {
                    return Err(Misfit::new(flag, format!("{flag} applies to an accelerator EP (the CPU EP has no fallback and no context binary); drop it or pass --ep qnn, --ep openvino, …")));
                }
            }
            if let Some(option) = self.ep_options.first() {
                return Err(Misfit::new(
                    "--ep-option",
                    format!("--ep-option {}=… goes to the EP, and the CPU EP takes no options; drop it or pass the EP it is for (--ep qnn, --ep openvino, …)", option.key),
                ));
            }
        }
        if self.qnn.profiling() && self.profile_runs == 0 {
            return Err(Misfit::new(
                "--qnn-profiling",
                "--qnn-profiling runs in the profiled pass only, but --profile-runs is 0; pass --profile-runs 1 or more",
            ));
        }
        Ok(())
    }
}

/// Settings that do not fit together ([`HarnessSettings::check`]): the flag at fault and why, in
/// flags (`--strict applies to …`); [`Misfit::in_table`] says it in a table's field names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Misfit {
    /// The flag at fault, e.g. `--strict`.
    pub flag: String,
    /// One sentence with the fix.
    pub message: String,
}

impl Misfit {
    fn new(flag: &str, message: impl Into<String>) -> Misfit {
        Misfit { flag: flag.to_string(), message: message.into() }
    }

    /// The same refusal about a table's field (`strict`, `qnn.vtcm_mb`).
    pub fn in_table(&self) -> table::FieldError {
        let message = self.message.strip_prefix(&format!("{} ", self.flag)).unwrap_or(&self.message);
        table::FieldError {
            field: table::message_in_field_names::<HarnessSettings>(&self.flag),
            message: table::message_in_field_names::<HarnessSettings>(message),
        }
    }
}

impl std::fmt::Display for Misfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Misfit {}

/// A path as the text a command line gives it.
fn display_path<S: serde::Serializer>(path: &Option<PathBuf>, serializer: S) -> Result<S::Ok, S::Error> {
    match path {
        Some(path) => serializer.collect_str(&path.display()),
        None => serializer.serialize_none(),
    }
}

spelling::serialize_as_value_name!(OptimizationLevel, OrtLogLevel, EpKind, EpDevice);

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` as a sweep plan's `[settings]` table.
    fn from_toml(text: &str) -> Result<HarnessSettings, table::FieldError> {
        HarnessSettings::from_table(&toml::from_str::<toml::Table>(text).unwrap())
    }

    #[test]
    fn the_run_budget_is_four_times_the_runs_but_one_run_is_never_extended() {
        let settings =
            |runs: u32, max_runs: Option<u32>| HarnessSettings { runs, max_runs, ..HarnessSettings::default() };
        assert_eq!(settings(30, None).run_budget(), 120);
        assert_eq!(settings(1, None).run_budget(), 1, "one inference, not a series");
        assert_eq!(settings(1, Some(5)).run_budget(), 5, "unless asked");
        assert_eq!(settings(20, Some(20)).run_budget(), 20);
    }

    #[test]
    fn defaults_match_between_command_line_and_toml() {
        assert_eq!(from_toml("").unwrap(), HarnessSettings::default());
        let custom = from_toml(
            "runs = 20\nep = \"qnn\"\nshapes = [\"x=1x3\"]\n[qnn]\nqnn_backend = \"saver\"\nhtp_performance_mode = \"balanced\"",
        )
        .unwrap();
        assert_eq!(custom.runs, 20);
        assert_eq!(custom.shapes, vec!["x=1x3".parse::<ShapeSpec>().unwrap()]);
        assert_eq!(custom.qnn.qnn_backend, Some(qnn::QnnBackend::Type("saver")));
        let both = from_toml("runs = 5\nseed = 7\nep = \"openvino\"\nstrict = true").unwrap();
        assert_eq!((both.runs, both.seed, both.strict, both.warmup), (5, 7, true, HarnessSettings::default().warmup));
        let generation = from_toml("prompt_tokens = 16\ngen_tokens = 4\nruns = 3").unwrap();
        assert_eq!(
            (
                generation.generation.prompt_tokens.map(|c| c.get()),
                generation.generation.gen_tokens.map(|c| c.get()),
                generation.runs
            ),
            (Some(16), Some(4), 3)
        );
    }

    #[test]
    fn a_table_is_checked_like_the_command_line_and_names_the_field() {
        let refused = |text: &str| from_toml(text).unwrap_err();
        let unknown = refused("rns = 3");
        assert_eq!(unknown.field, "rns");
        assert!(unknown.message.contains("unknown setting; did you mean `runs`?"), "{unknown}");
        let bad = refused("shapes = [\"x=1x0\"]");
        assert!(bad.field == "shapes" && bad.message.contains("not a positive integer"), "{bad}");
        let zero = refused("runs = 0");
        assert!(zero.field == "runs" && zero.message.contains("'0' for 'runs'"), "{zero}");
        let once = refused("execute_once = true");
        assert_eq!(once.to_string(), "execute_once: needs session_only = true as well; add it, or drop execute_once");
        assert!(from_toml("execute_once = true\nsession_only = true").unwrap().execute_once);
        let cpu_strict = refused("strict = true");
        assert_eq!(cpu_strict.field, "strict");
        assert!(cpu_strict.message.starts_with("applies to an accelerator EP"), "{cpu_strict}");
        assert!(cpu_strict.message.ends_with("drop it or pass ep = \"qnn\", ep = \"openvino\", …"), "{cpu_strict}");
        let option_on_cpu = refused("ep_options = [\"device_type=NPU\"]");
        assert_eq!(option_on_cpu.field, "ep_options", "{option_on_cpu}");
        assert!(option_on_cpu.message.contains("the CPU EP takes no options"), "{option_on_cpu}");
        let qnn_on_cpu = refused("[qnn]\nvtcm_mb = 8");
        assert_eq!(qnn_on_cpu.field, "qnn.vtcm_mb");
        assert_eq!(qnn_on_cpu.message, "applies to ep = \"qnn\" only; drop it or pass ep = \"qnn\"");
        let typo = refused("ep = \"qnn2\"");
        assert!(typo.field == "ep" && typo.message.contains("'qnn'"), "{typo}");
        assert_eq!(from_toml("ep = \"QNN\"").unwrap().ep, EpKind::Qnn, "names in any case");
        assert_eq!(refused("vtcm_mb = 8").message, "belongs in [settings.qnn]");
        assert_eq!(refused("[qnn]\nruns = 8").message, "belongs in the [settings] table itself");
        assert_eq!(refused("session_only = \"yes\"").message, "is a switch: write true or false");
        assert_eq!(refused("runs = [1, 2]").message, "takes one value, not a list");
    }

    #[test]
    fn every_setting_survives_the_table_round_trip() {
        let given = HarnessSettings::default();
        assert_eq!(table::parse::<HarnessSettings>(&serde_json::to_value(&given).unwrap()).unwrap(), given);
    }

    #[test]
    fn input_paths_are_mapped_for_a_target() {
        let settings = HarnessSettings::from(SessionSettings {
            inputs: vec!["x=/host/a.npy".parse().unwrap()],
            ..SessionSettings::default()
        });
        let mapped = settings.with_input_paths(|input| PathBuf::from(format!("/device/{}.npy", input.input)));
        assert_eq!(mapped.inputs[0].to_string(), "x=/device/x.npy");
        assert_eq!(settings.inputs[0].path, PathBuf::from("/host/a.npy"));
    }

    #[test]
    fn ep_options_that_name_a_file_are_mapped_for_a_target() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("affinity.json");
        std::fs::write(&config, "{}").unwrap();
        let settings = HarnessSettings::from(SessionSettings {
            ep: EpKind::Qnn,
            ep_options: vec![
                "op_affinity=missing.json".parse().unwrap(),
                format!("op_affinity={}", config.display()).parse().unwrap(),
            ],
            ..SessionSettings::default()
        });
        assert_eq!(settings.ep_option_files(), [(1, config.clone())], "a value that is no file stays as it is");
        let mapped = settings.with_ep_option_files(|index, file| format!("/device/{index}/{}", file.display()));
        assert_eq!(mapped.ep_options[0].value, "missing.json");
        assert_eq!(mapped.ep_options[1].value, format!("/device/1/{}", config.display()));
    }
}
