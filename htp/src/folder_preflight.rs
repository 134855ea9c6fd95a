//! An LLM folder's preflight as one document: each graph — each phase of a graph with dynamic dims —
//! judged per SoC on its own ([`crate::preflight`]), collected with what it was sized as and where
//! its result directories are. `npugate preflight --json` of a folder prints it.

use npugate_result::contract;
use serde::{Deserialize, Serialize};

use crate::preflight::HtpPreflightReport;

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
