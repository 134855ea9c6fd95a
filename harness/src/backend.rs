//! The dead-backend tripwire. When the QNN backend does not start (no Snapdragon, a missing
//! Stub/Skel, no FastRPC, a wrong `ADSP_LIBRARY_PATH`) ONNX Runtime still creates the session and
//! runs every node on the CPU EP, logging the cause only. This module reads the log lines written
//! while a session was created, together with the node→EP assignment, and says whether the
//! backend started and, if not, why.
//!
//! Lines are matched by content, not by the logger's prefix, so both the harness's own format
//! (`[V:onnxruntime:timed, file.cc:12 Func] message`) and other loggers' formats are read.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use npugate_result::{Assignment, BackendHealth};

/// Log markers of a specific cause, most telling first; the first found names the cause.
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
/// Other lines worth keeping as evidence.
const CONTEXT: &[&str] = &["QNN SetupBackend succeed", "Setting ADSP_LIBRARY_PATH", "placed on ["];
/// At most this many evidence lines are kept.
const MAX_EVIDENCE: usize = 24;

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

/// Judges the backend from the log lines of one session creation and its assignment.
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
    let known_assignment = !assignment.subgraphs.is_empty();
    let reason = failure_in_log(log, adsp_problem).or_else(|| {
        if known_assignment && claimed == 0 {
            Some(format!("{ep} claimed no node of the model (its Validation FAILED lines in ort.log say why)"))
        } else if !known_assignment && !lines.iter().any(|l| l.contains("QNN SetupBackend succeed")) {
            Some("the log shows no successful QNN backend setup and the node assignment is unavailable".to_string())
        } else {
            None
        }
    });
    if let Some(problem) = adsp_problem.filter(|_| reason.is_some()) {
        evidence.push(problem.to_string());
    }
    BackendHealth { started: reason.is_none(), evidence, reason }
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

/// The loud one-line failure: `QNN backend did not start: <reason>; 100% of nodes would run on CPU`.
pub fn failure_message(health: &BackendHealth, assignment: &Assignment, ep: &str) -> String {
    let total = assignment.subgraphs.iter().map(|s| s.nodes.len()).sum::<usize>();
    let elsewhere = assignment.subgraphs.iter().filter(|s| s.ep != ep).map(|s| s.nodes.len()).sum::<usize>();
    let share = match (elsewhere * 100 + total / 2).checked_div(total) {
        Some(pct) => format!("{pct}% of nodes would run on CPU"),
        None => "every node would run on CPU".to_string(),
    };
    format!("QNN backend did not start: {}; {share}", health.reason.as_deref().unwrap_or("no reason in the log"))
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

    const QNN: &str = "QNNExecutionProvider";

    fn assignment(placed: &[(&str, usize)]) -> Assignment {
        let subgraphs = placed
            .iter()
            .map(|(ep, n)| AssignedSubgraph {
                ep: ep.to_string(),
                nodes: (0..*n).map(|i| AssignedNode { name: format!("n{i}"), op_type: "Conv".into(), domain: String::new() }).collect(),
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
        let health = assess(&fixture("a64_qemu_qnn_htp_no_soc_verbose.log"), &assignment(&[("CPUExecutionProvider", 13)]), QNN, None);
        assert!(!health.started);
        let reason = health.reason.as_deref().unwrap();
        assert!(reason.starts_with("No Snapdragon SOC detected"), "{reason}");
        assert!(reason.contains("QNN SetupBackend failed"), "{reason}");
        assert!(health.evidence.iter().any(|e| e.contains("All nodes placed on [CPUExecutionProvider]")), "{:?}", health.evidence);
        let message = failure_message(&health, &assignment(&[("CPUExecutionProvider", 13)]), QNN);
        assert!(message.starts_with("QNN backend did not start: No Snapdragon SOC detected"), "{message}");
        assert!(message.ends_with("; 100% of nodes would run on CPU"), "{message}");
    }

    #[test]
    fn gpu_without_adreno_is_dead() {
        let health = assess(&fixture("a64_qemu_qnn_gpu_no_adreno_verbose.log"), &assignment(&[("CPUExecutionProvider", 9)]), QNN, None);
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
    fn started_backend_that_claims_nothing_is_not_counted_as_started() {
        let health = assess("[V:onnxruntime:timed, x.cc:1 SetupBackend] QNN SetupBackend succeed", &assignment(&[("CPUExecutionProvider", 4)]), QNN, None);
        assert!(!health.started);
        assert!(health.reason.unwrap().contains("claimed no node"));
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
