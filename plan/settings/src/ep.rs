//! The execution providers the harness attaches, and the hardware a plugin EP's device sits on.
//!
//! Every EP is *preferred*: it claims what it can, and ONNX Runtime leaves the rest to the CPU EP
//! without a word. The preferred EP is what placement and the `npu_*` gate rules measure ("npu"
//! means the preferred accelerator EP, whichever it is).

use clap::ValueEnum;

/// Execution providers the harness can attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EpKind {
    /// ONNX Runtime's CPU execution provider.
    #[value(name = "cpu")]
    Cpu,
    /// Qualcomm QNN (Hexagon NPU through the HTP backend by default).
    #[value(name = "qnn")]
    Qnn,
    /// Intel OpenVINO (CPU, GPU or NPU by its `device_type` option).
    #[value(name = "openvino")]
    OpenVino,
    /// XNNPACK (Arm and x86 CPUs; Android, iOS).
    #[value(name = "xnnpack")]
    Xnnpack,
    /// Android NNAPI.
    #[value(name = "nnapi")]
    Nnapi,
    /// Apple Core ML.
    #[value(name = "coreml")]
    CoreMl,
    /// NVIDIA CUDA.
    #[value(name = "cuda")]
    Cuda,
    /// NVIDIA TensorRT.
    #[value(name = "tensorrt")]
    TensorRt,
    /// Microsoft DirectML (Windows).
    #[value(name = "dml")]
    Dml,
    /// WebGPU (Dawn).
    #[value(name = "webgpu")]
    WebGpu,
    /// AMD Vitis AI (Ryzen AI NPUs).
    #[value(name = "vitisai")]
    VitisAi,
    /// Any plugin EP library (`--ep-library`), named by `--ep-name`, on the device `--ep-device`.
    #[value(name = "plugin")]
    Plugin,
}

impl EpKind {
    /// True when the EP needs every dim of the model static (QNN, NNAPI, Core ML, XNNPACK,
    /// VitisAI): npugate then fixes the model's input dims from `--shape` before the session is
    /// created. The others run dynamic dims and get the model as given (fixing dims can break ONNX
    /// Runtime's shape inference of an `If` branch exported for other sizes, as in silero-vad).
    pub fn needs_static_shapes(self) -> bool {
        matches!(self, EpKind::Qnn | EpKind::Nnapi | EpKind::CoreMl | EpKind::Xnnpack | EpKind::VitisAi)
    }

    /// ONNX Runtime's name of the provider; `None` for [`EpKind::Plugin`], whose name `--ep-name` gives.
    pub fn ort_name(self) -> Option<&'static str> {
        Some(match self {
            EpKind::Cpu => "CPUExecutionProvider",
            EpKind::Qnn => "QNNExecutionProvider",
            EpKind::OpenVino => "OpenVINOExecutionProvider",
            EpKind::Xnnpack => "XnnpackExecutionProvider",
            EpKind::Nnapi => "NnapiExecutionProvider",
            EpKind::CoreMl => "CoreMLExecutionProvider",
            EpKind::Cuda => "CUDAExecutionProvider",
            EpKind::TensorRt => "TensorrtExecutionProvider",
            EpKind::Dml => "DmlExecutionProvider",
            EpKind::WebGpu => "WebGpuExecutionProvider",
            EpKind::VitisAi => "VitisAIExecutionProvider",
            EpKind::Plugin => return None,
        })
    }

    /// The command-line spelling.
    pub fn cli_name(self) -> &'static str {
        match self {
            EpKind::Cpu => "cpu",
            EpKind::Qnn => "qnn",
            EpKind::OpenVino => "openvino",
            EpKind::Xnnpack => "xnnpack",
            EpKind::Nnapi => "nnapi",
            EpKind::CoreMl => "coreml",
            EpKind::Cuda => "cuda",
            EpKind::TensorRt => "tensorrt",
            EpKind::Dml => "dml",
            EpKind::WebGpu => "webgpu",
            EpKind::VitisAi => "vitisai",
            EpKind::Plugin => "plugin",
        }
    }

    /// True for every EP but the CPU EP: an accelerator that can leave nodes to the CPU.
    pub fn is_accelerator(self) -> bool {
        self != EpKind::Cpu
    }
}

/// The hardware a plugin EP device sits on (`--ep-device`), as ONNX Runtime's device discovery
/// reports it (`OrtHardwareDeviceType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EpDevice {
    /// A CPU device.
    Cpu,
    /// A GPU device.
    Gpu,
    /// An NPU device.
    Npu,
}

impl EpDevice {
    /// The command-line spelling.
    pub fn cli_name(self) -> &'static str {
        match self {
            EpDevice::Cpu => "cpu",
            EpDevice::Gpu => "gpu",
            EpDevice::Npu => "npu",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ep_spells_the_same_on_the_command_line_and_in_toml() {
        for kind in EpKind::value_variants() {
            let parsed = EpKind::from_str(kind.cli_name(), false).unwrap();
            assert_eq!(parsed, *kind);
            let table: toml::Table =
                [("ep".to_string(), toml::Value::String(kind.cli_name().into()))].into_iter().collect();
            assert_eq!(crate::table::parse::<crate::SessionSettings>(&table).unwrap().ep, *kind);
            let upper = EpKind::from_str(&kind.cli_name().to_ascii_uppercase(), true).unwrap();
            assert_eq!(upper, *kind, "names in any case");
            assert_eq!(kind.ort_name().is_none(), *kind == EpKind::Plugin);
        }
        assert_eq!(EpKind::value_variants().len(), 12);
    }
}
