//! `npugate devices`: every device the adb server knows, with what it is.

use npugate_result::contract::EXIT_PASS;

use std::path::{Path, PathBuf};

use super::options::DeviceArgs;
use crate::devices::{self, DeviceInfo};
use crate::history::{self, health, health::DeviceHealth};

/// Arguments of `npugate devices`.
#[derive(Debug, clap::Args)]
pub struct DevicesArgs {
    /// Devices (`--device` narrows the list), adb binary and adb server.
    #[command(flatten)]
    pub options: DeviceArgs,
    /// Print `npugate.devices/1` JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// History store each device's noise floor is learned from (default: <cache>/history.sqlite).
    #[arg(long, value_name = "PATH")]
    pub history: Option<PathBuf>,
}

/// Runs `npugate devices`.
pub fn run(args: DevicesArgs) -> anyhow::Result<u8> {
    let adb = args.options.adb()?;
    let mut list = devices::list(&adb)?;
    if !args.options.devices.is_empty() {
        let chosen = devices::select(&adb, &args.options.devices)?;
        list.devices.retain(|d| chosen.contains(&d.serial));
    }
    let history = args.history.clone().unwrap_or_else(history::default_path);
    let mut health = health::load(&history)?.unwrap_or_default();
    health.retain(|h| list.devices.iter().any(|d| d.serial == h.serial));
    if args.json {
        let mut json = serde_json::to_value(&list)?;
        json["health"] = serde_json::to_value(&health)?;
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print!("{}", table(&list.devices));
        print!("{}", health_lines(&health, &history));
    }
    Ok(EXIT_PASS)
}

/// One row per device, columns aligned by display width.
fn table(devices: &[DeviceInfo]) -> String {
    if devices.is_empty() {
        return "no devices (adb devices lists none)\n".into();
    }
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::NOTHING).set_header(["SERIAL", "STATE", "MODEL", "SOC", "HEXAGON", "RELEASE", "ABI", "FINGERPRINT", "PROBE ERROR"]);
    for d in devices {
        let o = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        table.add_row([
            d.serial.clone(),
            d.state.clone(),
            o(&d.model),
            o(&d.soc),
            o(&d.hexagon_arch),
            o(&d.release),
            o(&d.abi),
            o(&d.fingerprint),
            o(&d.probe_error),
        ]);
    }
    for column in table.column_iter_mut() {
        column.set_padding((0, 2));
    }
    let text: Vec<String> = table.to_string().lines().map(|line| line.trim_end().to_string()).collect();
    text.join("\n") + "\n"
}

/// Each listed device's noise floor from the history, flagged ones marked `NOISY`.
fn health_lines(health: &[DeviceHealth], history: &Path) -> String {
    if health.is_empty() {
        return String::new();
    }
    format!("\nnoise floor (last {} nights of {})\n{}", health::HEALTH_NIGHTS, history.display(), health::lines(health))
}
