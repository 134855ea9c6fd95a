//! `npugate devices`: every device the adb server knows, with what it is; `--unlock` clears a
//! device lock left behind; `--aihub`: Qualcomm AI Hub's hosted devices instead.

use npugate_result::contract::EXIT_PASS;

use std::path::Path;

use super::options::{DeviceArgs, HistoryArg, JsonArg, WorkDirArg};
use npugate_aihub::devices as aihub_devices;
use npugate_android::device_lock::{self, LockOptions};
use npugate_android::devices::{self, DeviceChoice, DeviceInfo};
use npugate_nightly::history::{health, health::DeviceHealth};

/// Arguments of `npugate devices`.
#[derive(Debug, clap::Args)]
pub struct DevicesArgs {
    /// Devices (`--device` narrows the list), adb binary and adb server.
    #[command(flatten)]
    pub options: DeviceArgs,
    /// `--json`: `npugate.devices/1` instead of a table.
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
    devices: Vec<AiHubListed>,
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
fn aihub(json: bool) -> anyhow::Result<u8> {
    let session = super::options::aihub_session()?;
    let config = session.client().config();
    let devices = aihub_devices::list(session.client())?;
    let listing = AiHubListing {
        schema: "npugate.aihub-devices/1",
        api_url: config.api_url.clone(),
        qualcomm: config.is_qualcomm(),
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
    if json {
        println!("{}", serde_json::to_string_pretty(&listing)?);
        return Ok(EXIT_PASS);
    }
    println!("AI Hub: {}", config.service());
    let o = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let rows = listing
        .devices
        .iter()
        .map(|d| vec![d.name.clone(), d.os.clone(), o(&d.chipset), o(&d.hexagon), d.frameworks.join(",")]);
    print!("{}", npugate_host::table::plain(&["NAME", "OS", "CHIPSET", "HEXAGON", "FRAMEWORKS"], rows));
    println!("run on one with `npugate run --aihub NAME` (a part of a name, or attributes such as chipset:…; ONNX needs framework onnx)");
    Ok(EXIT_PASS)
}

/// Runs `npugate devices`.
pub fn run(args: DevicesArgs) -> anyhow::Result<u8> {
    if args.aihub {
        return aihub(args.json.json);
    }
    let adb = args.options.adb()?;
    if let Some(serial) = &args.unlock {
        let chosen = devices::select(&adb, std::slice::from_ref(serial))?;
        let [serial] = chosen.as_slice() else {
            anyhow::bail!("--unlock takes one device serial, not \"{serial}\" ({} devices)", chosen.len());
        };
        let work_dir = args.work_dir.work_dir.trim_end_matches('/');
        println!("{}", device_lock::unlock(&adb.device(serial), work_dir, args.force, &LockOptions::waiting(None))?);
        return Ok(EXIT_PASS);
    }
    let mut list = devices::list(&adb)?;
    if !args.options.devices.is_empty() {
        let chosen = devices::select(&adb, &args.options.devices)?;
        list.devices.retain(|d| chosen.contains(&d.serial));
    }
    let history = args.history.path();
    let mut health = health::load(&history)?.unwrap_or_default();
    health.retain(|h| list.devices.iter().any(|d| d.serial == h.serial));
    if args.json.json {
        let mut json = serde_json::to_value(&list)?;
        json["health"] = serde_json::to_value(&health)?;
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print!("{}", table(&list.devices));
        list.devices.iter().filter_map(DeviceInfo::gap).for_each(|gap| println!("{gap}"));
        print!("{}", health_lines(&health, &history));
    }
    Ok(EXIT_PASS)
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
    npugate_host::table::plain(
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
