//! An LLM folder's preflight as one document: each graph — each phase of a graph with dynamic dims —
//! judged per SoC on its own ([`crate::preflight`]), collected with what it was sized as and where
//! its result directories are. `npugate preflight --json` of a folder prints it.

use npugate_result::contract;
use npugate_result::report::{json_of, Report};
use serde::{Deserialize, Serialize};

use crate::preflight::{summary as htp_summary, HtpPreflightReport, SocOutcome, SocVerdict};

/// Schema id of [`FolderPreflightReport`].
pub const FOLDER_PREFLIGHT_SCHEMA: &str = "npugate.htp-folder-preflight/1";

/// The preflight of an LLM folder: one entry per graph (and phase).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FolderPreflightReport {
    /// Always [`FOLDER_PREFLIGHT_SCHEMA`].
    pub schema: String,
    /// The folder as given.
    pub model: String,
    /// Each graph, or each graph and phase, in the folder's order.
    pub graphs: Vec<GraphPreflight>,
    /// The worst graph's exit code: 0 every graph passes on every SoC, 1 one fails, 2 one could
    /// not be judged.
    pub exit_code: u8,
}

impl contract::Document for FolderPreflightReport {
    const SCHEMA: contract::Schema = contract::Schema::new(FOLDER_PREFLIGHT_SCHEMA);
}

/// One graph (or one phase of it) preflighted.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GraphPreflight {
    /// The graph's id in the folder's config (`prompt-processor`, `decoder`).
    pub graph: String,
    /// Its ONNX file, relative to the folder.
    pub file: String,
    /// The phase it was sized for (`prompt`, `token`), for a graph with dynamic dims.
    pub phase: Option<String>,
    /// The shapes it was sized as (`input_ids=1x16`), empty for a static graph.
    pub shapes: Vec<String>,
    /// Its result directory, relative to the preflight's output folder.
    pub dir: String,
    /// Its verdict per SoC and QNN version (also in `<dir>/preflight.json`).
    pub report: HtpPreflightReport,
}

impl FolderPreflightReport {
    /// The report of `graphs` preflighted from the folder `model`, its exit code the worst one's.
    pub fn new(model: &std::path::Path, graphs: Vec<GraphPreflight>) -> FolderPreflightReport {
        let exit_code = graphs.iter().map(|graph| graph.report.exit_code).max().unwrap_or(0);
        FolderPreflightReport {
            schema: FOLDER_PREFLIGHT_SCHEMA.into(),
            model: model.display().to_string(),
            graphs,
            exit_code,
        }
    }
}

/// `npugate preflight`'s report of an LLM folder: one line per graph, phase and SoC, then each
/// one's table (with the QNN version on each line when several judged it).
impl Report for FolderPreflightReport {
    fn schema(&self) -> &str {
        &self.schema
    }
    fn exit_code(&self) -> u8 {
        self.exit_code
    }
    fn text(&self, _color: bool) -> String {
        let several_versions = self.graphs.iter().any(|graph| graph.report.qnn.len() > 1);
        folder_summary(self, several_versions) + "\n"
    }
    fn json(&self) -> String {
        json_of(self)
    }
}

/// A folder's preflight as text: one line per graph, phase and SoC, then each one's table.
fn folder_summary(report: &FolderPreflightReport, qnn: bool) -> String {
    let label = |graph: &GraphPreflight| match &graph.phase {
        Some(phase) => format!("graph {} ({}) {phase} phase", graph.graph, graph.file),
        None => format!("graph {} ({})", graph.graph, graph.file),
    };
    let mut text = String::new();
    for graph in &report.graphs {
        for soc in &graph.report.socs {
            text.push_str(&format!("{} on {}\n", label(graph), soc_verdict(soc, qnn)));
        }
    }
    for graph in &report.graphs {
        let sized = match graph.shapes.is_empty() {
            true => String::new(),
            false => format!(" sized {}", graph.shapes.join(" ")),
        };
        text.push_str(&format!("\n{}{sized}:\n{}", label(graph), htp_summary(&graph.report)));
    }
    text
}

/// `SM8650 (v75): pass: every node on the HTP, compiled` (with the QNN version when several are judged).
fn soc_verdict(soc: &SocVerdict, qnn: bool) -> String {
    let left: Vec<&str> = soc.fallback.iter().filter(|f| !f.expected).map(|f| f.name.as_str()).collect();
    let outcome = match soc.outcome {
        SocOutcome::Pass => "pass",
        SocOutcome::Fail => "fail",
        SocOutcome::Error => "could not judge",
    };
    let verdict = match (&soc.error, left.is_empty()) {
        (Some(error), _) => format!("{outcome}: {}", error.lines().next().unwrap_or_default()),
        (None, true) => format!("{outcome}: every node on the HTP, compiled"),
        (None, false) => format!("{outcome}: {} node(s) left to the CPU ({})", left.len(), left.join(", ")),
    };
    let qnn = if qnn { format!(" with QNN {}", soc.qnn_sdk) } else { String::new() };
    format!("{} ({}){qnn}: {verdict}", soc.soc, soc.htp_arch)
}
