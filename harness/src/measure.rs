//! The measurement loop: inputs and outputs are bound once, then every run is one raw
//! `RunWithBinding` call between two monotonic clock reads — nothing is allocated in the loop.

use std::time::Instant;

use anyhow::{anyhow, Result};
use ort::logging::LogLevel;
use ort::memory::MemoryInfo;
use ort::session::{IoBinding, NoSelectedOutputs, RunOptions, Session, SessionOutputs};
use ort::AsPointer;

use crate::inputs::PreparedInput;

/// A session with its inputs and outputs bound, ready to run repeatedly.
pub struct BoundSession {
    session: Session,
    binding: IoBinding,
    run_options: RunOptions<NoSelectedOutputs>,
}

/// Quiet run options for timed runs: per-run logging stays out of the loop (session creation is
/// logged at VERBOSE).
pub fn quiet_run_options() -> Result<RunOptions<NoSelectedOutputs>> {
    let mut run_options = RunOptions::new().map_err(|e| anyhow!("cannot create run options: {e}"))?;
    run_options.set_log_level(LogLevel::Warning).map_err(|e| anyhow!("cannot set the run log level: {e}"))?;
    Ok(run_options)
}

/// One raw `RunWithBinding` call: nothing else happens between the caller's clock reads.
#[inline(always)]
pub fn run_with_binding(session: &Session, run_options: &RunOptions<NoSelectedOutputs>, binding: &IoBinding) -> Result<()> {
    // SAFETY: session, run options and binding are alive for the call; ORT does not retain them.
    let status = unsafe { (ort::api().RunWithBinding)(session.ptr().cast_mut(), run_options.ptr(), binding.ptr()) };
    // SAFETY: `status` was just returned by ORT.
    unsafe { ort::Error::result_from_status(status) }.map_err(|e| anyhow!("inference failed: {e}"))
}

/// What the measurement loop produced.
#[derive(Debug, Default)]
pub struct Measurement {
    /// The first run after session creation.
    pub first_inference_ns: u64,
    /// Timed runs in order; shorter than requested if a run failed.
    pub latencies_ns: Vec<u64>,
    /// Wall time of the timed loop.
    pub loop_wall_ns: u64,
}

impl BoundSession {
    /// Binds `inputs` and every output (to CPU memory ORT manages) for repeated runs.
    pub fn new(session: Session, inputs: &[PreparedInput]) -> Result<Self> {
        let mut binding = session.create_binding().map_err(|e| anyhow!("cannot create an I/O binding: {e}"))?;
        for input in inputs {
            binding
                .bind_input(input.description.name.as_str(), &input.value)
                .map_err(|e| anyhow!("cannot bind input {:?}: {e}", input.description.name))?;
        }
        let cpu = MemoryInfo::default();
        for output in session.outputs() {
            binding
                .bind_output_to_device(output.name(), &cpu)
                .map_err(|e| anyhow!("cannot bind output {:?}: {e}", output.name()))?;
        }
        Ok(BoundSession { session, binding, run_options: quiet_run_options()? })
    }

    /// Mutable access to the underlying session (to end profiling).
    pub fn session_mut(&mut self) -> &mut Session {
        &mut self.session
    }

    /// One inference through the binding.
    #[inline(always)]
    pub fn run_once(&self) -> Result<()> {
        run_with_binding(&self.session, &self.run_options, &self.binding)
    }

    /// One more inference through the binding, outside any timing, returning the outputs.
    pub fn run_with_outputs(&mut self) -> Result<SessionOutputs<'_>> {
        self.session.run_binding_with_options(&self.binding, &self.run_options).map_err(|e| anyhow!("inference failed: {e}"))
    }

    /// Runs the first inference, `warmup` discarded runs, then `runs` timed runs. On a failing run
    /// the latencies measured so far are kept in the returned measurement alongside the error.
    pub fn measure(&self, warmup: u32, runs: u32) -> (Measurement, Result<()>) {
        let mut measurement = Measurement::default();
        let start = Instant::now();
        if let Err(e) = self.run_once() {
            return (measurement, Err(e.context("first inference")));
        }
        measurement.first_inference_ns = start.elapsed().as_nanos() as u64;
        for _ in 0..warmup {
            if let Err(e) = self.run_once() {
                return (measurement, Err(e.context("warmup run")));
            }
        }
        let mut latencies = vec![0u64; runs as usize];
        let mut completed = 0;
        let mut failure = Ok(());
        let loop_start = Instant::now();
        for slot in latencies.iter_mut() {
            let t0 = Instant::now();
            let outcome = self.run_once();
            let t1 = Instant::now();
            if let Err(e) = outcome {
                failure = Err(e.context(format!("timed run {}", completed + 1)));
                break;
            }
            *slot = t1.duration_since(t0).as_nanos() as u64;
            completed += 1;
        }
        measurement.loop_wall_ns = loop_start.elapsed().as_nanos() as u64;
        latencies.truncate(completed);
        measurement.latencies_ns = latencies;
        (measurement, failure)
    }
}
