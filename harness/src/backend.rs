//! The dead-backend tripwire, for every accelerator EP. An accelerator whose device is absent
//! either refuses to attach (OpenVINO `device_type=NPU` without an NPU: "Device NPU is not
//! available") or — the QNN EP without a Snapdragon, a missing Stub/Skel, no FastRPC, a wrong
//! `ADSP_LIBRARY_PATH` — attaches, claims nothing and leaves every node to the CPU EP, logging the
//! cause only. Either way it *did not start* ([`DidNotStart`]): infrastructure, not a verdict on
//! the model. An EP that started and rejected nodes (QNN's `Validation FAILED … REASON`) is a
//! placement verdict instead, even when it rejected every node.
//!
//! Lines are matched by content, not by the logger's prefix, so both the harness's own format
//! (`[V:onnxruntime:timed, file.cc:12 Func] message`) and other loggers' formats are read.

use std::fmt;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use npugate_result::{Assignment, BackendHealth, HtpPowerReport};

/// The QNN EP's name, whose backend health is read from QNN's own log lines.
const QNN: &str = "QNNExecutionProvider";
/// Log markers of a specific cause of a dead QNN backend, most telling first; the first found names the cause.
const CAUSES: &[&str] = &[
    "No Snapdragon SOC detected",
    "Failed in loading stub",
    "loadRemoteSymbols failed",
    "Transport layer setup failed",
    "GPU ERROR",
    "Could not determine default backend path",
    "Using existing ADSP_LIBRARY_PATH",
];
/// The QNN EP's summary of a failed backend setup (GetCapability then claims nothing).
const SETUP_FAILED: &str = "QNN SetupBackend failed";
/// The QNN EP's line for a backend that started.
const SETUP_SUCCEEDED: &str = "QNN SetupBackend succeed";
/// Phrases of an EP registration error that mean its device is absent (not a bad option).
const DEVICE_ABSENT: &[&str] =
    &["is not available", "no CUDA-capable device is detected", "CUDA driver version is insufficient"];
/// Other lines worth keeping as evidence.
const CONTEXT: &[&str] = &[
    SETUP_SUCCEEDED,
    "Setting ADSP_LIBRARY_PATH",
    "Number of partitions supported by QNN EP",
    "[OpenVINO-EP] Choosing Device",
    "Supported subgraphs on OpenVINO",
    "placed on [",
];
/// At most this many evidence lines are kept.
const MAX_EVIDENCE: usize = 24;

/// An accelerator that did not start: its device is absent or its backend is dead. The run cannot
/// say anything about the model on it; another attempt (on a healthy device) may.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DidNotStart {
    /// `QNN backend`, or the EP's name.
    pub subject: String,
    /// Why, in the EP's own words where it gave any.
    pub reason: String,
}

impl DidNotStart {
    /// The EP `ep` did not start because of `reason`.
    pub fn new(ep: &str, reason: impl Into<String>) -> DidNotStart {
        let subject = if ep == QNN { "QNN backend".to_string() } else { ep.to_string() };
        DidNotStart { subject, reason: reason.into() }
    }

    /// True when `error` is, or was caused by, an accelerator that did not start.
    pub fn is_cause_of(error: &anyhow::Error) -> bool {
        error.downcast_ref::<DidNotStart>().is_some() || error.chain().any(|cause| cause.is::<DidNotStart>())
    }
}

impl fmt::Display for DidNotStart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} did not start: {}", self.subject, self.reason)
    }
}

impl std::error::Error for DidNotStart {}

/// Length of the log file now (the start of the window a session creation will write).
pub fn log_position(log: &Path) -> u64 {
    std::fs::metadata(log).map(|m| m.len()).unwrap_or(0)
}

/// The log text written since `start` (lossy UTF-8; empty when unreadable).
pub fn log_since(log: &Path, start: u64) -> String {
    let mut text = Vec::new();
    if let Ok(mut file) = std::fs::File::open(log) {
        if file.seek(SeekFrom::Start(start)).is_ok() {
            // An unreadable log leaves the decision to the assignment alone.
            let _ = file.read_to_end(&mut text);
        }
    }
    String::from_utf8_lossy(&text).into_owned()
}

/// Lines written to the log between two of its lengths (`start..end`, from [`log_position`]); 0
/// when unreadable.
pub fn lines_between(log: &Path, start: u64, end: u64) -> u64 {
    let mut window = Vec::new();
    if let Ok(mut file) = std::fs::File::open(log) {
        if file.seek(SeekFrom::Start(start)).is_ok() {
            // An unreadable log counts nothing; the count is a record, not a decision.
            let _ = file.take(end.saturating_sub(start)).read_to_end(&mut window);
        }
    }
    window.iter().filter(|b| **b == b'\n').count() as u64
}

/// Why an Android `ADSP_LIBRARY_PATH` cannot work: the DSP loader splits it on `;` only, so a
/// `:`-separated list is one nonexistent directory and the Skel never loads.
pub fn adsp_library_path_problem(value: &str) -> Option<String> {
    (value.contains(':') && !value.contains(';')).then(|| {
        format!(
            "ADSP_LIBRARY_PATH={value:?} is ':'-separated, but the DSP loader splits it on ';' only and reads it as \
             one directory, so the Skel cannot load: join the directories with ';'"
        )
    })
}

/// Judges the accelerator `ep` from the log lines of one session creation and its assignment.
/// It did not start when the log names a dead backend, or — QNN, whose setup the log records
/// at VERBOSE — when the log shows no successful setup and the EP claimed nothing. An EP that
/// claimed nodes started, whatever the log's level (a quiet session-only run's log has no setup
/// line: its assignment is the evidence); an EP that started and claimed nothing has
/// `started: true`: its rejections are a placement verdict.
/// `adsp_problem` (from [`adsp_library_path_problem`]) is added to the reason when it did not start.
pub fn assess(log: &str, assignment: &Assignment, ep: &str, adsp_problem: Option<&str>) -> BackendHealth {
    let lines: Vec<&str> = log.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let mut evidence: Vec<String> = Vec::new();
    for line in &lines {
        let relevant = CAUSES.iter().chain(CONTEXT).chain([&SETUP_FAILED]).any(|m| line.contains(m));
        if relevant && !evidence.iter().any(|e| e == line) && evidence.len() < MAX_EVIDENCE {
            evidence.push(line.to_string());
        }
    }
    let claimed = assignment.subgraphs.iter().filter(|s| s.ep == ep).map(|s| s.nodes.len()).sum::<usize>();
    if claimed > 0 {
        let total = assignment.subgraphs.iter().map(|s| s.nodes.len()).sum::<usize>();
        evidence.push(format!("{}: {ep} was assigned {claimed} of {total} nodes", assignment.source));
    }
    let set_up = lines.iter().any(|l| l.contains(SETUP_SUCCEEDED));
    let reason = failure_in_log(log, adsp_problem).or_else(|| {
        (ep == QNN && claimed == 0 && !set_up)
            .then(|| format!("the log shows no successful QNN backend setup and {ep} claimed no node"))
    });
    if let Some(problem) = adsp_problem.filter(|_| reason.is_some()) {
        evidence.push(problem.to_string());
    }
    let htp_power = (ep == QNN).then(|| htp_power(log)).flatten();
    BackendHealth { started: reason.is_none(), evidence, reason, htp_power }
}

/// The QNN EP's lines about the power configuration it asks for (`qnn_htp_power_config_manager.cc`).
const POWER_MODE_SET: &str = "Updating htp performance mode to: ";
const POWER_MODE_KEPT: &str = "Requested htp performance mode is the same as last set (";
const RPC_POLLING_SET: &str = "Updating rpc polling time to: ";
const RPC_POLLING_KEPT: &str = "Requested rpc polling time is the same as last set (";
const RPC_LATENCY_SET: &str = "Updating rpc control latency to: ";
const RPC_LATENCY_KEPT: &str = "Requested rpc control latency is the same as last set (";
/// The QNN EP's errors when the power configuration could not be set.
const POWER_ERRORS: &[&str] = &["Unable to set HTP power configurations.", "Failed to create HTP power config id."];
/// The backend's own start and end of setting a power configuration.
const SET_POWER_STARTED: &str = "htpPerfInfrastructureSetPowerConfig started";
const SET_POWER_DONE: &str = "htpPerfInfrastructureSetPowerConfig done. status ";
/// The backend's word that it cannot apply performance settings (Qualcomm's host build says it).
const NO_PERF_SUPPORT: &str = "No perf settings support on this platform";
/// Backend lines inside the block that say nothing about the settings.
const POWER_NOISE: &[&str] = &["Get HTP power device instance", "Deactivated logger"];
/// At most this many of the backend's settings lines are kept.
const MAX_POWER_SETTINGS: usize = 32;

/// What the QNN EP and the HTP backend logged about the power configuration set up for the
/// session (its first `setPowerConfig` in `log`); `None` when the log has no such line (another
/// backend, or a log below VERBOSE).
pub fn htp_power(log: &str) -> Option<HtpPowerReport> {
    let mut report = HtpPowerReport::default();
    let mut seen = false;
    let mut in_block = false;
    let mut block_done = false;
    for line in log.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let after = |marker: &str| line.find(marker).map(|at| &line[at + marker.len()..]);
        let number = |marker: &str| after(marker).and_then(leading_number);
        if let Some(mode) = after(POWER_MODE_SET)
            .map(|m| m.trim_end_matches('.'))
            .or_else(|| after(POWER_MODE_KEPT).and_then(|m| m.split(')').next()))
        {
            report.performance_mode.get_or_insert_with(|| mode.to_string());
            seen = true;
        } else if let Some(us) = number(RPC_POLLING_SET).or_else(|| number(RPC_POLLING_KEPT)) {
            report.rpc_polling_time_us.get_or_insert(us);
            seen = true;
        } else if let Some(us) = number(RPC_LATENCY_SET).or_else(|| number(RPC_LATENCY_KEPT)) {
            report.rpc_control_latency_us.get_or_insert(us);
            seen = true;
        } else if let Some(error) = POWER_ERRORS.iter().find_map(|marker| message_from(line, marker)) {
            report.not_applied.get_or_insert(format!("QNN EP: {error}"));
            seen = true;
        } else if line.contains(SET_POWER_STARTED) && !block_done {
            in_block = true;
            seen = true;
        } else if let Some(status) = after(SET_POWER_DONE).filter(|_| in_block) {
            report.status = Some(status.trim().to_string());
            (in_block, block_done) = (false, true);
        } else if in_block {
            let Some(message) = qnn_message(line) else { continue };
            if message.contains(NO_PERF_SUPPORT) {
                report.not_applied.get_or_insert(format!("QNN HTP backend: {NO_PERF_SUPPORT}"));
            }
            let noise = POWER_NOISE.iter().any(|n| message.contains(n))
                || report.backend_settings.last().is_some_and(|l| l == message);
            if !noise && report.backend_settings.len() < MAX_POWER_SETTINGS {
                report.backend_settings.push(message.to_string());
            }
        }
    }
    if let Some(status) = report.status.as_deref().filter(|s| *s != "0x0") {
        report.not_applied.get_or_insert(format!("QNN HTP backend: setPowerConfig returned status {status}"));
    }
    if report.status.is_none() && report.not_applied.is_none() && report.performance_mode.as_deref() != Some("default")
    {
        report.not_applied = Some("the log holds no record of the HTP backend setting the power configuration".into());
    }
    report.applied = report.not_applied.is_none();
    seen.then_some(report)
}

/// The message of a QNN backend line (`… <V> message`), without its level tag.
fn qnn_message(line: &str) -> Option<&str> {
    ["<V> ", "<I> ", "<W> ", "<E> "].iter().find_map(|tag| line.find(tag).map(|at| line[at + tag.len()..].trim()))
}

/// The number a text starts with (`9999us.` → 9999).
fn leading_number(text: &str) -> Option<u64> {
    let digits: String = text.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The backend failure the log names, if any: the most telling cause, then the QNN EP's
/// `QNN SetupBackend failed …` summary, then `adsp_problem`.
pub fn failure_in_log(log: &str, adsp_problem: Option<&str>) -> Option<String> {
    let cause = CAUSES.iter().find_map(|marker| log.lines().find_map(|l| message_from(l, marker)));
    let setup_failure = log.lines().find_map(|l| message_from(l, SETUP_FAILED));
    let mut reason = match (cause, setup_failure) {
        (Some(cause), Some(setup)) => format!("{cause}; {setup}"),
        (Some(only), None) | (None, Some(only)) => only,
        (None, None) => return None,
    };
    if let Some(problem) = adsp_problem {
        reason.push_str("; ");
        reason.push_str(problem);
    }
    Some(reason)
}

/// The logged error that means the EP's device is absent, as the sentence that says so
/// (`Device NPU is not available`, from ORT's `[E:…] … [ERROR] [OpenVINO] Device NPU is not
/// available`); `None` when no error line says so (e.g. a bad option).
pub fn absent_device_cause(log: &str) -> Option<String> {
    log.lines().filter(|line| is_error_line(line)).find_map(|line| {
        DEVICE_ABSENT.iter().find_map(|marker| {
            let at = line.find(marker)?;
            let start = line[..at].rfind("] ").map_or(0, |i| i + 2);
            Some(line[start..].trim().to_string())
        })
    })
}

/// The first error ORT logged, without the logger's prefix and the thrower's source location and
/// signature (what an EP says when it refuses).
pub fn first_logged_error(log: &str) -> Option<String> {
    let line = log.lines().find(|line| is_error_line(line))?;
    let message = line.find("] ").map_or(line, |at| &line[at + 2..]).trim();
    let signature_end = message.rfind(") ").max(message.rfind("> "));
    let message = match signature_end {
        Some(at) if message.starts_with('/') => &message[at + 2..],
        _ => message,
    };
    Some(message.trim().to_string())
}

/// An error line of either logger format (`[E:onnxruntime:…]`, `[ort Error]`).
fn is_error_line(line: &str) -> bool {
    line.contains("[E:") || line.contains("[ort Error]")
}

/// The loud failure of a dead backend after the run: `<reason>; 100% of nodes would run on CPU`.
pub fn failure(health: &BackendHealth, assignment: &Assignment, ep: &str) -> DidNotStart {
    let total = assignment.subgraphs.iter().map(|s| s.nodes.len()).sum::<usize>();
    let elsewhere = assignment.subgraphs.iter().filter(|s| s.ep != ep).map(|s| s.nodes.len()).sum::<usize>();
    let share = match (elsewhere * 100 + total / 2).checked_div(total) {
        Some(pct) => format!("{pct}% of nodes would run on CPU"),
        None => "every node would run on CPU".to_string(),
    };
    DidNotStart::new(ep, format!("{}; {share}", health.reason.as_deref().unwrap_or("no reason in the log")))
}

/// The message of a log line from `marker` on (the logger prefix and QNN's `<E>` tag dropped).
fn message_from(line: &str, marker: &str) -> Option<String> {
    let at = line.find(marker)?;
    Some(line[at..].trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use npugate_result::{AssignedNode, AssignedSubgraph};

    const QNN: &str = super::QNN;

    fn assignment(placed: &[(&str, usize)]) -> Assignment {
        let subgraphs = placed
            .iter()
            .map(|(ep, n)| AssignedSubgraph {
                ep: ep.to_string(),
                nodes: (0..*n)
                    .map(|i| AssignedNode { name: format!("n{i}"), op_type: "Conv".into(), domain: String::new() })
                    .collect(),
            })
            .collect();
        Assignment { source: "Session_GetEpGraphAssignmentInfo".into(), error: None, subgraphs }
    }

    fn fixture(name: &str) -> String {
        // The workspace keeps one copy of the real ORT 1.31.1 fixtures, with their provenance.
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../profile-parser/tests/fixtures/ort-1.31.1").join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    #[test]
    fn htp_without_snapdragon_is_dead_with_the_cause_first() {
        let health = assess(
            &fixture("a64_qemu_qnn_htp_no_soc_verbose.log"),
            &assignment(&[("CPUExecutionProvider", 13)]),
            QNN,
            None,
        );
        assert!(!health.started);
        let reason = health.reason.as_deref().unwrap();
        assert!(reason.starts_with("No Snapdragon SOC detected"), "{reason}");
        assert!(reason.contains("QNN SetupBackend failed"), "{reason}");
        assert!(
            health.evidence.iter().any(|e| e.contains("All nodes placed on [CPUExecutionProvider]")),
            "{:?}",
            health.evidence
        );
        let message = failure(&health, &assignment(&[("CPUExecutionProvider", 13)]), QNN).to_string();
        assert!(message.starts_with("QNN backend did not start: No Snapdragon SOC detected"), "{message}");
        assert!(message.ends_with("; 100% of nodes would run on CPU"), "{message}");
    }

    #[test]
    fn gpu_without_adreno_is_dead() {
        let health = assess(
            &fixture("a64_qemu_qnn_gpu_no_adreno_verbose.log"),
            &assignment(&[("CPUExecutionProvider", 9)]),
            QNN,
            None,
        );
        assert!(!health.started);
        assert!(health.reason.as_deref().unwrap().contains("Invalid OpenCL driver path"), "{:?}", health.reason);
    }

    #[test]
    fn saver_run_with_a_cpu_fallback_node_is_alive() {
        let log = fixture("a64_qemu_mixed_qnn_saver_verbose.log");
        let health = assess(&log, &assignment(&[(QNN, 17), ("CPUExecutionProvider", 1)]), QNN, None);
        assert!(health.started, "{:?}", health.reason);
        assert_eq!(health.reason, None);
    }

    #[test]
    fn a_backend_that_started_and_rejected_every_node_started() {
        // The real run: QNN (Saver) set up, then every node of a model with dynamic dims failed
        // validation with "Cannot get shape". A verdict on the model, not a dead backend.
        let log = fixture("a64_qemu_dynamic_qnn_saver_all_rejected_verbose.log");
        let health = assess(&log, &assignment(&[("CPUExecutionProvider", 4)]), QNN, None);
        assert!(health.started, "{:?}", health.reason);
        assert!(health.evidence.iter().any(|e| e.contains("QNN SetupBackend succeed")), "{:?}", health.evidence);
        // Without the setup line, a QNN EP that claimed nothing is not known to have started.
        let health = assess(
            "[V:onnxruntime:timed, x.cc:1 F] Node placements",
            &assignment(&[("CPUExecutionProvider", 4)]),
            QNN,
            None,
        );
        assert!(!health.started);
        assert!(health.reason.unwrap().contains("no successful QNN backend setup"));
    }

    #[test]
    fn a_quiet_log_with_the_ep_assigned_every_node_started() {
        // A session-only run kept its quiet session (WARNING): no setup line, only the assignment.
        let log = "[W:onnxruntime:timed, x.cc:1 F] some warning\n";
        let health = assess(log, &assignment(&[(QNN, 12)]), QNN, None);
        assert!(health.started, "{:?}", health.reason);
        assert_eq!(
            health.evidence,
            ["Session_GetEpGraphAssignmentInfo: QNNExecutionProvider was assigned 12 of 12 nodes"]
        );
        assert_eq!(health.htp_power, None);
    }

    #[test]
    fn other_eps_started_unless_their_device_is_absent() {
        let log = "[I:onnxruntime:Default, capability.cc:252 Execute] [OpenVINO-EP] Supported subgraphs on OpenVINO: 0";
        let health = assess(log, &assignment(&[("CPUExecutionProvider", 4)]), "OpenVINOExecutionProvider", None);
        assert!(health.started);
        assert_eq!(health.evidence.len(), 1);
        // ORT 1.24.1 with OpenVINO 2025.4, device_type=NPU on a machine without one.
        let log = "[I:onnxruntime:npugate, x.cc:1 F] Device GPU is not available as a fallback\n\
                   [E:onnxruntime:npugate, provider_bridge_ort.cc:2310 Create] /onnxruntime/onnxruntime/core/providers/openvino/\
                   openvino_provider_factory.cc:141 std::string onnxruntime::openvino_ep::ParseDeviceType(std::shared_ptr<OVCore>, \
                   const onnxruntime::ProviderOptions&) [ERROR] [OpenVINO] Device NPU is not available\n";
        assert_eq!(absent_device_cause(log).as_deref(), Some("Device NPU is not available"));
        let bad_option = "[E:onnxruntime:npugate, x.cc:1 Create] /onnxruntime/openvino_provider_factory.cc:232 \
                          ParseProviderInfo(const ProviderOptions&)::<lambda()> Invalid OpenVINO EP option: bogus_key";
        assert_eq!(absent_device_cause(bad_option), None);
        assert_eq!(first_logged_error(bad_option).as_deref(), Some("Invalid OpenVINO EP option: bogus_key"));
        let dead = anyhow::Error::new(DidNotStart::new("OpenVINOExecutionProvider", "Device NPU is not available"));
        assert_eq!(dead.to_string(), "OpenVINOExecutionProvider did not start: Device NPU is not available");
        assert!(DidNotStart::is_cause_of(&dead.context("timed session")));
        assert!(!DidNotStart::is_cause_of(&anyhow::anyhow!("cannot create a session")));
    }

    /// The power configuration block of a real session set up by Qualcomm's host HTP backend
    /// (QNN 2.51 in onnxruntime-qnn 2.7.0 under wine, SM8650, `htp_performance_mode=burst`),
    /// trimmed to the lines the parser reads and a few it skips.
    const EMULATOR_POWER_LOG: &str = "\
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 onnxruntime::qnn::QnnLogging]  <I> htpPerfInfrastructureCreatePowerConfigId done. status 0x0
[V:onnxruntime:profiled, qnn_htp_power_config_manager.cc:39 onnxruntime::qnn::power::HtpPowerConfigManager::AddRpcPollingTime] Updating rpc polling time to: 9999us.
[V:onnxruntime:profiled, qnn_htp_power_config_manager.cc:57 onnxruntime::qnn::power::HtpPowerConfigManager::AddRpcControlLatency] Requested rpc control latency is the same as last set (0). Ignoring request
[V:onnxruntime:profiled, qnn_htp_power_config_manager.cc:113 onnxruntime::qnn::power::HtpPowerConfigManager::AddHtpPerformanceMode] Updating htp performance mode to: burst.
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 onnxruntime::qnn::QnnLogging]  <I> htpPerfInfrastructureSetPowerConfig started for powerConfigId: 172534280

[V:onnxruntime:npugate, qnn_backend_manager.cc:519 onnxruntime::qnn::QnnLogging]  <V> Get HTP power device instance for device id 0 core id 0 processDomain id 0 coreType 0
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 onnxruntime::qnn::QnnLogging]  <V> set power settings rpc polling time 9999
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 onnxruntime::qnn::QnnLogging]  <V> set power settings rpc polling time 9999
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 onnxruntime::qnn::QnnLogging]  <V> No perf settings support on this platform
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 onnxruntime::qnn::QnnLogging]  <V> set power settings DCVS V3 for context id 172534280:
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 onnxruntime::qnn::QnnLogging]  <V> dcvsEnable 0
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 onnxruntime::qnn::QnnLogging]  <V> powerMode 16
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 onnxruntime::qnn::QnnLogging]  <I> htpPerfInfrastructureSetPowerConfig done. status 0x0
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 onnxruntime::qnn::QnnLogging]  <I> htpPerfInfrastructureSetPowerConfig started for powerConfigId: 1
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 onnxruntime::qnn::QnnLogging]  <V> powerMode 99
";

    #[test]
    fn the_power_configuration_is_read_from_the_setup_log() {
        let report = htp_power(EMULATOR_POWER_LOG).unwrap();
        assert_eq!(report.performance_mode.as_deref(), Some("burst"));
        assert_eq!((report.rpc_polling_time_us, report.rpc_control_latency_us), (Some(9999), Some(0)));
        assert_eq!(report.status.as_deref(), Some("0x0"));
        assert_eq!(
            report.backend_settings,
            [
                "set power settings rpc polling time 9999",
                "No perf settings support on this platform",
                "set power settings DCVS V3 for context id 172534280:",
                "dcvsEnable 0",
                "powerMode 16"
            ]
        );
        assert!(!report.applied, "the host build says it cannot");
        assert_eq!(report.not_applied.as_deref(), Some("QNN HTP backend: No perf settings support on this platform"));

        // A device's backend that set it without complaint (the same block without the host build's line).
        let device = EMULATOR_POWER_LOG.replace("No perf settings support on this platform", "setSleepLatency 1");
        let report = htp_power(&device).unwrap();
        assert!(report.applied && report.not_applied.is_none(), "{report:?}");
        let failed = device.replace("status 0x0", "status 0x3ea");
        assert_eq!(
            htp_power(&failed).unwrap().not_applied.as_deref(),
            Some("QNN HTP backend: setPowerConfig returned status 0x3ea")
        );
        let unrecorded = "[V:onnxruntime:profiled, x.cc:1 F] Updating htp performance mode to: burst.";
        assert!(htp_power(unrecorded).unwrap().not_applied.unwrap().contains("no record"));
        let default = "[V:onnxruntime:profiled, x.cc:1 F] Requested htp performance mode is the same as last set (default). Ignoring request";
        let report = htp_power(default).unwrap();
        assert_eq!((report.performance_mode.as_deref(), report.applied), (Some("default"), true));
        assert_eq!(htp_power("[W:onnxruntime:timed, x.cc:1 F] something else"), None);
    }

    #[test]
    fn colon_separated_adsp_path_is_named_in_the_reason() {
        let problem = adsp_library_path_problem("/data/local/tmp/qnn:/vendor/dsp/cdsp").unwrap();
        assert!(adsp_library_path_problem("/data/local/tmp/qnn;/vendor/dsp/cdsp").is_none());
        assert!(adsp_library_path_problem("/data/local/tmp/qnn").is_none());
        let log = "[E:onnxruntime:timed, qnn_execution_provider.cc:2290 GetCapabilityImpl] QNN SetupBackend failed Failed to create device.";
        let health = assess(log, &assignment(&[("CPUExecutionProvider", 3)]), QNN, Some(&problem));
        let reason = health.reason.unwrap();
        assert!(reason.starts_with("QNN SetupBackend failed Failed to create device."), "{reason}");
        assert!(reason.contains("is ':'-separated"), "{reason}");
    }
}
