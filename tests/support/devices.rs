//! The adb test rig from the tests' side: `scripts/adb-rig` starts one real adbd per simulated
//! device inside a private network namespace; every command that must see those devices (adb,
//! `npugate`) runs in that namespace through [`Rig::command`]. Dropping the rig stops every
//! process in the namespace (adbds, adb servers, leftover harness runs).
//!
//! Each device is a phone's userland (see `scripts/adb-rig`): mksh and toybox, `adb shell` as uid
//! 2000 with AOSP's groups, `/proc` mounted hidepid, `/data` with a phone's owners. What a test
//! puts into a device's `/data` from the host must belong to the shell user ([`Rig::plant`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A running rack of simulated devices.
pub struct Rig {
    state: tempfile::TempDir,
}

/// The uid (and gid) of `adb shell` on the devices: Android's `shell`.
pub const SHELL_UID: u32 = 2000;

/// One simulated device: its port and its options (`scripts/adb-rig up STATE PORT[:OPTION]...`).
#[derive(Debug, Clone)]
pub struct Device {
    port: u16,
    options: Vec<String>,
}

impl Device {
    /// A device on `port` (outside 5555–5585): a Linux board with a phone's userland.
    pub fn new(port: u16) -> Device {
        Device { port, options: Vec::new() }
    }

    /// Its `/sys/devices/soc0/soc_id` reads `id`, as a Qualcomm board's does (e.g. 439 = SM8350).
    pub fn soc_id(mut self, id: u32) -> Device {
        self.options.push(format!("soc_id={id}"));
        self
    }

    /// Its `getprop` answers from `file` (`NAME=VALUE` lines): with `ro.*` properties it is a phone.
    pub fn props(mut self, file: &Path) -> Device {
        self.options.push(format!("props={}", file.display()));
        self
    }

    /// Its shell is not in the readproc group: it sees only its own user's processes.
    pub fn without_readproc(mut self) -> Device {
        self.options.push("no_readproc".into());
        self
    }

    /// It has a phone's battery gauge (`/sys/class/power_supply/battery`, discharging), whose files
    /// the test writes through [`Rig::battery`].
    pub fn battery(mut self) -> Device {
        self.options.push("battery".into());
        self
    }

    fn spec(&self) -> String {
        std::iter::once(self.port.to_string()).chain(self.options.iter().cloned()).collect::<Vec<_>>().join(":")
    }
}

/// `scripts/adb-rig` of this checkout.
fn rig_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/adb-rig")
}

impl Rig {
    /// Starts one adbd per port (outside 5555–5585) and connects the rig's adb server to each.
    pub fn up(ports: &[u16]) -> Rig {
        Rig::up_with(&ports.iter().map(|port| Device::new(*port)).collect::<Vec<_>>())
    }

    /// Like [`Rig::up`], with each device's options.
    pub fn up_with(devices: &[Device]) -> Rig {
        let state = tempfile::Builder::new().prefix("npugate-rig-").tempdir().expect("temp dir");
        let rig = Rig { state };
        let output = crate::run(
            Command::new(rig_script()).arg("up").arg(rig.state.path()).args(devices.iter().map(Device::spec)),
        );
        assert!(
            output.status.success(),
            "adb-rig up failed (see scripts/adb-rig install):\n{}",
            crate::describe(&output)
        );
        rig
    }

    /// The adb serial of the simulated device on `port`.
    pub fn serial(port: u16) -> String {
        format!("127.0.0.1:{port}")
    }

    /// A command that runs `program` inside the rig's network namespace.
    pub fn command(&self, program: impl AsRef<Path>) -> Command {
        let mut command = Command::new(rig_script());
        command.arg("exec").arg(self.state.path()).arg(program.as_ref());
        command
    }

    /// Kills the adbd of the device on `port`: the device vanishes as if unplugged.
    pub fn kill(&self, port: u16) {
        let output = crate::run(Command::new(rig_script()).arg("kill").arg(self.state.path()).arg(port.to_string()));
        assert!(output.status.success(), "adb-rig kill failed:\n{}", crate::describe(&output));
    }

    /// The device's `/data` as seen from the host.
    pub fn device_data(&self, port: u16) -> PathBuf {
        self.state.path().join(format!("dev-{port}/data"))
    }

    /// Waits until a process whose command line contains `needle` runs on the device on `port`
    /// (its root is that device's chroot); false after `limit`.
    pub fn wait_for_process(&self, port: u16, needle: &str, limit: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < limit {
            if self.processes(port).iter().any(|(_, _, argv)| argv.join(" ").contains(needle)) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    /// The harness processes running on the device on `port` (what `ps` on the device shows as
    /// `…/npugate-harness …`; not the shells that started them, nor a harness's own child between
    /// its fork and exec — the harness runs `getprop` — which shows the harness's command line).
    pub fn harnesses(&self, port: u16) -> Vec<u32> {
        let is_harness = |argv: &[String]| argv.first().is_some_and(|program| program.ends_with("/npugate-harness"));
        let all: Vec<(u32, u32)> = self
            .processes(port)
            .into_iter()
            .filter(|(_, _, argv)| is_harness(argv))
            .map(|(pid, parent, _)| (pid, parent))
            .collect();
        all.iter().filter(|(_, parent)| !all.iter().any(|(pid, _)| pid == parent)).map(|(pid, _)| *pid).collect()
    }

    /// Samples [`Rig::harnesses`] of `port` every 10 ms until `stop` is set; returns the most
    /// that ran at once and how many samples saw any.
    pub fn most_harnesses_at_once(&self, port: u16, stop: &AtomicBool) -> (usize, usize) {
        let (mut most, mut busy) = (0, 0);
        while !stop.load(Ordering::SeqCst) {
            let running = self.harnesses(port).len();
            most = most.max(running);
            busy += usize::from(running > 0);
            std::thread::sleep(Duration::from_millis(10));
        }
        (most, busy)
    }

    /// Every process of the device on `port` (its root is that device's chroot): pid, parent pid
    /// and argv.
    fn processes(&self, port: u16) -> Vec<(u32, u32, Vec<String>)> {
        let device_root = self.state.path().join(format!("dev-{port}/root"));
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else { continue };
            let dir = entry.path();
            if !std::fs::read_link(dir.join("root")).is_ok_and(|root| root == device_root) {
                continue;
            }
            let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
            let argv = cmdline
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            // `pid (name) state ppid …`: the name may hold spaces, so count from its last ')'.
            let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
            let parent =
                stat.rfind(')').and_then(|at| stat[at + 1..].split_whitespace().nth(1)?.parse().ok()).unwrap_or(0);
            found.push((pid, parent, argv));
        }
        found
    }

    /// Writes `content` to `path` below the device's `/data` as its shell would have: the file and
    /// every directory created for it belong to the shell user.
    pub fn plant(&self, port: u16, path: &str, content: &[u8]) {
        let data = self.device_data(port);
        let file = data.join(path);
        let mut missing = Vec::new();
        let mut dir = file.parent().expect("a file below /data");
        while !dir.exists() {
            missing.push(dir.to_path_buf());
            dir = dir.parent().expect("below /data");
        }
        std::fs::create_dir_all(file.parent().expect("a parent")).expect("create the file's directories");
        std::fs::write(&file, content).expect("plant the file");
        for owned in missing.iter().chain([&file]) {
            std::os::unix::fs::chown(owned, Some(SHELL_UID), Some(SHELL_UID)).expect("give it to the shell user");
        }
    }

    /// Removes the command `name` from the device's `/system/bin` (a toybox built without it).
    pub fn remove_command(&self, port: u16, name: &str) {
        let link = self.state.path().join(format!("dev-{port}/system/bin/{name}"));
        std::fs::remove_file(&link).unwrap_or_else(|e| panic!("cannot remove {}: {e}", link.display()));
    }

    /// Sets the battery gauge's file `name` (`current_now`, `status`, …) of the device on `port`
    /// (started with [`Device::battery`]) to `value`. A reader sees the old value or the new one,
    /// never a half-written file, as with the kernel's sysfs: the new file is written beside it and
    /// renamed over it (the device sees the directory, bind-mounted).
    pub fn battery(&self, port: u16, name: &str, value: &str) {
        use std::os::unix::fs::PermissionsExt;
        let dir = self.state.path().join(format!("dev-{port}/sysfs/power_supply/battery"));
        let (file, next) = (dir.join(name), dir.join(format!(".{name}.next")));
        std::fs::write(&next, format!("{value}\n")).unwrap_or_else(|e| panic!("cannot write {}: {e}", next.display()));
        std::fs::set_permissions(&next, std::fs::Permissions::from_mode(0o444)).expect("a gauge file's mode");
        std::fs::rename(&next, &file).unwrap_or_else(|e| panic!("cannot replace {}: {e}", file.display()));
    }

    /// The device lock dir of the default work dir on the device on `port`, as seen from the host.
    pub fn lock_dir(&self, port: u16) -> PathBuf {
        self.device_data(port).join("local/tmp/npugate/lock")
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = Command::new(rig_script()).arg("down").arg(self.state.path()).output();
    }
}
