//! Command-line interface of `npugate-harness`: where the libraries, model and output are, plus
//! the measurement settings shared with the host (`harness_settings::HarnessSettings`).

use std::path::PathBuf;

use clap::Parser;
use harness_settings::HarnessSettings;

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

    /// EP plugin library (e.g. libonnxruntime_providers_qnn.so); without it a QNN EP compiled into
    /// libonnxruntime is used.
    #[arg(long, value_name = "PATH")]
    pub ep_library: Option<PathBuf>,

    /// Name of the runtime (library set), recorded in the result.
    #[arg(long, value_name = "NAME")]
    pub runtime_name: Option<String>,

    /// What to measure and how.
    #[command(flatten)]
    pub settings: HarnessSettings,
}
