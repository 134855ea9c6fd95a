//! What the harness measures and how. `HarnessSettings` is flattened into the harness's command
//! line (which parses it), into `npugate run` (which passes it through to the harness on any
//! target) and read from TOML (a sweep plan's `[settings]`): one definition, same names, same
//! defaults everywhere. `HarnessSettings::harness_args` turns it back into a harness command line.

pub mod qnn;

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use serde::Deserialize;

pub use qnn::QnnArgs;

/// Measurement settings of one harness run. String-valued options are validated when parsed
/// from the command line and kept in their `key=value` spelling so they pass through unchanged.
#[derive(Debug, Clone, PartialEq, Args, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HarnessSettings {
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
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Execution provider.
    #[arg(long, value_enum, default_value_t = EpKind::Cpu)]
    pub ep: EpKind,
    /// EP option `key=value` (repeatable), passed to the EP unchanged.
    #[arg(long = "ep-option", value_name = "KEY=VALUE", value_parser = key_value)]
    pub ep_options: Vec<String>,
    /// Session configuration entry `key=value` (repeatable), e.g. `session.disable_cpu_ep_fallback=1`.
    #[arg(long = "session-config", value_name = "KEY=VALUE", value_parser = key_value)]
    pub session_config: Vec<String>,
    /// Concrete shape for an input with dynamic dimensions, `name=1x3x224x224` (repeatable).
    #[arg(long = "shape", value_name = "NAME=DIMS", value_parser = shape)]
    pub shapes: Vec<String>,
    /// Real input data from a `.npy` file, `name=file.npy` (repeatable).
    #[arg(long = "input", value_name = "NAME=FILE", value_parser = input_file)]
    pub inputs: Vec<String>,
    /// Intra-op threads (0 = ONNX Runtime's default).
    #[arg(long, default_value_t = 0)]
    pub intra_threads: usize,
    /// Graph optimization level of the timed and profiled sessions.
    #[arg(long, value_enum, default_value_t = OptimizationLevel::All)]
    pub optimization: OptimizationLevel,
    /// Refuse CPU fallback: sets `session.disable_cpu_ep_fallback=1`, so a node the EP does not
    /// take (or a backend that did not start) fails session creation instead of running on CPU.
    #[arg(long)]
    pub strict: bool,
    /// EP context cache directory (on the target): the first run compiles the graph and writes a
    /// context model there (timed as cold creation), every run then times loading it (warm creation).
    #[arg(long, value_name = "DIR")]
    pub context_cache: Option<PathBuf>,
    /// After the timed runs, run once more and save every output as `outputs/<name>.npy` for
    /// comparison with a reference; the timed loop is unchanged.
    #[arg(long)]
    pub check_outputs: bool,
    /// QNN execution provider options.
    #[command(flatten)]
    pub qnn: QnnArgs,
}

impl Default for HarnessSettings {
    /// The command line's defaults (one source of truth: the clap attributes above).
    fn default() -> Self {
        use clap::FromArgMatches;
        let matches = HarnessSettings::augment_args(clap::Command::new("defaults")).get_matches_from(["defaults"]);
        HarnessSettings::from_arg_matches(&matches).expect("the defaults of HarnessSettings parse")
    }
}

/// Execution providers the harness can attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EpKind {
    /// ONNX Runtime's CPU execution provider.
    Cpu,
    /// Qualcomm QNN execution provider (HTP backend by default).
    Qnn,
}

impl EpKind {
    /// ORT's name for the provider.
    pub fn ort_name(self) -> &'static str {
        match self {
            EpKind::Cpu => "CPUExecutionProvider",
            EpKind::Qnn => "QNNExecutionProvider",
        }
    }

    /// The command-line spelling.
    pub fn cli_name(self) -> &'static str {
        match self {
            EpKind::Cpu => "cpu",
            EpKind::Qnn => "qnn",
        }
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

/// Paths as the harness will see them on its target.
#[derive(Debug, Clone)]
pub struct TargetPaths {
    /// ONNX Runtime library.
    pub ort_lib: String,
    /// EP plugin library, when the runtime's EP is a plugin.
    pub ep_library: Option<String>,
    /// The model.
    pub model: String,
    /// Output directory.
    pub out: String,
    /// `--input` files, in the order of `HarnessSettings::inputs`, as target paths.
    pub input_files: Vec<String>,
}

impl HarnessSettings {
    /// The host-side paths of the `--input` files (`name=file.npy` → `file.npy`).
    pub fn input_files(&self) -> Vec<PathBuf> {
        self.inputs.iter().filter_map(|spec| spec.split_once('=').map(|(_, path)| PathBuf::from(path))).collect()
    }

    /// `--ep-option`s as pairs.
    pub fn ep_option_pairs(&self) -> Result<Vec<(String, String)>, String> {
        self.ep_options.iter().map(|s| parse_key_value(s)).collect()
    }

    /// `--session-config` entries as pairs.
    pub fn session_config_pairs(&self) -> Result<Vec<(String, String)>, String> {
        self.session_config.iter().map(|s| parse_key_value(s)).collect()
    }

    /// `--shape`s as input name and dimensions.
    pub fn shape_pairs(&self) -> Result<Vec<(String, Vec<i64>)>, String> {
        self.shapes.iter().map(|s| parse_shape(s)).collect()
    }

    /// `--input`s as input name and file.
    pub fn input_pairs(&self) -> Result<Vec<(String, PathBuf)>, String> {
        self.inputs.iter().map(|s| parse_input_file(s)).collect()
    }

    /// The harness argument list for `paths` (no shell quoting: callers that go through a shell
    /// quote each argument). Parsing it with the harness's command line gives back `self`, with
    /// the `--input` files replaced by their target paths.
    pub fn harness_args(&self, paths: &TargetPaths, runtime_name: Option<&str>) -> Vec<String> {
        let mut args = vec!["--ort-lib".into(), paths.ort_lib.clone(), "--model".into(), paths.model.clone()];
        args.extend(["--out".into(), paths.out.clone()]);
        args.extend(["--runs".into(), self.runs.to_string(), "--warmup".into(), self.warmup.to_string()]);
        args.extend(["--profile-runs".into(), self.profile_runs.to_string(), "--seed".into(), self.seed.to_string()]);
        args.extend(["--intra-threads".into(), self.intra_threads.to_string()]);
        args.extend(["--ep".into(), self.ep.cli_name().into(), "--optimization".into(), self.optimization.cli_name().into()]);
        let switches = [
            (self.no_reference_pass, "--no-reference-pass"),
            (self.strict, "--strict"),
            (self.check_outputs, "--check-outputs"),
        ];
        args.extend(switches.into_iter().filter(|(on, _)| *on).map(|(_, flag)| flag.to_string()));
        if let Some(dir) = &self.context_cache {
            args.extend(["--context-cache".into(), dir.display().to_string()]);
        }
        if let Some(library) = &paths.ep_library {
            args.extend(["--ep-library".into(), library.clone()]);
        }
        if let Some(name) = runtime_name {
            args.extend(["--runtime-name".into(), name.to_string()]);
        }
        let repeated = [("--ep-option", &self.ep_options), ("--session-config", &self.session_config), ("--shape", &self.shapes)];
        for (flag, values) in repeated {
            for value in values {
                args.extend([flag.to_string(), value.clone()]);
            }
        }
        for (spec, target) in self.inputs.iter().zip(&paths.input_files) {
            let name = spec.split_once('=').map(|(n, _)| n).unwrap_or(spec);
            args.extend(["--input".into(), format!("{name}={target}")]);
        }
        args.extend(self.qnn.to_flags());
        args
    }
}

/// Parses `key=value` (the key must be non-empty; the value may contain `=`).
pub fn parse_key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => Ok((key.trim().to_string(), value.to_string())),
        _ => Err(format!("expected KEY=VALUE, got {text:?}")),
    }
}

/// Parses `name=1x3x224x224` into a name and positive dimensions.
pub fn parse_shape(text: &str) -> Result<(String, Vec<i64>), String> {
    let (name, dims) = parse_key_value(text).map_err(|_| format!("expected NAME=DIMS like x=1x3x224x224, got {text:?}"))?;
    let dims = dims
        .split(['x', 'X', ','])
        .map(|d| match d.trim().parse::<i64>() {
            Ok(v) if v > 0 => Ok(v),
            _ => Err(format!("dimension {d:?} in --shape {text:?} is not a positive integer")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((name, dims))
}

/// Parses `name=path/to/file.npy`.
pub fn parse_input_file(text: &str) -> Result<(String, PathBuf), String> {
    let (name, path) = parse_key_value(text).map_err(|_| format!("expected NAME=FILE.npy, got {text:?}"))?;
    if path.is_empty() {
        return Err(format!("--input {text:?} names no file"));
    }
    Ok((name, PathBuf::from(path)))
}

/// clap validator keeping a well-formed `key=value` as written.
fn key_value(text: &str) -> Result<String, String> {
    parse_key_value(text).map(|_| text.to_string())
}

/// clap validator keeping a well-formed `name=dims` as written.
fn shape(text: &str) -> Result<String, String> {
    parse_shape(text).map(|_| text.to_string())
}

/// clap validator keeping a well-formed `name=file` as written.
fn input_file(text: &str) -> Result<String, String> {
    parse_input_file(text).map(|_| text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Harness {
        #[arg(long)]
        ort_lib: String,
        #[arg(long)]
        model: String,
        #[arg(long)]
        out: String,
        #[arg(long)]
        ep_library: Option<String>,
        #[arg(long)]
        runtime_name: Option<String>,
        #[command(flatten)]
        settings: HarnessSettings,
    }

    fn paths(input_files: Vec<String>) -> TargetPaths {
        TargetPaths {
            ort_lib: "/t/libonnxruntime.so".into(),
            ep_library: Some("/t/libqnn.so".into()),
            model: "/t/m.onnx".into(),
            out: "/t/out".into(),
            input_files,
        }
    }

    #[test]
    fn harness_args_round_trip_every_setting() {
        let given = Harness::parse_from([
            "h", "--ort-lib", "x", "--model", "y", "--out", "z", "--runs", "7", "--warmup", "1", "--profile-runs", "0",
            "--no-reference-pass", "--seed", "9", "--ep", "qnn", "--ep-option", "a=b=c", "--session-config", "k=v",
            "--shape", "x=1x3", "--input", "x=/host/a.npy", "--intra-threads", "2", "--optimization", "basic", "--strict",
            "--context-cache", "/t/cache", "--check-outputs", "--qnn-backend", "saver", "--htp-performance-mode",
            "sustained_high_performance", "--qnn-profiling", "detailed", "--vtcm-mb", "8", "--htp-arch", "75",
            "--enable-htp-fp16-precision", "0", "--offload-graph-io-quantization", "1",
        ]);
        let argv = given.settings.harness_args(&paths(vec!["/t/a.npy".into()]), Some("rt"));
        let again = Harness::parse_from(std::iter::once("h".to_string()).chain(argv));
        let mut expected = given.settings.clone();
        expected.inputs = vec!["x=/t/a.npy".into()];
        assert_eq!(again.settings, expected);
        assert_eq!((again.ep_library.as_deref(), again.runtime_name.as_deref()), (Some("/t/libqnn.so"), Some("rt")));
        assert_eq!(again.settings.ep_option_pairs().unwrap(), vec![("a".to_string(), "b=c".to_string())]);
        assert_eq!(given.settings.input_files(), vec![PathBuf::from("/host/a.npy")]);
    }

    #[test]
    fn defaults_match_between_command_line_and_toml() {
        let from_toml: HarnessSettings = toml::from_str("").unwrap();
        assert_eq!(from_toml, HarnessSettings::default());
        let custom: HarnessSettings =
            toml::from_str("runs = 20\nep = \"qnn\"\n[qnn]\nqnn_backend = \"saver\"\nhtp_performance_mode = \"balanced\"").unwrap();
        assert_eq!(custom.runs, 20);
        assert_eq!(custom.qnn.qnn_backend, Some(qnn::QnnBackend::Type("saver")));
        assert!(toml::from_str::<HarnessSettings>("rns = 3").is_err(), "unknown keys are refused");
    }

    #[test]
    fn malformed_values_are_refused_when_parsed() {
        assert!(Harness::try_parse_from(["h", "--ort-lib", "x", "--model", "y", "--out", "z", "--ep-option", "novalue"]).is_err());
        assert!(Harness::try_parse_from(["h", "--ort-lib", "x", "--model", "y", "--out", "z", "--shape", "x=1x0"]).is_err());
        assert!(Harness::try_parse_from(["h", "--ort-lib", "x", "--model", "y", "--out", "z", "--runs", "0"]).is_err());
        assert!(parse_shape("x=1x0").unwrap_err().contains("not a positive integer"));
    }
}
