//! What the machine added to each timed run: how long the harness's threads waited for a CPU
//! during it and how often they were preempted, read from the kernel's counters around the run —
//! outside the two clock reads, with files opened and buffers allocated before the loop.
//!
//! Per thread alive when the loop starts (ONNX Runtime's intra-op pool included), every reading —
//! one before the first run, one after each run, one before a run whose outputs are bound again
//! and one after each check between runs — takes, into preallocated memory:
//! 1. every thread's CPU clock (`clock_gettime` of `((!tid) << 3) | 6`, the kernel's per-thread
//!    scheduler clock: exact to the nanosecond, the slice running now included), the calling
//!    thread's last — the first calls after a run see the other threads as the run left them,
//!    before the calling thread can be preempted at a call's return, which is where a thread that
//!    used up its slice during the run is preempted (measured here: most of the measuring thread's
//!    waits fell between runs);
//! 2. a `pread` of each thread's `schedstat` (its 2nd field: nanoseconds the thread was runnable
//!    but not running, counted when it gets a CPU) and of its `status` (`nonvoluntary_ctxt_switches`,
//!    its preemptions; `voluntary_ctxt_switches`, the times it blocked);
//! 3. each thread's CPU clock again and then its state (`stat`'s 3rd field, `R` for runnable):
//!    the state the next run starts in.
//!
//! What each run waited is then proven from these readings (`npugate_result::stats::attributed_waits`,
//! whose definition is in `npugate_result::stats::contention`): a thread runnable before the run and never
//! blocked until after it waited for all of the run it did not run, and a delay counted at a later
//! reading goes back onto the runs it must have overlapped. Not `getrusage(RUSAGE_SELF)`, which
//! sums the same switches in one call: it walks and locks the thread group, and with a worker
//! thread spinning on a loaded 2-core machine it took 0.6 µs at the median but 2.6 ms at the 90th
//! percentile.

use std::time::Instant;

use npugate_result::stats::{attributed_waits, Readings, RunSpan, ThreadCounters};
use npugate_result::{CpuWait, PerRun};

/// The counters at one moment that are summed over the threads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reading {
    /// Involuntary context switches of the process (0 when unavailable).
    pub involuntary_switches: u64,
}

/// Every reading of every thread's counters through the timed loop, and the runs between them,
/// preallocated for every run.
pub struct CpuWaitRecord {
    probe: Probe,
    origin: Instant,
    /// When each reading began and ended (ns since `origin`).
    began_ns: Vec<u64>,
    ended_ns: Vec<u64>,
    /// Reading-major: each thread's counters at each reading.
    counters: Vec<ThreadCounters>,
    spans: Vec<RunSpan>,
    switches: Vec<u64>,
}

impl CpuWaitRecord {
    /// Opens the counters of every thread of this process and preallocates room for `runs` runs:
    /// a reading after each, one before each (when the loop reads again before a run) and one
    /// after each check between runs.
    pub fn open(runs: usize) -> CpuWaitRecord {
        let probe = Probe::open();
        let readings = 3 * runs + 1;
        CpuWaitRecord {
            origin: Instant::now(),
            began_ns: Vec::with_capacity(readings),
            ended_ns: Vec::with_capacity(readings),
            counters: Vec::with_capacity(readings * probe.thread_count()),
            spans: Vec::with_capacity(runs),
            switches: vec![0; runs],
            probe,
        }
    }

    /// Reads every thread's counters now and keeps them (no allocation); returns the sums.
    #[inline(always)]
    pub fn read(&mut self) -> Reading {
        let threads = self.probe.thread_count();
        if self.ended_ns.len() == self.ended_ns.capacity() {
            return Reading::default();
        }
        self.began_ns.push(self.origin.elapsed().as_nanos() as u64);
        let from = self.counters.len();
        self.counters.resize(from + threads, ThreadCounters::default());
        let reading = self.probe.read(&mut self.counters[from..]);
        self.ended_ns.push(self.origin.elapsed().as_nanos() as u64);
        reading
    }

    /// Records run `index`, timed from `start` to `end`, between the last two readings: `before`
    /// and `after` are the sums they returned.
    #[inline(always)]
    pub fn record(&mut self, index: usize, (start, end): (Instant, Instant), before: Reading, after: Reading) {
        if let Some(switches) = self.switches.get_mut(index) {
            *switches = after.involuntary_switches.saturating_sub(before.involuntary_switches);
        }
        if self.spans.len() < self.spans.capacity() {
            let on_clock = |at: Instant| at.saturating_duration_since(self.origin).as_nanos() as u64;
            let after_reading = self.ended_ns.len().saturating_sub(1);
            self.spans.push(RunSpan { start_ns: on_clock(start), end_ns: on_clock(end), after_reading });
        }
    }

    /// Runs recorded so far: the index the next run is recorded at.
    pub fn recorded(&self) -> usize {
        self.spans.len()
    }

    /// The CPU wait attributed to each of the first `completed` runs
    /// ([`npugate_result::stats::attributed_waits`]), when the kernel gives run-queue delays.
    pub fn delays(&self, completed: usize) -> Option<Vec<u64>> {
        self.probe.schedstat_missing().is_none().then(|| {
            let readings = Readings {
                began_ns: &self.began_ns,
                ended_ns: &self.ended_ns,
                counters: &self.counters,
                threads: self.probe.thread_count(),
            };
            attributed_waits(readings, &self.spans[..completed.min(self.spans.len())])
        })
    }

    /// The record of the first `completed` runs, as `result.json` holds it.
    pub fn finish(self, completed: usize) -> CpuWait {
        let delays = self.delays(completed);
        let mut switches = self.switches;
        switches.truncate(completed);
        CpuWait {
            threads: self.probe.threads(),
            run_queue_delay_ns: match (delays, self.probe.schedstat_missing()) {
                (Some(delays), _) => PerRun::Measured(delays),
                (None, why) => PerRun::Unavailable(why.unwrap_or_default()),
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

    use npugate_result::stats::ThreadCounters;

    use crate::cpu_wait::Reading;

    /// Where the threads of this process are listed.
    const TASKS: &str = "/proc/self/task";
    /// The line of a thread's `status` that counts its preemptions.
    const SWITCHES: &[u8] = b"\nnonvoluntary_ctxt_switches:";
    /// The line of a thread's `status` that counts the times it blocked.
    const BLOCKED: &[u8] = b"\nvoluntary_ctxt_switches:";
    /// Room for a thread's `status` (about 1.5 kB; longer with many CPUs in its affinity lists).
    const STATUS_BYTES: usize = 16 * 1024;

    /// One thread's open counter files, its CPU clock and what they said last.
    struct Thread {
        schedstat: File,
        status: File,
        stat: Option<File>,
        /// The thread's CPU clock (`clock_gettime` of `((!tid) << 3) | 6`: per thread, scheduler
        /// time), exact to the nanosecond where `schedstat`'s 1st field lags a running thread by
        /// up to a tick.
        clock: libc::clockid_t,
        counters: ThreadCounters,
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
                            (Ok(schedstat), Ok(status)) => threads.push(Thread {
                                schedstat,
                                status,
                                stat: File::open(task.path().join("stat")).ok(),
                                clock: task
                                    .file_name()
                                    .to_str()
                                    .and_then(|tid| tid.parse().ok())
                                    .map_or(libc::clockid_t::MAX, thread_clock),
                                counters: ThreadCounters::default(),
                                switches: 0,
                            }),
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
                    // The calling thread last: a run's other threads are read first after it.
                    // SAFETY: gettid takes no argument and cannot fail.
                    let own = thread_clock(unsafe { libc::syscall(libc::SYS_gettid) } as libc::pid_t);
                    threads.sort_by_key(|thread| thread.clock == own);
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

        /// Threads whose counters are read (0 when none can be).
        pub fn thread_count(&self) -> usize {
            self.threads.as_ref().map_or(0, Vec::len)
        }

        /// Why run-queue delays are not available, when they are not.
        pub fn schedstat_missing(&self) -> Option<String> {
            self.threads.as_ref().err().cloned()
        }

        /// Why involuntary switches are not available, when they are not.
        pub fn switches_missing(&self) -> Option<String> {
            self.schedstat_missing().or_else(|| self.switches.as_ref().err().cloned())
        }

        /// The counters now, each thread's into `out` (one entry per thread): its CPU clock, a
        /// `pread` of its `schedstat`, and of its `status` when its delay moved, into the probe's
        /// buffer; nothing allocated. A thread that ended since the probe was opened keeps its last
        /// counts. Returns the sums.
        #[inline(always)]
        pub fn read(&mut self, out: &mut [ThreadCounters]) -> Reading {
            let mut reading = Reading::default();
            let Ok(threads) = &mut self.threads else { return reading };
            let count_switches = self.switches.is_ok();
            // Every CPU clock first, the calling thread's last: the first calls after a run see the
            // other threads as the run left them, before the calling thread can be preempted at
            // their return.
            for (thread, out) in threads.iter_mut().zip(out.iter_mut()) {
                out.cpu_ns = cpu_time(thread.clock);
            }
            for (thread, out) in threads.iter_mut().zip(out.iter_mut()) {
                let last = thread.counters;
                thread.counters.cpu_ns = out.cpu_ns;
                thread.counters.run_delay_ns = match thread.schedstat.read_at(&mut self.buffer, 0) {
                    Ok(length) => second_field(&self.buffer[..length]),
                    Err(_) => last.run_delay_ns,
                };
                thread.counters.blocked = None;
                if count_switches {
                    if let Ok(length) = thread.status.read_at(&mut self.buffer, 0) {
                        thread.switches = switches(&self.buffer[..length]).unwrap_or(thread.switches);
                        thread.counters.blocked = blocked(&self.buffer[..length]);
                    }
                }
                *out = thread.counters;
                reading.involuntary_switches += thread.switches;
            }
            // Last, each thread's CPU clock and then its state: the state the next run starts in.
            for (thread, out) in threads.iter_mut().zip(out.iter_mut()) {
                let cpu_ns = cpu_time(thread.clock);
                let runnable = thread.stat.as_ref().is_some_and(|stat| {
                    stat.read_at(&mut self.buffer, 0).is_ok_and(|length| runnable(&self.buffer[..length]))
                });
                out.runnable_at_cpu_ns = cpu_ns.filter(|_| runnable);
            }
            reading
        }
    }

    /// The CPU clock of thread `tid` of this process, as the kernel encodes it
    /// (`MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)`). A `/proc/self/task` entry whose name is no
    /// thread id gets an invalid clock instead, which `clock_gettime` refuses: its CPU time is then
    /// unknown.
    fn thread_clock(tid: libc::pid_t) -> libc::clockid_t {
        (!tid << 3) | 6
    }

    /// The CPU time of `clock` (ns); `None` when the kernel refuses it (the thread ended).
    #[inline(always)]
    fn cpu_time(clock: libc::clockid_t) -> Option<u64> {
        let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `now` is a valid timespec the call writes into.
        let status = unsafe { libc::clock_gettime(clock, &mut now) };
        (status == 0).then(|| now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64)
    }

    /// The second space-separated decimal number of a `schedstat` line (`cpu_ns wait_ns slices`);
    /// 0 when there is none.
    pub fn second_field(line: &[u8]) -> u64 {
        let mut fields = line.split(|b| b.is_ascii_whitespace()).filter(|f| !f.is_empty());
        fields.nth(1).and_then(decimal).unwrap_or(0)
    }

    /// True when a thread's `stat` line says it is runnable: state `R` (running or waiting for a
    /// CPU), the first field after the command name in parentheses.
    pub fn runnable(stat: &[u8]) -> bool {
        stat.iter().rposition(|&b| b == b')').is_some_and(|at| stat.get(at + 2) == Some(&b'R'))
    }

    /// The count on the `nonvoluntary_ctxt_switches:` line of a `status` file.
    pub fn switches(status: &[u8]) -> Option<u64> {
        count(status, SWITCHES)
    }

    /// The count on the `voluntary_ctxt_switches:` line of a `status` file.
    pub fn blocked(status: &[u8]) -> Option<u64> {
        count(status, BLOCKED)
    }

    /// The number after `label` (a line's start, with its newline) in a `status` file.
    fn count(status: &[u8], label: &[u8]) -> Option<u64> {
        let at = status.windows(label.len()).position(|window| window == label)?;
        let rest = &status[at + label.len()..];
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

        /// No threads read.
        pub fn thread_count(&self) -> usize {
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
        pub fn read(&mut self, _out: &mut [npugate_result::stats::ThreadCounters]) -> Reading {
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
        assert_eq!(linux::blocked(status), Some(17));
        assert_eq!(linux::switches(b"Name:\tx\n"), None);
        assert!(linux::runnable(b"4242 (ort (worker)) R 1 4242 0"));
        assert!(!linux::runnable(b"4242 (npugate-harness) S 1 4242 0"));
        assert!(!linux::runnable(b"4242 (x"));
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
        let start = std::time::Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let end = std::time::Instant::now();
        let after = record.read();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for spinner in spinners {
            spinner.join().unwrap();
        }
        record.record(0, (start, end), before, after);
        let wait = record.finish(1);
        assert!(wait.threads > cores * 2, "{wait:?}");
        let delay = wait.run_queue_delay_ns.measured().unwrap()[0];
        // 2 spinners per core for 300 ms: each waits about half the time; 50 ms in all cannot fail.
        assert!(delay > 50_000_000, "run-queue delay {delay} ns over 300 ms of {} spinners", cores * 2);
        assert!(wait.involuntary_switches.measured().unwrap()[0] > 0, "{wait:?}");
    }
}
