//! The subset of AI Hub's messages (protobuf package `qai_hub.api`) that a profile run exchanges,
//! written by hand from the field numbers and names of the official client's `public_api_pb2`
//! (qai-hub 0.56.0). Fields npugate does not read are left out: protobuf skips unknown fields, so
//! a reply with more fields decodes, and a request without them is what the client sends when it
//! leaves them unset. A `oneof` is written as its optional fields (the same bytes on the wire).

/// `qai_hub.api.Device`: one kind of hosted device.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Device {
    /// Its name, e.g. `Samsung Galaxy S24 (Family)`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Its OS version, e.g. `14`.
    #[prost(string, tag = "2")]
    pub os: String,
    /// `key:value` attributes: `chipset:…`, `hexagon:v75`, `framework:onnx`, `os:android`, …
    #[prost(string, repeated, tag = "3")]
    pub attributes: Vec<String>,
    /// The SoC as AI Hub describes it.
    #[prost(string, tag = "4")]
    pub soc_description: String,
}

/// `qai_hub.api.DeviceList`: the reply of `GET devices/`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DeviceList {
    /// The devices.
    #[prost(message, repeated, tag = "1")]
    pub devices: Vec<Device>,
    /// How many the query matched.
    #[prost(uint64, tag = "2")]
    pub total_query_count: u64,
}

/// `qai_hub.api.ModelType` values npugate sends.
pub const MODEL_TYPE_ONNX: i32 = 6;

/// `qai_hub.api.Model`: a model to create, or a reference to one (`model_id` only).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Model {
    /// Its id.
    #[prost(string, optional, tag = "1")]
    pub model_id: Option<String>,
    /// Its name (the file name).
    #[prost(string, optional, tag = "3")]
    pub name: Option<String>,
    /// `ModelType` ([`MODEL_TYPE_ONNX`]).
    #[prost(int32, optional, tag = "5")]
    pub model_type: Option<i32>,
    /// True once its file is uploaded.
    #[prost(bool, optional, tag = "6")]
    pub file_upload_complete: Option<bool>,
}

/// `qai_hub.api.CreateUpdateResponse`: the id of what a POST created.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateUpdateResponse {
    /// The id (empty when nothing was created).
    #[prost(string, tag = "1")]
    pub id: String,
    /// The server's status text.
    #[prost(string, tag = "2")]
    pub status: String,
}

/// `qai_hub.api.FileMultipartUploadURL`: where each part of a file goes.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FileMultipartUploadUrl {
    /// One URL per part, in order: each takes a PUT of the part and answers with its ETag.
    #[prost(string, repeated, tag = "1")]
    pub urls: Vec<String>,
    /// The upload's id, sent back when completing it.
    #[prost(string, tag = "2")]
    pub upload_id: String,
    /// The size of every part but the last.
    #[prost(uint64, tag = "3")]
    pub max_part_size: u64,
}

/// `qai_hub.api.S3Credentials`, only to notice that the server sent credentials.
#[derive(Clone, PartialEq, prost::Message)]
pub struct S3Credentials {
    /// The bucket.
    #[prost(string, tag = "5")]
    pub bucket: String,
}

/// `qai_hub.api.FileUploadResponse` (its `method` oneof): plain multipart URLs, or S3 credentials
/// when the client said it supports them (npugate does not).
#[derive(Clone, PartialEq, prost::Message)]
pub struct FileUploadResponse {
    /// Plain multipart URLs.
    #[prost(message, optional, tag = "2")]
    pub multipart_url: Option<FileMultipartUploadUrl>,
    /// S3 credentials.
    #[prost(message, optional, tag = "3")]
    pub credentials: Option<S3Credentials>,
}

/// `qai_hub.api.FileMultipartUploadComplete`: the parts' ETags, in order.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FileMultipartUploadComplete {
    /// The upload's id.
    #[prost(string, tag = "1")]
    pub upload_id: String,
    /// Each part's ETag as its PUT returned it.
    #[prost(string, repeated, tag = "2")]
    pub etags: Vec<String>,
}

/// `qai_hub.api.JobState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum JobState {
    /// Not set.
    Unspecified = 0,
    /// Created.
    Created = 1,
    /// Finished with a result.
    Done = 10,
    /// Failed.
    Failed = 30,
    /// Compiling or converting the model.
    OptimizingModel = 50,
    /// Waiting for a device.
    ProvisioningDevice = 60,
    /// Profiling on the device.
    MeasuringPerformance = 70,
    /// Running inference on the device.
    RunningInference = 80,
    /// Quantizing.
    QuantizingModel = 90,
    /// Linking.
    LinkingModels = 100,
}

/// `qai_hub.api.ComputeUnit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ComputeUnit {
    /// Not set.
    Unspecified = 0,
    /// The CPU.
    Cpu = 1,
    /// The GPU.
    Gpu = 2,
    /// The NPU (Hexagon HTP).
    Npu = 3,
}

/// `qai_hub.api.InferenceJob`: an inference (with `is_profiling_on`, a profile) of a model on a device.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InferenceJob {
    /// Its id.
    #[prost(string, tag = "1")]
    pub inference_job_id: String,
    /// The model (its id).
    #[prost(message, optional, tag = "3")]
    pub model: Option<Model>,
    /// The device.
    #[prost(message, optional, tag = "4")]
    pub device: Option<Device>,
    /// Where it is.
    #[prost(enumeration = "JobState", tag = "5")]
    pub job_state: i32,
    /// Its name.
    #[prost(string, tag = "6")]
    pub name: String,
    /// Why it failed.
    #[prost(string, optional, tag = "11")]
    pub failure_reason: Option<String>,
    /// Options, a command line the server checks (`--max_profiler_iterations 100`).
    #[prost(string, tag = "12")]
    pub options: String,
    /// What went wrong, in detail.
    #[prost(string, optional, tag = "15")]
    pub error_details: Option<String>,
    /// True for a profile.
    #[prost(bool, optional, tag = "19")]
    pub is_profiling_on: Option<bool>,
    /// The headline time, µs.
    #[prost(uint64, optional, tag = "20")]
    pub execution_time: Option<u64>,
}

/// `qai_hub.api.Job` (its `job` oneof reduced to the inference job).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Job {
    /// The inference job.
    #[prost(message, optional, tag = "2")]
    pub inference_job: Option<InferenceJob>,
    /// The version of AI Hub that ran it.
    #[prost(string, optional, tag = "3")]
    pub hub_version: Option<String>,
    /// `JobFailureType` (e.g. 12001, `RUNTIME_DEVICE_OOM`).
    #[prost(int32, tag = "9")]
    pub failure_type: i32,
}

/// The name of a `qai_hub.api.JobFailureType` value, without its `JOB_FAILURE_TYPE_` prefix.
pub fn failure_type_name(value: i32) -> String {
    let name = match value {
        0 => "UNSPECIFIED",
        1 => "SUCCESS",
        2 => "UNKNOWN",
        3 => "UNSUPPORTED",
        1000 => "INTERNAL_UNKNOWN",
        1001 => "INTERNAL_LOGIC",
        2000 => "RUNTIME_UNKNOWN",
        2001 => "RUNTIME_CRASH",
        2002 => "RUNTIME_OUT_OF_DISK",
        2003 => "RUNTIME_FAILED_DEPENDENCY",
        2004 => "RUNTIME_OUT_OF_MEMORY",
        2100 => "CLOUD_API_ERROR",
        2101 => "CLOUD_RESOURCE_MISSING",
        2200 => "QDC_API_ERROR",
        3000 => "MODEL_UNKNOWN",
        3050 => "QNN_TOOL_ERROR",
        12000 => "RUNTIME_TIMEOUT",
        12001 => "RUNTIME_DEVICE_OOM",
        12102 => "CLOUD_THROTTLED",
        13000 => "INVALID_INPUTS",
        13001 => "INVALID_ARGUMENT",
        13002 => "MODEL_CORRUPT",
        13003 => "MODEL_INVALID",
        13050 => "QNN_VERSION_MISMATCH",
        13051 => "DSP_VERSION_MISMATCH",
        21000 => "RUNTIME_INTERNAL_SERVICE_BUSY",
        other => return format!("failure type {other}"),
    };
    name.to_string()
}

/// `qai_hub.api.Range`: a byte range.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Range {
    /// The lower bound.
    #[prost(uint64, tag = "1")]
    pub lower: u64,
    /// The upper bound.
    #[prost(uint64, tag = "2")]
    pub upper: u64,
}

/// `qai_hub.api.ProfileDetail.MemoryUsage`.
#[derive(Clone, Copy, PartialEq, prost::Message)]
pub struct MemoryUsage {
    /// What the step added.
    #[prost(message, optional, tag = "1")]
    pub increase: Option<Range>,
    /// The peak during the step.
    #[prost(message, optional, tag = "2")]
    pub peak: Option<Range>,
}

/// `qai_hub.api.LayerDetail`: one layer of the profiled model and where it ran.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LayerDetail {
    /// The layer's name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Where it ran.
    #[prost(enumeration = "ComputeUnit", tag = "2")]
    pub compute_unit: i32,
    /// Its type (`Conv`, …).
    #[prost(string, tag = "3")]
    pub layer_type_name: String,
    /// Its id.
    #[prost(string, tag = "4")]
    pub id: String,
    /// The delegate that ran it (`QNN`, …).
    #[prost(string, tag = "5")]
    pub delegate_name: String,
    /// The delegate's detail (`HTP`).
    #[prost(string, tag = "6")]
    pub delegate_extra_info: String,
    /// Its time in the per-layer pass, µs.
    #[prost(uint64, optional, tag = "7")]
    pub execution_time: Option<u64>,
    /// The segment (partition) it belongs to.
    #[prost(string, optional, tag = "8")]
    pub segment_id: Option<String>,
}

/// `qai_hub.api.SegmentDetail`: one partition of the model.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SegmentDetail {
    /// Its id (what layers' `segment_id` name).
    #[prost(string, tag = "1")]
    pub id: String,
    /// Where it ran.
    #[prost(enumeration = "ComputeUnit", tag = "2")]
    pub compute_unit: i32,
    /// The delegate that ran it.
    #[prost(string, tag = "3")]
    pub delegate_name: String,
    /// The delegate's detail.
    #[prost(string, tag = "4")]
    pub delegate_extra_info: String,
    /// Its time, µs.
    #[prost(uint64, optional, tag = "5")]
    pub execution_time: Option<u64>,
}

/// `qai_hub.api.ToolVersion`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ToolVersion {
    /// The tool (`onnx_runtime`, `qairt`).
    #[prost(string, tag = "1")]
    pub name: String,
    /// Its version.
    #[prost(string, tag = "2")]
    pub version: String,
}

/// `qai_hub.api.ProfileDetail`: what a profile measured.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProfileDetail {
    /// The headline inference time, µs (AI Hub's "estimated inference time", not a median).
    #[prost(uint64, tag = "1")]
    pub execution_time: u64,
    /// The per-layer detail.
    #[prost(message, repeated, tag = "4")]
    pub layer_details: Vec<LayerDetail>,
    /// Peak memory after execution, bytes.
    #[prost(uint64, tag = "9")]
    pub after_execution_peak_memory: u64,
    /// The first (cold) load, µs.
    #[prost(uint64, tag = "19")]
    pub cold_load_time: u64,
    /// The compile (on device) time, µs.
    #[prost(uint64, tag = "20")]
    pub compile_time: u64,
    /// A warm load, µs.
    #[prost(uint64, tag = "21")]
    pub warm_load_time: u64,
    /// Memory during the timed executions.
    #[prost(message, optional, tag = "29")]
    pub execution_memory: Option<MemoryUsage>,
    /// Every cold load, µs.
    #[prost(uint64, repeated, tag = "31")]
    pub all_cold_load_times: Vec<u64>,
    /// Every warm load, µs.
    #[prost(uint64, repeated, tag = "32")]
    pub all_warm_load_times: Vec<u64>,
    /// Every timed execution, µs, in order: the latency series.
    #[prost(uint64, repeated, tag = "33")]
    pub all_execution_times: Vec<u64>,
    /// The partitions.
    #[prost(message, repeated, tag = "34")]
    pub segment_details: Vec<SegmentDetail>,
    /// The tools that ran it (`onnx_runtime`, `qairt`).
    #[prost(message, repeated, tag = "36")]
    pub tool_versions: Vec<ToolVersion>,
}

/// `qai_hub.api.InferenceJobResult`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InferenceJobResult {
    /// The job's id.
    #[prost(string, tag = "1")]
    pub inference_job_id: String,
    /// The output dataset, when inputs were uploaded.
    #[prost(string, tag = "2")]
    pub output_dataset_id: String,
    /// The profile, when profiling was on.
    #[prost(message, optional, tag = "3")]
    pub detail: Option<ProfileDetail>,
}

/// `qai_hub.api.ProfileJobResult` (older jobs).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProfileJobResult {
    /// The job's id.
    #[prost(string, tag = "1")]
    pub profile_job_id: String,
    /// The profile.
    #[prost(message, optional, tag = "2")]
    pub profile: Option<ProfileDetail>,
}

/// `qai_hub.api.JobResult` (its `result` oneof reduced to the profile-bearing results).
#[derive(Clone, PartialEq, prost::Message)]
pub struct JobResult {
    /// A profile job's result.
    #[prost(message, optional, tag = "1")]
    pub profile_job_result: Option<ProfileJobResult>,
    /// An inference job's result.
    #[prost(message, optional, tag = "2")]
    pub inference_job_result: Option<InferenceJobResult>,
}

impl JobResult {
    /// The profile the result carries, whichever job kind it came from.
    pub fn profile(self) -> Option<ProfileDetail> {
        match (self.inference_job_result, self.profile_job_result) {
            (Some(inference), _) => inference.detail,
            (None, Some(profile)) => profile.profile,
            (None, None) => None,
        }
    }
}
