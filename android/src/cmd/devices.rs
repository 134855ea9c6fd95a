//! `npugate devices`: every device the adb server knows, with what it is.

use crate::devices::{self, DeviceInfo, DeviceOptions};

/// Arguments of `npugate devices`.
#[derive(Debug, clap::Args)]
pub struct DevicesArgs {
    /// adb binary, server and (optionally) which devices to show.
    #[command(flatten)]
    pub options: DeviceOptions,
    /// Print the typed list (`npugate.devices/1`) as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Lists devices; exit 0 when the adb server answered (even with no device), 2 otherwise.
pub fn run(args: DevicesArgs) -> anyhow::Result<u8> {
    let adb = args.options.adb()?;
    let mut list = devices::list(&adb)?;
    if !args.options.devices.is_empty() {
        let chosen = args.options.select(&adb)?;
        list.devices.retain(|d| chosen.contains(&d.serial));
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&list)?);
    } else {
        print_table(&list.devices);
    }
    Ok(crate::EXIT_PASS)
}

fn print_table(devices: &[DeviceInfo]) {
    if devices.is_empty() {
        println!("no devices (adb devices lists none)");
        return;
    }
    let rows: Vec<[String; 9]> = devices
        .iter()
        .map(|d| {
            let o = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
            [
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
        })
        .collect();
    let header = ["SERIAL", "STATE", "MODEL", "SOC", "HEXAGON", "RELEASE", "ABI", "FINGERPRINT", "PROBE ERROR"];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells.iter().zip(widths).map(|(c, w)| format!("{c:w$}")).collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(header.to_vec());
    for row in &rows {
        line(row.iter().map(String::as_str).collect());
    }
}
