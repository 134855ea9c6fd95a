//! Where the numbers of a run on a Qualcomm AI Hub hosted device came from (`result.json`
//! `aihub`, schema 1.2): the service and whether it is Qualcomm's, the device, the job and its
//! link, the model as uploaded, AI Hub's own figures, how its layers matched the model's nodes,
//! and what AI Hub cannot tell.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The least share of the model's nodes that an AI Hub layer must name for `npu_flops_pct` to be
/// judged on an AI Hub run: below it, the placement says too little about the model.
pub const MIN_LAYER_MATCH_PCT: f64 = 90.0;

/// What AI Hub cannot tell, said in every AI Hub result rather than guessed.
pub const CANNOT_TELL: [&str; 4] = [
    "CPU wait and the other processes on the device (AI Hub reports no per-run scheduling record: the contention rules have nothing to set aside)",
    "energy (AI Hub reads no battery gauge)",
    "the EP options and session settings of the run (AI Hub chooses them; its tool versions are recorded instead)",
    "the device's thermal state and clocks",
];

/// The record of an AI Hub run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AiHubRecord {
    /// The service's API URL (`api_url` of the official client's configuration).
    pub api_url: String,
    /// True only for Qualcomm's own service (https on `aihub.qualcomm.com`); any other URL (a
    /// proxy, a stand-in) is named as not Qualcomm's in every output.
    pub qualcomm: bool,
    /// The service as outputs name it.
    pub service: String,
    /// The device as AI Hub listed it.
    pub device: AiHubDevice,
    /// The profile job.
    pub job: AiHubJob,
    /// The model as AI Hub has it.
    pub model: AiHubModel,
    /// AI Hub's own figures.
    pub figures: AiHubFigures,
    /// How AI Hub's layers matched the model's nodes.
    pub layers: LayerMatch,
    /// The partitions AI Hub reported (`segment_details`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub segments: Vec<AiHubSegment>,
    /// The tools AI Hub ran the model with (`onnx_runtime`, `qairt`, …).
    pub tool_versions: BTreeMap<String, String>,
    /// What the local run on this machine gave the result (the model's nodes, FLOPs, inputs).
    pub local: String,
    /// What AI Hub cannot tell, one sentence each.
    pub cannot_tell: Vec<String>,
}

/// An AI Hub device.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AiHubDevice {
    /// Its name (`Samsung Galaxy S24 (Family)`).
    pub name: String,
    /// Its OS version.
    pub os: String,
    /// Its chipset attribute (`qualcomm-snapdragon-8gen3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chipset: Option<String>,
    /// Its Hexagon arch attribute (`v75`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hexagon: Option<String>,
    /// Every attribute, as listed.
    pub attributes: Vec<String>,
}

/// A profile job on AI Hub.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AiHubJob {
    /// Its id.
    pub id: String,
    /// Its web page.
    pub link: String,
    /// The options it was submitted with (`--max_profiler_iterations N`).
    pub options: String,
    /// The version of AI Hub that ran it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub_version: Option<String>,
}

/// The model as uploaded.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AiHubModel {
    /// Its id on AI Hub.
    pub id: String,
    /// sha256 of the bytes uploaded (the `.onnx` as it is).
    pub sha256: String,
    /// False when an earlier upload of the same bytes to the same service was reused.
    pub uploaded_now: bool,
}

/// AI Hub's figures, in its units.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AiHubFigures {
    /// The profiler iterations timed (`all_execution_times`, the latency series).
    pub iterations: usize,
    /// AI Hub's headline time, µs (`execution_time`, its "estimated inference time": not a median).
    pub estimated_inference_us: u64,
    /// The first (cold) load, µs.
    pub cold_load_us: u64,
    /// A warm load, µs.
    pub warm_load_us: u64,
    /// Peak memory during execution, bytes, as AI Hub gives it: a range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_memory: Option<ByteRange>,
}

/// A byte range.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ByteRange {
    /// Lower bound.
    pub lower: u64,
    /// Upper bound.
    pub upper: u64,
}

/// AI Hub's layers set against the model's nodes, by name.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LayerMatch {
    /// Layers AI Hub reported.
    pub layers: usize,
    /// Of them, those named like a node of the model.
    pub matched: usize,
    /// Those named like none, in AI Hub's order.
    pub unmatched: Vec<String>,
    /// The model's nodes.
    pub nodes: usize,
    /// Model nodes a layer named: their placement is AI Hub's word.
    pub nodes_placed: usize,
    /// Model nodes no layer named (their placement is unknown).
    pub nodes_without_layer: Vec<String>,
    /// `nodes_placed` as a share of `nodes`, %.
    pub nodes_placed_pct: f64,
    /// The share below which `npu_flops_pct` is not judged ([`MIN_LAYER_MATCH_PCT`]).
    pub min_nodes_placed_pct: f64,
}

impl LayerMatch {
    /// True when enough of the model's nodes were placed by a layer for the placement rules.
    pub fn enough(&self) -> bool {
        self.nodes > 0 && self.nodes_placed_pct >= self.min_nodes_placed_pct
    }

    /// One sentence: how the layers matched.
    pub fn describe(&self) -> String {
        let unmatched = match self.unmatched.as_slice() {
            [] => String::new(),
            names => format!("; layers matching no node: {}", names.join(", ")),
        };
        format!(
            "{} of AI Hub's {} layers match a model node, placing {} of the model's {} nodes ({:.0}%; npu_flops_pct needs {:.0}%){unmatched}",
            self.matched, self.layers, self.nodes_placed, self.nodes, self.nodes_placed_pct, self.min_nodes_placed_pct
        )
    }
}

/// One partition AI Hub reported.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AiHubSegment {
    /// Its id.
    pub id: String,
    /// `CPU`, `GPU` or `NPU`.
    pub compute_unit: String,
    /// The delegate that ran it.
    pub delegate: String,
    /// Layers in it.
    pub layers: usize,
    /// Its time, µs, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_time_us: Option<u64>,
}
