//! The `adb` client: runs the real `adb` binary (one process per step, each with a timeout) and
//! tells transport failures (device gone, timeout — worth a retry) from failed commands.

pub mod commands;
pub mod quote;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use npugate_host::process::Stopped;

/// How the adb client is started: which binary and which adb server it talks to.
#[derive(Debug, Clone)]
pub struct Adb {
    binary: PathBuf,
    server_socket: Option<String>,
}

/// A failed adb step.
#[derive(Debug, thiserror::Error)]
pub enum AdbError {
    /// The adb binary could not be started at all.
    #[error("cannot start adb ({binary})")]
    Spawn {
        /// The binary tried.
        binary: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The step did not finish in time (the adb process was killed).
    #[error("device {serial}: {step} timed out after {}s", timeout.as_secs())]
    Timeout {
        /// Device serial.
        serial: String,
        /// What was being done.
        step: String,
        /// The limit that was hit.
        timeout: Duration,
    },
    /// The device is no longer reachable (disconnected, offline, adbd died).
    #[error("device {serial}: {step}: device not reachable (state {state}): {message}")]
    DeviceGone {
        /// Device serial.
        serial: String,
        /// What was being done.
        step: String,
        /// State reported by `adb get-state` afterwards.
        state: String,
        /// What adb printed.
        message: String,
    },
    /// adb ran and the device is there, but the step failed (permission, disk full, bad path).
    #[error("device {serial}: {step} failed: {message}")]
    Failed {
        /// Device serial.
        serial: String,
        /// What was being done.
        step: String,
        /// What adb printed.
        message: String,
    },
    /// The adb server itself could not be reached or answered nonsense.
    #[error("adb server: {0}")]
    Server(String),
    /// The user interrupted npugate while the step ran (the adb process was killed).
    #[error("device {serial}: {step}: interrupted")]
    Interrupted {
        /// Device serial.
        serial: String,
        /// What was being done.
        step: String,
    },
}

impl AdbError {
    /// True for failures of the transport (device gone, timeout): a retry may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, AdbError::Timeout { .. } | AdbError::DeviceGone { .. })
    }
}

/// What one `adb shell` command left behind.
#[derive(Debug, Clone)]
pub struct ShellOutput {
    /// Standard output of the remote command.
    pub stdout: String,
    /// Standard error of the remote command.
    pub stderr: String,
    /// Exit code of the remote command (adb's shell protocol v2 propagates it).
    pub exit_code: i32,
}

/// One line of `adb devices`: a serial and the state the server reports for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceEntry {
    /// Device serial (`R58N…`, `127.0.0.1:6101`).
    pub serial: String,
    /// `device`, `offline`, `unauthorized`, `recovery`, …
    pub state: String,
}

/// Marks the line that carries the remote script's exit status (see [`Adb::shell`]).
const EXIT_MARKER: &str = "__npugate_exit_status=";

/// Output of a local adb process.
struct Finished {
    stdout: String,
    stderr: String,
    code: i32,
}

impl Adb {
    /// An adb client using `binary` (else `adb` from PATH) and, when given, the server at
    /// `host:port` (else adb's own default, which honours `ADB_SERVER_SOCKET`).
    pub fn new(binary: Option<PathBuf>, server: Option<&str>) -> anyhow::Result<Adb> {
        let server_socket = match server {
            None => None,
            Some(s) => Some(parse_server(s)?),
        };
        Ok(Adb { binary: binary.unwrap_or_else(|| PathBuf::from("adb")), server_socket })
    }

    /// Every device the adb server knows, in its order.
    pub fn list_devices(&self) -> Result<Vec<DeviceEntry>, AdbError> {
        let out = self.run_local(&["devices"], Duration::from_secs(30), "", "list devices", &|| false)?;
        if out.code != 0 {
            return Err(AdbError::Server(one_line(&out.stderr, &out.stdout)));
        }
        Ok(parse_devices(&out.stdout))
    }

    /// Runs `script` (already quoted, see [`quote`]) in the device's shell.
    ///
    /// The script runs in a subshell followed by a marker line carrying its exit status, so a
    /// session cut short (adbd died, cable pulled — adb itself may then exit 0) is told from a
    /// finished command, also on old devices whose adb shell does not propagate exit codes.
    pub fn shell(&self, serial: &str, script: &str, timeout: Duration, step: &str) -> Result<ShellOutput, AdbError> {
        self.shell_until(serial, script, timeout, step, &|| false)
    }

    /// [`Adb::shell`] that also stops (with [`AdbError::Interrupted`]) once `cancelled()` turns
    /// true. Only the local adb client is stopped: the caller stops what the script started.
    pub fn shell_until(
        &self,
        serial: &str,
        script: &str,
        timeout: Duration,
        step: &str,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<ShellOutput, AdbError> {
        let out = self.run_local(&["-s", serial, "shell", &wrapped(script)], timeout, serial, step, cancelled)?;
        let Some((stdout, exit_code)) = split_exit_marker(&out.stdout) else {
            self.fail_if_gone(serial, step, &out)?;
            return Err(AdbError::DeviceGone {
                serial: serial.into(),
                step: step.into(),
                state: "device".into(),
                message: format!("shell session ended without an exit status ({})", one_line(&out.stderr, "")),
            });
        };
        Ok(ShellOutput { stdout, stderr: out.stderr, exit_code })
    }

    /// Runs `script` and fails unless it exits 0.
    pub fn shell_ok(&self, serial: &str, script: &str, timeout: Duration, step: &str) -> Result<String, AdbError> {
        self.device(serial).run_ok(script, timeout, step)
    }

    /// Copies a host file to `remote` on the device.
    pub fn push(&self, serial: &str, local: &Path, remote: &str, timeout: Duration) -> Result<(), AdbError> {
        let local = local.to_string_lossy();
        self.transfer(serial, &["push", &local, remote], timeout, &format!("push {local}"))
    }

    /// Copies `remote` (file or directory) from the device to `local`.
    pub fn pull(&self, serial: &str, remote: &str, local: &Path, timeout: Duration) -> Result<(), AdbError> {
        let local = local.to_string_lossy();
        self.transfer(serial, &["pull", remote, &local], timeout, &format!("pull {remote}"))
    }

    /// State of one device as the server sees it now (`device`, `offline`, … or `absent`).
    pub fn state_of(&self, serial: &str) -> String {
        match self.run_local(&["-s", serial, "get-state"], Duration::from_secs(10), serial, "get-state", &|| false) {
            Ok(out) if out.code == 0 => out.stdout.trim().to_string(),
            _ => "absent".to_string(),
        }
    }

    fn transfer(&self, serial: &str, args: &[&str], timeout: Duration, step: &str) -> Result<(), AdbError> {
        let mut full = vec!["-s", serial];
        full.extend_from_slice(args);
        let out = self.run_local(&full, timeout, serial, step, &|| false)?;
        if out.code == 0 {
            return Ok(());
        }
        self.fail_if_gone(serial, step, &out)?;
        Err(AdbError::Failed { serial: serial.into(), step: step.into(), message: one_line(&out.stderr, &out.stdout) })
    }

    /// After a non-zero exit: a device that is no longer `device` turns it into a transport error.
    fn fail_if_gone(&self, serial: &str, step: &str, out: &Finished) -> Result<(), AdbError> {
        let state = self.state_of(serial);
        if state == "device" {
            return Ok(());
        }
        Err(AdbError::DeviceGone {
            serial: serial.into(),
            step: step.into(),
            state,
            message: one_line(&out.stderr, &out.stdout),
        })
    }

    /// Runs the local adb binary with `args`, collecting both streams, killing it at `timeout` or
    /// when `cancelled()` turns true.
    fn run_local(
        &self,
        args: &[&str],
        timeout: Duration,
        serial: &str,
        step: &str,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Finished, AdbError> {
        let mut command = Command::new(&self.binary);
        if let Some(socket) = &self.server_socket {
            command.arg("-L").arg(socket);
        }
        command.args(args);
        match npugate_host::process::run(command, timeout, cancelled) {
            Ok(done) => Ok(Finished { stdout: done.stdout, stderr: done.stderr, code: done.code.unwrap_or(-1) }),
            Err(Stopped::Spawn { source, .. }) => {
                Err(AdbError::Spawn { binary: self.binary.display().to_string(), source })
            }
            Err(Stopped::Timeout { .. }) => {
                Err(AdbError::Timeout { serial: serial.into(), step: step.into(), timeout })
            }
            Err(Stopped::Cancelled { .. }) => Err(AdbError::Interrupted { serial: serial.into(), step: step.into() }),
        }
    }

    /// One device behind this client, as a [`DeviceShell`].
    pub fn device(&self, serial: &str) -> AdbDevice {
        AdbDevice { adb: self.clone(), serial: serial.to_string() }
    }
}

/// `script` in a subshell followed by the marker line that carries its exit status (see
/// [`Adb::shell`]).
pub fn wrapped(script: &str) -> String {
    format!("({script}\n); printf '\\n{EXIT_MARKER}%d\\n' $?")
}

/// Somewhere to run a shell script: a device over adb, or (in tests) a local phone shell. Code that
/// only needs to run scripts on a device (the device lock, the load sample) takes this, so it can
/// be tested with real shell semantics and no device.
pub trait DeviceShell: Send + Sync {
    /// The device's name in messages (its serial).
    fn name(&self) -> &str;

    /// Runs `script` (already quoted, see [`quote`]) in the device's shell.
    fn run(&self, script: &str, timeout: Duration, step: &str) -> Result<ShellOutput, AdbError>;

    /// Runs `script` and fails unless it exits 0; returns its stdout.
    fn run_ok(&self, script: &str, timeout: Duration, step: &str) -> Result<String, AdbError> {
        let out = self.run(script, timeout, step)?;
        if out.exit_code != 0 {
            return Err(AdbError::Failed {
                serial: self.name().into(),
                step: step.into(),
                message: format!("exit {}: {}", out.exit_code, one_line(&out.stderr, &out.stdout)),
            });
        }
        Ok(out.stdout)
    }
}

/// One device over adb: [`Adb::shell`] with its serial.
#[derive(Debug, Clone)]
pub struct AdbDevice {
    adb: Adb,
    serial: String,
}

impl DeviceShell for AdbDevice {
    fn name(&self) -> &str {
        &self.serial
    }

    fn run(&self, script: &str, timeout: Duration, step: &str) -> Result<ShellOutput, AdbError> {
        self.adb.shell(&self.serial, script, timeout, step)
    }
}

/// `host:port` → adb's `-L tcp:host:port` server socket spec.
fn parse_server(spec: &str) -> anyhow::Result<String> {
    if spec.starts_with("tcp:") {
        return Ok(spec.to_string());
    }
    match spec.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(format!("tcp:{host}:{port}")),
        _ => anyhow::bail!("--adb-server {spec:?}: expected host:port, e.g. 192.168.1.20:5037"),
    }
}

/// Splits the exit-status marker line off a shell's stdout: (stdout before it, status).
fn split_exit_marker(stdout: &str) -> Option<(String, i32)> {
    let at = stdout.rfind(EXIT_MARKER)?;
    let code = stdout[at + EXIT_MARKER.len()..].trim().parse().ok()?;
    let before = &stdout[..at];
    Some((before.strip_suffix('\n').unwrap_or(before).to_string(), code))
}

/// Parses `adb devices` output: a header line, then `serial<TAB>state` lines.
fn parse_devices(text: &str) -> Vec<DeviceEntry> {
    text.lines()
        .filter(|line| !line.starts_with("List of devices") && !line.starts_with('*'))
        .filter_map(|line| {
            let (serial, state) = line.split_once('\t')?;
            Some(DeviceEntry { serial: serial.trim().to_string(), state: state.trim().to_string() })
        })
        .collect()
}

/// The first non-empty line of what a process printed, for one-line error messages.
fn one_line(stderr: &str, stdout: &str) -> String {
    stderr.lines().chain(stdout.lines()).map(str::trim).find(|l| !l.is_empty()).unwrap_or("(no output)").to_string()
}

/// A local phone shell as the device, for tests of code that runs scripts on devices: mksh with
/// only toybox's applets on its PATH (as `adb shell` on Android; both from Debian, installed by
/// `scripts/setup`), this machine's `/proc`, no adb.
pub struct LocalShell;

/// A directory holding `sh` (mksh) and every toybox applet (`target/phone-bin`, made once).
fn phone_bin() -> &'static Path {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let found = |name: &str| {
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
                .map(|dir| dir.join(name))
                .find(|path| path.is_file())
        };
        let (Some(mksh), Some(toybox)) = (found("mksh"), found("toybox")) else {
            panic!("mksh and toybox are missing: run scripts/setup (apt-get install mksh toybox)");
        };
        let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/phone-bin");
        std::fs::create_dir_all(&bin).expect("create target/phone-bin");
        let applets = String::from_utf8(Command::new(&toybox).output().expect("run toybox").stdout)
            .expect("toybox lists applets");
        for (name, program) in applets.split_whitespace().map(|applet| (applet, &toybox)).chain([("sh", &mksh)]) {
            // Parallel test processes make the same links; one of them wins.
            match std::os::unix::fs::symlink(program, bin.join(name)) {
                Err(error) if error.kind() != std::io::ErrorKind::AlreadyExists => {
                    panic!("cannot link {name} in {}: {error}", bin.display())
                }
                _ => {}
            }
        }
        bin
    })
}

impl DeviceShell for LocalShell {
    fn name(&self) -> &str {
        "local-sh"
    }

    fn run(&self, script: &str, timeout: Duration, step: &str) -> Result<ShellOutput, AdbError> {
        let bin = phone_bin();
        let mut command = Command::new(bin.join("sh"));
        command.arg("-c").arg(script).env_clear().env("PATH", bin);
        run_here(self, command, timeout, step)
    }
}

/// This machine's own shell (`sh -c`) read as a device's: its `/proc` and `/sys`. `npugate run
/// --local` records this machine's load and state through it as device runs record a device's.
pub struct ThisMachine;

impl DeviceShell for ThisMachine {
    fn name(&self) -> &str {
        "local"
    }

    fn run(&self, script: &str, timeout: Duration, step: &str) -> Result<ShellOutput, AdbError> {
        let mut command = Command::new("sh");
        command.arg("-c").arg(script);
        run_here(self, command, timeout, step)
    }
}

/// Runs a shell `command` of this machine as `shell`'s step.
fn run_here(shell: &dyn DeviceShell, command: Command, timeout: Duration, step: &str) -> Result<ShellOutput, AdbError> {
    let done = npugate_host::process::run(command, timeout, &|| false).map_err(|stopped| AdbError::Failed {
        serial: shell.name().into(),
        step: step.into(),
        message: stopped.to_string(),
    })?;
    Ok(ShellOutput { stdout: done.stdout, stderr: done.stderr, exit_code: done.code.unwrap_or(-1) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_devices_output_with_daemon_noise() {
        let text = "* daemon not running; starting now at tcp:5037\n* daemon started successfully\n\
                    List of devices attached\n127.0.0.1:6101\tdevice\nR58N12345\tunauthorized\n\n";
        assert_eq!(
            parse_devices(text),
            vec![
                DeviceEntry { serial: "127.0.0.1:6101".into(), state: "device".into() },
                DeviceEntry { serial: "R58N12345".into(), state: "unauthorized".into() },
            ]
        );
    }

    #[test]
    fn exit_marker_is_split_off_and_its_absence_noticed() {
        assert_eq!(split_exit_marker("a\nb\n\n__npugate_exit_status=3\n"), Some(("a\nb\n".into(), 3)));
        assert_eq!(split_exit_marker("\n__npugate_exit_status=0\n"), Some((String::new(), 0)));
        assert_eq!(split_exit_marker("partial output"), None);
    }

    #[test]
    fn server_spec_becomes_tcp_socket_or_a_clear_error() {
        assert_eq!(parse_server("10.0.0.2:5037").unwrap(), "tcp:10.0.0.2:5037");
        assert_eq!(parse_server("tcp:localhost:5038").unwrap(), "tcp:localhost:5038");
        let err = parse_server("farm-host").unwrap_err().to_string();
        assert!(err.contains("farm-host") && err.contains("host:port"), "{err}");
    }
}
