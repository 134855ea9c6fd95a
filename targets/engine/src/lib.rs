//! The run engine: where a harness runs and what one run is. [`targets`] (this machine, qemu, wine for
//! the host HTP, adb devices, a mock) → [`run`] (stage, execute, check the outputs, judge, place) →
//! [`pipeline`] (result → placement → verdict → sinks), with [`rack`] running many targets at once
//! (retries, timeouts, cancellation, panics), [`compare`] two models interleaved on one target and
//! [`confirm`] rerunning a latency failure before it counts; what happens meanwhile goes out as
//! [`progress`] events to the one reporter the command chose. [`compiled`] reads what an EPContext
//! model was compiled for and refuses a target it does not fit (by the measured rule of
//! [`context_compat`]); [`host_htp`] is the runtime of Qualcomm's host HTP emulator.
//!
//! Behind the `testing` feature (tests and benchmarks only, never in what ships): the mock target
//! (`targets::mock`), `scenarios` (labelled latency series that measure the gate on it) and tiny
//! models (`model::testing`).

pub mod compare;
pub mod compiled;
pub mod confirm;
pub mod consistency;
pub mod context_compat;
pub mod device_rack;
pub mod ep_plugin;
pub mod evidence;
pub mod harnesses;
pub mod host_htp;
pub mod host_preflight;
pub mod layout;
pub mod model;
pub mod output_check;
pub mod pipeline;
pub mod progress;
pub mod rack;
pub mod run;
#[cfg(any(test, feature = "testing"))]
pub mod scenarios;
pub mod targets;
pub mod timeouts;
