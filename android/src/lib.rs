//! `npugate` as a library: the host side of npugate. The command line ([`cmd`]) is a thin layer
//! over it; nothing below `cmd` knows clap.
//!
//! The flow, one way for every command:
//! [`targets`] (where a harness runs) → [`run`] (one run on one target: stage, execute, check the
//! outputs, judge, place) → [`pipeline`] (result → placement → verdict → sinks), with [`rack`]
//! running many targets at once (retries, timeouts, cancellation, panics) and [`sweep`] running
//! plans of them night after night. [`compare`] runs two models interleaved on one target, and
//! [`confirm`] reruns a latency failure before it counts.

pub mod adb;
pub mod cmd;
pub mod compare;
pub mod confirm;
pub mod consistency;
pub mod deploy;
pub mod device_load;
pub mod device_lock;
pub mod device_rack;
pub mod device_state;
pub mod devices;
pub mod ep_plugin;
pub mod evidence;
pub mod harnesses;
pub mod hash_cache;
pub mod hexagon;
pub mod host_preflight;
pub mod htp;
pub mod history;
pub mod layout;
pub mod matrix;
pub mod model;
pub mod numerics;
pub mod output_check;
pub mod paths;
pub mod pipeline;
pub mod plan;
pub mod preflight;
pub mod process;
pub mod rack;
pub mod run;
pub mod run_plan;
pub mod runtime;
pub mod samples;
pub mod sweep;
pub mod table;
pub mod targets;
