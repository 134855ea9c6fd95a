//! The execution providers the harness attaches, and the hardware a plugin EP's device sits on.
//!
//! Every EP is *preferred*: it claims what it can, and ONNX Runtime leaves the rest to the CPU EP
//! without a word. The preferred EP is what placement and the `npu_*` gate rules measure ("npu"
//! means the preferred accelerator EP, whichever it is).

use clap::ValueEnum;
use serde::Deserialize;

/// Execution providers the harness can attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
pub enum EpKind {
    /// ONNX Runtime's CPU execution provider.
    #[value(name = "cpu")]
    #[serde(rename = "cpu")]
    Cpu,
    /// Qualcomm QNN (Hexagon NPU through the HTP backend by default).
    #[value(name = "qnn")]
    #[serde(rename = "qnn")]
    Qnn,
    /// Intel OpenVINO (CPU, GPU or NPU by its `device_type` option).
    #[value(name = "openvino")]
    #[serde(rename = "openvino")]
    OpenVino,
    /// XNNPACK (Arm and x86 CPUs; Android, iOS).
    #[value(name = "xnnpack")]
    #[serde(rename = "xnnpack")]
    Xnnpack,
    /// Android NNAPI.
    #[value(name = "nnapi")]
    #[serde(rename = "nnapi")]
    Nnapi,
    /// Apple Core ML.
    #[value(name = "coreml")]
    #[serde(rename = "coreml")]
    CoreMl,
    /// NVIDIA CUDA.
    #[value(name = "cuda")]
    #[serde(rename = "cuda")]
    Cuda,
    /// NVIDIA TensorRT.
    #[value(name = "tensorrt")]
    #[serde(rename = "tensorrt")]
    TensorRt,
    /// Microsoft DirectML (Windows).
    #[value(name = "dml")]
    #[serde(rename = "dml")]
    Dml,
    /// WebGPU (Dawn).
    #[value(name = "webgpu")]
    #[serde(rename = "webgpu")]
    WebGpu,
    /// AMD Vitis AI (Ryzen AI NPUs).
    #[value(name = "vitisai")]
    #[serde(rename = "vitisai")]
    VitisAi,
    /// Any plugin EP library (`--ep-library`), named by `--ep-name`, on the device `--ep-device`.
    #[value(name = "plugin")]
    #[serde(rename = "plugin")]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
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
            let from_toml: EpKind = toml::Value::String(kind.cli_name().into()).try_into().unwrap();
            assert_eq!(from_toml, *kind);
            assert_eq!(kind.ort_name().is_none(), *kind == EpKind::Plugin);
        }
        assert_eq!(EpKind::value_variants().len(), 12);
    }
}
