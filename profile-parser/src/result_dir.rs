//! [`analyze_result_dir`]: a harness output directory in, a [`PlacementReport`] out.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use npugate_result::{files, Generation, ReadError, RunResult, RunStatus};

use crate::graphs::GraphPart;

use crate::ort_log::{parse_rejections, RejectionReasons};
use crate::placement::{build_report, PlacementInputs};
use crate::profile::{parse_profile, parse_profile_every_shape, Profile, ProfileError};
use crate::qnn_csv::{parse_qnn_csv, QnnCsvError, QnnProfile};
use crate::report::PlacementReport;

/// Read buffer for profiles: large enough that syscalls do not dominate.
const READ_BUFFER_BYTES: usize = 1 << 20;

/// Why a result directory could not be analyzed. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    /// `result.json` is missing, unreadable or of another schema.
    #[error(transparent)]
    Result(#[from] ReadError),
    /// A profile is truncated, malformed or unreadable.
    #[error("{path} {source}")]
    Profile {
        /// File path.
        path: String,
        /// Cause.
        source: ProfileError,
    },
    /// The QNN profiling CSV is malformed.
    #[error("{path}: {source}")]
    QnnCsv {
        /// File path.
        path: String,
        /// Cause.
        source: QnnCsvError,
    },
    /// A file exists but cannot be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// File path.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The result has no node→EP assignment to judge placement against.
    #[error("{path} has no EP assignment ({detail}): re-run with an ORT ≥ 1.24 harness that records it")]
    NoAssignment {
        /// File path.
        path: String,
        /// `assignment.error` or the source.
        detail: String,
    },
}

/// Reads a profile file, streaming.
pub fn read_profile(path: &Path) -> Result<Profile, AnalyzeError> {
    let shown = path.display().to_string();
    let io = |source| AnalyzeError::Io { path: shown.clone(), source };
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, File::open(path).map_err(io)?);
    let gzip = reader.fill_buf().map_err(io)?.starts_with(&[0x1f, 0x8b]);
    let parsed = match gzip {
        true => parse_profile(BufReader::with_capacity(READ_BUFFER_BYTES, flate2::bufread::GzDecoder::new(reader))),
        false => parse_profile(reader),
    };
    parsed.map_err(|source| AnalyzeError::Profile { path: shown, source })
}

/// The profiled pass's profile in a result directory: compressed ([`files::PROFILE`]) or, as
/// older results hold it, plain ([`files::PROFILE_UNCOMPRESSED`]).
pub fn profile_in(dir: &Path) -> Option<PathBuf> {
    first_file(dir, &[files::PROFILE, files::PROFILE_UNCOMPRESSED])
}

/// The reference pass's profile in a result directory: compressed ([`files::REFERENCE_PROFILE`])
/// or, as older results hold it, plain ([`files::REFERENCE_PROFILE_UNCOMPRESSED`]).
pub fn reference_profile_in(dir: &Path) -> Option<PathBuf> {
    first_file(dir, &[files::REFERENCE_PROFILE, files::REFERENCE_PROFILE_UNCOMPRESSED])
}

fn first_file(dir: &Path, names: &[&str]) -> Option<PathBuf> {
    names.iter().map(|name| dir.join(name)).find(|path| path.is_file())
}

/// Reads a reference profile, streaming, keeping every distinct shape set of each node
/// ([`parse_profile_every_shape`]): a generation's reference pass runs decode steps of two pasts.
pub fn read_reference_profile(path: &Path) -> Result<Profile, AnalyzeError> {
    let shown = path.display().to_string();
    let file = File::open(path).map_err(|source| AnalyzeError::Io { path: shown.clone(), source })?;
    parse_profile_every_shape(BufReader::with_capacity(READ_BUFFER_BYTES, file))
        .map_err(|source| AnalyzeError::Profile { path: shown, source })
}

/// Reads the `Validation FAILED` reasons of a verbose ORT log.
pub fn read_rejections(path: &Path) -> Result<RejectionReasons, AnalyzeError> {
    let io_error = |source| AnalyzeError::Io { path: path.display().to_string(), source };
    parse_rejections(BufReader::new(File::open(path).map_err(io_error)?)).map_err(io_error)
}

/// Reads a QNN profiling CSV.
pub fn read_qnn_csv(path: &Path) -> Result<QnnProfile, AnalyzeError> {
    let shown = path.display().to_string();
    let file = File::open(path).map_err(|source| AnalyzeError::Io { path: shown.clone(), source })?;
    parse_qnn_csv(file).map_err(|source| AnalyzeError::QnnCsv { path: shown, source })
}

/// Analyzes a harness output directory: `result.json` plus whichever of `profile.json`,
/// `reference_profile.json`, `ort.log` and `qnn_profile.csv` are present.
pub fn analyze_result_dir(dir: &Path) -> Result<PlacementReport, AnalyzeError> {
    analyze_run(dir, &RunResult::read(dir)?)
}

/// [`analyze_result_dir`] for a result already read from `dir`.
pub fn analyze_run(dir: &Path, result: &RunResult) -> Result<PlacementReport, AnalyzeError> {
    if result.assignment.subgraphs.is_empty() {
        return Err(AnalyzeError::NoAssignment {
            path: dir.join(files::RESULT).display().to_string(),
            detail: result.assignment.error.clone().unwrap_or_else(|| format!("source {:?}", result.assignment.source)),
        });
    }
    let present = |name: &str| -> Option<PathBuf> { Some(dir.join(name)).filter(|p| p.is_file()) };
    let rejections = present(files::ORT_LOG).map(|p| read_rejections(&p)).transpose()?;
    let mut report = match &result.generation {
        Some(generation) => generation_report(dir, result, generation, rejections.as_ref())?,
        None => single_model(dir, result, rejections.as_ref())?,
    };
    if result.status == RunStatus::Incomplete {
        report.warnings.push(format!(
            "result.json is incomplete ({}): the placement may miss what was not measured",
            result.error.as_deref().unwrap_or("no reason given")
        ));
    }
    Ok(report)
}

/// The placement of an LLM folder's generation: each graph in each phase on its own profiles,
/// merged with every graph weighted by its runs per generation ([`crate::graphs::merge`]).
fn generation_report(
    dir: &Path,
    result: &RunResult,
    generation: &Generation,
    rejections: Option<&RejectionReasons>,
) -> Result<PlacementReport, AnalyzeError> {
    let preferred = result.execution.preferred_ep.as_str();
    let mut parts = Vec::new();
    for graph in &generation.graphs {
        for phase in &graph.phases {
            let read = |file: &Option<String>, reader: fn(&Path) -> Result<Profile, AnalyzeError>| {
                file.as_ref().map(|f| reader(&dir.join(f))).transpose()
            };
            let profile = read(&phase.profile, read_profile)?;
            let reference = read(&phase.reference_profile, read_reference_profile)?;
            let report = build_report(&PlacementInputs {
                model_sha256: &graph.sha256,
                assignment: &graph.assignment,
                graph: graph.graph.as_ref(),
                profile: profile.as_ref(),
                reference: reference.as_ref(),
                rejections,
                graph_io: crate::graphs::graph_io(graph),
                fusions: None,
                ..PlacementInputs::of_run(result)
            });
            parts.push(GraphPart { graph, phase: phase.phase.clone(), runs: phase.runs, report });
        }
    }
    Ok(crate::graphs::merge(&result.model.digest, preferred, &parts))
}

/// The placement of a run of one `.onnx`.
fn single_model(
    dir: &Path,
    result: &RunResult,
    rejections: Option<&RejectionReasons>,
) -> Result<PlacementReport, AnalyzeError> {
    let present = |name: &str| -> Option<PathBuf> { Some(dir.join(name)).filter(|p| p.is_file()) };
    let profile = profile_in(dir).map(|p| read_profile(&p)).transpose()?;
    let reference = reference_profile_in(dir).map(|p| read_profile(&p)).transpose()?;
    let qnn = present(files::QNN_PROFILE).map(|p| read_qnn_csv(&p)).transpose()?;
    let mut report = build_report(&PlacementInputs {
        profile: profile.as_ref(),
        reference: reference.as_ref(),
        rejections,
        qnn: qnn.as_ref(),
        predicted: saver_prediction(result).as_deref(),
        ..PlacementInputs::of_run(result)
    });
    if let Some(fix) = shape_fix(result) {
        let hint = crate::causes::shape_fix_hint(&fix);
        // The model's inputs really are dynamic here: its shape reasons get the fix node by node too.
        for node in
            report.fallback.iter_mut().filter(|n| n.reason.as_deref().is_some_and(crate::hints::is_shape_reason))
        {
            node.hint = Some(hint.clone());
        }
        report.rejections = crate::causes::aggregate(&report.fallback, &report.preferred_ep, Some(&hint));
    }
    if profile.is_none() && result.settings.profile_runs > 0 {
        report.warnings.push(format!("{} is missing although profile runs were requested", files::PROFILE));
    }
    Ok(report)
}

/// The `--shape` flags that fix the model's dynamic input dims to the shapes this run fed, when
/// the model has any: `--shape x=1x3x32x32`.
fn shape_fix(result: &RunResult) -> Option<String> {
    let flags: Vec<String> = result
        .model
        .inputs
        .iter()
        .filter(|declared| declared.shape.iter().any(Option::is_none))
        .filter_map(|declared| result.inputs.iter().find(|fed| fed.name == declared.name))
        .map(|fed| {
            format!("--shape {}={}", fed.name, fed.shape.iter().map(i64::to_string).collect::<Vec<_>>().join("x"))
        })
        .collect();
    (!flags.is_empty()).then(|| flags.join(" "))
}

/// With the QNN Saver backend the graph is recorded, not executed: placement is a prediction.
fn saver_prediction(result: &RunResult) -> Option<String> {
    let options = &result.execution.ep_options;
    let saver = options.contains_key("qnn_saver_path") || options.get("backend_type").is_some_and(|b| b == "saver");
    saver.then(|| "predicted: QNN Saver backend records the graph, HTP backend execution not run".to_string())
}
