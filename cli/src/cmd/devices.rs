//! `npugate devices`: every device the adb server knows, with what it is; `--unlock` clears a
//! device lock left behind; `--aihub`: Qualcomm AI Hub's hosted devices instead.

use npugate_result::contract::EXIT_PASS;

use std::path::Path;

use super::options::{DeviceArgs, HistoryArg, JsonArg, WorkDirArg};
use npugate_aihub::devices as aihub_devices;
use npugate_android::device_lock::{self, LockOptions};
use npugate_android::devices::{self, DeviceChoice, DeviceInfo, DeviceList};
use npugate_result::report::{json_of, Finished, Report};

use super::console::Console;
use npugate_sweeps::history::{health, health::DeviceHealth};

/// Arguments of `npugate devices`.
#[derive(Debug, clap::Args)]
pub struct DevicesArgs {
    /// Devices (`--device` narrows the list), adb binary and adb server.
    #[command(flatten)]
    pub options: DeviceArgs,
    /// `--json`: `npugate.devices/1` instead of a table (with --unlock: `npugate.device-unlock/1`).
    #[command(flatten)]
    pub json: JsonArg,
    /// Clear the lock of this device's work dir (left by a crashed npugate, corrupt, or written by
    /// a newer npugate); refused while its holder is alive unless --force.
    #[arg(long, value_name = "SERIAL")]
    pub unlock: Option<DeviceChoice>,
    /// With --unlock: clear the lock even while its holder is alive.
    #[arg(long, requires = "unlock")]
    pub force: bool,
    /// `--work-dir`: with --unlock, the work dir whose lock is cleared.
    #[command(flatten)]
    pub work_dir: WorkDirArg,
    /// `--history`: the store each device's noise floor is learned from.
    #[command(flatten)]
    pub history: HistoryArg,
    /// List Qualcomm AI Hub's hosted devices (name, OS, chipset, Hexagon arch, frameworks) instead,
    /// with the official client's credentials (`qai-hub configure --api_token …`).
    #[arg(long, conflicts_with_all = ["unlock", "force"])]
    pub aihub: bool,
}

/// `npugate devices --aihub --json`: AI Hub's devices as listed.
#[derive(Debug, serde::Serialize)]
struct AiHubListing {
    schema: &'static str,
    /// The service.
    api_url: String,
    /// True only for Qualcomm's own service.
    qualcomm: bool,
    /// The service in words, for the text.
    #[serde(skip)]
    service: String,
    devices: Vec<AiHubListed>,
}

/// `npugate devices --aihub`'s finished result: a table of the devices and how to run on one.
impl Report for AiHubListing {
    fn schema(&self) -> &str {
        self.schema
    }
    fn exit_code(&self) -> u8 {
        EXIT_PASS
    }
    fn text(&self, _color: bool) -> String {
        let o = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        let rows = self
            .devices
            .iter()
            .map(|d| vec![d.name.clone(), d.os.clone(), o(&d.chipset), o(&d.hexagon), d.frameworks.join(",")]);
        format!(
            "AI Hub: {}\n{}run on one with `npugate run --aihub NAME` (a part of a name, or attributes such as chipset:…; ONNX needs framework onnx)\n",
            self.service,
            npugate_result::table::plain(&["NAME", "OS", "CHIPSET", "HEXAGON", "FRAMEWORKS"], rows)
        )
    }
    fn json(&self) -> String {
        json_of(self)
    }
}

/// `npugate devices --json` (`npugate.devices/1`): the devices adb lists, with the noise floor the
/// history holds for each.
#[derive(Debug, serde::Serialize)]
struct Listed<'a> {
    /// The devices (and the schema).
    #[serde(flatten)]
    list: &'a DeviceList,
    /// Each listed device's noise floor.
    health: &'a [DeviceHealth],
    /// The history the noise floors come from, for the text.
    #[serde(skip)]
    history: &'a Path,
}

/// `npugate devices`' finished result: a row per device, what each cannot tell, its noise floor.
impl Report for Listed<'_> {
    fn schema(&self) -> &str {
        &self.list.schema
    }
    fn exit_code(&self) -> u8 {
        EXIT_PASS
    }
    fn text(&self, _color: bool) -> String {
        let mut text = table(&self.list.devices);
        self.list.devices.iter().filter_map(DeviceInfo::gap).for_each(|gap| text.push_str(&format!("{gap}\n")));
        text + &health_lines(self.health, self.history)
    }
    fn json(&self) -> String {
        json_of(self)
    }
}

/// `npugate devices --unlock SERIAL`'s finished result (`npugate.device-unlock/1`): the device,
/// the work dir whose lock it cleared, and what was done in one sentence (its text).
#[derive(Debug, serde::Serialize)]
struct Unlocked {
    /// Always `npugate.device-unlock/1`.
    schema: &'static str,
    /// The device.
    serial: String,
    /// The work dir whose lock was cleared.
    work_dir: String,
    /// What was done: `device S: cleared the lock of …`, or `device S: not locked (…)`.
    done: String,
}

impl Report for Unlocked {
    fn schema(&self) -> &str {
        self.schema
    }
    fn exit_code(&self) -> u8 {
        EXIT_PASS
    }
    fn text(&self, _color: bool) -> String {
        format!("{}\n", self.done)
    }
    fn json(&self) -> String {
        json_of(self)
    }
}

/// One AI Hub device.
#[derive(Debug, serde::Serialize)]
struct AiHubListed {
    name: String,
    os: String,
    chipset: Option<String>,
    hexagon: Option<String>,
    frameworks: Vec<String>,
    attributes: Vec<String>,
}

/// `npugate devices --aihub`: a table (or `npugate.aihub-devices/1` with `--json`).
fn aihub(console: &Console, json: bool) -> anyhow::Result<u8> {
    let session = super::options::aihub_session()?;
    let config = session.client().config();
    let devices = aihub_devices::list(session.client())?;
    let listing = AiHubListing {
        schema: "npugate.aihub-devices/1",
        api_url: config.api_url.clone(),
        qualcomm: config.is_qualcomm(),
        service: config.service(),
        devices: devices
            .iter()
            .map(|d| AiHubListed {
                name: d.name.clone(),
                os: d.os.clone(),
                chipset: aihub_devices::attribute(d, "chipset").map(str::to_string),
                hexagon: aihub_devices::attribute(d, "hexagon").map(str::to_string),
                frameworks: aihub_devices::attributes(d, "framework").map(str::to_string).collect(),
                attributes: d.attributes.clone(),
            })
            .collect(),
    };
    Ok(console.finished(json, Finished::new(&listing)))
}

/// Runs `npugate devices`.
pub fn run(args: DevicesArgs, console: &Console) -> anyhow::Result<u8> {
    if args.aihub {
        return aihub(console, args.json.json);
    }
    let adb = args.options.adb()?;
    if let Some(serial) = &args.unlock {
        let chosen = devices::select(&adb, std::slice::from_ref(serial))?;
        let [serial] = chosen.as_slice() else {
            anyhow::bail!("--unlock takes one device serial, not \"{serial}\" ({} devices)", chosen.len());
        };
        let work_dir = args.work_dir.work_dir.trim_end_matches('/');
        let done = device_lock::unlock(&adb.device(serial), work_dir, args.force, &LockOptions::waiting(None))?;
        let unlocked =
            Unlocked { schema: "npugate.device-unlock/1", serial: serial.clone(), work_dir: work_dir.into(), done };
        return Ok(console.finished(args.json.json, Finished::new(&unlocked)));
    }
    let mut list = devices::list(&adb)?;
    if !args.options.devices.is_empty() {
        let chosen = devices::select(&adb, &args.options.devices)?;
        list.devices.retain(|d| chosen.contains(&d.serial));
    }
    let history = args.history.path();
    let mut health = health::load(&history)?.unwrap_or_default();
    health.retain(|h| list.devices.iter().any(|d| d.serial == h.serial));
    let listed = Listed { list: &list, health: &health, history: &history };
    Ok(console.finished(args.json.json, Finished::new(&listed)))
}

/// One row per device, columns aligned by display width.
fn table(devices: &[DeviceInfo]) -> String {
    if devices.is_empty() {
        return "no devices (adb devices lists none)\n".into();
    }
    let o = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let rows = devices.iter().map(|d| {
        vec![
            d.serial.clone(),
            d.state.clone(),
            o(&d.model),
            o(&d.soc),
            o(&d.hexagon_arch),
            o(&d.release),
            o(&d.abi),
            o(&d.fingerprint),
            o(&d.probe_error),
        ]
    });
    npugate_result::table::plain(
        &["SERIAL", "STATE", "MODEL", "SOC", "HEXAGON", "RELEASE", "ABI", "FINGERPRINT", "PROBE ERROR"],
        rows,
    )
}

/// Each listed device's noise floor from the history, flagged ones marked `NOISY`.
fn health_lines(health: &[DeviceHealth], history: &Path) -> String {
    if health.is_empty() {
        return String::new();
    }
    format!("\nnoise floor (last {} nights of {})\n{}", health::HEALTH_NIGHTS, history.display(), health::lines(health))
}
