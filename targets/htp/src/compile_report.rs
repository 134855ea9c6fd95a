//! `npugate compile`'s finished result as one report of the report stream
//! ([`npugate_result::report`]): each context model written (one per QNN version), or an LLM
//! folder's compiled folder, and with several QNN versions the measured compatibility matrix.

use std::path::PathBuf;

use npugate_engine::context_compat::ContextCompat;
use npugate_result::contract::{EXIT_FAIL, EXIT_PASS};
use npugate_result::report::{json_of, Report};
use serde::Serialize;

use super::compile::Compiled;
use super::compile_folder::CompiledFolder;
use super::preflight::node_lines;

/// Schema of `npugate compile --json`: [`CompileReport`].
pub const COMPILE_SCHEMA: &str = "npugate.compile/1";

/// What `npugate compile` wrote and left on the CPU.
#[derive(Debug, Clone, Serialize)]
pub struct CompileReport {
    /// Always [`COMPILE_SCHEMA`].
    pub schema: &'static str,
    /// Each context model written, one per QNN version (none for an LLM folder).
    pub compiled: Vec<Compiled>,
    /// An LLM folder's compiled folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub folder: Option<CompiledFolder>,
    /// With several QNN versions: each context loaded under every version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_compat: Option<CompatMeasured>,
}

/// The context compatibility matrix a compile with several QNN versions measured.
#[derive(Debug, Clone, Serialize)]
pub struct CompatMeasured {
    /// The SoC the contexts were compiled for, e.g. `SM8650`.
    pub soc: String,
    /// Its Hexagon arch, e.g. `v75`.
    pub htp_arch: String,
    /// Where the matrix (`context_compat.json`) and every load's result are.
    pub dir: PathBuf,
    /// What loaded where.
    pub matrix: ContextCompat,
}

impl CompileReport {
    /// The report of `compiled` context models.
    pub fn of(compiled: Vec<Compiled>) -> CompileReport {
        CompileReport { schema: COMPILE_SCHEMA, compiled, folder: None, context_compat: None }
    }

    /// The report of a compiled LLM folder.
    pub fn of_folder(folder: CompiledFolder) -> CompileReport {
        CompileReport { schema: COMPILE_SCHEMA, compiled: Vec::new(), folder: Some(folder), context_compat: None }
    }

    /// True when the HTP left a node of any model or graph to the CPU.
    fn left_on_cpu(&self) -> bool {
        self.compiled.iter().any(|c| !c.left_on_cpu.is_empty())
            || self.folder.iter().flat_map(|f| &f.graphs).any(|g| !g.left_on_cpu.is_empty())
    }
}

/// Exit 1 when nodes were left on the CPU (the files are written anyway).
impl Report for CompileReport {
    fn schema(&self) -> &str {
        self.schema
    }
    fn exit_code(&self) -> u8 {
        match self.left_on_cpu() {
            true => EXIT_FAIL,
            false => EXIT_PASS,
        }
    }
    fn text(&self, _color: bool) -> String {
        let mut text: String = self.compiled.iter().map(compiled_text).collect();
        if let Some(folder) = &self.folder {
            text.push_str(&folder_text(folder));
        }
        if let Some(compat) = &self.context_compat {
            text.push_str(&format!("\ncontext compatibility on the host HTP emulator as {} ({}): each context loaded (and run once) under every QNN version\n", compat.soc, compat.htp_arch));
            text.push_str(&compat.matrix.table());
        }
        text
    }
    fn json(&self) -> String {
        json_of(self)
    }
}

/// What one compile wrote and left on the CPU.
fn compiled_text(compiled: &Compiled) -> String {
    let mut lines = vec![format!("{}: compiled for {}", compiled.path.display(), compiled.compiled_for.describe())];
    lines.extend(compiled.context_files.iter().map(|file| format!("  context binary beside it: {}", file.display())));
    lines.extend(compiled.notes.iter().map(|note| format!("  note: {note}")));
    lines.extend(node_lines(&compiled.left_on_cpu, &|_| "left on the CPU"));
    lines.iter().map(|line| format!("{line}\n")).collect()
}

/// Each graph of a compiled folder with what it was sized as and left on the CPU, then the one
/// context binary and how to run the folder.
fn folder_text(folder: &CompiledFolder) -> String {
    let mut text = String::new();
    for graph in &folder.graphs {
        text.push_str(&format!(
            "{}: graph {} compiled for {}\n",
            graph.path.display(),
            graph.id,
            graph.compiled_for.describe()
        ));
        if !graph.shapes.is_empty() {
            text.push_str(&format!("  sized {}\n", graph.shapes));
        }
        for node in &graph.left_on_cpu {
            let reason = node.reason.as_deref().unwrap_or("no reason in the log");
            text.push_str(&format!("  left on the CPU: {} ({}): {reason}\n", node.name, node.op_type));
        }
    }
    text.push_str(&format!(
        "one context binary for {} graphs (weights shared): {}\n",
        folder.graphs.len(),
        folder.context_binary.display()
    ));
    text.push_str(&format!(
        "{}: the compiled folder; run it with --model {}\n",
        folder.dir.display(),
        folder.dir.display()
    ));
    text
}
