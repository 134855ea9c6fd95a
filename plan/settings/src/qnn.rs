//! QNN execution provider options under the names Snapdragon teams know, turned into the
//! provider-option list both attach paths (built-in and plugin) pass to ONNX Runtime.

use std::path::{Path, PathBuf};

use clap::builder::BoolishValueParser;
use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::spelling::spelling;

/// Float graphs run in fp16 on the HTP unless `--enable-htp-fp16-precision 0` says otherwise: what
/// a device run does, and what the host HTP's preflight and compile assume.
pub const DEFAULT_HTP_FP16: bool = true;

/// Provider option keys that have their own flag; `--ep-option` must not set them a second way.
const DEDICATED_KEYS: &[(&str, &str)] = &[
    ("backend_type", "--qnn-backend"),
    ("backend_path", "--qnn-backend"),
    ("htp_performance_mode", "--htp-performance-mode"),
    ("profiling_level", "--qnn-profiling"),
    ("profiling_file_path", "--qnn-profiling (the CSV always goes to the result directory)"),
    ("htp_graph_finalization_optimization_mode", "--htp-graph-finalization-optimization-mode"),
    ("vtcm_mb", "--vtcm-mb"),
    ("soc_model", "--soc-model"),
    ("htp_arch", "--htp-arch"),
    ("enable_htp_fp16_precision", "--enable-htp-fp16-precision"),
    ("offload_graph_io_quantization", "--offload-graph-io-quantization"),
    ("enable_framework_op_trace", "nothing: npugate traces every account session's QNN ops itself"),
    ("framework_op_trace_dir", "nothing: the op trace always goes to the result directory"),
    ("dump_json_qnn_graph", "nothing: npugate dumps the QNN graph of every account session itself"),
    ("json_qnn_graph_dir", "nothing: the QNN graph dump is read and removed by the harness"),
];

/// The file QNN's framework op trace is written to, in `framework_op_trace_dir`.
pub const OP_TRACE_FILE: &str = "qnn_op_trace.json";

/// The folder of the result directory QNN's JSON graph dump goes to (one `<graph>.json` per QNN
/// graph); the harness reads the ops' tensors from it and removes it.
pub const GRAPH_DUMP_DIR: &str = "qnn_graph";

/// QNN options (apply to `--ep qnn` only). Unset options keep the defaults documented per flag.
/// In TOML (a sweep plan) they form a `qnn` table with the field names as keys.
#[derive(Debug, Clone, Default, PartialEq, Args, Serialize)]
#[command(next_help_heading = "QNN execution provider")]
pub struct QnnArgs {
    /// QNN backend: `htp` (Hexagon NPU), `gpu` (Adreno), `cpu`, `saver` (records QNN API calls,
    /// needs no hardware) or the path of a backend library (`libQnnHtp.so`…) [default: htp].
    #[arg(long, value_name = "htp|gpu|cpu|saver|PATH", value_parser = parse_backend)]
    pub qnn_backend: Option<QnnBackend>,

    /// HTP performance mode [default: burst].
    #[arg(long, value_enum, ignore_case = true)]
    pub htp_performance_mode: Option<HtpPerformanceMode>,

    /// QNN's own per-op profiling, written to `qnn_profile.csv` by the profiled pass only (never
    /// by the timed session: detailed profiling adds per-op overhead) [default: off].
    #[arg(long, value_enum, ignore_case = true)]
    pub qnn_profiling: Option<QnnProfiling>,

    /// HTP graph finalization optimization mode (0 = QNN default, 3 = longest prepare, best graph).
    #[arg(long, value_name = "0-3", value_parser = clap::value_parser!(u8).range(0..=3))]
    pub htp_graph_finalization_optimization_mode: Option<u8>,

    /// VTCM size in MB to request (0 = backend default).
    #[arg(long, value_name = "MB")]
    pub vtcm_mb: Option<u32>,

    /// QNN SoC model id (e.g. 57 = SM8650); used for offline preparation, ignored on a real target.
    #[arg(long, value_name = "ID")]
    pub soc_model: Option<u32>,

    /// Hexagon architecture (68, 69, 73, 75, 79, 81; 0 = none); ignored on a real target.
    #[arg(long, value_name = "ARCH", value_parser = ["0", "68", "69", "73", "75", "79", "81"])]
    pub htp_arch: Option<String>,

    /// Run float graphs in fp16 on HTP. Always passed explicitly because its default differs
    /// between builds (in-tree QNN EP: on, plugin 2.x: off) [default: 1].
    #[arg(long, value_name = "0|1", value_parser = BoolishValueParser::new())]
    pub enable_htp_fp16_precision: Option<bool>,

    /// Run graph-input quantization / output dequantization on QNN instead of the CPU EP
    /// [default: the EP's, 1 since ORT 1.21; forced to 0 by ORT under --strict].
    #[arg(long, value_name = "0|1", value_parser = BoolishValueParser::new())]
    pub offload_graph_io_quantization: Option<bool>,
}

/// Where the QNN backend library comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QnnBackend {
    /// A backend by type (`backend_type`), loaded from the EP's own directory.
    Type(&'static str),
    /// A backend library by path (`backend_path`).
    Path(PathBuf),
}

/// The backend types the QNN EP knows (`backend_type`).
const BACKEND_TYPES: &[&str] = &["htp", "gpu", "cpu", "saver"];

impl Serialize for QnnBackend {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.spelling())
    }
}

impl QnnBackend {
    /// The command-line spelling (`htp`, or the library path).
    pub fn spelling(&self) -> String {
        match self {
            QnnBackend::Type(name) => name.to_string(),
            QnnBackend::Path(path) => path.display().to_string(),
        }
    }
}

fn parse_backend(text: &str) -> Result<QnnBackend, String> {
    if let Some(known) = BACKEND_TYPES.iter().find(|t| **t == text) {
        return Ok(QnnBackend::Type(known));
    }
    if text.contains('/') || text.ends_with(".so") || text.ends_with(".dll") {
        return Ok(QnnBackend::Path(PathBuf::from(text)));
    }
    Err(format!("expected htp, gpu, cpu, saver or the path of a QNN backend library (libQnnHtp.so), got {text:?}"))
}

/// HTP performance modes (`htp_performance_mode`), spelled as the QNN EP spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HtpPerformanceMode {
    /// Highest clocks, RPC polling on (the usual benchmark setting).
    #[value(name = "burst")]
    Burst,
    /// Balanced performance and power.
    #[value(name = "balanced")]
    Balanced,
    /// The backend's default voting.
    #[value(name = "default")]
    Default,
    /// High performance without burst.
    #[value(name = "high_performance")]
    HighPerformance,
    /// Power saver, high end.
    #[value(name = "high_power_saver")]
    HighPowerSaver,
    /// Balanced, low end.
    #[value(name = "low_balanced")]
    LowBalanced,
    /// Power saver, low end.
    #[value(name = "low_power_saver")]
    LowPowerSaver,
    /// Power saver.
    #[value(name = "power_saver")]
    PowerSaver,
    /// Lowest clocks.
    #[value(name = "extreme_power_saver")]
    ExtremePowerSaver,
    /// High performance that holds under thermal limits.
    #[value(name = "sustained_high_performance")]
    SustainedHighPerformance,
}

/// QNN profiling levels (`profiling_level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum QnnProfiling {
    /// No QNN profiling.
    Off,
    /// Per-execute totals.
    Basic,
    /// Per-op timings (adds per-op overhead).
    Detailed,
    /// Per-op trace for QNN's viewer tools (QAIRT ≥ 2.39).
    Optrace,
}

impl QnnArgs {
    /// The flags that were given, by name (to reject them with `--ep cpu`).
    pub fn given_flags(&self) -> Vec<String> {
        crate::table::given_flags(self)
    }

    /// The flags given that a `--soc` of the host HTP emulator sets itself: the SoC's model and
    /// arch, and a backend other than the HTP.
    pub fn soc_flags(&self) -> Vec<&'static str> {
        let mut given = Vec::new();
        if self.soc_model.is_some() {
            given.push("--soc-model");
        }
        if self.htp_arch.is_some() {
            given.push("--htp-arch");
        }
        if self.qnn_backend.as_ref().is_some_and(|b| *b != QnnBackend::Type("htp")) {
            given.push("--qnn-backend");
        }
        given
    }

    /// The backend, defaulting to HTP.
    pub fn backend(&self) -> QnnBackend {
        self.qnn_backend.clone().unwrap_or(QnnBackend::Type("htp"))
    }

    /// True when QNN profiling was requested.
    pub fn profiling(&self) -> bool {
        self.qnn_profiling.is_some_and(|p| p != QnnProfiling::Off)
    }

    /// Provider options of the timed session: the dedicated flags (with their defaults) followed
    /// by the user's `--ep-option`s, which must not repeat a dedicated key.
    pub fn provider_options(&self, extra: &[(String, String)]) -> Result<Vec<(String, String)>, String> {
        for (key, _) in extra {
            if let Some((_, flag)) = DEDICATED_KEYS.iter().find(|(k, _)| k == key) {
                return Err(format!("--ep-option {key}=… sets a QNN option that has its own flag: use {flag}"));
            }
        }
        let bool_text = |b: bool| if b { "1" } else { "0" }.to_string();
        let mut options = vec![match self.backend() {
            QnnBackend::Type(t) => ("backend_type".to_string(), t.to_string()),
            QnnBackend::Path(p) => ("backend_path".to_string(), p.display().to_string()),
        }];
        let mode = self.htp_performance_mode.unwrap_or(HtpPerformanceMode::Burst);
        options.push(("htp_performance_mode".into(), spelling(mode)));
        options.push((
            "enable_htp_fp16_precision".into(),
            bool_text(self.enable_htp_fp16_precision.unwrap_or(DEFAULT_HTP_FP16)),
        ));
        let optional = [
            (
                "htp_graph_finalization_optimization_mode",
                self.htp_graph_finalization_optimization_mode.map(|v| v.to_string()),
            ),
            ("vtcm_mb", self.vtcm_mb.map(|v| v.to_string())),
            ("soc_model", self.soc_model.map(|v| v.to_string())),
            ("htp_arch", self.htp_arch.clone()),
            ("offload_graph_io_quantization", self.offload_graph_io_quantization.map(bool_text)),
        ];
        options.extend(optional.into_iter().filter_map(|(k, v)| v.map(|v| (k.to_string(), v))));
        options.extend(extra.iter().cloned());
        Ok(options)
    }

    /// Options of every session that gives the EP's account (the profiled pass, a session-only
    /// run's session; never the timed session) of the QNN EP plugin: the framework op trace
    /// (onnxruntime-qnn ≥ 2.7, [`OP_TRACE_FILE`]) and the JSON dump of each QNN graph (the ops'
    /// tensors, [`GRAPH_DUMP_DIR`]) into the result directory `out`. Older plugins ignore them.
    pub fn trace_options(out: &Path) -> Vec<(String, String)> {
        vec![
            ("enable_framework_op_trace".into(), "1".into()),
            ("framework_op_trace_dir".into(), out.display().to_string()),
            ("dump_json_qnn_graph".into(), "1".into()),
            ("json_qnn_graph_dir".into(), out.join(GRAPH_DUMP_DIR).display().to_string()),
        ]
    }

    /// Options added to the profiled pass only: QNN profiling into `csv`.
    pub fn profiling_options(&self, csv: &Path) -> Vec<(String, String)> {
        match self.qnn_profiling {
            Some(level) if level != QnnProfiling::Off => vec![
                ("profiling_level".into(), spelling(level)),
                ("profiling_file_path".into(), csv.display().to_string()),
            ],
            _ => Vec::new(),
        }
    }
}

crate::spelling::serialize_as_value_name!(HtpPerformanceMode, QnnProfiling);

#[cfg(test)]
mod tests {
    use super::*;

    fn options(args: &QnnArgs) -> Vec<(String, String)> {
        args.provider_options(&[]).unwrap()
    }

    #[test]
    fn defaults_are_htp_burst_fp16_explicit() {
        let o = options(&QnnArgs::default());
        assert_eq!(o[0], ("backend_type".into(), "htp".into()));
        assert!(o.contains(&("htp_performance_mode".into(), "burst".into())));
        assert!(o.contains(&("enable_htp_fp16_precision".into(), "1".into())));
        assert_eq!(o.len(), 3, "{o:?}");
    }

    #[test]
    fn backend_path_and_all_performance_modes_spell_like_qnn() {
        assert_eq!(
            parse_backend("/data/local/tmp/libQnnHtp.so").unwrap(),
            QnnBackend::Path("/data/local/tmp/libQnnHtp.so".into())
        );
        assert_eq!(parse_backend("saver").unwrap(), QnnBackend::Type("saver"));
        assert!(parse_backend("npu").unwrap_err().contains("htp, gpu, cpu, saver"));
        let modes: Vec<String> = HtpPerformanceMode::value_variants().iter().map(|m| spelling(*m)).collect();
        assert_eq!(modes.len(), 10);
        assert!(modes.contains(&"sustained_high_performance".to_string()));
    }

    #[test]
    fn dedicated_keys_cannot_come_through_ep_option() {
        let err = QnnArgs::default().provider_options(&[("backend_path".into(), "x.so".into())]).unwrap_err();
        assert!(err.contains("use --qnn-backend"), "{err}");
        let o = QnnArgs::default().provider_options(&[("skip_backend_op_validation".into(), "1".into())]).unwrap();
        assert_eq!(o.last().unwrap().0, "skip_backend_op_validation");
    }

    #[test]
    fn profiling_options_only_when_on() {
        let csv = Path::new("/out/qnn_profile.csv");
        assert!(QnnArgs::default().profiling_options(csv).is_empty());
        let args = QnnArgs { qnn_profiling: Some(QnnProfiling::Optrace), ..QnnArgs::default() };
        assert_eq!(args.profiling_options(csv)[0], ("profiling_level".into(), "optrace".into()));
    }
}
