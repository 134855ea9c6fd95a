//! The harness command line as the host builds it: the measurement settings are the harness's own
//! (`harness_settings`, one definition for the harness, `npugate run`, sweep plans), and
//! `HarnessSettings::harness_args` turns them plus target-side paths into the argument list, so the
//! local and device paths launch the harness identically.

pub use harness_settings::{HarnessSettings, TargetPaths};
