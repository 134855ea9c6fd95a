//! The measurement loop: inputs and outputs are bound once, then every run is one raw
//! `RunWithBinding` call between two monotonic clock reads — nothing is allocated in the loop.
//! Around each run, outside the clock reads, the kernel's counters of the process's CPU wait are
//! read (see [`crate::cpu_wait`]): the reading after one run is the reading before the next.
//!
//! An output bound to a device keeps, after a run, the tensor ONNX Runtime allocated for it, and
//! the next run writes into it as into a preallocated buffer, checked against the model's
//! declared shape. That holds only for outputs whose shape is the declared, static one. An output
//! whose real shape differs from the declaration (declared rank 2, real rank 3) or is not
//! declared static (NonZero, TopK with a runtime k: the size depends on the data) is bound to the
//! device again before every run, outside the clock reads, so ONNX Runtime allocates it anew, as
//! a plain `session.run` would. Which outputs need that is known after the first run.

use std::ffi::CString;
use std::ptr;
use std::time::Instant;

use anyhow::{anyhow, bail, Result};
use ort::logging::LogLevel;
use ort::memory::MemoryInfo;
use ort::session::{IoBinding, NoSelectedOutputs, RunOptions, Session, SessionOutputs};
use ort::value::ValueType;
use ort::AsPointer;

use crate::cpu_wait::CpuWaitRecord;
use crate::inputs::PreparedInput;
use npugate_result::{CpuWait, RunExtension};

/// A session with its inputs and outputs bound, ready to run repeatedly.
pub struct BoundSession {
    session: Session,
    binding: IoBinding,
    run_options: RunOptions<NoSelectedOutputs>,
    cpu: MemoryInfo<'static>,
    /// Outputs bound to the device again before every run (all of them until the first run).
    allocate_on_run: Vec<CString>,
    /// Every output's name and declared shape (`None`: not a tensor, or a dimension not static).
    declared: Vec<(CString, Option<Vec<i64>>)>,
    settled: bool,
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
pub fn run_with_binding(
    session: &Session,
    run_options: &RunOptions<NoSelectedOutputs>,
    binding: &IoBinding,
) -> Result<()> {
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
    /// How long the process's threads waited for a CPU in each timed run (absent when no timed
    /// run started).
    pub cpu_wait: Option<CpuWait>,
    /// The runs taken beyond the requested ones to replace contended runs, when any were.
    pub extension: Option<RunExtension>,
}

/// How many timed runs to take: `runs` clean ones, up to `budget` in all.
#[derive(Debug, Clone, Copy)]
pub struct RunCount {
    /// Clean runs wanted (`--runs`).
    pub runs: u32,
    /// Runs at most (`--max-runs`).
    pub budget: u32,
}

impl RunCount {
    /// Where to stop after `completed` runs: `completed` when `latencies` and their waits hold
    /// `runs` clean runs (or no wait was recorded, or the budget is spent), else further on by the
    /// runs still missing. Called between runs, outside the clock reads.
    pub fn next_stop(&self, latencies: &[u64], delays: Option<&[u64]>) -> usize {
        let completed = latencies.len();
        let clean = clean_runs(latencies, delays);
        let missing = (self.runs as usize).saturating_sub(clean);
        (completed + missing).min(self.capacity())
    }

    /// Runs timed at most: the budget, never below the runs asked for.
    pub fn capacity(&self) -> usize {
        self.budget.max(self.runs) as usize
    }
}

/// Runs not set aside as contended (`npugate_result::stats::Contention`); all of them without a wait record.
pub fn clean_runs(latencies: &[u64], delays: Option<&[u64]>) -> usize {
    delays.and_then(|d| npugate_result::stats::Contention::of(latencies, d)).map_or(latencies.len(), |c| c.clean_runs())
}

impl BoundSession {
    /// Binds `inputs` and every output (to CPU memory ORT manages, its size checked first) for repeated runs.
    pub fn new(session: Session, inputs: &[PreparedInput]) -> Result<Self> {
        crate::memory::check_outputs(session.outputs())?;
        let mut binding = session.create_binding().map_err(|e| anyhow!("cannot create an I/O binding: {e}"))?;
        for input in inputs {
            binding
                .bind_input(input.description.name.as_str(), &input.value)
                .map_err(|e| anyhow!("cannot bind input {:?}: {e}", input.description.name))?;
        }
        let cpu = MemoryInfo::default();
        let mut declared = Vec::new();
        for output in session.outputs() {
            binding
                .bind_output_to_device(output.name(), &cpu)
                .map_err(|e| anyhow!("cannot bind output {:?}: {e}", output.name()))?;
            let name =
                CString::new(output.name()).map_err(|_| anyhow!("output name {:?} holds a NUL byte", output.name()))?;
            let shape = match output.dtype() {
                ValueType::Tensor { shape, .. } if shape.iter().all(|&d| d >= 0) => Some(shape.to_vec()),
                _ => None,
            };
            declared.push((name, shape));
        }
        let allocate_on_run = declared.iter().map(|(name, _)| name.clone()).collect();
        Ok(BoundSession {
            session,
            binding,
            run_options: quiet_run_options()?,
            cpu,
            allocate_on_run,
            declared,
            settled: false,
        })
    }

    /// Mutable access to the underlying session (to end profiling).
    pub fn session_mut(&mut self) -> &mut Session {
        &mut self.session
    }

    /// The outputs ONNX Runtime allocates on every run (their shape is not the declared static one).
    pub fn allocated_on_run(&self) -> impl Iterator<Item = &str> {
        self.allocate_on_run.iter().filter_map(|name| name.to_str().ok())
    }

    /// One inference through the binding: one raw `RunWithBinding`.
    #[inline(always)]
    fn run_bound(&self) -> Result<()> {
        run_with_binding(&self.session, &self.run_options, &self.binding)
    }

    /// Binds the outputs that are allocated on every run to the device again (nothing for a
    /// model whose outputs all have their declared static shape).
    #[inline(always)]
    fn rebind(&self) -> Result<()> {
        for name in &self.allocate_on_run {
            // SAFETY: binding and memory info are alive; ORT copies the name.
            let status = unsafe {
                (ort::api().BindOutputToDevice)(self.binding.ptr().cast_mut(), name.as_ptr(), self.cpu.ptr())
            };
            // SAFETY: `status` was just returned by ORT.
            unsafe { ort::Error::result_from_status(status) }
                .map_err(|e| anyhow!("cannot bind output {name:?}: {e}"))?;
        }
        Ok(())
    }

    /// After the first run: keeps preallocated only the outputs whose real shape is their
    /// declared static one.
    fn settle(&mut self) -> Result<()> {
        let real = self.bound_output_shapes()?;
        self.allocate_on_run = self
            .declared
            .iter()
            .zip(real)
            .filter(|((_, declared), real)| declared.is_none() || declared != real)
            .map(|((name, _), _)| name.clone())
            .collect();
        self.settled = true;
        Ok(())
    }

    /// The shapes of the tensors the last run left in the binding, in output order (`None`: not a tensor).
    fn bound_output_shapes(&self) -> Result<Vec<Option<Vec<i64>>>> {
        let outputs = self.last_outputs()?;
        Ok(outputs
            .iter()
            .map(|(_, value)| match value.dtype() {
                ort::value::ValueType::Tensor { shape, .. } => Some(shape.to_vec()),
                _ => None,
            })
            .collect())
    }

    /// The outputs the last run left in the binding, named, in output order (owned: each is
    /// released when dropped). No inference runs.
    pub fn last_outputs(&self) -> Result<Vec<(String, ort::value::DynValue)>> {
        use ort::AsPointer;
        let api = ort::api();
        let failed = |e: ort::Error| anyhow!("cannot read the outputs of the last run: {e}");
        let allocator = ort::memory::Allocator::default();
        let raw_allocator = allocator.ptr().cast_mut();
        let mut values: *mut *mut ort::sys::OrtValue = ptr::null_mut();
        let mut count = 0usize;
        // SAFETY: the binding and the default allocator are alive; ORT returns `count` owned
        // values in an array from that allocator: each becomes a `DynValue` that releases it
        // (holding the allocator), then the array is freed with it.
        unsafe {
            ort::Error::result_from_status((api.GetBoundOutputValues)(
                self.binding.ptr(),
                raw_allocator,
                &mut values,
                &mut count,
            ))
            .map_err(failed)?;
            let owned: Vec<ort::value::DynValue> = (0..count)
                .filter_map(|i| ptr::NonNull::new(*values.add(i)))
                .map(|value| ort::value::DynValue::from_ptr(value, Some(&allocator)))
                .collect();
            if !values.is_null() {
                ort::Error::result_from_status((api.AllocatorFree)(raw_allocator, values.cast())).map_err(failed)?;
            }
            if owned.len() != self.declared.len() {
                bail!("the binding holds {} outputs, the model declares {}", owned.len(), self.declared.len());
            }
            let names = self.declared.iter().map(|(name, _)| name.to_string_lossy().into_owned());
            Ok(names.zip(owned).collect())
        }
    }

    /// One untimed inference: the outputs to allocate are bound again first, and the first run
    /// settles which outputs those are.
    pub fn run_once(&mut self) -> Result<()> {
        self.rebind()?;
        self.run_bound()?;
        if !self.settled {
            self.settle()?;
        }
        Ok(())
    }

    /// One more inference through the binding, outside any timing, returning the outputs.
    pub fn run_with_outputs(&mut self) -> Result<SessionOutputs<'_>> {
        self.rebind()?;
        self.session
            .run_binding_with_options(&self.binding, &self.run_options)
            .map_err(|e| anyhow!("inference failed: {e}"))
    }

    /// Runs the first inference, `warmup` discarded runs, then `count.runs` timed runs — and, when
    /// some of them waited for a CPU long enough to be set aside, more until `count.runs` are clean
    /// or `count.budget` were timed (the check runs between runs, outside the clock reads). On a
    /// failing run the latencies measured so far are kept in the returned measurement alongside
    /// the error.
    pub fn measure(&mut self, warmup: u32, count: RunCount) -> (Measurement, Result<()>) {
        let mut measurement = Measurement::default();
        let start = Instant::now();
        if let Err(e) = self.run_bound() {
            return (measurement, Err(e.context("first inference")));
        }
        measurement.first_inference_ns = start.elapsed().as_nanos() as u64;
        crate::progress::done("first", 1, 1, start.elapsed());
        if let Err(e) = self.settle() {
            return (measurement, Err(e));
        }
        for run in 1..=warmup {
            let start = Instant::now();
            if let Err(e) = self.run_once() {
                return (measurement, Err(e.context("warmup run")));
            }
            crate::progress::done("warmup", run, warmup, start.elapsed());
        }
        let capacity = count.capacity();
        let mut latencies = vec![0u64; capacity];
        let mut cpu_wait = CpuWaitRecord::open(capacity);
        let rebinds = !self.allocate_on_run.is_empty();
        let (mut completed, mut stop) = (0, count.runs as usize);
        let mut set_aside_at_requested = None;
        let mut failure = Ok(());
        let loop_start = Instant::now();
        let mut before = cpu_wait.read();
        while completed < stop {
            if let Err(e) = self.rebind() {
                failure = Err(e.context(format!("timed run {}", completed + 1)));
                break;
            }
            if rebinds {
                before = cpu_wait.read();
            }
            let t0 = Instant::now();
            let outcome = self.run_bound();
            let t1 = Instant::now();
            let after = cpu_wait.read();
            if let Err(e) = outcome {
                failure = Err(e.context(format!("timed run {}", completed + 1)));
                break;
            }
            latencies[completed] = t1.duration_since(t0).as_nanos() as u64;
            cpu_wait.record(completed, (t0, t1), before, after);
            before = after;
            completed += 1;
            crate::progress::done("timed", completed as u32, stop as u32, t1.duration_since(t0));
            if completed == stop && stop < capacity {
                let done = &latencies[..completed];
                let requested = stop;
                let delays = cpu_wait.delays(completed);
                stop = count.next_stop(done, delays.as_deref());
                crate::progress::planned_more(stop.saturating_sub(requested) as u32);
                if set_aside_at_requested.is_none() && stop > completed {
                    set_aside_at_requested = Some(completed - clean_runs(done, delays.as_deref()));
                }
                // The check's own time stays out of the next run's wait.
                before = cpu_wait.read();
            }
        }
        measurement.loop_wall_ns = loop_start.elapsed().as_nanos() as u64;
        latencies.truncate(completed);
        measurement.extension = set_aside_at_requested.map(|set_aside| RunExtension {
            requested: count.runs,
            budget: capacity as u32,
            taken: completed as u32,
            set_aside_at_requested: set_aside,
            clean: clean_runs(&latencies, cpu_wait.delays(completed).as_deref()),
        });
        measurement.latencies_ns = latencies;
        measurement.cpu_wait = Some(cpu_wait.finish(completed));
        (measurement, failure)
    }
}
