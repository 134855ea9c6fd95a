//! Qualcomm AI Hub's hosted devices, spoken to from Rust: the protocol of the official client
//! (`qai-hub` 0.56.0: protobuf messages of package `qai_hub.api` over HTTPS), its credentials file,
//! the device list and how a `--aihub` value chooses a device, the model upload (cached by content
//! digest), profile jobs and their results. Nothing here runs a model or judges one: the engine's
//! `AiHubTarget` does, with what [`Session::profile`] returns.

pub mod client;
pub mod config;
pub mod devices;
pub mod jobs;
pub mod messages;
pub mod upload;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::Result;

pub use client::{ApiError, Client, RetryPolicy};
pub use config::ClientConfig;
pub use jobs::{JobFailed, PollPolicy, Wait};
pub use messages::{Device, ProfileDetail};
pub use upload::{UploadCache, Uploaded};

/// One command's connection to AI Hub, shared by its targets: the client and the models uploaded
/// so far (one upload per model, whichever target asks first; the others wait for it).
pub struct Session {
    client: Client,
    cache: UploadCache,
    uploads: Mutex<Vec<(PathBuf, Uploaded)>>,
}

/// A finished profile job.
#[derive(Debug, Clone)]
pub struct ProfileRun {
    /// The model as AI Hub has it.
    pub uploaded: Uploaded,
    /// The job's id.
    pub job_id: String,
    /// The job's web page.
    pub link: String,
    /// The version of AI Hub that ran it.
    pub hub_version: Option<String>,
    /// The options the job was submitted with.
    pub options: String,
    /// What it measured.
    pub detail: ProfileDetail,
}

/// Why a profile did not finish.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The job failed on AI Hub.
    #[error(transparent)]
    Failed(Box<JobFailed>),
    /// The caller stopped waiting; the job keeps running on AI Hub.
    #[error("interrupted: AI Hub job {job_id} keeps running on AI Hub until it ends (AI Hub's protocol has no way to cancel a job; see {link})")]
    Stopped {
        /// The job.
        job_id: String,
        /// Its web page.
        link: String,
    },
    /// The job did not end in time.
    #[error("AI Hub job {job_id} did not end within {}s; it keeps running on AI Hub ({link})", .waited.as_secs())]
    TimedOut {
        /// The job.
        job_id: String,
        /// Its web page.
        link: String,
        /// How long npugate waited.
        waited: std::time::Duration,
    },
    /// Anything else (the service, the connection, the model file).
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl From<JobFailed> for ProfileError {
    fn from(failed: JobFailed) -> ProfileError {
        ProfileError::Failed(Box::new(failed))
    }
}

impl From<ApiError> for ProfileError {
    fn from(error: ApiError) -> ProfileError {
        ProfileError::Other(error.into())
    }
}

impl Session {
    /// A session with the official client's configuration and the upload cache at `cache`.
    pub fn new(config: ClientConfig, retry: RetryPolicy, cache: PathBuf) -> Session {
        Session { client: Client::new(config, retry), cache: UploadCache::at(cache), uploads: Mutex::new(Vec::new()) }
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The model at `path` on AI Hub, uploaded once per session (and not at all when the cache
    /// knows its bytes).
    pub fn upload(&self, path: &Path) -> Result<Uploaded> {
        let mut uploads = self.uploads.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((_, uploaded)) = uploads.iter().find(|(p, _)| p == path) {
            return Ok(uploaded.clone());
        }
        let uploaded = upload::ensure(&self.client, &self.cache, path)?;
        uploads.push((path.to_path_buf(), uploaded.clone()));
        Ok(uploaded)
    }

    /// Profiles the model at `path` on `device` with `iterations` profiler iterations: upload,
    /// submit, wait (as `policy` says, until `stop`), read the result. `on_step` hears each step.
    pub fn profile(
        &self,
        path: &Path,
        device: &Device,
        iterations: u32,
        policy: &PollPolicy,
        stop: &dyn Fn() -> bool,
        on_step: &dyn Fn(&str),
    ) -> Result<ProfileRun, ProfileError> {
        on_step("upload");
        let uploaded = self.upload(path)?;
        let name = format!("npugate {}", path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default());
        let request = jobs::ProfileRequest { model_id: &uploaded.model_id, device, name: &name, iterations };
        let options = request.options();
        on_step("submit");
        let job_id = jobs::submit(&self.client, &request)?;
        let link = self.client.config().job_link(&job_id);
        let on_state = |state: messages::JobState| on_step(&format!("job {job_id}: {state:?}"));
        match jobs::wait(&self.client, &job_id, policy, stop, &on_state)? {
            Wait::Done(job) => Ok(ProfileRun {
                detail: jobs::profile(&self.client, &job_id)?,
                uploaded,
                options,
                job_id,
                link,
                hub_version: job.hub_version,
            }),
            Wait::Failed(failed) => Err(failed.into()),
            Wait::Stopped => Err(ProfileError::Stopped { job_id, link }),
            Wait::TimedOut(waited) => Err(ProfileError::TimedOut { job_id, link, waited }),
        }
    }
}
