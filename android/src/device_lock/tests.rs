//! The lock's states — free, held, stale, corrupt, newer, unwritable, broken — and orphan stopping,
//! run against a local phone shell (mksh, toybox) in a temp dir: the same scripts, real shell semantics, real
//! processes, no device.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Mutex;

use super::*;
use crate::adb::LocalShell;

/// A work dir in a temp dir, and the notes a taker wrote.
struct Bench {
    dir: tempfile::TempDir,
    notes: Mutex<Vec<String>>,
}

impl Bench {
    fn new() -> Bench {
        Bench { dir: tempfile::tempdir().unwrap(), notes: Mutex::new(Vec::new()) }
    }

    fn work(&self) -> String {
        self.dir.path().join("work").display().to_string()
    }

    fn lock_path(&self) -> PathBuf {
        self.dir.path().join("work/lock")
    }

    fn take(&self, options: &LockOptions) -> Result<DeviceLock, LockError> {
        self.take_unless(options, &|| false)
    }

    fn take_unless(&self, options: &LockOptions, cancelled: &dyn Fn() -> bool) -> Result<DeviceLock, LockError> {
        let note = |line: &str| self.notes.lock().unwrap().push(line.to_string());
        let reporter = Reporter { step: &|_| {}, note: &note, cancelled };
        DeviceLock::acquire(Arc::new(LocalShell), &self.work(), options, &reporter)
    }

    fn notes(&self) -> Vec<String> {
        self.notes.lock().unwrap().clone()
    }

    /// Writes a lock as another taker would have left it: `record` and a heartbeat `age` seconds old.
    fn plant(&self, record: &str, heartbeat_age_s: Option<u64>) {
        std::fs::create_dir_all(self.lock_path()).unwrap();
        std::fs::write(self.lock_path().join("holder"), record).unwrap();
        if let Some(age) = heartbeat_age_s {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
            std::fs::write(self.lock_path().join("heartbeat"), format!("{}\n", now - age)).unwrap();
        }
    }

    /// Starts a process named `npugate-harness` (a copy of `sleep`) working in `results/<run>`, as a
    /// harness left behind by a killed host.
    fn orphan(&self, run: &str) -> Child {
        let bin = self.dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let fake = bin.join("npugate-harness");
        if !fake.exists() {
            std::fs::copy("/bin/sleep", &fake).unwrap();
        }
        let cwd = Path::new(&self.work()).join("results").join(run);
        std::fs::create_dir_all(&cwd).unwrap();
        let child = Command::new(&fake).arg("300").current_dir(&cwd).spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while script::harnesses(&LocalShell, &self.work()).unwrap().iter().all(|h| h.pid != child.id()) {
            assert!(Instant::now() < deadline, "the fake harness never showed up");
            std::thread::sleep(Duration::from_millis(20));
        }
        child
    }
}

fn quick(timeout: Option<Duration>) -> LockOptions {
    LockOptions {
        timeout,
        poll: Duration::from_millis(50),
        stale_after: Duration::from_secs(60),
        heartbeat_every: Duration::from_millis(100),
    }
}

/// A holder on another host (its process cannot be checked from here).
fn remote_holder(run: &str) -> Holder {
    Holder {
        run: run.into(),
        host: "ci-runner-7".into(),
        host_id: "another-boot/pid:[1]".into(),
        pid: 4242,
        pid_start: Some(7),
        command: "npugate sweep --plan nightly.toml".into(),
        started_at: "2026-11-23T02:00:00Z".into(),
    }
}

#[test]
fn a_free_lock_is_taken_with_our_record_and_released_on_drop() {
    let bench = Bench::new();
    let lock = bench.take(&quick(Some(Duration::ZERO))).unwrap();
    let holder = Holder::parse(&std::fs::read_to_string(bench.lock_path().join("holder")).unwrap()).unwrap();
    assert_eq!((&holder, holder.pid), (&lock.record().holder, std::process::id()));
    assert!(lock.run().starts_with(&format!("run-{}-", std::process::id())));
    assert!(bench.lock_path().join("heartbeat").is_file());
    assert_eq!((lock.record().waited_s, lock.record().broken.len(), lock.lost()), (0.0, 0, None));
    drop(lock);
    assert!(!bench.lock_path().exists(), "released on drop");
    assert!(bench.notes().is_empty(), "{:?}", bench.notes());
}

#[test]
fn a_held_lock_fails_at_once_with_timeout_zero_and_is_waited_for_otherwise() {
    let bench = Bench::new();
    let first = bench.take(&quick(None)).unwrap();
    let pid = std::process::id();

    let error = bench.take(&quick(Some(Duration::ZERO))).err().unwrap().to_string();
    assert!(
        error.contains(&format!("pid {pid}")) && error.contains(&format!("host {}", first.record().holder.host)),
        "{error}"
    );
    assert!(error.contains("--lock-timeout 0"), "{error}");

    let started = Instant::now();
    let error = bench.take(&quick(Some(Duration::from_millis(300)))).err().unwrap().to_string();
    assert!(error.contains("still locked") && error.contains(&format!("pid {pid}")), "{error}");
    assert!(started.elapsed() >= Duration::from_millis(300));

    let holder = first.record().holder.clone();
    let second = std::thread::scope(|scope| {
        let waiter = scope.spawn(|| bench.take(&quick(None)));
        std::thread::sleep(Duration::from_millis(500));
        drop(first);
        waiter.join().unwrap().unwrap()
    });
    assert_eq!(second.record().waited_for.as_ref(), Some(&holder));
    assert!(second.record().waited_s >= 0.3, "{:?}", second.record());
    let notes = bench.notes();
    assert!(notes.iter().any(|n| n.contains("is locked by") && n.contains(&format!("pid {pid}"))), "{notes:?}");
    assert!(notes.iter().any(|n| n.contains("lock taken after waiting")), "{notes:?}");
}

#[test]
fn a_stale_lock_is_broken_and_its_orphaned_harness_stopped_before_the_lock_is_ours() {
    let bench = Bench::new();
    let stale = remote_holder("run-4242-old");
    bench.plant(&stale.to_text(), Some(600));
    let mut orphan = bench.orphan("run-4242-old");

    let lock = bench.take(&quick(Some(Duration::ZERO))).unwrap();
    let record = lock.record();
    assert_eq!(record.broken.len(), 1, "{record:?}");
    assert_eq!(record.broken[0].holder.as_ref(), Some(&stale));
    assert!(record.broken[0].reason.contains("no heartbeat for 60"), "{record:?}");
    assert_eq!(record.orphans_stopped, [DeviceHarness { pid: orphan.id(), run: "run-4242-old".into() }]);
    assert!(orphan.wait().unwrap().code().is_none(), "the orphan was killed by a signal");
    assert!(!Path::new(&bench.work()).join("results/run-4242-old").exists(), "its run dir is removed");
    let notes = bench.notes();
    assert!(notes.iter().any(|n| n.contains("broke the lock of host ci-runner-7 pid 4242")), "{notes:?}");
    assert!(
        notes
            .iter()
            .any(|n| n.contains(&format!("stopped orphaned harness pid {}", orphan.id())) && n.contains("ci-runner-7")),
        "{notes:?}"
    );
}

#[test]
fn a_fresh_remote_lock_is_held_and_a_dead_local_holder_is_gone_at_once() {
    let bench = Bench::new();
    bench.plant(&remote_holder("run-1").to_text(), Some(2));
    let error = bench.take(&quick(Some(Duration::ZERO))).err().unwrap().to_string();
    assert!(error.contains("host ci-runner-7 pid 4242"), "{error}");

    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let local = Holder { pid: dead, pid_start: Some(1), run: "run-2".into(), ..Holder::for_this_process("x") };
    bench.plant(&local.to_text(), Some(0));
    let lock = bench.take(&quick(Some(Duration::ZERO))).unwrap();
    assert!(
        lock.record().broken[0].reason.contains(&format!("pid {dead}) on this host has ended")),
        "{:?}",
        lock.record()
    );
}

#[test]
fn corrupt_and_newer_records_are_refused_with_the_command_that_clears_them() {
    let bench = Bench::new();
    for (record, expected) in [
        ("\u{0}\u{7f}garbage", "is corrupt (line 1"),
        ("schema=npugate.device-lock/1\nrun=x\nhost=h\npid=lots\n", "is corrupt (field pid"),
        ("schema=npugate.device-lock/2\nwhatever=new\n", "was written by a newer npugate (npugate.device-lock/2"),
    ] {
        bench.plant(record, Some(600));
        let error = bench.take(&quick(None)).err().unwrap().to_string();
        assert!(error.contains(expected), "{error}");
        assert!(error.contains(&format!("npugate devices --unlock local-sh --work-dir {}", bench.work())), "{error}");
        assert!(bench.lock_path().join("holder").is_file(), "a record that cannot be read is never broken");
    }
}

#[test]
fn a_lock_without_a_record_is_being_taken_until_it_is_old() {
    let bench = Bench::new();
    std::fs::create_dir_all(bench.lock_path()).unwrap();
    let error = bench.take(&quick(Some(Duration::ZERO))).err().unwrap().to_string();
    assert!(error.contains("taking it right now"), "{error}");
    let aged = Command::new("touch").arg("-d").arg("@1000").arg(bench.lock_path()).status().unwrap();
    assert!(aged.success());
    let lock = bench.take(&quick(Some(Duration::ZERO))).unwrap();
    assert!(lock.record().broken[0].holder.is_none() && lock.record().broken[0].reason.contains("no holder record"));
}

#[test]
fn an_unwritable_work_dir_is_named() {
    let bench = Bench::new();
    std::fs::write(bench.dir.path().join("work"), "a file, not a dir").unwrap();
    let error = bench.take(&quick(None)).err().unwrap().to_string();
    assert!(
        error.contains(&format!("cannot take the lock in work dir {}", bench.work())) && error.contains("--work-dir"),
        "{error}"
    );
}

#[test]
fn an_interrupt_ends_the_wait() {
    let bench = Bench::new();
    bench.plant(&remote_holder("run-1").to_text(), Some(0));
    let started = Instant::now();
    let cancelled = || started.elapsed() > Duration::from_millis(200);
    let error = bench.take_unless(&quick(None), &cancelled).err().unwrap();
    assert!(matches!(error, LockError::Interrupted(_)), "{error}");
}

#[test]
fn the_heartbeat_notices_a_lock_taken_over() {
    let bench = Bench::new();
    let lock = bench.take(&quick(None)).unwrap();
    bench.plant(&remote_holder("run-other").to_text(), Some(0));
    let deadline = Instant::now() + Duration::from_secs(10);
    while lock.lost().is_none() {
        assert!(Instant::now() < deadline, "the heartbeat never noticed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(lock.lost().unwrap().contains("taken over"));
    drop(lock);
    assert!(bench.lock_path().join("holder").is_file(), "a lock that is no longer ours is not released");
}

#[test]
fn own_harness_is_stopped_and_others_of_the_work_dir_are_not() {
    let bench = Bench::new();
    let lock = bench.take(&quick(None)).unwrap();
    let mut ours = bench.orphan(lock.run());
    let mut other = bench.orphan("run-somebody-else");
    let stopped = lock.stop_own_harness().unwrap();
    assert_eq!(stopped, [DeviceHarness { pid: ours.id(), run: lock.run().to_string() }]);
    assert!(ours.wait().unwrap().code().is_none());
    assert!(other.try_wait().unwrap().is_none(), "another run's harness keeps running");
    other.kill().unwrap();
    other.wait().unwrap();
}

#[test]
fn unlock_refuses_a_live_holder_unless_forced_and_clears_a_stale_or_corrupt_one() {
    let bench = Bench::new();
    let options = quick(None);
    assert!(unlock(&LocalShell, &bench.work(), false, &options).unwrap().contains("not locked"));

    bench.plant(&remote_holder("run-1").to_text(), Some(3));
    let refused = unlock(&LocalShell, &bench.work(), false, &options).err().unwrap().to_string();
    assert!(
        refused.contains("host ci-runner-7 pid 4242")
            && refused.contains("heartbeat is 3 s old")
            && refused.contains("--force"),
        "{refused}"
    );
    assert!(unlock(&LocalShell, &bench.work(), true, &options).unwrap().contains("(forced)"));
    assert!(!bench.lock_path().exists());

    bench.plant(&remote_holder("run-1").to_text(), Some(600));
    assert!(unlock(&LocalShell, &bench.work(), false, &options)
        .unwrap()
        .contains("cleared the lock of host ci-runner-7"));
    bench.plant("garbage", None);
    assert!(unlock(&LocalShell, &bench.work(), false, &options).unwrap().contains("cleared a corrupt lock"));
    assert!(!bench.lock_path().exists());
}
