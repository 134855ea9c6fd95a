//! The harness command line, built from host-side settings and target-side paths, so the local
//! and device paths launch the harness identically.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use serde::Deserialize;

/// Measurement settings passed through to `npugate-harness` (same names, same defaults). Also read
/// from TOML (a sweep plan's `[settings]`), with the field names as keys and the same defaults.
#[derive(Debug, Clone, Args, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HarnessSettings {
    /// Timed runs (≥ 20 for the CV rule to be judged).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Warmup runs before timing (discarded).
    #[arg(long, default_value_t = 3)]
    pub warmup: u32,
    /// Profiled runs in a separate session after the timed runs (0 = no ORT profile, no time shares).
    #[arg(long, default_value_t = 10)]
    pub profile_runs: u32,
    /// Skip the CPU reference pass that gives every node its shapes (FLOPs become unknown).
    #[arg(long)]
    pub no_reference_pass: bool,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Execution provider.
    #[arg(long, value_enum, default_value_t = Ep::Cpu)]
    pub ep: Ep,
    /// EP option `key=value` (repeatable).
    #[arg(long = "ep-option", value_name = "KEY=VALUE")]
    pub ep_options: Vec<String>,
    /// Session configuration entry `key=value` (repeatable).
    #[arg(long = "session-config", value_name = "KEY=VALUE")]
    pub session_config: Vec<String>,
    /// Concrete shape for a dynamic input, `name=1x3x224x224` (repeatable).
    #[arg(long = "shape", value_name = "NAME=DIMS")]
    pub shapes: Vec<String>,
    /// Real input data, `name=file.npy` (repeatable).
    #[arg(long = "input", value_name = "NAME=FILE")]
    pub inputs: Vec<String>,
    /// Intra-op threads (0 = ONNX Runtime's default).
    #[arg(long, default_value_t = 0)]
    pub intra_threads: usize,
    /// Save the outputs of one extra run after the timed runs and compare them with an fp32 CPU
    /// reference computed on this machine (`outputs.json`, rules min_cosine, min_sqnr_db, max_abs_err).
    #[arg(long)]
    pub check_outputs: bool,
}

/// Execution providers, as the harness names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ep {
    /// ONNX Runtime's CPU EP.
    Cpu,
    /// Qualcomm QNN EP.
    Qnn,
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

impl Default for HarnessSettings {
    /// The command line's defaults (one source of truth: the clap attributes above).
    fn default() -> Self {
        use clap::FromArgMatches;
        let matches = HarnessSettings::augment_args(clap::Command::new("defaults")).get_matches_from(["defaults"]);
        HarnessSettings::from_arg_matches(&matches).expect("the defaults of HarnessSettings parse")
    }
}

impl HarnessSettings {
    /// The host-side paths of the `--input` files (`name=file.npy` → `file.npy`).
    pub fn input_files(&self) -> Vec<PathBuf> {
        self.inputs.iter().filter_map(|spec| spec.split_once('=').map(|(_, path)| PathBuf::from(path))).collect()
    }

    /// The harness argument list for `paths` (no shell quoting: callers that go through a shell quote each argument).
    pub fn harness_args(&self, paths: &TargetPaths, runtime_name: Option<&str>) -> Vec<String> {
        let mut args = vec!["--ort-lib".into(), paths.ort_lib.clone(), "--model".into(), paths.model.clone()];
        args.extend(["--out".into(), paths.out.clone()]);
        args.extend(["--runs".into(), self.runs.to_string(), "--warmup".into(), self.warmup.to_string()]);
        args.extend(["--profile-runs".into(), self.profile_runs.to_string(), "--seed".into(), self.seed.to_string()]);
        args.extend(["--intra-threads".into(), self.intra_threads.to_string()]);
        args.extend(["--ep".into(), self.ep.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default()]);
        if self.no_reference_pass {
            args.push("--no-reference-pass".into());
        }
        if self.check_outputs {
            args.push("--check-outputs".into());
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
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        settings: HarnessSettings,
    }

    #[test]
    fn input_files_are_rewritten_to_target_paths() {
        let wrapper = Wrapper::parse_from(["x", "--input", "x=/host/a.npy", "--shape", "x=1x3", "--ep", "qnn"]);
        let paths = TargetPaths {
            ort_lib: "/t/libonnxruntime.so".into(),
            ep_library: Some("/t/libqnn.so".into()),
            model: "/t/m.onnx".into(),
            out: "/t/out".into(),
            input_files: vec!["/t/a.npy".into()],
        };
        let args = wrapper.settings.harness_args(&paths, Some("rt"));
        let joined = args.join(" ");
        assert!(joined.contains("--input x=/t/a.npy"), "{joined}");
        assert!(joined.contains("--ep qnn --ep-library /t/libqnn.so --runtime-name rt"), "{joined}");
        assert!(joined.contains("--shape x=1x3"), "{joined}");
        assert_eq!(wrapper.settings.input_files(), vec![PathBuf::from("/host/a.npy")]);
    }
}
