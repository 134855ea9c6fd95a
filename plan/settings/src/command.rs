//! The harness's whole command line as one typed value: where the libraries, model and output are
//! (as the harness sees them on its target) plus the measurement settings. The harness parses it;
//! the host builds it for a target and turns it into an argument list with [`HarnessCommand::to_argv`],
//! so every place a harness runs launches it identically.

use std::path::PathBuf;

use clap::Parser;

use crate::HarnessSettings;

/// Run an ONNX model N times on the chosen execution provider and write `result.json`.
#[derive(Debug, Clone, PartialEq, Parser)]
#[command(name = "npugate-harness", version, about, long_about = None)]
pub struct HarnessCommand {
    /// ONNX Runtime library to load (`libonnxruntime.so…`); ORT ≥ 1.24 is required.
    #[arg(long, value_name = "PATH")]
    pub ort_lib: PathBuf,

    /// The ONNX model to run.
    #[arg(long, value_name = "PATH")]
    pub model: PathBuf,

    /// Output directory for result.json, the profiles and the log (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    /// EP plugin library (e.g. libonnxruntime_providers_qnn.so), registered under the EP's name and
    /// appended by device; without it the EP built into (or shipped with) libonnxruntime is
    /// appended by name.
    #[arg(long, value_name = "PATH")]
    pub ep_library: Option<PathBuf>,

    /// Name of the runtime (library set), recorded in the result.
    #[arg(long, value_name = "NAME")]
    pub runtime_name: Option<String>,

    /// sha256 of the model as the user gave it, when `--model` is a copy whose dynamic input
    /// dims `--shape` fixed (recorded in the result next to the fixed model's own sha256).
    #[arg(long, value_name = "SHA256")]
    pub fixed_from_sha256: Option<String>,

    /// A file the model refers to (external data, a context binary) that the caller already
    /// hashed, as `NAME=SHA256:BYTES` (repeatable); the harness takes the hash of a file whose
    /// size matches instead of reading it again, and hashes every other referenced file itself.
    #[arg(long = "model-file", value_name = "NAME=SHA256:BYTES")]
    pub model_files: Vec<npugate_result::ModelFile>,

    /// The source model of a compiled (`EPContext`) model: the CPU reference pass runs it (the CPU
    /// EP cannot run `EPContext` nodes), and placement counts nodes and FLOPs in its nodes. A
    /// compiled model without it gets no reference pass (a warning says so).
    #[arg(long, value_name = "PATH")]
    pub reference_model: Option<PathBuf>,

    /// After the timed runs, run inferences back to back for this many seconds and record the
    /// window on `/proc/uptime`'s clock (`energy_window`): the host reads the device's battery
    /// gauge over it (`npugate run --energy-window`, devices only).
    #[arg(long, value_name = "SECONDS", value_parser = parse_window)]
    pub energy_window: Option<f64>,

    /// Print a line on stderr after each inference (`npugate-harness progress {…}`, an
    /// [`InferenceProgress`]): the host shows progress per inference where inferences are slow
    /// (the HTP emulator); off by default, so a timed loop on a device writes nothing.
    #[arg(long)]
    pub progress: bool,

    /// Keep the graph ONNX Runtime partitions (the model after its level-1, EP-independent
    /// optimizations, saved by a CPU session) in `--out` as `partitioned_graph.onnx`, its weights
    /// inside it, instead of removing it once read: `compile` of a model with control flow takes
    /// its subgraphs.
    #[arg(long)]
    pub keep_partitioned_graph: bool,

    /// What to measure and how.
    #[command(flatten)]
    pub settings: HarnessSettings,
}

impl HarnessCommand {
    /// The argument list (after the executable) that parses back into `self`. No shell quoting:
    /// callers that go through a shell quote each word.
    pub fn to_argv(&self) -> Vec<String> {
        let path = |p: &PathBuf| p.display().to_string();
        let mut args = vec![
            "--ort-lib".into(),
            path(&self.ort_lib),
            "--model".into(),
            path(&self.model),
            "--out".into(),
            path(&self.out),
        ];
        if let Some(library) = &self.ep_library {
            args.extend(["--ep-library".into(), path(library)]);
        }
        if let Some(name) = &self.runtime_name {
            args.extend(["--runtime-name".into(), name.clone()]);
        }
        if let Some(sha256) = &self.fixed_from_sha256 {
            args.extend(["--fixed-from-sha256".into(), sha256.clone()]);
        }
        if let Some(reference) = &self.reference_model {
            args.extend(["--reference-model".into(), path(reference)]);
        }
        for file in &self.model_files {
            args.extend(["--model-file".into(), file.to_string()]);
        }
        if let Some(seconds) = self.energy_window {
            args.extend(["--energy-window".into(), seconds.to_string()]);
        }
        if self.progress {
            args.push("--progress".into());
        }
        if self.keep_partitioned_graph {
            args.push("--keep-partitioned-graph".into());
        }
        args.extend(self.settings.to_flags());
        args
    }
}

/// What the harness says after one inference under `--progress`, as one stderr line
/// ([`InferenceProgress::line`]) the host reads back ([`InferenceProgress::parse`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct InferenceProgress {
    /// Which inferences: `first`, `warmup`, `timed`, `outputs`, `profiled`, `reference`.
    pub phase: String,
    /// Inferences of the phase done, this one included (1 = the first).
    pub done: u32,
    /// Inferences of the phase planned (timed runs extended while undecided raise it).
    pub total: u32,
    /// Wall time of this inference, seconds.
    pub seconds: f64,
    /// Inferences of the whole run still to come after this one, every phase.
    pub left: u32,
}

/// How an [`InferenceProgress`] line starts.
const PROGRESS_PREFIX: &str = "npugate-harness progress ";

impl InferenceProgress {
    /// The stderr line (without its newline).
    pub fn line(&self) -> String {
        format!("{PROGRESS_PREFIX}{}", serde_json::to_string(self).unwrap_or_default())
    }

    /// The progress a harness stderr line carries, if it is one.
    pub fn parse(line: &str) -> Option<InferenceProgress> {
        serde_json::from_str(line.trim_end().strip_prefix(PROGRESS_PREFIX)?).ok()
    }
}

/// A window length: a positive, finite number of seconds.
pub fn parse_window(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && seconds > 0.0 => Ok(seconds),
        _ => Err(format!("expected a positive number of seconds, got {text:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_round_trips_every_setting() {
        let model_file = format!("w.bin={}:7", "a".repeat(64));
        let given = HarnessCommand::parse_from([
            "h",
            "--ort-lib",
            "/t/libonnxruntime.so",
            "--model",
            "/t/m.onnx",
            "--out",
            "/t/out",
            "--ep-library",
            "/t/libqnn.so",
            "--runtime-name",
            "rt",
            "--fixed-from-sha256",
            "ab12",
            "--model-file",
            &model_file,
            "--energy-window",
            "2.5",
            "--progress",
            "--leak-check",
            "3",
            "--runs",
            "7",
            "--warmup",
            "1",
            "--profile-runs",
            "0",
            "--no-reference-pass",
            "--seed",
            "9",
            "--ep",
            "qnn",
            "--ep-name",
            "QNNExecutionProvider",
            "--ep-device",
            "npu",
            "--ep-option",
            "a=b=c",
            "--session-config",
            "k=v",
            "--shape",
            "x=1x3",
            "--input",
            "x=/t/a.npy",
            "--intra-threads",
            "2",
            "--optimization",
            "basic",
            "--ort-log-level",
            "error",
            "--strict",
            "--context-cache",
            "/t/cache",
            "--check-outputs",
            "--session-only",
            "--qnn-backend",
            "saver",
            "--htp-performance-mode",
            "sustained_high_performance",
            "--qnn-profiling",
            "detailed",
            "--vtcm-mb",
            "8",
            "--htp-arch",
            "75",
            "--enable-htp-fp16-precision",
            "0",
            "--offload-graph-io-quantization",
            "1",
            "--prompt-tokens",
            "16",
            "--gen-tokens",
            "4",
            "--warmup-generations",
            "0",
            "--generations",
            "2",
        ]);
        let again = HarnessCommand::parse_from(std::iter::once("h".to_string()).chain(given.to_argv()));
        assert_eq!(again, given);
        assert_eq!(again.settings.ep_options[0].value, "b=c");
        assert_eq!(again.settings.ort_log_level, crate::OrtLogLevel::Error);
        assert_eq!(again.settings.inputs[0].path, PathBuf::from("/t/a.npy"));
    }

    #[test]
    fn an_inference_progress_line_reads_back_and_other_lines_are_not_progress() {
        let progress = InferenceProgress { phase: "timed".into(), done: 3, total: 20, seconds: 13.5, left: 18 };
        assert_eq!(InferenceProgress::parse(&format!("{}\n", progress.line())), Some(progress));
        assert_eq!(InferenceProgress::parse("npugate-harness: error: no session"), None);
    }

    #[test]
    fn malformed_values_are_refused_when_parsed() {
        let base = ["h", "--ort-lib", "x", "--model", "y", "--out", "z"];
        for extra in [
            &["--ep-option", "novalue"][..],
            &["--shape", "x=1x0"],
            &["--runs", "0"],
            &["--input", "x="],
            &["--model-file", "w.bin"],
            &["--gen-tokens", "0"],
        ] {
            assert!(HarnessCommand::try_parse_from(base.iter().chain(extra)).is_err(), "{extra:?}");
        }
    }
}
