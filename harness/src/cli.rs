//! Command-line interface of `npugate-harness`.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

use crate::qnn::QnnArgs;

/// Run an ONNX model N times on the chosen execution provider and write `result.json`.
#[derive(Debug, Parser)]
#[command(name = "npugate-harness", version, about, long_about = None)]
pub struct Args {
    /// ONNX Runtime library to load (`libonnxruntime.so…`); ORT ≥ 1.24 is required.
    #[arg(long, value_name = "PATH")]
    pub ort_lib: PathBuf,

    /// The ONNX model to run.
    #[arg(long, value_name = "PATH")]
    pub model: PathBuf,

    /// Output directory for result.json, the profiles and the log (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    /// Warmup runs before timing (discarded).
    #[arg(long, default_value_t = 3)]
    pub warmup: u32,

    /// Timed runs.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,

    /// Profiled runs in a separate, identically configured session after the timed runs
    /// (0 = no ORT profile). Kept out of the timed session so profiling cannot distort latency.
    #[arg(long, default_value_t = 10)]
    pub profile_runs: u32,

    /// Skip the reference pass (CPU EP, graph optimizations off, one profiled run) that gives
    /// every original node its shapes for FLOP accounting.
    #[arg(long)]
    pub no_reference_pass: bool,

    /// Seed of the random input generator.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,

    /// Execution provider.
    #[arg(long, value_enum, default_value_t = EpKind::Cpu)]
    pub ep: EpKind,

    /// EP plugin library (e.g. libonnxruntime_providers_qnn.so); without it a QNN EP compiled into
    /// libonnxruntime is used.
    #[arg(long, value_name = "PATH")]
    pub ep_library: Option<PathBuf>,

    /// EP option `key=value` (repeatable), passed to the EP unchanged.
    #[arg(long = "ep-option", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub ep_options: Vec<(String, String)>,

    /// Session configuration entry `key=value` (repeatable), e.g. `session.disable_cpu_ep_fallback=1`.
    #[arg(long = "session-config", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub session_config: Vec<(String, String)>,

    /// Concrete shape for an input with dynamic dimensions, `name=1x3x224x224` (repeatable).
    #[arg(long = "shape", value_name = "NAME=DIMS", value_parser = parse_shape)]
    pub shapes: Vec<(String, Vec<i64>)>,

    /// Real input data from a `.npy` file, `name=file.npy` (repeatable).
    #[arg(long = "input", value_name = "NAME=FILE", value_parser = parse_input_file)]
    pub input_files: Vec<(String, PathBuf)>,

    /// Intra-op threads (0 = ONNX Runtime's default).
    #[arg(long, default_value_t = 0)]
    pub intra_threads: usize,

    /// Graph optimization level of the timed and profiled sessions.
    #[arg(long, value_enum, default_value_t = OptimizationLevel::All)]
    pub optimization: OptimizationLevel,

    /// Name of the runtime (library set), recorded in the result.
    #[arg(long, value_name = "NAME")]
    pub runtime_name: Option<String>,

    /// Refuse CPU fallback: sets `session.disable_cpu_ep_fallback=1`, so a node the EP does not
    /// take (or a backend that did not start) fails session creation instead of running on CPU.
    #[arg(long)]
    pub strict: bool,

    /// EP context cache directory: the first run compiles the graph and writes a context model
    /// there (timed as cold creation), every run then times loading it (warm creation).
    #[arg(long, value_name = "DIR")]
    pub context_cache: Option<PathBuf>,

    /// After the timed runs, run once more and save every output as `outputs/<name>.npy` (listed in
    /// `artifacts.outputs`) for comparison with a reference; the timed loop is unchanged.
    #[arg(long)]
    pub check_outputs: bool,

    /// QNN execution provider options.
    #[command(flatten)]
    pub qnn: QnnArgs,
}

/// Execution providers the harness can attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_value_keeps_equals_in_value() {
        assert_eq!(parse_key_value("a=b=c").unwrap(), ("a".into(), "b=c".into()));
        assert!(parse_key_value("novalue").is_err());
        assert!(parse_key_value("=v").is_err());
    }

    #[test]
    fn shape_parses_and_rejects_nonpositive() {
        assert_eq!(parse_shape("x=1x3x224x224").unwrap(), ("x".into(), vec![1, 3, 224, 224]));
        assert!(parse_shape("x=1x0").unwrap_err().contains("not a positive integer"));
        assert!(parse_shape("x=1xa").is_err());
        assert!(parse_shape("1x3").is_err());
    }
}
