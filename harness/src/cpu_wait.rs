//! What the machine added to each timed run: how long the harness's threads waited for a CPU
//! (run-queue delay) and how often they were preempted, read from the kernel's counters around
//! the run — outside the two clock reads, with files opened and buffers allocated before the loop.
//!
//! Run-queue delay is the 2nd field of `/proc/self/task/<tid>/schedstat` (nanoseconds the thread
//! was runnable but not running), summed over every thread alive when the loop starts — ONNX
//! Runtime's intra-op pool included. Involuntary context switches come from one
//! `getrusage(RUSAGE_SELF)` call: the kernel's sum of every thread's `nonvoluntary_ctxt_switches`
//! (what `/proc/self/task/*/status` lists thread by thread), without formatting a status file per
//! thread per run.

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

    use super::Reading;

    /// Where the threads of this process are listed.
    const TASKS: &str = "/proc/self/task";

    /// Open `schedstat` files of the process's threads and a buffer to read them into.
    pub struct Probe {
        schedstat: Result<Vec<File>, String>,
        threads: usize,
        switches: Result<(), String>,
        buffer: [u8; 96],
    }

    impl Probe {
        /// Opens `/proc/self/task/<tid>/schedstat` of every thread now alive and checks that
        /// `getrusage` answers.
        pub fn open() -> Probe {
            let mut threads = 0;
            let schedstat =
                std::fs::read_dir(TASKS).map_err(|e| format!("{TASKS} cannot be read: {e}")).and_then(|tasks| {
                    let mut files = Vec::new();
                    for task in tasks.flatten() {
                        threads += 1;
                        let path = task.path().join("schedstat");
                        match File::open(&path) {
                            Ok(file) => files.push(file),
                            // A thread that ended between listing and opening is no loss.
                            Err(e)
                                if e.kind() == std::io::ErrorKind::NotFound
                                    && path.parent().is_some_and(|p| !p.exists()) => {}
                            Err(e) => {
                                return Err(format!(
                                    "{} cannot be read ({e}): the kernel keeps no per-thread run-queue delay \
                                     (built without CONFIG_SCHED_INFO)",
                                    path.display()
                                ))
                            }
                        }
                    }
                    Ok(files)
                });
            let switches = match involuntary_switches() {
                Some(_) => Ok(()),
                None => Err(format!("getrusage(RUSAGE_SELF) failed: {}", std::io::Error::last_os_error())),
            };
            let mut probe = Probe { schedstat, threads, switches, buffer: [0; 96] };
            if let Ok(files) = &probe.schedstat {
                let unreadable = files.iter().any(|file| file.read_at(&mut probe.buffer, 0).is_err());
                if unreadable || files.is_empty() {
                    probe.schedstat = Err(format!(
                        "{TASKS}/*/schedstat holds no run-queue delay here (the kernel keeps none without \
                         CONFIG_SCHED_INFO)"
                    ));
                }
            }
            probe
        }

        /// Threads listed when the probe was opened.
        pub fn threads(&self) -> usize {
            self.threads
        }

        /// Why run-queue delays are not available, when they are not.
        pub fn schedstat_missing(&self) -> Option<String> {
            self.schedstat.as_ref().err().cloned()
        }

        /// Why involuntary switches are not available, when they are not.
        pub fn switches_missing(&self) -> Option<String> {
            self.switches.as_ref().err().cloned()
        }

        /// The counters now: one `pread` per thread and one `getrusage`; nothing allocated. A
        /// thread that ended since the probe was opened reads as nothing.
        #[inline(always)]
        pub fn read(&mut self) -> Reading {
            let mut run_delay_ns = 0u64;
            if let Ok(files) = &self.schedstat {
                for file in files {
                    if let Ok(length) = file.read_at(&mut self.buffer, 0) {
                        run_delay_ns += second_field(&self.buffer[..length]);
                    }
                }
            }
            Reading { run_delay_ns, involuntary_switches: involuntary_switches().unwrap_or(0) }
        }
    }

    /// The process's involuntary context switches over all its threads.
    fn involuntary_switches() -> Option<u64> {
        // SAFETY: `usage` is a plain C struct the call fills; RUSAGE_SELF is always valid.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: a valid pointer to a `rusage` the call writes.
        let status = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
        (status == 0).then_some(usage.ru_nivcsw as u64)
    }

    /// The second space-separated decimal number of a `schedstat` line (`cpu_ns wait_ns slices`);
    /// 0 when there is none.
    pub fn second_field(line: &[u8]) -> u64 {
        let mut fields = line.split(|b| b.is_ascii_whitespace()).filter(|f| !f.is_empty());
        let Some(field) = fields.nth(1) else { return 0 };
        field
            .iter()
            .try_fold(0u64, |value, &digit| match digit {
                b'0'..=b'9' => value.checked_mul(10)?.checked_add(u64::from(digit - b'0')),
                _ => None,
            })
            .unwrap_or(0)
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod other {
    use super::Reading;

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
    fn the_second_schedstat_field_is_the_run_queue_delay() {
        assert_eq!(linux::second_field(b"123456 7890 12\n"), 7890);
        assert_eq!(linux::second_field(b"1 2"), 2);
        assert_eq!(linux::second_field(b"1"), 0);
        assert_eq!(linux::second_field(b""), 0);
        assert_eq!(linux::second_field(b"1 x2 3"), 0);
    }

    /// Threads that spin against each other on more threads than cores wait for a CPU: the
    /// counters grow, and the involuntary switches are the per-thread status lines' sum.
    #[test]
    fn contention_shows_in_the_counters_and_switches_match_the_status_files() {
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
        let summed: u64 = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .filter_map(|task| std::fs::read_to_string(task.path().join("status")).ok())
            .filter_map(|status| {
                status.lines().find_map(|l| l.strip_prefix("nonvoluntary_ctxt_switches:").map(|v| v.trim().to_string()))
            })
            .map(|v| v.parse::<u64>().unwrap())
            .sum();
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
        // Read later, the process-wide count covers at least what the threads' status lines summed
        // to (a thread that ends in between leaves its count to the process).
        assert!(after.involuntary_switches >= summed && summed > 0, "{after:?} vs {summed}");
    }
}
