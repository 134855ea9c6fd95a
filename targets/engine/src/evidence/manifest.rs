//! The signed part of a bundle: `manifest.json` (`npugate.evidence/1`) — every file with its
//! sha256, each run's device fingerprint, tool versions and verdict — and `signature.json`.

use npugate_result::{SystemFingerprint, ToolInfo};
use serde::{Deserialize, Serialize};

/// Schema identifier of `manifest.json`.
pub const EVIDENCE_SCHEMA: &str = "npugate.evidence/1";
/// Schema identifier of `signature.json`.
pub const SIGNATURE_SCHEMA: &str = "npugate.evidence-signature/1";
/// The manifest's file name in a bundle.
pub const MANIFEST_FILE: &str = "manifest.json";
/// The signature's file name in a bundle.
pub const SIGNATURE_FILE: &str = "signature.json";

/// What a bundle holds and what it proves. Serialized with sorted keys and files in path order,
/// without a creation time, so the same inputs give the same bytes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    /// Always [`EVIDENCE_SCHEMA`].
    pub schema: String,
    /// The `npugate` that wrote the bundle.
    pub tool: ToolVersion,
    /// Every file of the bundle except the manifest and the signature, ordered by path.
    pub files: Vec<FileEntry>,
    /// One entry per result directory in the bundle, ordered by label.
    pub runs: Vec<RunEvidence>,
}

/// Name and version of a host tool.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ToolVersion {
    /// Program name.
    pub name: String,
    /// Its version.
    pub version: String,
}

/// One file of the bundle.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FileEntry {
    /// Path inside the bundle, `/`-separated.
    pub path: String,
    /// What it is: `model`, `reference_model`, `harness`, `runtime`, `input`, `plan`, `result`,
    /// `profile`, `log`, `outputs`, `report`, `device` or `other`.
    pub role: String,
    /// sha256, lowercase hex.
    pub sha256: String,
    /// Size in bytes.
    pub bytes: u64,
}

/// What one result directory recorded, as read from its `result.json` and `verdict.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunEvidence {
    /// Label of the run (`local`, a device serial, a sweep cell).
    pub label: String,
    /// Its directory inside the bundle.
    pub dir: String,
    /// `complete` or `incomplete`.
    pub status: String,
    /// The harness that measured it.
    pub harness: ToolInfo,
    /// Runtime name and ONNX Runtime version.
    pub runtime: RuntimeVersion,
    /// The digest of the model the harness ran (over the `.onnx` and every file it refers to).
    pub model_digest: String,
    /// Every file the model refers to, with its size and sha256.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model_files: Vec<npugate_result::ModelFile>,
    /// The machine it ran on.
    pub fingerprint: SystemFingerprint,
    /// The gate's verdict, when the run was judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<VerdictSummary>,
}

/// Runtime identity of a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RuntimeVersion {
    /// Runtime name, when launched through npugate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// ONNX Runtime version.
    pub ort_version: String,
}

/// The verdict of a run in one line.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct VerdictSummary {
    /// `pass`, `fail` or `error`.
    pub outcome: String,
    /// Rules that failed.
    pub failed: Vec<String>,
}

impl VerdictSummary {
    /// The summary of a verdict.
    pub fn of(verdict: &npugate_gate::Verdict) -> VerdictSummary {
        VerdictSummary {
            outcome: verdict.outcome.label().to_lowercase(),
            failed: verdict.failures().map(|check| check.rule.to_string()).collect(),
        }
    }
}

/// `signature.json`: the ed25519 signature of the manifest's exact bytes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SignatureFile {
    /// Always [`SIGNATURE_SCHEMA`].
    pub schema: String,
    /// Always `ed25519`.
    pub algorithm: String,
    /// The signed file, [`MANIFEST_FILE`].
    pub manifest: String,
    /// sha256 of the signed manifest bytes (to tell a changed manifest from a changed signature).
    pub manifest_sha256: String,
    /// The signer's public key, hex (informational: verification uses the key the verifier gives).
    pub public_key: String,
    /// The signature, hex (64 bytes).
    pub signature: String,
}

/// JSON with keys sorted (through `serde_json::Value`, whose maps are ordered) and a final newline.
pub fn canonical_json<T: Serialize>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(&serde_json::to_value(value)?)?;
    bytes.push(b'\n');
    Ok(bytes)
}
