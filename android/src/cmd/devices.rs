//! `npugate devices`: every device the adb server knows, with what it is.

use npugate_result::contract::EXIT_PASS;

use super::options::DeviceArgs;
use crate::devices::{self, DeviceInfo};

/// Arguments of `npugate devices`.
#[derive(Debug, clap::Args)]
pub struct DevicesArgs {
    /// Devices (`--device` narrows the list), adb binary and adb server.
    #[command(flatten)]
    pub options: DeviceArgs,
    /// Print `npugate.devices/1` JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs `npugate devices`.
pub fn run(args: DevicesArgs) -> anyhow::Result<u8> {
    let adb = args.options.adb()?;
    let mut list = devices::list(&adb)?;
    if !args.options.devices.is_empty() {
        let chosen = devices::select(&adb, &args.options.devices)?;
        list.devices.retain(|d| chosen.contains(&d.serial));
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&list)?);
    } else {
        print!("{}", table(&list.devices));
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
        vec![d.serial.clone(), d.state.clone(), o(&d.model), o(&d.soc), o(&d.hexagon_arch), o(&d.release), o(&d.abi), o(&d.fingerprint), o(&d.probe_error)]
    });
    crate::table::plain(&["SERIAL", "STATE", "MODEL", "SOC", "HEXAGON", "RELEASE", "ABI", "FINGERPRINT", "PROBE ERROR"], rows)
}
