//! What the machine added to each timed run: how long the harness's threads waited for a CPU
//! (run-queue delay) and how often they were preempted, read from the kernel's counters around
//! the run — outside the two clock reads, with files opened and buffers allocated before the loop.
//!
//! Per thread alive when the loop starts (ONNX Runtime's intra-op pool included), a `pread` into a
//! preallocated buffer of the 2nd field of `/proc/self/task/<tid>/schedstat` (nanoseconds the
//! thread was runnable but not running) and, only when that delay moved — a thread preempted goes
//! back to the run queue and waits there, so a thread whose delay did not move was not preempted —
//! of `nonvoluntary_ctxt_switches` in `/proc/self/task/<tid>/status` (a larger file the kernel
//! formats on every read: 4 µs a thread, against 0.5 µs for `schedstat`). Not
//! `getrusage(RUSAGE_SELF)`, which sums the same switches in one call: it walks and locks the
//! thread group, and with a worker thread spinning on a loaded 2-core machine it took 0.6 µs at
//! the median but 2.6 ms at the 90th percentile.

use npugate_result::{CpuWait, PerRun};

/// The counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reading {
    /// Run-queue delay summed over the sampled threads, ns (0 when unavailable).
    pub run_delay_ns: u64,
    /// Involuntary context switches of the process (0 when unavailable).
    pub involuntary_switches: u64,
}

/// Per-run counters collected by the timed loop, preallocated for every run.
pub struct CpuWaitRecord {
    probe: Probe,
    delays: Vec<u64>,
    switches: Vec<u64>,
}

impl CpuWaitRecord {
    /// Opens the counters of every thread of this process and preallocates `runs` entries.
    pub fn open(runs: usize) -> CpuWaitRecord {
        CpuWaitRecord { probe: Probe::open(), delays: vec![0; runs], switches: vec![0; runs] }
    }

    /// The counters now (no allocation).
    #[inline(always)]
    pub fn read(&mut self) -> Reading {
        self.probe.read()
    }

    /// Records run `index` as the difference between the readings around it.
    #[inline(always)]
    pub fn record(&mut self, index: usize, before: Reading, after: Reading) {
        if let (Some(delay), Some(switches)) = (self.delays.get_mut(index), self.switches.get_mut(index)) {
            *delay = after.run_delay_ns.saturating_sub(before.run_delay_ns);
            *switches = after.involuntary_switches.saturating_sub(before.involuntary_switches);
        }
    }

    /// The run-queue delays of the first `completed` runs, when the kernel gives them.
    pub fn delays(&self, completed: usize) -> Option<&[u64]> {
        self.probe.schedstat_missing().is_none().then(|| &self.delays[..completed.min(self.delays.len())])
    }

    /// The record of the first `completed` runs, as `result.json` holds it.
    pub fn finish(mut self, completed: usize) -> CpuWait {
        self.delays.truncate(completed);
        self.switches.truncate(completed);
        let (delays, switches) = (self.delays, self.switches);
        CpuWait {
            threads: self.probe.threads(),
            run_queue_delay_ns: match self.probe.schedstat_missing() {
                Some(why) => PerRun::Unavailable(why),
                None => PerRun::Measured(delays),
            },
            involuntary_switches: match self.probe.switches_missing() {
                Some(why) => PerRun::Unavailable(why),
                None => PerRun::Measured(switches),
            },
        }
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
use linux::Probe;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
use other::Probe;

#[cfg(any(target_os = "linux", target_os = "android"))]
mod linux {
    use std::fs::File;
    use std::os::unix::fs::FileExt;

    use crate::cpu_wait::Reading;

    /// Where the threads of this process are listed.
    const TASKS: &str = "/proc/self/task";
    /// The line of a thread's `status` that counts its preemptions.
    const SWITCHES: &[u8] = b"nonvoluntary_ctxt_switches:";
    /// Room for a thread's `status` (about 1.5 kB; longer with many CPUs in its affinity lists).
    const STATUS_BYTES: usize = 16 * 1024;

    /// One thread's open counter files and what they said last.
    struct Thread {
        schedstat: File,
        status: File,
        delay_ns: u64,
        switches: u64,
    }

    /// The open counter files of the process's threads and the buffers to read them into.
    pub struct Probe {
        threads: Result<Vec<Thread>, String>,
        listed: usize,
        switches: Result<(), String>,
        buffer: Vec<u8>,
    }

    impl Probe {
        /// Opens the `schedstat` and `status` of every thread now alive.
        pub fn open() -> Probe {
            let mut listed = 0;
            let mut switches = Ok(());
            let threads =
                std::fs::read_dir(TASKS).map_err(|e| format!("{TASKS} cannot be read: {e}")).and_then(|tasks| {
                    let mut threads = Vec::new();
                    for task in tasks.flatten() {
                        listed += 1;
                        let (schedstat, status) = (task.path().join("schedstat"), task.path().join("status"));
                        match (File::open(&schedstat), File::open(&status)) {
                            (Ok(schedstat), Ok(status)) => {
                                threads.push(Thread { schedstat, status, delay_ns: u64::MAX, switches: 0 })
                            }
                            // A thread that ended between listing and opening is no loss.
                            _ if !task.path().exists() => {}
                            (Err(e), _) => {
                                return Err(format!(
                                    "{} cannot be read ({e}): the kernel keeps no per-thread run-queue delay (built \
                                 without CONFIG_SCHED_INFO)",
                                    schedstat.display()
                                ))
                            }
                            (Ok(_), Err(e)) => switches = Err(format!("{} cannot be read: {e}", status.display())),
                        }
                    }
                    Ok(threads)
                });
            let mut probe = Probe { threads, listed, switches, buffer: vec![0; STATUS_BYTES] };
            probe.check();
            probe
        }

        /// Reads every file once: a kernel whose files say nothing useful says why.
        fn check(&mut self) {
            let Ok(threads) = &self.threads else { return };
            let buffer = &mut self.buffer;
            let delays = threads.iter().all(|t| t.schedstat.read_at(buffer, 0).is_ok_and(|n| n > 0));
            if !delays || threads.is_empty() {
                self.threads = Err(format!(
                    "{TASKS}/*/schedstat holds no run-queue delay here (the kernel keeps none without CONFIG_SCHED_INFO)"
                ));
                return;
            }
            let counted =
                threads.iter().all(|t| t.status.read_at(buffer, 0).is_ok_and(|n| switches(&buffer[..n]).is_some()));
            if !counted && self.switches.is_ok() {
                self.switches = Err(format!("{TASKS}/*/status has no nonvoluntary_ctxt_switches line here"));
            }
        }

        /// Threads listed when the probe was opened.
        pub fn threads(&self) -> usize {
            self.listed
        }

        /// Why run-queue delays are not available, when they are not.
        pub fn schedstat_missing(&self) -> Option<String> {
            self.threads.as_ref().err().cloned()
        }

        /// Why involuntary switches are not available, when they are not.
        pub fn switches_missing(&self) -> Option<String> {
            self.schedstat_missing().or_else(|| self.switches.as_ref().err().cloned())
        }

        /// The counters now: a `pread` of each thread's `schedstat`, and of its `status` when its
        /// delay moved, into the probe's buffer; nothing allocated. A thread that ended since the
        /// probe was opened keeps its last counts.
        #[inline(always)]
        pub fn read(&mut self) -> Reading {
            let mut reading = Reading::default();
            let Ok(threads) = &mut self.threads else { return reading };
            let count_switches = self.switches.is_ok();
            for thread in threads.iter_mut() {
                let delay_ns = match thread.schedstat.read_at(&mut self.buffer, 0) {
                    Ok(length) => second_field(&self.buffer[..length]),
                    Err(_) => thread.delay_ns,
                };
                if count_switches && delay_ns != thread.delay_ns {
                    if let Ok(length) = thread.status.read_at(&mut self.buffer, 0) {
                        thread.switches = switches(&self.buffer[..length]).unwrap_or(thread.switches);
                    }
                }
                thread.delay_ns = delay_ns;
                reading.run_delay_ns += delay_ns;
                reading.involuntary_switches += thread.switches;
            }
            reading
        }
    }

    /// The second space-separated decimal number of a `schedstat` line (`cpu_ns wait_ns slices`);
    /// 0 when there is none.
    pub fn second_field(line: &[u8]) -> u64 {
        let mut fields = line.split(|b| b.is_ascii_whitespace()).filter(|f| !f.is_empty());
        fields.nth(1).and_then(decimal).unwrap_or(0)
    }

    /// The count on the `nonvoluntary_ctxt_switches:` line of a `status` file (its last line).
    pub fn switches(status: &[u8]) -> Option<u64> {
        let at = status.windows(SWITCHES.len()).rposition(|window| window == SWITCHES)?;
        let rest = &status[at + SWITCHES.len()..];
        let digits = rest.split(|b| *b == b'\n').next()?;
        decimal(digits.trim_ascii())
    }

    /// A decimal number without sign; `None` for anything else.
    fn decimal(digits: &[u8]) -> Option<u64> {
        if digits.is_empty() {
            return None;
        }
        digits.iter().try_fold(0u64, |value, &digit| match digit {
            b'0'..=b'9' => value.checked_mul(10)?.checked_add(u64::from(digit - b'0')),
            _ => None,
        })
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod other {
    use crate::cpu_wait::Reading;

    /// Why nothing is read on this platform.
    const WHY: &str = "the harness runs on Windows, whose kernel gives no per-thread run-queue delay";

    /// Nothing to read on this platform.
    pub struct Probe;

    impl Probe {
        /// Nothing to open.
        pub fn open() -> Probe {
            Probe
        }

        /// No threads read.
        pub fn threads(&self) -> usize {
            0
        }

        /// Always unavailable.
        pub fn schedstat_missing(&self) -> Option<String> {
            Some(WHY.into())
        }

        /// Always unavailable.
        pub fn switches_missing(&self) -> Option<String> {
            Some(WHY.into())
        }

        /// Zeros.
        #[inline(always)]
        pub fn read(&mut self) -> Reading {
            Reading::default()
        }
    }
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use super::*;

    #[test]
    fn the_counters_are_parsed_from_the_kernels_lines() {
        assert_eq!(linux::second_field(b"123456 7890 12\n"), 7890);
        assert_eq!(linux::second_field(b"1 2"), 2);
        assert_eq!(linux::second_field(b"1"), 0);
        assert_eq!(linux::second_field(b""), 0);
        assert_eq!(linux::second_field(b"1 x2 3"), 0);
        let status = b"Name:\tharness\nvoluntary_ctxt_switches:\t17\nnonvoluntary_ctxt_switches:\t42\n";
        assert_eq!(linux::switches(status), Some(42));
        assert_eq!(linux::switches(b"Name:\tx\n"), None);
    }

    /// Threads that spin against each other on more threads than cores wait for a CPU and are
    /// preempted: both counters grow, and the switches are what the status lines sum to.
    #[test]
    fn contention_shows_in_both_counters() {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spinners: Vec<_> = (0..cores * 2)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        let mut record = CpuWaitRecord::open(1);
        let before = record.read();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let after = record.read();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for spinner in spinners {
            spinner.join().unwrap();
        }
        record.record(0, before, after);
        let wait = record.finish(1);
        assert!(wait.threads > cores * 2, "{wait:?}");
        let delay = wait.run_queue_delay_ns.measured().unwrap()[0];
        // 2 spinners per core for 300 ms: each waits about half the time; 50 ms in all cannot fail.
        assert!(delay > 50_000_000, "run-queue delay {delay} ns over 300 ms of {} spinners", cores * 2);
        assert!(wait.involuntary_switches.measured().unwrap()[0] > 0, "{wait:?}");
    }
}
