//! What the harness measures and how. `HarnessSettings` is flattened into the harness's command
//! line ([`HarnessCommand`], which the harness parses and the host builds), into `npugate run` (which
//! passes it through to the harness on any target) and read from TOML (a sweep plan's
//! `[settings]`): one definition, same names, same defaults, same validation everywhere.

pub mod command;
pub mod ep;
pub mod generation;
pub mod qnn;
pub mod values;

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use serde::Deserialize;

pub use command::HarnessCommand;
pub use ep::{EpDevice, EpKind};
pub use generation::GenerationSettings;
pub use qnn::QnnArgs;
pub use values::{InputFile, KeyValue, ShapeSpec};

/// Everything one harness run does: how its session is made ([`SessionSettings`], reachable
/// directly through `Deref`) and what the run measures. Repeatable options are typed values
/// ([`values`]), validated when they are constructed. In TOML (a sweep plan's `[settings]`) every
/// field is a key of one flat table; unknown keys are refused.
#[derive(Debug, Clone, PartialEq, Args, Deserialize)]
#[serde(try_from = "SettingsTable")]
pub struct HarnessSettings {
    /// How the model is loaded, fed and placed.
    #[command(flatten)]
    pub session: SessionSettings,
    /// Timed runs (≥ 20 for the CV rule to be judged).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Warmup runs before timing (discarded).
    #[arg(long, default_value_t = 3)]
    pub warmup: u32,
    /// Profiled runs in a separate, identically configured session after the timed runs (0 = no
    /// ORT profile, no time shares). Kept out of the timed session so profiling cannot distort latency.
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
    /// comparison with a reference; the timed loop is unchanged.
    #[arg(long)]
    pub check_outputs: bool,
    /// After everything else, create and drop the session N more times and record the memory
    /// still held after each drop (`memory.leak_check`; the `max_memory_growth_mb` rule reads its
    /// growth) [default: 0, no leak check].
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub leak_check: u32,
    /// How an LLM model folder is run as token generation (`--prompt-tokens`, `--gen-tokens`, …).
    #[command(flatten)]
    pub generation: GenerationSettings,
}

/// How a harness session is made: the EP and its options, the inputs, the graph optimizations.
/// Every command that creates a session takes these flags (`run`, `compare` and sweeps inside
/// [`HarnessSettings`]; `preflight`, `compile` and `numerics` alone, since they time nothing).
#[derive(Debug, Clone, PartialEq, Args, Deserialize)]
#[serde(default)]
pub struct SessionSettings {
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Execution provider: the preferred EP, which placement and the `npu_*` rules measure.
    #[arg(long, value_enum, default_value_t = EpKind::Cpu)]
    pub ep: EpKind,
    /// ORT name of a plugin EP (`--ep plugin`; the name its library is registered under). Known
    /// EPs default to their own name (`QNNExecutionProvider`, `OpenVINOExecutionProvider`, …).
    #[arg(long, value_name = "NAME")]
    pub ep_name: Option<String>,
    /// The device a plugin EP runs on, chosen explicitly: a plugin EP without a device of this
    /// type did not start (no silent fallback to another device) [QNN default: by --qnn-backend].
    #[arg(long, value_enum)]
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
    #[arg(long, value_enum, default_value_t = OptimizationLevel::All)]
    pub optimization: OptimizationLevel,
    /// Log level of the timed session (ONNX Runtime's and, through the EP, its backend's: QNN's):
    /// what an app logs at. The session that gives the VERBOSE account (assignment, the backend's
    /// reasons, ort.log) is another one, so nothing is logged per timed inference by default.
    #[arg(long, value_enum, default_value_t = OrtLogLevel::Warning)]
    pub ort_log_level: OrtLogLevel,
    /// Refuse CPU fallback: sets `session.disable_cpu_ep_fallback=1`, so a node the EP does not
    /// take (or a backend that did not start) fails session creation instead of running on CPU.
    #[arg(long)]
    pub strict: bool,
    /// EP context cache directory (on the target): the first run compiles the graph and writes a
    /// context model there (timed as cold creation), every run then times loading it (warm creation).
    #[arg(long, value_name = "DIR")]
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

/// `[settings]` as written in TOML: one flat table, split into [`HarnessSettings`] with unknown
/// keys refused (serde cannot deny unknown fields of a flattened struct itself).
#[derive(Deserialize)]
struct SettingsTable {
    #[serde(flatten)]
    session: SessionSettings,
    #[serde(flatten)]
    run: RunTable,
    #[serde(flatten)]
    generation: GenerationSettings,
    #[serde(flatten)]
    unknown: std::collections::BTreeMap<String, serde::de::IgnoredAny>,
}

/// The measurement keys of [`SettingsTable`].
#[derive(Deserialize)]
#[serde(default)]
struct RunTable {
    runs: u32,
    warmup: u32,
    profile_runs: u32,
    no_reference_pass: bool,
    session_only: bool,
    execute_once: bool,
    check_outputs: bool,
    leak_check: u32,
}

impl Default for RunTable {
    fn default() -> Self {
        let d = HarnessSettings::default();
        RunTable {
            runs: d.runs,
            warmup: d.warmup,
            profile_runs: d.profile_runs,
            no_reference_pass: d.no_reference_pass,
            session_only: d.session_only,
            execute_once: d.execute_once,
            check_outputs: d.check_outputs,
            leak_check: d.leak_check,
        }
    }
}

impl TryFrom<SettingsTable> for HarnessSettings {
    type Error = String;

    fn try_from(table: SettingsTable) -> Result<HarnessSettings, String> {
        if let Some(key) = table.unknown.keys().next() {
            return Err(format!(
                "unknown setting `{key}` (see `npugate run --help` for the settings and their spelling)"
            ));
        }
        let RunTable {
            runs,
            warmup,
            profile_runs,
            no_reference_pass,
            session_only,
            execute_once,
            check_outputs,
            leak_check,
        } = table.run;
        Ok(HarnessSettings {
            session: table.session,
            runs,
            warmup,
            profile_runs,
            no_reference_pass,
            session_only,
            execute_once,
            check_outputs,
            leak_check,
            generation: table.generation,
        })
    }
}

/// ONNX Runtime graph optimization levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
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
    /// The same settings with every `--input` file replaced by `map(file)` (e.g. its path on a target).
    pub fn with_input_paths(&self, mut map: impl FnMut(&InputFile) -> PathBuf) -> HarnessSettings {
        let mut settings = self.clone();
        for input in &mut settings.inputs {
            input.path = map(input);
        }
        settings
    }

    /// The flags that reproduce these settings on a harness command line (see [`HarnessCommand`]).
    pub fn to_flags(&self) -> Vec<String> {
        let mut args = vec!["--runs".into(), self.runs.to_string(), "--warmup".into(), self.warmup.to_string()];
        args.extend(["--profile-runs".into(), self.profile_runs.to_string(), "--seed".into(), self.seed.to_string()]);
        args.extend(["--intra-threads".into(), self.intra_threads.to_string()]);
        args.extend([
            "--ep".into(),
            self.ep.cli_name().into(),
            "--optimization".into(),
            self.optimization.cli_name().into(),
        ]);
        args.extend(["--ort-log-level".into(), self.ort_log_level.cli_name().into()]);
        if self.leak_check > 0 {
            args.extend(["--leak-check".into(), self.leak_check.to_string()]);
        }
        let switches = [
            (self.no_reference_pass, "--no-reference-pass"),
            (self.strict, "--strict"),
            (self.check_outputs, "--check-outputs"),
            (self.session_only, "--session-only"),
            (self.execute_once, "--execute-once"),
        ];
        args.extend(switches.into_iter().filter(|(on, _)| *on).map(|(_, flag)| flag.to_string()));
        if let Some(name) = &self.ep_name {
            args.extend(["--ep-name".into(), name.clone()]);
        }
        if let Some(device) = self.ep_device {
            args.extend(["--ep-device".into(), device.cli_name().into()]);
        }
        if let Some(dir) = &self.context_cache {
            args.extend(["--context-cache".into(), dir.display().to_string()]);
        }
        let repeated = [
            ("--ep-option", self.ep_options.iter().map(ToString::to_string).collect::<Vec<_>>()),
            ("--session-config", self.session_config.iter().map(ToString::to_string).collect()),
            ("--shape", self.shapes.iter().map(ToString::to_string).collect()),
            ("--input", self.inputs.iter().map(ToString::to_string).collect()),
        ];
        for (flag, values) in repeated {
            for value in values {
                args.extend([flag.to_string(), value]);
            }
        }
        args.extend(self.qnn.to_flags());
        args.extend(self.generation.to_flags());
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_between_command_line_and_toml() {
        let from_toml: HarnessSettings = toml::from_str("").unwrap();
        assert_eq!(from_toml, HarnessSettings::default());
        let custom: HarnessSettings = toml::from_str(
            "runs = 20\nep = \"qnn\"\nshapes = [\"x=1x3\"]\n[qnn]\nqnn_backend = \"saver\"\nhtp_performance_mode = \"balanced\"",
        )
        .unwrap();
        assert_eq!(custom.runs, 20);
        assert_eq!(custom.shapes, vec!["x=1x3".parse::<ShapeSpec>().unwrap()]);
        assert_eq!(custom.qnn.qnn_backend, Some(qnn::QnnBackend::Type("saver")));
        let unknown = toml::from_str::<HarnessSettings>("rns = 3").unwrap_err().to_string();
        assert!(unknown.contains("unknown setting `rns`"), "{unknown}");
        let both = toml::from_str::<HarnessSettings>("runs = 5\nseed = 7\nstrict = true").unwrap();
        assert_eq!((both.runs, both.seed, both.strict, both.warmup), (5, 7, true, HarnessSettings::default().warmup));
        let generation = toml::from_str::<HarnessSettings>("prompt_tokens = 16\ngen_tokens = 4\nruns = 3").unwrap();
        assert_eq!(
            (
                generation.generation.prompt_tokens.map(|c| c.get()),
                generation.generation.gen_tokens.map(|c| c.get()),
                generation.runs
            ),
            (Some(16), Some(4), 3)
        );
        let bad = toml::from_str::<HarnessSettings>("shapes = [\"x=1x0\"]").unwrap_err().to_string();
        assert!(bad.contains("not a positive integer"), "{bad}");
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
}
