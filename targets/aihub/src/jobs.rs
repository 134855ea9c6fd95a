//! A profile job: an inference job with `is_profiling_on` (`submit_profile_job` is deprecated in
//! the official client) submitted with `POST jobs/`, polled with `GET jobs/{id}/` — backing off,
//! riding out a dropped connection, up to a deadline, stopping when the caller says so — and its
//! result read with `GET jobs/{id}/result/`.
//!
//! AI Hub's protocol (qai-hub 0.56.0) has no request that cancels a job: the official client
//! offers none, and its only update of a job is its name. A job npugate stops waiting for keeps
//! running on AI Hub until it ends; [`Wait::Stopped`] names it and its link.

use std::time::{Duration, Instant};

use crate::client::{ApiError, Client};
use crate::messages::{
    self, CreateUpdateResponse, Device, InferenceJob, Job, JobResult, JobState, Model, ProfileDetail,
};

/// What to profile where.
#[derive(Debug, Clone)]
pub struct ProfileRequest<'a> {
    /// The model's id on AI Hub.
    pub model_id: &'a str,
    /// The device, as AI Hub listed it.
    pub device: &'a Device,
    /// The job's name.
    pub name: &'a str,
    /// Profiler iterations (`--max_profiler_iterations N`).
    pub iterations: u32,
}

impl ProfileRequest<'_> {
    /// The job's options, as the service takes them.
    pub fn options(&self) -> String {
        format!("--max_profiler_iterations {}", self.iterations)
    }
}

/// Submits a profile job; its id.
pub fn submit(client: &Client, request: &ProfileRequest<'_>) -> anyhow::Result<String> {
    let job = Job {
        inference_job: Some(InferenceJob {
            model: Some(Model { model_id: Some(request.model_id.to_string()), ..Model::default() }),
            device: Some(Device {
                name: request.device.name.clone(),
                os: request.device.os.clone(),
                attributes: request.device.attributes.clone(),
                soc_description: String::new(),
            }),
            name: request.name.to_string(),
            options: request.options(),
            is_profiling_on: Some(true),
            ..InferenceJob::default()
        }),
        ..Job::default()
    };
    let created: CreateUpdateResponse = client.post("jobs", &job)?;
    anyhow::ensure!(
        !created.id.is_empty(),
        "AI Hub did not create the profile job on {}: {}",
        request.device.name,
        created.status
    );
    Ok(created.id)
}

/// How long to wait between polls and in all.
#[derive(Debug, Clone, Copy)]
pub struct PollPolicy {
    /// The first wait; it doubles up to `max_interval`.
    pub first_interval: Duration,
    /// The longest wait between polls (the official client polls every 10 s).
    pub max_interval: Duration,
    /// The longest wait for the job to end.
    pub timeout: Duration,
}

/// A job that ended with a failure, as AI Hub reports it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("AI Hub job {job_id} failed on {device}: {reason}{} [{failure_type}] — {link}", details_note(.details))]
pub struct JobFailed {
    /// The job.
    pub job_id: String,
    /// The device.
    pub device: String,
    /// `failure_reason`.
    pub reason: String,
    /// `error_details`.
    pub details: Option<String>,
    /// `Job.failure_type`, without its prefix (`RUNTIME_DEVICE_OOM`).
    pub failure_type: String,
    /// The job's web page.
    pub link: String,
}

fn details_note(details: &Option<String>) -> String {
    details.as_deref().filter(|d| !d.trim().is_empty()).map(|d| format!(" ({})", d.trim())).unwrap_or_default()
}

/// How waiting for a job ended.
#[derive(Debug)]
pub enum Wait {
    /// Done: its last state (the version of AI Hub that ran it).
    Done(Job),
    /// Failed.
    Failed(JobFailed),
    /// The caller stopped waiting (an interrupt); the job keeps running on AI Hub.
    Stopped,
    /// The deadline passed; the job keeps running on AI Hub.
    TimedOut(Duration),
}

/// Polls job `job_id` until it ends, the deadline passes or `stop` says so (checked every 100 ms);
/// a failed poll (a dropped connection, a busy service) is tried again at the next interval.
/// `on_state` hears every state change.
pub fn wait(
    client: &Client,
    job_id: &str,
    policy: &PollPolicy,
    stop: &dyn Fn() -> bool,
    on_state: &dyn Fn(JobState),
) -> Result<Wait, ApiError> {
    let started = Instant::now();
    let mut interval = policy.first_interval;
    let mut last_state = None;
    loop {
        match client.get::<Job>(&format!("jobs/{job_id}"), &[]) {
            Ok(job) => {
                let inference = job.inference_job.clone().unwrap_or_default();
                let state = JobState::try_from(inference.job_state).unwrap_or(JobState::Unspecified);
                if last_state != Some(state) {
                    on_state(state);
                    last_state = Some(state);
                }
                match state {
                    JobState::Done => return Ok(Wait::Done(job)),
                    JobState::Failed => return Ok(Wait::Failed(failure(client, job_id, &job, &inference))),
                    _ => {}
                }
            }
            Err(error) if error.is_transient() => {}
            Err(error) => return Err(error),
        }
        let resume = Instant::now() + interval;
        while Instant::now() < resume {
            if stop() {
                return Ok(Wait::Stopped);
            }
            if started.elapsed() >= policy.timeout {
                return Ok(Wait::TimedOut(policy.timeout));
            }
            std::thread::sleep(Duration::from_millis(100).min(resume.saturating_duration_since(Instant::now())));
        }
        interval = (interval * 2).min(policy.max_interval);
    }
}

fn failure(client: &Client, job_id: &str, job: &Job, inference: &InferenceJob) -> JobFailed {
    JobFailed {
        job_id: job_id.to_string(),
        device: inference.device.as_ref().map(|d| d.name.clone()).unwrap_or_default(),
        reason: inference.failure_reason.clone().filter(|r| !r.is_empty()).unwrap_or_else(|| "no reason given".into()),
        details: inference.error_details.clone(),
        failure_type: messages::failure_type_name(job.failure_type),
        link: client.config().job_link(job_id),
    }
}

/// The profile of a finished job.
pub fn profile(client: &Client, job_id: &str) -> anyhow::Result<ProfileDetail> {
    let result: JobResult = client.get(&format!("jobs/{job_id}/result"), &[])?;
    result.profile().ok_or_else(|| {
        anyhow::anyhow!("AI Hub's result of job {job_id} holds no profile ({})", client.config().job_link(job_id))
    })
}
