//! Child processes with a time limit and a cancellation flag: both output streams are drained on
//! their own threads (so neither pipe can fill up and block the child), the child is killed when
//! the limit passes or the flag is set, and it never outlives the call — nor npugate: each child
//! runs in its own process group (a Ctrl-C on the terminal reaches npugate, which stops the child
//! and the device side in order), is killed if the call unwinds, and gets SIGKILL from the kernel
//! when npugate dies (even by SIGKILL), so no `adb shell` keeps a device busy for a dead host.
//! Its output is read until it ends, and [`DRAIN_AFTER_EXIT`] beyond: a daemon it started outside
//! its process group (wine's `wineserver` and services) keeps its pipes open as long as it lives.

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use wait_timeout::ChildExt;

/// How often a waiting call looks at the cancellation flag.
const POLL: Duration = Duration::from_millis(100);
/// How long a process's output is still read once it ended: what it wrote is in its pipes at once,
/// and only a daemon that inherited them (outside its process group, so not stopped with it) holds
/// them open longer — wine's `wineserver`, `services.exe` … live while any wine process of the
/// prefix runs, minutes when other runs share it.
pub const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);

/// What a finished process left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// Its standard output (lossy UTF-8).
    pub stdout: String,
    /// Its standard error (lossy UTF-8).
    pub stderr: String,
    /// Its exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
}

/// Why a process did not finish on its own.
#[derive(Debug, thiserror::Error)]
pub enum Stopped {
    /// It could not be started.
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// The program tried.
        program: String,
        /// Cause.
        source: std::io::Error,
    },
    /// It ran past its time limit and was killed.
    #[error("{program} ran past its limit of {}s and was stopped", limit.as_secs())]
    Timeout {
        /// The program.
        program: String,
        /// The limit.
        limit: Duration,
    },
    /// The cancellation flag was set and it was killed.
    #[error("{program} was stopped: interrupted")]
    Cancelled {
        /// The program.
        program: String,
    },
}

/// The program `name` as the shell would find it on `PATH`, if it is there.
pub fn on_path(name: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|dir| dir.join(name)).find(|path| path.is_file())
}

/// Runs `command` (stdin closed, both streams captured) until it ends, `limit` passes or
/// `cancelled()` turns true.
pub fn run(command: Command, limit: Duration, cancelled: &dyn Fn() -> bool) -> Result<Finished, Stopped> {
    run_watched(command, limit, cancelled, &mut |_| {})
}

/// [`run`], calling `on_stderr_line` on the calling thread with each line of standard error as it
/// arrives (within [`POLL`]), before the process ends; the lines stay in [`Finished::stderr`].
pub fn run_watched(
    mut command: Command,
    limit: Duration,
    cancelled: &dyn Fn() -> bool,
    on_stderr_line: &mut dyn FnMut(&str),
) -> Result<Finished, Stopped> {
    let program = command.get_program().to_string_lossy().into_owned();
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    // SAFETY: the closure runs in the forked child before exec and only calls prctl(2), which is
    // async-signal-safe; it allocates nothing and touches no lock.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let spawned = command.spawn().map_err(|source| Stopped::Spawn { program: program.clone(), source })?;
    let mut child = KillOnDrop(spawned);
    let stdout = drain(child.0.stdout.take(), None);
    let (line_tx, lines) = mpsc::channel();
    let stderr = drain(child.0.stderr.take(), Some(line_tx));
    let started = Instant::now();
    let outcome = loop {
        lines.try_iter().for_each(|line| on_stderr_line(&line));
        let left = limit.saturating_sub(started.elapsed());
        match child.0.wait_timeout(left.min(POLL)) {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if cancelled() => break Err(Stopped::Cancelled { program: program.clone() }),
            Ok(None) if left.is_zero() => break Err(Stopped::Timeout { program: program.clone(), limit }),
            Ok(None) => continue,
            Err(source) => break Err(Stopped::Spawn { program: program.clone(), source }),
        }
    };
    if outcome.is_err() {
        child.stop();
    }
    let status = outcome?;
    let deadline = Instant::now() + DRAIN_AFTER_EXIT;
    let stderr = stderr.collect(deadline);
    lines.try_iter().for_each(|line| on_stderr_line(&line));
    Ok(Finished { stdout: stdout.collect(deadline), stderr, code: status.code(), signal: status.signal() })
}

/// A child that is killed and reaped when it goes out of scope unfinished (an error or a panic
/// between spawn and wait).
struct KillOnDrop(Child);

impl KillOnDrop {
    /// Ends the child's whole process group (it leads one, see [`run`]): what it started — wine's
    /// processes, a shell's pipeline — ends with it; then reaps the child.
    fn stop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            if let Ok(group) = i32::try_from(self.0.id()) {
                // SAFETY: kill(2) with a negative pid signals that process group; no memory is touched.
                unsafe {
                    libc::kill(-group, libc::SIGKILL);
                }
            }
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A child's pipe read on its own thread, into a buffer that can be taken before the pipe closes.
struct Drained {
    /// What was read so far.
    bytes: Arc<Mutex<Vec<u8>>>,
    /// Signalled when the pipe closed (or failed).
    closed: mpsc::Receiver<()>,
}

impl Drained {
    /// What was read by `deadline` (all of it when the pipe closed by then); a reader still
    /// blocked then is left to end with the pipe.
    fn collect(self, deadline: Instant) -> String {
        let _ = self.closed.recv_timeout(deadline.saturating_duration_since(Instant::now()));
        let bytes = self.bytes.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// Reads a child's pipe until it closes, on its own thread; with `lines`, sends each complete
/// line there as it arrives.
fn drain(pipe: Option<impl Read + Send + 'static>, lines: Option<mpsc::Sender<String>>) -> Drained {
    let bytes = Arc::new(Mutex::new(Vec::new()));
    let (closed_tx, closed) = mpsc::channel();
    let sink = Arc::clone(&bytes);
    std::thread::spawn(move || {
        if let Some(mut pipe) = pipe {
            let mut chunk = [0u8; 8192];
            let mut sent = 0;
            loop {
                match pipe.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => {
                        let mut read = sink.lock().unwrap_or_else(PoisonError::into_inner);
                        read.extend_from_slice(&chunk[..n]);
                        let complete = read[sent..].iter().rposition(|&b| b == b'\n').map(|end| sent + end);
                        if let (Some(lines), Some(end)) = (&lines, complete) {
                            for line in String::from_utf8_lossy(&read[sent..end]).lines() {
                                let _ = lines.send(line.to_string());
                            }
                            sent = end + 1;
                        }
                    }
                    Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                }
            }
        }
        let _ = closed_tx.send(());
    });
    Drained { bytes, closed }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut command = Command::new("/bin/sh");
        command.arg("-c").arg(script);
        command
    }

    #[test]
    fn output_and_exit_code_are_collected() {
        let done = run(sh("echo out; echo err >&2; exit 3"), Duration::from_secs(10), &|| false).unwrap();
        assert_eq!((done.stdout.as_str(), done.stderr.as_str(), done.code), ("out\n", "err\n", Some(3)));
    }

    #[test]
    fn stderr_lines_are_seen_as_they_arrive_while_the_process_runs() {
        // The process waits for a file the caller creates on seeing its first line: only a line
        // seen while it runs lets it finish.
        let dir = tempfile::tempdir().unwrap();
        let go = dir.path().join("go");
        let script = format!("echo one >&2; while [ ! -e '{}' ]; do sleep 0.05; done; printf 'two\\nth' >&2; sleep 0.2; printf r >&2; sleep 0.2; echo ee >&2", go.display());
        let mut seen = Vec::new();
        let done = run_watched(sh(&script), Duration::from_secs(20), &|| false, &mut |line| {
            if line == "one" {
                std::fs::write(&go, "").unwrap();
            }
            seen.push(line.to_string());
        })
        .unwrap();
        assert_eq!(seen, ["one", "two", "three"]);
        assert_eq!(done.stderr, "one\ntwo\nthree\n");
    }

    #[test]
    fn a_signal_that_ended_the_process_is_named_by_its_number() {
        let done = run(sh("echo dying >&2; kill -ABRT $$"), Duration::from_secs(10), &|| false).unwrap();
        assert_eq!((done.stderr.as_str(), done.code, done.signal), ("dying\n", None, Some(libc::SIGABRT)));
    }

    #[test]
    fn a_daemon_holding_the_pipes_open_does_not_keep_the_call_waiting() {
        // The daemon leaves the child's process group (setsid) with its stdout and stderr, as
        // wine's wineserver does; the child itself ends at once.
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("daemon.pid");
        let script = format!("setsid sleep 60 & echo $! > {}; echo out; echo err >&2", pid_file.display());
        let started = Instant::now();
        let done = run(sh(&script), Duration::from_secs(30), &|| false).unwrap();
        let waited = started.elapsed();
        let pid = std::fs::read_to_string(&pid_file).unwrap().trim().parse::<i32>().unwrap();
        // SAFETY: kill(2) of the test's own daemon; no memory is touched.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
        assert_eq!((done.stdout.as_str(), done.stderr.as_str(), done.code), ("out\n", "err\n", Some(0)));
        assert!(waited < Duration::from_secs(30), "the call waited {waited:?} for the daemon's pipes");
    }

    #[test]
    fn a_child_leads_its_own_process_group() {
        // The shell reads its own stat (a redirection of a builtin is opened by the shell itself).
        let done =
            run(sh("read -r stat < /proc/self/stat; echo \"$stat\""), Duration::from_secs(10), &|| false).unwrap();
        let pid = done.stdout.split_whitespace().next().unwrap();
        let after_name = &done.stdout[done.stdout.rfind(')').unwrap() + 1..];
        let process_group = after_name.split_whitespace().nth(2).unwrap();
        assert_eq!(process_group, pid, "{}", done.stdout);
    }

    #[test]
    fn a_stopped_process_takes_what_it_started_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild.pid");
        let script = format!("sleep 300 & echo $! > {}; wait", pid_file.display());
        assert!(matches!(run(sh(&script), Duration::from_millis(500), &|| false), Err(Stopped::Timeout { .. })));
        let pid = std::fs::read_to_string(&pid_file).unwrap().trim().to_string();
        // SIGKILL takes effect at once but not instantly: gone, or a zombie waiting for init, soon.
        let state = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| stat.rsplit(')').next().and_then(|rest| rest.trim().chars().next()))
        };
        let ended = |s: Option<char>| matches!(s, None | Some('Z' | 'X'));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ended(state()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(ended(state()), "the grandchild {pid} still runs: {:?}", state());
    }

    #[test]
    fn a_process_past_its_limit_or_cancelled_is_stopped() {
        let started = Instant::now();
        assert!(matches!(run(sh("sleep 30"), Duration::from_millis(300), &|| false), Err(Stopped::Timeout { .. })));
        assert!(matches!(run(sh("sleep 30"), Duration::from_secs(30), &|| true), Err(Stopped::Cancelled { .. })));
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(matches!(
            run(Command::new("/no/such/program"), Duration::from_secs(1), &|| false),
            Err(Stopped::Spawn { .. })
        ));
    }
}
