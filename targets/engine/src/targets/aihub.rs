//! A Qualcomm AI Hub hosted device as a target. What only the model tells — its nodes, their
//! shapes and FLOPs (the CPU reference pass), its inputs — comes from the harness run on this
//! machine on the CPU with one timed run; what only the device tells comes from an AI Hub profile
//! job: the latency series (`all_execution_times`, one per profiler iteration: `--runs N` asks for
//! `--max_profiler_iterations N`; AI Hub loads the model cold, then warm, before it times, and
//! warms up as it chooses — npugate's `--warmup` does not reach it), cold and warm load, the
//! placement of each layer (`layer_details`, joined to the model's nodes by name), peak memory
//! (a range), the partitions and the tool versions. Both go into ONE `result.json`, judged by the
//! gate as a phone's; its `aihub` record says where every number came from.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use npugate_aihub::devices::attribute;
use npugate_aihub::messages::ComputeUnit;
use npugate_aihub::{Device, PollPolicy, ProfileDetail, ProfileError, ProfileRun, Session};
use npugate_result::aihub::{
    AiHubDevice, AiHubFigures, AiHubJob, AiHubModel, AiHubRecord, AiHubSegment, ByteRange, LayerMatch, CANNOT_TELL,
    MIN_LAYER_MATCH_PCT,
};
use npugate_result::{AssignedNode, AssignedSubgraph, Assignment, MemoryRecord, RunResult, SystemFingerprint};
use npugate_settings::{EpKind, HarnessSettings};

use super::host::LocalLaunch;
use super::{Execution, Job, Progress, Target};

/// The EP an AI Hub layer on the NPU ran in (AI Hub runs ONNX models with ONNX Runtime's QNN EP).
pub const NPU_EP: &str = "QNNExecutionProvider";
/// The EP of a layer AI Hub reports on the CPU.
pub const CPU_EP: &str = "CPUExecutionProvider";
/// How AI Hub's GPU layers are named (the QNN EP's GPU backend): off the NPU, like the CPU's.
pub const GPU_EP: &str = "QNNExecutionProvider (GPU backend)";
/// The first wait between polls of a job; it doubles up to [`MAX_POLL_INTERVAL`].
pub const FIRST_POLL_INTERVAL: Duration = Duration::from_millis(500);
/// The longest wait between polls (the official client polls every 10 s).
pub const MAX_POLL_INTERVAL: Duration = Duration::from_secs(15);

/// One AI Hub device, reached through the command's shared [`Session`].
pub struct AiHubTarget {
    session: Arc<Session>,
    device: Device,
    name: String,
}

impl AiHubTarget {
    /// The device `device` of `session`, named for its result directory.
    pub fn new(session: Arc<Session>, device: Device) -> AiHubTarget {
        let name = dir_name(&device.name);
        AiHubTarget { session, device, name }
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }
}

/// A device name as a directory name: `Samsung Galaxy S24 (Family)` → `samsung-galaxy-s24-family`.
pub fn dir_name(device: &str) -> String {
    let words: Vec<String> = device
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    match words.is_empty() {
        true => "aihub-device".into(),
        false => words.join("-"),
    }
}

/// The settings of the local pass: the CPU, one timed run, the reference pass, nothing else.
fn local_settings(settings: &HarnessSettings) -> HarnessSettings {
    let mut local = settings.clone();
    local.session.ep = EpKind::Cpu;
    local.session.ep_name = None;
    local.session.ep_device = None;
    local.session.ep_options.clear();
    local.session.session_config.clear();
    local.runs = 1;
    local.warmup = 0;
    local.profile_runs = 0;
    local.no_reference_pass = false;
    local.check_outputs = false;
    local.leak_check = 0;
    local
}

impl Target for AiHubTarget {
    fn name(&self) -> &str {
        &self.name
    }

    fn execute(&self, job: &Job<'_>, out: &Path, progress: &Progress<'_>) -> Result<Execution> {
        if !job.runtime.target.starts_with(std::env::consts::ARCH) {
            bail!("the local pass of an AI Hub run needs a runtime for this machine, not {}", job.runtime.target);
        }
        progress.step("local reference pass");
        let settings = local_settings(job.settings);
        let local = Job { settings: &settings, ..*job };
        let mut execution =
            LocalLaunch { program: Command::new(job.harness), path: &|p: &Path| p.to_path_buf(), inferences: None }
                .run(&local, out)?;
        if !execution.succeeded() {
            return Ok(execution);
        }
        let mut result = RunResult::read(out).map_err(anyhow::Error::from)?;
        let policy =
            PollPolicy { first_interval: FIRST_POLL_INTERVAL, max_interval: MAX_POLL_INTERVAL, timeout: job.timeout };
        let run = self
            .session
            .profile(job.model, &self.device, job.settings.runs, &policy, &|| job.cancel.is_cancelled(), &|step| {
                progress.step(step)
            })
            .map_err(|error| match error {
                ProfileError::Stopped { .. } => anyhow::Error::from(error).context(job.cancel.error()),
                other => anyhow::Error::from(other),
            })
            .with_context(|| format!("AI Hub device {}", self.device.name))?;
        let record = merge(&mut result, &run, &self.device, self.session.client().config());
        execution.warnings.extend(result.warnings.iter().take(1).cloned());
        if !record.layers.enough() {
            execution.warnings.push(format!("npu_flops_pct is not judged: {}", record.layers.describe()));
        }
        result.write(out).with_context(|| format!("cannot write the result in {}", out.display()))?;
        Ok(execution)
    }
}

/// The local result with AI Hub's measurements in place of the local ones; returns the record.
pub fn merge(
    result: &mut RunResult,
    run: &ProfileRun,
    device: &Device,
    config: &npugate_aihub::ClientConfig,
) -> AiHubRecord {
    let detail = &run.detail;
    let (assignment, layers) = assignment(result, detail);
    let record = AiHubRecord {
        api_url: config.api_url.clone(),
        qualcomm: config.is_qualcomm(),
        service: config.service(),
        device: AiHubDevice {
            name: device.name.clone(),
            os: device.os.clone(),
            chipset: attribute(device, "chipset").map(str::to_string),
            hexagon: attribute(device, "hexagon").map(str::to_string),
            attributes: device.attributes.clone(),
        },
        job: AiHubJob {
            id: run.job_id.clone(),
            link: run.link.clone(),
            options: run.options.clone(),
            hub_version: run.hub_version.clone(),
        },
        model: AiHubModel {
            id: run.uploaded.model_id.clone(),
            sha256: run.uploaded.sha256.clone(),
            uploaded_now: run.uploaded.uploaded_now,
        },
        figures: AiHubFigures {
            iterations: detail.all_execution_times.len(),
            estimated_inference_us: detail.execution_time,
            cold_load_us: detail.cold_load_time,
            warm_load_us: detail.warm_load_time,
            peak_memory: detail.execution_memory.and_then(|m| m.peak).map(|r| ByteRange { lower: r.lower, upper: r.upper }),
        },
        layers,
        segments: segments(detail),
        tool_versions: detail.tool_versions.iter().map(|t| (t.name.clone(), t.version.clone())).collect(),
        local: "this machine's CPU ran the model once (ONNX Runtime's CPU EP, graph optimizations off for the reference pass): the model's nodes, their shapes and FLOPs, the inputs".into(),
        cannot_tell: CANNOT_TELL.iter().map(|s| s.to_string()).collect(),
    };
    let timings = &mut result.timings;
    timings.latencies_ns = detail.all_execution_times.iter().map(|us| us.saturating_mul(1000)).collect();
    timings.loop_wall_ns = timings.latencies_ns.iter().sum();
    timings.session_create_ns = detail.cold_load_time.saturating_mul(1000);
    timings.context_cold_create_ns = Some(detail.cold_load_time.saturating_mul(1000));
    timings.context_warm_create_ns = Some(detail.warm_load_time.saturating_mul(1000));
    timings.first_inference_ns = 0;
    timings.profiled_pass_ns = 0;
    timings.cpu_wait = None;
    result.histogram = None;
    result.settings.runs = detail.all_execution_times.len() as u32;
    result.settings.warmup = 0;
    result.assignment = assignment;
    result.backend = None;
    result.fusions = None;
    result.qnn_trace = None;
    if let Some(graph) = result.graph.as_mut() {
        // AI Hub's layers name the model's own nodes (when they match at all), not the graph the
        // local CPU session partitioned.
        graph.partitioned = None;
    }
    result.execution.requested_ep = "aihub".into();
    result.execution.preferred_ep = NPU_EP.into();
    result.execution.attach = "aihub".into();
    result.execution.ep_options = BTreeMap::new();
    result.execution.session_config = BTreeMap::new();
    result.execution.profiled_pass_ep_options = BTreeMap::new();
    result.runtime = npugate_result::RuntimeIdentity {
        name: Some(format!("AI Hub {}", run.hub_version.as_deref().unwrap_or("(version not reported)"))),
        ort_version: record
            .tool_versions
            .get("onnx_runtime")
            .cloned()
            .unwrap_or_else(|| "unknown (AI Hub did not say)".into()),
        ort_build_info: record.tool_versions.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "),
        libraries: Vec::new(),
    };
    result.memory = record.figures.peak_memory.map(|range| MemoryRecord {
        source: format!(
            "AI Hub execution_memory.peak, a range {}–{} bytes: the upper bound is judged",
            range.lower, range.upper
        ),
        peak_bytes: Some(range.upper),
        ..MemoryRecord::default()
    });
    result.fingerprint = fingerprint(&record.device);
    result.warnings.insert(0, source_line(&record));
    result.warnings.push(format!("AI Hub cannot tell: {}", record.cannot_tell.join("; ")));
    result.aihub = Some(record.clone());
    record
}

/// The first line of every AI Hub result's warnings: where the numbers came from.
pub fn source_line(record: &AiHubRecord) -> String {
    let service = match record.qualcomm {
        true => format!("Qualcomm AI Hub ({})", record.api_url),
        false => format!("{}, which is NOT Qualcomm's AI Hub service", record.api_url),
    };
    format!(
        "measured by AI Hub job {} on {} ({}), service {service}: {} profiler iterations; {}",
        record.job.id,
        record.device.name,
        record.job.link,
        record.figures.iterations,
        record.layers.describe()
    )
}

/// The device as a fingerprint: its name as the device, its chipset as the SoC.
fn fingerprint(device: &AiHubDevice) -> SystemFingerprint {
    let mut soc = BTreeMap::new();
    if let Some(chipset) = &device.chipset {
        soc.insert("machine".to_string(), chipset.clone());
    }
    if let Some(hexagon) = &device.hexagon {
        soc.insert("hexagon".to_string(), hexagon.clone());
    }
    SystemFingerprint {
        cpu_model: Some(format!("AI Hub: {}", device.name)),
        os_name: attribute_os(device),
        os_version: Some(device.os.clone()),
        arch: "aarch64".into(),
        soc,
        absent: vec!["the device itself: AI Hub reports its name, OS and attributes, not its properties".into()],
        ..SystemFingerprint::default()
    }
}

fn attribute_os(device: &AiHubDevice) -> Option<String> {
    device.attributes.iter().find_map(|a| a.strip_prefix("os:")).map(str::to_string)
}

/// The EP an AI Hub layer ran in.
fn layer_ep(compute_unit: i32) -> &'static str {
    match ComputeUnit::try_from(compute_unit) {
        Ok(ComputeUnit::Npu) => NPU_EP,
        Ok(ComputeUnit::Gpu) => GPU_EP,
        _ => CPU_EP,
    }
}

fn unit_name(compute_unit: i32) -> String {
    match ComputeUnit::try_from(compute_unit) {
        Ok(ComputeUnit::Npu) => "NPU".into(),
        Ok(ComputeUnit::Gpu) => "GPU".into(),
        Ok(ComputeUnit::Cpu) => "CPU".into(),
        _ => "unspecified".into(),
    }
}

/// AI Hub's layers joined to the model's nodes by name: one subgraph per run of consecutive
/// matched layers on one EP, and how many matched.
fn assignment(result: &RunResult, detail: &ProfileDetail) -> (Assignment, LayerMatch) {
    let nodes: BTreeMap<&str, &npugate_result::GraphNode> =
        result.graph.iter().flat_map(|g| &g.nodes).map(|n| (n.name.as_str(), n)).collect();
    let mut subgraphs: Vec<AssignedSubgraph> = Vec::new();
    let mut unmatched = Vec::new();
    let mut named = std::collections::BTreeSet::new();
    for layer in &detail.layer_details {
        let Some(node) = nodes.get(layer.name.as_str()) else {
            unmatched.push(layer.name.clone());
            continue;
        };
        if !named.insert(layer.name.as_str()) {
            continue;
        }
        let ep = layer_ep(layer.compute_unit);
        let assigned =
            AssignedNode { name: node.name.clone(), op_type: node.op_type.clone(), domain: node.domain.clone() };
        match subgraphs.last_mut() {
            Some(last) if last.ep == ep => last.nodes.push(assigned),
            _ => subgraphs.push(AssignedSubgraph { ep: ep.into(), nodes: vec![assigned] }),
        }
    }
    let layers = detail.layer_details.len();
    let matched = layers - unmatched.len();
    let nodes_without_layer: Vec<String> =
        nodes.keys().filter(|name| !named.contains(*name)).map(|n| n.to_string()).collect();
    let assignment = Assignment {
        source: "AI Hub layer_details joined to the model's nodes by name".into(),
        error: (matched == 0).then(|| "no AI Hub layer is named like a node of the model".to_string()),
        subgraphs,
    };
    let nodes_placed = named.len();
    let nodes_placed_pct = if nodes.is_empty() { 0.0 } else { 100.0 * nodes_placed as f64 / nodes.len() as f64 };
    let layers = LayerMatch {
        layers,
        matched,
        unmatched,
        nodes: nodes.len(),
        nodes_placed,
        nodes_without_layer,
        nodes_placed_pct,
        min_nodes_placed_pct: MIN_LAYER_MATCH_PCT,
    };
    (assignment, layers)
}

fn segments(detail: &ProfileDetail) -> Vec<AiHubSegment> {
    detail
        .segment_details
        .iter()
        .map(|segment| AiHubSegment {
            id: segment.id.clone(),
            compute_unit: unit_name(segment.compute_unit),
            delegate: segment.delegate_name.clone(),
            layers: detail
                .layer_details
                .iter()
                .filter(|l| l.segment_id.as_deref() == Some(segment.id.as_str()))
                .count(),
            execution_time_us: segment.execution_time,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names_become_directory_names() {
        assert_eq!(dir_name("Samsung Galaxy S24 (Family)"), "samsung-galaxy-s24-family");
        assert_eq!(dir_name("Snapdragon X Elite CRD"), "snapdragon-x-elite-crd");
        assert_eq!(dir_name("()"), "aihub-device");
    }
}
