//! `npugate verify`: checks a bundle offline — the signature over `manifest.json` with the given
//! public key, then every file's sha256 — and names each file that changed, went missing or appeared.

use std::collections::BTreeSet;
use std::path::Path;

use ed25519_dalek::{Signature, Verifier, VerifyingKey};
use npugate_result::digest::sha256_file;
use sha2::{Digest, Sha256};

use super::files_below;
use npugate_result::contract::Schema;

use super::manifest::{Manifest, SignatureFile, EVIDENCE_SCHEMA, MANIFEST_FILE, SIGNATURE_FILE, SIGNATURE_SCHEMA};

/// One reason a bundle is not valid, naming the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file inside the bundle (`manifest.json`, `signature.json` or a listed file).
    pub file: String,
    /// What is wrong with it.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.file, self.message)
    }
}

fn problem(file: &str, message: impl Into<String>) -> Problem {
    Problem { file: file.to_string(), message: message.into() }
}

/// Verifies the bundle in `dir` against `key`; an empty list means valid. Only a directory that is
/// no bundle at all is an error (the caller's exit 2); everything wrong inside a bundle is a [`Problem`].
pub fn verify(dir: &Path, key: &VerifyingKey) -> anyhow::Result<Vec<Problem>> {
    if !dir.is_dir() {
        anyhow::bail!("{} is not a directory; pass the directory `--evidence` wrote", dir.display());
    }
    if !dir.join(MANIFEST_FILE).exists() && !dir.join(SIGNATURE_FILE).exists() {
        anyhow::bail!(
            "{} holds no evidence bundle (no {MANIFEST_FILE}); pass the directory `--evidence` wrote",
            dir.display()
        );
    }
    let mut problems = Vec::new();
    let manifest_bytes = std::fs::read(dir.join(MANIFEST_FILE));
    if let Err(e) = &manifest_bytes {
        problems.push(problem(MANIFEST_FILE, format!("cannot be read ({e}); the bundle is incomplete")));
    }
    if let Some(p) = check_signature(dir, manifest_bytes.as_deref().ok(), key) {
        problems.push(p);
    }
    let Ok(bytes) = manifest_bytes else { return Ok(problems) };
    let manifest = match serde_json::from_slice::<Manifest>(&bytes) {
        Ok(m) if Schema::new(EVIDENCE_SCHEMA).accepts(&m.schema) => m,
        Ok(m) => {
            problems.push(problem(MANIFEST_FILE, format!("has schema {:?}, expected {EVIDENCE_SCHEMA:?}", m.schema)));
            return Ok(problems);
        }
        Err(e) => {
            problems.push(problem(MANIFEST_FILE, format!("is not a valid {EVIDENCE_SCHEMA} manifest ({e})")));
            return Ok(problems);
        }
    };
    problems.extend(check_files(dir, &manifest)?);
    Ok(problems)
}

/// The signature must verify over the manifest's bytes with `key`; tells a changed manifest from a
/// changed signature by the manifest hash recorded next to the signature.
fn check_signature(dir: &Path, manifest: Option<&[u8]>, key: &VerifyingKey) -> Option<Problem> {
    let text = match std::fs::read(dir.join(SIGNATURE_FILE)) {
        Ok(text) => text,
        Err(e) => {
            return Some(problem(SIGNATURE_FILE, format!("cannot be read ({e}); the bundle is unsigned or incomplete")))
        }
    };
    let file: SignatureFile = match serde_json::from_slice(&text) {
        Ok(file) => file,
        Err(e) => return Some(problem(SIGNATURE_FILE, format!("was changed: it is not a valid signature file ({e})"))),
    };
    if !Schema::new(SIGNATURE_SCHEMA).accepts(&file.schema)
        || file.algorithm != "ed25519"
        || file.manifest != MANIFEST_FILE
    {
        return Some(problem(
            SIGNATURE_FILE,
            "was changed: schema, algorithm or manifest name is not what npugate writes",
        ));
    }
    let signature = match hex::decode(&file.signature).ok().and_then(|b| Signature::from_slice(&b).ok()) {
        Some(signature) => signature,
        None => return Some(problem(SIGNATURE_FILE, "was changed: the signature is not 64 bytes of hex")),
    };
    let manifest = manifest?;
    let manifest_sha256 = format!("{:x}", Sha256::digest(manifest));
    let signed_by_key = hex::encode(key.as_bytes()) == file.public_key;
    match (key.verify(manifest, &signature).is_ok(), manifest_sha256 == file.manifest_sha256) {
        (true, true) if signed_by_key => None,
        (true, true) => {
            Some(problem(SIGNATURE_FILE, "was changed: its public_key is not the key the signature verifies with"))
        }
        (true, false) => {
            Some(problem(SIGNATURE_FILE, "was changed: its manifest_sha256 does not match the signed manifest"))
        }
        (false, false) => Some(problem(
            MANIFEST_FILE,
            format!(
                "was changed after signing (sha256 {manifest_sha256}, signed {}); the signature does not verify",
                file.manifest_sha256
            ),
        )),
        (false, true) if !signed_by_key => Some(problem(
            SIGNATURE_FILE,
            format!(
                "does not verify with the given public key: the bundle names signer {}, or signature.json was changed",
                file.public_key
            ),
        )),
        (false, true) => {
            Some(problem(SIGNATURE_FILE, "was changed: the signature does not verify over the unchanged manifest"))
        }
    }
}

/// Every listed file must exist with its sha256; no other file may be in the bundle.
fn check_files(dir: &Path, manifest: &Manifest) -> anyhow::Result<Vec<Problem>> {
    let mut problems = Vec::new();
    let mut listed = BTreeSet::new();
    for entry in &manifest.files {
        listed.insert(entry.path.as_str());
        let unsafe_path = entry.path.starts_with('/') || entry.path.split('/').any(|c| c == ".." || c.is_empty());
        if unsafe_path {
            problems.push(problem(&entry.path, "is not a path inside the bundle"));
            continue;
        }
        match sha256_file(&dir.join(&entry.path)) {
            Err(e) => problems.push(problem(&entry.path, format!("is missing or unreadable ({e})"))),
            Ok((sha256, _)) if sha256 != entry.sha256 => problems
                .push(problem(&entry.path, format!("was changed (sha256 {sha256}, manifest says {})", entry.sha256))),
            Ok(_) => {}
        }
    }
    for (relative, _) in files_below(dir)? {
        if relative != MANIFEST_FILE && relative != SIGNATURE_FILE && !listed.contains(relative.as_str()) {
            problems.push(problem(&relative, "is not in the manifest (added after signing)"));
        }
    }
    Ok(problems)
}
