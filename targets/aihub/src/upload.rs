//! Uploading a model: `POST models/` creates it, `GET models/{id}/multipart_upload/?file_size=…`
//! gives one plain URL per part (npugate does not offer to take S3 credentials), each part is PUT
//! and answers with its ETag, `POST models/{id}/multipart_upload/` with the ETags completes it. An
//! upload is remembered by the model's content digest and the service ([`UploadCache`]), so an
//! unchanged model is not uploaded again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::client::Client;
use crate::messages::{CreateUpdateResponse, FileMultipartUploadComplete, FileUploadResponse, Model, MODEL_TYPE_ONNX};

/// The schema of the upload cache file.
pub const UPLOAD_CACHE_SCHEMA: &str = "npugate.aihub-uploads/1";

/// A model on AI Hub: its id, and whether this run uploaded it or found it uploaded before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Uploaded {
    /// The model's id on AI Hub.
    pub model_id: String,
    /// sha256 of the bytes uploaded.
    pub sha256: String,
    /// False when the cache named a model uploaded earlier with the same bytes.
    pub uploaded_now: bool,
}

/// The models uploaded before, by service and content digest: a small JSON file under npugate's
/// cache (`aihub/uploads.json`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct CacheFile {
    schema: String,
    /// `{api_url} {sha256}` → model id.
    models: BTreeMap<String, String>,
}

/// The upload cache at a path.
#[derive(Debug, Clone)]
pub struct UploadCache {
    path: PathBuf,
}

impl UploadCache {
    /// The cache at `path` (created on the first upload).
    pub fn at(path: PathBuf) -> UploadCache {
        UploadCache { path }
    }

    fn key(api_url: &str, sha256: &str) -> String {
        format!("{api_url} {sha256}")
    }

    fn read(&self) -> CacheFile {
        // A damaged or foreign cache is only a cache: it is started again.
        std::fs::read(&self.path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<CacheFile>(&bytes).ok())
            .filter(|file| file.schema == UPLOAD_CACHE_SCHEMA)
            .unwrap_or_default()
    }

    /// The model id remembered for these bytes at this service.
    pub fn lookup(&self, api_url: &str, sha256: &str) -> Option<String> {
        self.read().models.get(&UploadCache::key(api_url, sha256)).cloned()
    }

    /// Remembers (or, with `None`, forgets) the model id of these bytes at this service.
    pub fn remember(&self, api_url: &str, sha256: &str, model_id: Option<&str>) -> Result<()> {
        let mut file = self.read();
        file.schema = UPLOAD_CACHE_SCHEMA.to_string();
        let key = UploadCache::key(api_url, sha256);
        match model_id {
            Some(id) => file.models.insert(key, id.to_string()),
            None => file.models.remove(&key),
        };
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let temp = self.path.with_extension(format!("json.{}.tmp", std::process::id()));
        std::fs::write(&temp, serde_json::to_vec_pretty(&file)?)
            .with_context(|| format!("cannot write {}", temp.display()))?;
        std::fs::rename(&temp, &self.path).with_context(|| format!("cannot write {}", self.path.display()))
    }
}

/// sha256 (lowercase hex) of bytes.
pub fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// The model at `path` on AI Hub: the cached id when these bytes were uploaded to this service
/// before and AI Hub still has them, else a fresh upload (remembered).
pub fn ensure(client: &Client, cache: &UploadCache, path: &Path) -> Result<Uploaded> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let digest = sha256(&bytes);
    let api_url = client.config().api_url.clone();
    if let Some(model_id) = cache.lookup(&api_url, &digest) {
        match client.get::<Model>(&format!("models/{model_id}"), &[]) {
            Ok(model) if model.file_upload_complete != Some(false) => {
                return Ok(Uploaded { model_id, sha256: digest, uploaded_now: false });
            }
            Ok(_) => {}
            Err(error) if error.status() == Some(404) => {}
            Err(error) => return Err(error.into()),
        }
        cache.remember(&api_url, &digest, None)?;
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "model.onnx".into());
    let model_id = upload(client, &name, &bytes)?;
    cache.remember(&api_url, &digest, Some(&model_id))?;
    Ok(Uploaded { model_id, sha256: digest, uploaded_now: true })
}

/// Creates a model named `name` and uploads `bytes` as its file, as they are; its id.
pub fn upload(client: &Client, name: &str, bytes: &[u8]) -> Result<String> {
    let model = Model { name: Some(name.to_string()), model_type: Some(MODEL_TYPE_ONNX), ..Model::default() };
    let created: CreateUpdateResponse = client.post("models", &model)?;
    // The official client's rule: a status beside the id is an error.
    if created.id.is_empty() || !created.status.is_empty() {
        bail!("AI Hub did not create the model {name}: {}", created.status);
    }
    let path = format!("models/{}/multipart_upload", created.id);
    let where_to: FileUploadResponse = client.get(&path, &[("file_size", bytes.len().to_string())])?;
    let Some(multipart) = where_to.multipart_url else {
        bail!(
            "AI Hub offered no plain multipart upload URLs for {name}{} (npugate uploads with plain PUTs only)",
            if where_to.credentials.is_some() { " but S3 credentials" } else { "" }
        );
    };
    let parts = multipart.urls.len();
    if parts == 0 || (multipart.max_part_size == 0 && parts > 1) {
        bail!("AI Hub's multipart upload for {name} has {parts} part URLs of {} bytes", multipart.max_part_size);
    }
    let part_size = if parts == 1 { bytes.len().max(1) } else { multipart.max_part_size as usize };
    let mut etags = Vec::with_capacity(parts);
    for (index, url) in multipart.urls.iter().enumerate() {
        let start = (index * part_size).min(bytes.len());
        let end = if index + 1 == parts { bytes.len() } else { (start + part_size).min(bytes.len()) };
        etags.push(client.put_part(url, &bytes[start..end]).with_context(|| format!("part {} of {parts}", index + 1))?);
    }
    let complete = FileMultipartUploadComplete { upload_id: multipart.upload_id, etags };
    let done: CreateUpdateResponse = client.post(&path, &complete)?;
    if done.id.is_empty() {
        bail!("AI Hub did not confirm the upload of {name}: {}", done.status);
    }
    Ok(created.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_remembers_by_service_and_digest_and_a_damaged_file_is_started_again() {
        let dir = tempfile::tempdir().unwrap();
        let cache = UploadCache::at(dir.path().join("aihub/uploads.json"));
        assert_eq!(cache.lookup("http://a", "d1"), None);
        cache.remember("http://a", "d1", Some("m1")).unwrap();
        assert_eq!(cache.lookup("http://a", "d1").as_deref(), Some("m1"));
        assert_eq!(cache.lookup("http://b", "d1"), None, "another service has its own uploads");
        cache.remember("http://a", "d1", None).unwrap();
        assert_eq!(cache.lookup("http://a", "d1"), None);
        std::fs::write(dir.path().join("aihub/uploads.json"), "not json").unwrap();
        assert_eq!(cache.lookup("http://a", "d1"), None);
        cache.remember("http://a", "d2", Some("m2")).unwrap();
        assert_eq!(cache.lookup("http://a", "d2").as_deref(), Some("m2"));
    }
}
