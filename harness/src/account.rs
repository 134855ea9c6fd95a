//! The EP's account in a `--session-only` run (preflight, compile): quiet first, VERBOSE only
//! where it is needed.
//!
//! The QNN HTP backend takes its log level from ONNX Runtime's when the session is set up; at
//! VERBOSE it writes ~100,000 lines while it compiles a real model (seconds of a preflight). Its
//! `<E>` reasons and the EP's `Validation FAILED` blocks exist only at VERBOSE, but a verdict needs
//! them only where something was rejected. So the session is created at `--ort-log-level` first;
//! when the EP took every node (graph-I/O quantization left to the CPU by design aside), the
//! assignment is the whole account and the session is kept. Otherwise — the session refused, or
//! nodes left off the EP — it is dropped and created again at VERBOSE, whose log is the account.
//!
//! The rerun is a new process (this harness again, with the same arguments): the QNN EP plugin
//! gives its backend the environment's log level when the EP is registered, so a second session
//! created at VERBOSE in the same process logs nothing of the backend's (measured with QNN 2.51
//! under wine).

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result};
use npugate_profile::placement::{off_preferred_ep, PlacementInputs};
use npugate_result::SessionLog;
use npugate_settings::{HarnessCommand as Args, OrtLogLevel};
use ort::environment::Environment;

use crate::context_cache;
use crate::session::{self, SessionPlan};

/// At most this many node names in a rerun's reason.
const NAMED_NODES: usize = 5;

/// The environment variable with which the harness starts its own VERBOSE rerun, holding why.
const VERBOSE_RERUN_ENV: &str = "NPUGATE_HARNESS_VERBOSE_RERUN";

/// The harness ended because its VERBOSE rerun (a child process, which wrote the result) ended
/// with this exit code: the process exits with it and says nothing more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RerunExited(pub u8);

impl std::fmt::Display for RerunExited {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the VERBOSE rerun exited with code {}", self.0)
    }
}

impl std::error::Error for RerunExited {}

/// Why this process is the VERBOSE rerun of a quiet session-only run; `None` in every other run.
pub fn verbose_rerun() -> Option<String> {
    std::env::var(VERBOSE_RERUN_ENV).ok().filter(|why| !why.is_empty())
}

/// Whether this run creates its session quiet first: `--session-only` on an accelerator EP (the
/// CPU EP's session-only runs log VERBOSE from the start; they compile nothing).
pub fn quiet_first(args: &Args) -> bool {
    args.settings.session_only && args.settings.ep.is_accelerator()
}

/// Why a session's assignment is not the whole account and the session must be created again at
/// VERBOSE: the assignment is unavailable, the preferred EP took no node, or nodes are left off
/// it — except graph-I/O quantization on the CPU by design (the placement's one rule,
/// [`off_preferred_ep`]). `None`: the EP took every node; nothing needs a reason.
pub fn rerun_reason(placement: &PlacementInputs<'_>) -> Option<String> {
    let assignment = placement.assignment;
    let ep = placement.preferred_ep;
    if let Some(error) = &assignment.error {
        return Some(format!("the assignment is unavailable: {error}"));
    }
    if !assignment.subgraphs.iter().any(|s| s.ep == ep && !s.nodes.is_empty()) {
        return Some(format!("{ep} was assigned no node"));
    }
    let off = off_preferred_ep(placement);
    if off.is_empty() {
        return None;
    }
    let names: Vec<&str> = off.iter().take(NAMED_NODES).map(|n| n.name.as_str()).collect();
    let more = match off.len().checked_sub(NAMED_NODES) {
        Some(more) if more > 0 => format!(" and {more} more"),
        _ => String::new(),
    };
    Some(format!("{} node(s) left off {ep}: {}{more}", off.len(), names.join(", ")))
}

/// Creates the session(s) of a session-only run on an accelerator EP, quiet first: the environment
/// and the session at `level` (`--ort-log-level`). `create(level)` creates them (`None`: at the
/// environment's level); `rerun_reason` judges what it created (see [`rerun_reason`]). When it
/// finds a reason, or the session was refused, the session is dropped, the EPContext models it
/// wrote removed (a compile's; the rerun writes them again), and the harness runs again with the
/// same arguments in a new process that creates it at VERBOSE and writes the result: the error
/// is then [`RerunExited`] with its exit code. In that rerun, the session is created at VERBOSE
/// at once. Returns what was created and how it logged.
pub fn create_quiet_first<S>(
    level: OrtLogLevel,
    env: &Environment,
    plans: &[&SessionPlan],
    create: impl Fn(Option<OrtLogLevel>) -> Result<S>,
    rerun_reason: impl FnOnce(&S) -> Option<String>,
) -> Result<(Result<S>, SessionLog)> {
    if let Some(why) = verbose_rerun() {
        return Ok((create(None), SessionLog { level: level.cli_name().into(), verbose_rerun: Some(why) }));
    }
    // Only files the first attempt writes are removed: one there before is the user's to keep.
    let written: Vec<PathBuf> = plans
        .iter()
        .filter_map(|plan| context_cache::written_by(&plan.session_config))
        .filter(|f| !f.exists())
        .collect();
    env.set_log_level(session::log_level(level));
    let first = create(Some(level));
    let reason = match &first {
        // A first attempt at VERBOSE is its own account.
        _ if level == OrtLogLevel::Verbose => None,
        Ok(created) => rerun_reason(created),
        Err(_) => Some("ONNX Runtime refused the session".to_string()),
    };
    let Some(why) = reason else {
        return Ok((first, SessionLog { level: level.cli_name().into(), verbose_rerun: None }));
    };
    drop(first);
    for file in written.iter().filter(|f| f.exists()) {
        std::fs::remove_file(file)
            .with_context(|| format!("cannot remove {} before the VERBOSE rerun writes it again", file.display()))?;
    }
    let harness = std::env::current_exe().context("cannot find the harness's own executable for the VERBOSE rerun")?;
    let status = Command::new(&harness)
        .args(std::env::args_os().skip(1))
        .env(VERBOSE_RERUN_ENV, &why)
        .status()
        .with_context(|| format!("cannot start the VERBOSE rerun ({})", harness.display()))?;
    // A rerun ended by a signal has no code: the harness's generic failure.
    let code = status.code().and_then(|c| u8::try_from(c).ok()).unwrap_or(npugate_result::contract::EXIT_ERROR);
    Err(RerunExited(code).into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use npugate_profile::placement::GraphIo;
    use npugate_result::{AssignedNode, AssignedSubgraph, Assignment, GraphNode, ModelGraph};

    const QNN: &str = "QNNExecutionProvider";
    const CPU: &str = "CPUExecutionProvider";

    fn assignment(subgraphs: &[(&str, &[(&str, &str)])]) -> Assignment {
        let subgraphs = subgraphs
            .iter()
            .map(|(ep, nodes)| AssignedSubgraph {
                ep: ep.to_string(),
                nodes: nodes
                    .iter()
                    .map(|(name, op)| AssignedNode {
                        name: name.to_string(),
                        op_type: op.to_string(),
                        domain: String::new(),
                    })
                    .collect(),
            })
            .collect();
        Assignment { source: "Session_GetEpGraphAssignmentInfo".into(), error: None, subgraphs }
    }

    /// A QDQ model: a graph-input Q, a conv unit, a graph-output DQ.
    fn graph() -> ModelGraph {
        let node = |name: &str, op: &str| GraphNode {
            name: name.into(),
            op_type: op.into(),
            domain: String::new(),
            subgraph: false,
        };
        ModelGraph {
            nodes: vec![
                node("x_q", "QuantizeLinear"),
                node("conv", "Conv"),
                node("det", "Det"),
                node("y_dq", "DequantizeLinear"),
            ],
            io_quantization: vec!["x_q".into(), "y_dq".into()],
            ..ModelGraph::default()
        }
    }

    fn reason(assignment: &Assignment, graph: Option<&ModelGraph>, io_offload: bool) -> Option<String> {
        rerun_reason(&PlacementInputs {
            model_sha256: "",
            preferred_ep: QNN,
            assignment,
            graph,
            profile: None,
            reference: None,
            rejections: None,
            qnn: None,
            trace: None,
            emulated: None,
            graph_io: GraphIo::default(),
            io_offload,
            predicted: None,
            fusions: None,
        })
    }

    #[test]
    fn every_node_on_the_ep_needs_no_rerun() {
        let all = assignment(&[(
            QNN,
            &[("x_q", "QuantizeLinear"), ("conv", "Conv"), ("det", "Det"), ("y_dq", "DequantizeLinear")],
        )]);
        assert_eq!(reason(&all, Some(&graph()), true), None);
    }

    #[test]
    fn graph_io_quantization_left_to_the_cpu_by_design_needs_no_rerun() {
        let offloaded = assignment(&[
            (CPU, &[("x_q", "QuantizeLinear")]),
            (QNN, &[("conv", "Conv"), ("det", "Det")]),
            (CPU, &[("y_dq", "DequantizeLinear")]),
        ]);
        assert_eq!(reason(&offloaded, Some(&graph()), true), None);
        // The EP was told to take them (offload_graph_io_quantization=0): then they are fallback.
        assert_eq!(
            reason(&offloaded, Some(&graph()), false).as_deref(),
            Some("2 node(s) left off QNNExecutionProvider: x_q, y_dq")
        );
        // Without the model's graph no Q/DQ is known to be graph I/O.
        assert!(reason(&offloaded, None, true).is_some());
    }

    #[test]
    fn a_real_node_left_to_the_cpu_needs_the_verbose_account() {
        let rejected = assignment(&[
            (CPU, &[("x_q", "QuantizeLinear")]),
            (QNN, &[("conv", "Conv")]),
            (CPU, &[("det", "Det"), ("y_dq", "DequantizeLinear")]),
        ]);
        assert_eq!(
            reason(&rejected, Some(&graph()), true).as_deref(),
            Some("1 node(s) left off QNNExecutionProvider: det")
        );
        let many: Vec<(String, &str)> = (0..7).map(|i| (format!("n{i}"), "Neg")).collect();
        let many: Vec<(&str, &str)> = many.iter().map(|(n, op)| (n.as_str(), *op)).collect();
        let mostly_cpu = assignment(&[(QNN, &[("conv", "Conv")]), (CPU, &many)]);
        assert_eq!(
            reason(&mostly_cpu, Some(&graph()), true).as_deref(),
            Some("7 node(s) left off QNNExecutionProvider: n0, n1, n2, n3, n4 and 2 more")
        );
    }

    #[test]
    fn an_ep_that_took_nothing_or_an_unavailable_assignment_needs_the_verbose_account() {
        let nothing = assignment(&[(CPU, &[("conv", "Conv")])]);
        assert_eq!(
            reason(&nothing, Some(&graph()), true).as_deref(),
            Some("QNNExecutionProvider was assigned no node")
        );
        assert_eq!(
            reason(&assignment(&[]), Some(&graph()), true).as_deref(),
            Some("QNNExecutionProvider was assigned no node")
        );
        let unavailable = Assignment {
            source: "unavailable".into(),
            error: Some("Session_GetEpGraphAssignmentInfo: not recorded".into()),
            subgraphs: Vec::new(),
        };
        assert_eq!(
            reason(&unavailable, Some(&graph()), true).as_deref(),
            Some("the assignment is unavailable: Session_GetEpGraphAssignmentInfo: not recorded")
        );
    }
}
