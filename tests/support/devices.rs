//! The adb test rig from the tests' side: `scripts/adb-rig` starts one real adbd per simulated
//! device inside a private network namespace; every command that must see those devices (adb,
//! `npugate`) runs in that namespace through [`Rig::command`]. Dropping the rig stops every
//! process in the namespace (adbds, adb servers, leftover harness runs).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A running rack of simulated devices.
pub struct Rig {
    state: tempfile::TempDir,
}

/// `scripts/adb-rig` of this checkout.
fn rig_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/adb-rig")
}

impl Rig {
    /// Starts one adbd per port (outside 5555–5585) and connects the rig's adb server to each.
    pub fn up(ports: &[u16]) -> Rig {
        Rig::up_with(&ports.iter().map(|port| (*port, None)).collect::<Vec<_>>())
    }

    /// Like [`Rig::up`], a device given a kernel chip id reading `/sys/devices/soc0/soc_id` as a
    /// Qualcomm board does (e.g. 439 = SM8350).
    pub fn up_with(devices: &[(u16, Option<u32>)]) -> Rig {
        let state = tempfile::Builder::new().prefix("npugate-rig-").tempdir().expect("temp dir");
        let rig = Rig { state };
        let specs = devices.iter().map(|(port, soc_id)| match soc_id {
            Some(id) => format!("{port}:soc_id={id}"),
            None => port.to_string(),
        });
        let output = crate::run(Command::new(rig_script()).arg("up").arg(rig.state.path()).args(specs));
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
        let all: Vec<(u32, u32)> =
            self.processes(port).into_iter().filter(|(_, _, argv)| is_harness(argv)).map(|(pid, parent, _)| (pid, parent)).collect();
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
            let argv = cmdline.split(|b| *b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
            // `pid (name) state ppid …`: the name may hold spaces, so count from its last ')'.
            let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
            let parent = stat.rfind(')').and_then(|at| stat[at + 1..].split_whitespace().nth(1)?.parse().ok()).unwrap_or(0);
            found.push((pid, parent, argv));
        }
        found
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
