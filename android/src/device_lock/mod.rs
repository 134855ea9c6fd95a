//! One measurement at a time per device: an exclusive lock on a device's work dir, taken on the
//! device itself (so it holds across processes *and* hosts sharing the device), held for the
//! whole deploy–run–pull of a harness, refreshed by a heartbeat while it is held.
//!
//! A taker that finds the lock held waits (or gives up after its timeout, naming the holder). A
//! holder that is gone — its npugate process ended (checked directly when it ran on this host) or
//! its heartbeat is older than [`LockOptions::stale_after`] — has its lock broken; once the lock
//! is taken, every harness still running in the work dir is an orphan of a dead host and is
//! stopped before anything is timed. Both are reported and recorded. A record that is corrupt or
//! written by a newer npugate is never broken automatically: the error says how to clear it
//! ([`unlock`], `npugate devices --unlock`).
//!
//! Everything runs through [`DeviceShell`], so the protocol is tested with a local phone shell (mksh, toybox).

pub mod holder;
pub mod script;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use self::holder::{Holder, RecordProblem, LOCK_SCHEMA};
use self::script::{lock_dir, Attempt, DeviceHarness, Observation};
use crate::adb::quote::command_line;
use crate::adb::{AdbError, DeviceShell};

/// A lock that vanishes between a failed `mkdir` and the look at it this many times in a row is
/// no race: `mkdir` fails for another reason.
const MAX_VANISHED: u32 = 10;

/// How long to wait for a lock and when a holder counts as gone.
#[derive(Debug, Clone)]
pub struct LockOptions {
    /// Longest wait for a held lock; `None` waits as long as it takes, zero does not wait.
    pub timeout: Option<Duration>,
    /// Pause between two looks at a held lock.
    pub poll: Duration,
    /// A holder whose heartbeat is older than this is gone.
    pub stale_after: Duration,
    /// How often the holder refreshes its heartbeat.
    pub heartbeat_every: Duration,
}

impl LockOptions {
    /// Waits up to `timeout` (`None`: forever); a heartbeat every 5 s, stale after 60 s.
    pub fn waiting(timeout: Option<Duration>) -> LockOptions {
        LockOptions {
            timeout,
            poll: Duration::from_secs(1),
            stale_after: Duration::from_secs(60),
            heartbeat_every: Duration::from_secs(5),
        }
    }
}

/// Where a taker reports while it works: a progress step (replaced by the next), a line that
/// stays (a wait, a broken lock, a stopped orphan), and whether the user interrupted.
pub struct Reporter<'a> {
    /// The current step, e.g. `lock: waiting 12 s for host ci-7 pid 4242`.
    pub step: &'a dyn Fn(&str),
    /// A line worth keeping in the log.
    pub note: &'a dyn Fn(&str),
    /// True once the user interrupted.
    pub cancelled: &'a dyn Fn() -> bool,
}

/// How the lock of one run was taken (`lock` in `device_run.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockRecord {
    /// The lock dir on the device.
    pub lock_dir: String,
    /// The record this run held the lock with.
    pub holder: Holder,
    /// Seconds spent waiting for other holders.
    pub waited_s: f64,
    /// The holder waited for first, when the lock was held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_for: Option<Holder>,
    /// Locks of gone holders that were broken.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub broken: Vec<BrokenLock>,
    /// Harnesses of dead hosts stopped before the run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub orphans_stopped: Vec<DeviceHarness>,
}

/// A broken lock: whose it was and why it counted as gone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BrokenLock {
    /// Its holder (absent when the lock held no record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<Holder>,
    /// Why it was gone, one phrase.
    pub reason: String,
}

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// The device could not be reached or a script failed.
    #[error(transparent)]
    Adb(#[from] AdbError),
    /// Someone holds the lock and the timeout ran out (or was zero).
    #[error("{0}")]
    Busy(String),
    /// The lock cannot be used as it is (corrupt, newer, unwritable); the message says what to do.
    #[error("{0}")]
    Unusable(String),
    /// The user interrupted the wait.
    #[error("device {0}: interrupted while waiting for the device lock")]
    Interrupted(String),
}

/// A held lock; released (and its heartbeat stopped) when dropped.
pub struct DeviceLock {
    shell: Arc<dyn DeviceShell>,
    work_dir: String,
    record: LockRecord,
    heartbeat: Heartbeat,
}

/// What the holder makes of a lock it found.
#[derive(Debug, Clone, PartialEq)]
enum Found {
    /// Its holder works (or is writing its record right now).
    Alive,
    /// Its holder is gone, for this reason: the lock may be broken.
    Gone(String),
    /// Its record cannot be used.
    Unreadable(RecordProblem),
}

impl DeviceLock {
    /// Takes the lock of `work_dir` on the device behind `shell`, waiting as `options` say, then
    /// stops every orphaned harness of the work dir. Reports waits, breaks and stops on `reporter`.
    pub fn acquire(
        shell: Arc<dyn DeviceShell>,
        work_dir: &str,
        options: &LockOptions,
        reporter: &Reporter<'_>,
    ) -> Result<DeviceLock, LockError> {
        let mut taking = Taking::new(&*shell, work_dir, options, reporter);
        taking.wait_until_taken()?;
        let Taking { device, ours, record, .. } = taking;
        let heartbeat = Heartbeat::start(shell.clone(), work_dir, &ours.run, options.heartbeat_every);
        let mut lock = DeviceLock { shell, work_dir: work_dir.to_string(), record, heartbeat };
        lock.stop_orphans(&device, reporter)?;
        Ok(lock)
    }

    /// Holding the lock, no harness of this work dir can be anyone's live run: stops them all,
    /// reports each (naming the broken holder whose run it was) and records them.
    fn stop_orphans(&mut self, device: &str, reporter: &Reporter<'_>) -> Result<(), LockError> {
        let orphans = script::stop_harnesses(&*self.shell, &self.work_dir, &[])?;
        for orphan in &orphans {
            let whose = self.record.broken.iter().filter_map(|b| b.holder.as_ref()).find(|h| h.run == orphan.run);
            let whose = whose.map_or(String::new(), |h| format!(" of {}", h.describe()));
            (reporter.note)(&format!(
                "device {device}: stopped orphaned harness pid {} (run {}{whose}) before timing anything",
                orphan.pid, orphan.run
            ));
        }
        self.record.orphans_stopped = orphans;
        Ok(())
    }

    /// The run dir name this lock was taken for (below `<work-dir>/results/`).
    pub fn run(&self) -> &str {
        &self.record.holder.run
    }

    /// How the lock was taken.
    pub fn record(&self) -> &LockRecord {
        &self.record
    }

    /// A sentence when the heartbeat found the lock in other hands during the run.
    pub fn lost(&self) -> Option<String> {
        self.heartbeat.lost.load(Ordering::SeqCst).then(|| {
            format!(
                "the device lock {} was taken over by another npugate during this run (its holder thought this one gone); the measurement may have overlapped another",
                self.record.lock_dir
            )
        })
    }

    /// Stops this run's own harness on the device (after a timeout or an interrupt).
    pub fn stop_own_harness(&self) -> Result<Vec<DeviceHarness>, AdbError> {
        script::stop_harnesses(&*self.shell, &self.work_dir, &[self.run()])
    }
}

impl Drop for DeviceLock {
    fn drop(&mut self) {
        self.heartbeat.stop();
        if let Err(error) = script::release(&*self.shell, &self.work_dir, self.run()) {
            eprintln!("npugate: warning: {error}; the lock {} stays until it is stale", self.record.lock_dir);
        }
    }
}

/// A taker waiting for a device's lock: what one look at the lock carries to the next.
struct Taking<'a, 'r> {
    /// The device's shell.
    shell: &'a dyn DeviceShell,
    /// The work dir whose lock it takes.
    work_dir: &'a str,
    /// The device's name, for messages.
    device: String,
    /// This process, as the lock's holder record names it.
    ours: Holder,
    /// How long to wait, how often to look.
    options: &'a LockOptions,
    /// Where waits and breaks are reported.
    reporter: &'a Reporter<'r>,
    /// How the lock was taken so far (broken locks, whom it waited for).
    record: LockRecord,
    /// When it first found the lock held by a live holder.
    waiting_since: Option<Instant>,
}

impl<'a, 'r> Taking<'a, 'r> {
    /// A taker for this process, with a new run id, that has not looked yet.
    fn new(
        shell: &'a dyn DeviceShell,
        work_dir: &'a str,
        options: &'a LockOptions,
        reporter: &'a Reporter<'r>,
    ) -> Self {
        let ours = Holder::for_this_process(&new_run_id());
        let record = LockRecord {
            lock_dir: lock_dir(work_dir),
            holder: ours.clone(),
            waited_s: 0.0,
            waited_for: None,
            broken: vec![],
            orphans_stopped: vec![],
        };
        Taking {
            shell,
            work_dir,
            device: shell.name().to_string(),
            ours,
            options,
            reporter,
            record,
            waiting_since: None,
        }
    }

    /// Tries to take the lock until it is taken (breaking gone holders' locks, waiting for live
    /// ones), then records and reports how long it waited.
    fn wait_until_taken(&mut self) -> Result<(), LockError> {
        let (device, work_dir) = (self.device.clone(), self.work_dir);
        let mut vanished = 0;
        loop {
            if (self.reporter.cancelled)() {
                return Err(LockError::Interrupted(device));
            }
            let observation = match script::try_take(self.shell, work_dir, &self.ours)? {
                Attempt::Taken => break,
                Attempt::Unwritable(why) => {
                    return Err(LockError::Unusable(format!(
                        "device {device}: cannot take the lock in work dir {work_dir}: {why}; make {work_dir} writable or choose another --work-dir"
                    )))
                }
                Attempt::Held(observation) => observation,
                Attempt::Vanished(_) if vanished < MAX_VANISHED => {
                    vanished += 1;
                    continue;
                }
                Attempt::Vanished(why) => {
                    return Err(LockError::Unusable(format!(
                        "device {device}: cannot take the lock in work dir {work_dir}: {why} ({MAX_VANISHED} times, though no lock was there)"
                    )))
                }
            };
            let holder = observation.holder.as_ref().ok();
            match judge(&observation, self.options.stale_after) {
                Found::Unreadable(problem) => {
                    return Err(LockError::Unusable(unreadable_message(&device, work_dir, &problem)))
                }
                Found::Gone(reason) => self.break_gone(holder, reason)?,
                Found::Alive => self.wait_for(holder)?,
            }
        }
        self.record.waited_s = self.waiting_since.map_or(0.0, |since| since.elapsed().as_secs_f64());
        if let Some(holder) = &self.record.waited_for {
            (self.reporter.note)(&format!(
                "device {device}: lock taken after waiting {:.1} s for host {} pid {}",
                self.record.waited_s, holder.host, holder.pid
            ));
        }
        Ok(())
    }

    /// Breaks the lock of a holder that is gone (for `reason`); reports and records it unless
    /// someone else broke or released it first.
    fn break_gone(&mut self, holder: Option<&Holder>, reason: String) -> Result<(), LockError> {
        if script::break_lock(self.shell, self.work_dir, holder.map_or("", |h| h.run.as_str()))? {
            let whose = holder
                .map_or("a lock without a holder record".to_string(), |h| format!("the lock of {}", h.describe()));
            (self.reporter.note)(&format!("device {}: broke {whose}: {reason}", self.device));
            self.record.broken.push(BrokenLock { holder: holder.cloned(), reason });
        }
        Ok(())
    }

    /// One pause waiting for a live holder: gives up once the timeout has passed (at once for a
    /// zero timeout), says whom it waits for the first time, shows the wait so far.
    fn wait_for(&mut self, holder: Option<&Holder>) -> Result<(), LockError> {
        let device = &self.device;
        let whom = holder.map_or("an npugate that is taking it right now".to_string(), Holder::describe);
        let since = *self.waiting_since.get_or_insert_with(Instant::now);
        let waited = since.elapsed();
        match self.options.timeout {
            Some(limit) if limit.is_zero() => {
                return Err(LockError::Busy(format!(
                    "device {device} is locked by {whom}; --lock-timeout 0 does not wait (wait with --lock-timeout SECONDS, or leave it out to wait as long as it takes)"
                )))
            }
            Some(limit) if waited >= limit => {
                return Err(LockError::Busy(format!(
                    "device {device} is still locked by {whom} after waiting {} s (--lock-timeout {})",
                    waited.as_secs(),
                    limit.as_secs()
                )))
            }
            _ => {}
        }
        if self.record.waited_for.is_none() && holder.is_some() {
            self.record.waited_for = holder.cloned();
            let bound =
                self.options.timeout.map_or("as long as it takes".to_string(), |t| format!("up to {} s", t.as_secs()));
            (self.reporter.note)(&format!(
                "device {device} is locked by {whom}; waiting for it ({bound}, see --lock-timeout)"
            ));
        }
        let short = holder.map_or("a new holder".to_string(), |h| format!("host {} pid {}", h.host, h.pid));
        (self.reporter.step)(&format!("lock: waiting {} s for {short}", waited.as_secs()));
        sleep_unless(self.options.poll, self.reporter.cancelled);
        Ok(())
    }
}

/// What a lock found held means: gone when its holder's process ended on this host, or when its
/// heartbeat is older than `stale_after`; alive otherwise.
fn judge(observation: &Observation, stale_after: Duration) -> Found {
    let stale = |age: Option<u64>| age.is_some_and(|age| age > stale_after.as_secs());
    match &observation.holder {
        Ok(holder) => match holder.alive_here() {
            Some(false) => Found::Gone(format!("its npugate process (pid {}) on this host has ended", holder.pid)),
            Some(true) => Found::Alive,
            None if stale(observation.heartbeat_age_s)
                || observation.heartbeat_age_s.is_none() && stale(observation.lock_age_s) =>
            {
                Found::Gone(format!(
                    "no heartbeat for {} s (stale after {} s)",
                    observation.heartbeat_age_s.or(observation.lock_age_s).unwrap_or(0),
                    stale_after.as_secs()
                ))
            }
            None => Found::Alive,
        },
        Err(RecordProblem::Missing) if stale(observation.lock_age_s) => {
            Found::Gone(format!("the lock dir has held no holder record for {} s", observation.lock_age_s.unwrap_or(0)))
        }
        Err(RecordProblem::Missing) => Found::Alive,
        Err(problem) => Found::Unreadable(problem.clone()),
    }
}

/// The error for a record that cannot be used, with the command that clears it.
fn unreadable_message(device: &str, work_dir: &str, problem: &RecordProblem) -> String {
    let file = format!("{}/holder", lock_dir(work_dir));
    let clear = command_line(["npugate", "devices", "--unlock", device, "--work-dir", work_dir]);
    match problem {
        RecordProblem::Newer(schema) => format!(
            "device {device}: the lock {file} was written by a newer npugate ({schema}; this npugate reads {LOCK_SCHEMA}); upgrade npugate, or clear it with: {clear}"
        ),
        RecordProblem::Corrupt(why) => format!("device {device}: the lock {file} is corrupt ({why}); clear it with: {clear}"),
        RecordProblem::Missing => format!("device {device}: the lock {file} is missing; clear it with: {clear}"),
    }
}

/// Clears the lock of `work_dir` (`npugate devices --unlock`): refused while its holder is alive —
/// its process runs on this host, its heartbeat is fresher than `options.stale_after` or its
/// harness runs — unless `force`.
/// Returns what was done, one sentence.
pub fn unlock(
    shell: &dyn DeviceShell,
    work_dir: &str,
    force: bool,
    options: &LockOptions,
) -> Result<String, LockError> {
    let device = shell.name();
    let Some(observation) = script::inspect(shell, work_dir)? else {
        return Ok(format!("device {device}: not locked ({} does not exist)", lock_dir(work_dir)));
    };
    let holder = observation.holder.as_ref().ok();
    let whose = match &observation.holder {
        Ok(holder) => format!("the lock of {}", holder.describe()),
        Err(RecordProblem::Missing) => "a lock without a holder record".into(),
        Err(RecordProblem::Corrupt(why)) => format!("a corrupt lock ({why})"),
        Err(RecordProblem::Newer(schema)) => format!("a lock of a newer npugate ({schema})"),
    };
    let fresh = observation.heartbeat_age_s.is_some_and(|age| age <= options.stale_after.as_secs());
    let alive = if holder.and_then(Holder::alive_here) == Some(true) {
        Some("its npugate process runs on this host".to_string())
    } else if holder.is_some_and(|h| observation.runs_harness_of(&h.run)) {
        Some("its harness runs on the device".to_string())
    } else if fresh && holder.and_then(Holder::alive_here) != Some(false) {
        Some(format!("its heartbeat is {} s old", observation.heartbeat_age_s.unwrap_or(0)))
    } else {
        None
    };
    if let (Some(why), false) = (&alive, force) {
        return Err(LockError::Busy(format!(
            "device {device}: {whose} is alive ({why}); wait for it, or clear it anyway with --force"
        )));
    }
    script::clear(shell, work_dir)?;
    Ok(format!("device {device}: cleared {whose}{}", if alive.is_some() { " (forced)" } else { "" }))
}

/// A unique run id: `run-<host pid>-<nanoseconds, hex>-<random>`.
fn new_run_id() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let mut random = [0u8; 4];
    let _ = getrandom::fill(&mut random);
    format!("run-{}-{nanos:x}-{}", std::process::id(), hex::encode(random))
}

/// Sleeps `pause`, waking early when `cancelled()` turns true.
fn sleep_unless(pause: Duration, cancelled: &dyn Fn() -> bool) {
    let until = Instant::now() + pause;
    while Instant::now() < until && !cancelled() {
        std::thread::sleep(Duration::from_millis(50).min(until.saturating_duration_since(Instant::now())));
    }
}

/// The holder's heartbeat: a thread refreshing the lock every interval until stopped; it notes
/// when the lock turned out to be someone else's.
struct Heartbeat {
    stop: Arc<(Mutex<bool>, Condvar)>,
    lost: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Heartbeat {
    fn start(shell: Arc<dyn DeviceShell>, work_dir: &str, run: &str, every: Duration) -> Heartbeat {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let lost = Arc::new(AtomicBool::new(false));
        let (work_dir, run) = (work_dir.to_string(), run.to_string());
        let thread = std::thread::spawn({
            let (stop, lost) = (stop.clone(), lost.clone());
            move || loop {
                let (flag, wake) = &*stop;
                let stopped = flag.lock().unwrap_or_else(|p| p.into_inner());
                let (stopped, _) =
                    wake.wait_timeout_while(stopped, every, |stopped| !*stopped).unwrap_or_else(|p| p.into_inner());
                if *stopped {
                    return;
                }
                drop(stopped);
                // A failed refresh (a slow or busy device) is tried again at the next beat.
                if let Ok(false) = script::heartbeat(&*shell, &work_dir, &run) {
                    lost.store(true, Ordering::SeqCst);
                    return;
                }
            }
        });
        Heartbeat { stop, lost, thread: Some(thread) }
    }

    fn stop(&mut self) {
        let (flag, wake) = &*self.stop;
        *flag.lock().unwrap_or_else(|p| p.into_inner()) = true;
        wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests;
