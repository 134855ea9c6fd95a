//! The energy window (`--energy-window SECONDS`, given by the host on a device measured for
//! energy): after the timed runs, inferences back to back for that long, timed on
//! `/proc/uptime`'s clock — the clock of the device-side sampler that reads the battery gauge at
//! the same time (see `npugate_android::energy`). The harness only runs and times the window; the
//! host turns the gauge's samples into energy per inference.

use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use npugate_result::EnergyWindow;

use crate::measure::BoundSession;

/// Seconds since boot from `/proc/uptime` (the sampler's clock).
pub fn uptime_s() -> Result<f64> {
    let text = std::fs::read_to_string("/proc/uptime").context("--energy-window: cannot read /proc/uptime")?;
    text.split_whitespace()
        .next()
        .and_then(|first| first.parse().ok())
        .ok_or_else(|| anyhow!("--energy-window: /proc/uptime reads {text:?}"))
}

/// Runs `bound` back to back for `seconds` and returns the window.
pub fn run_window(bound: &mut BoundSession, seconds: f64) -> Result<EnergyWindow> {
    let length = Duration::from_secs_f64(seconds);
    let start_uptime_s = uptime_s()?;
    let start = Instant::now();
    let mut inferences = 0u64;
    while start.elapsed() < length {
        bound.run_once().context("--energy-window: inference")?;
        inferences += 1;
    }
    Ok(EnergyWindow { requested_s: seconds, start_uptime_s, end_uptime_s: uptime_s()?, inferences })
}
