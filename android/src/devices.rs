//! Which devices there are and what they are: serial, state, model, SoC, Hexagon arch, Android
//! release, ABI, fingerprint — from `getprop` on Android, from `uname`/`/etc/os-release`/sysfs on a
//! Linux board. Also the `--device`/`--adb`/`--adb-server` options shared by every device command.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::adb::commands::APPLETS;
use crate::adb::{Adb, AdbError, DeviceShell};
use npugate_result::hexagon::{self, SocClues};
use npugate_result::names;

/// Schema of `npugate devices --json`.
pub const DEVICE_LIST_SCHEMA: &str = "npugate.devices/1";

/// One `--device` value (and a sweep plan's `serial`): a device by its serial, taken exactly (in any
/// case), or `all` (every online device).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceChoice {
    /// Every online device.
    All,
    /// The device with this serial.
    Serial(String),
}

impl std::str::FromStr for DeviceChoice {
    type Err = String;

    fn from_str(text: &str) -> Result<DeviceChoice, String> {
        match text.trim() {
            "" => Err("a device serial is not empty; `npugate devices` lists them".into()),
            all if all.eq_ignore_ascii_case("all") => Ok(DeviceChoice::All),
            serial => Ok(DeviceChoice::Serial(serial.to_string())),
        }
    }
}

impl std::fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceChoice::All => f.write_str("all"),
            DeviceChoice::Serial(serial) => f.write_str(serial),
        }
    }
}

impl DeviceChoice {
    /// True when `serial` is chosen (`all` chooses every one).
    pub fn admits(&self, serial: &str) -> bool {
        match self {
            DeviceChoice::All => true,
            DeviceChoice::Serial(wanted) => wanted.eq_ignore_ascii_case(serial),
        }
    }
}

/// The serials to work on: `requested` (`all` = every online device), else `ANDROID_SERIAL`, else
/// the single online device. Unknown or offline serials are an error naming them.
pub fn select(adb: &Adb, requested: &[DeviceChoice]) -> anyhow::Result<Vec<String>> {
    let from_env = std::env::var("ANDROID_SERIAL").ok().and_then(|serial| serial.parse().ok());
    choose(&adb.list_devices()?, requested, from_env)
}

/// [`select`] among the `known` devices, `from_env` being `ANDROID_SERIAL`.
fn choose(
    known: &[crate::adb::DeviceEntry],
    requested: &[DeviceChoice],
    from_env: Option<DeviceChoice>,
) -> anyhow::Result<Vec<String>> {
    let online: Vec<&str> = known.iter().filter(|d| d.state == "device").map(|d| d.serial.as_str()).collect();
    let requested: Vec<DeviceChoice> = match (requested, from_env) {
        ([], Some(serial)) => vec![serial],
        ([], None) => match online.as_slice() {
            [one] => vec![DeviceChoice::Serial(one.to_string())],
            [] => anyhow::bail!("no device online (adb devices lists none in state `device`)"),
            many => anyhow::bail!(
                "{} devices online ({}); choose with --device SERIAL or --device all",
                many.len(),
                many.join(", ")
            ),
        },
        (given, _) => given.to_vec(),
    };
    let mut chosen: Vec<String> = Vec::new();
    for choice in requested {
        let DeviceChoice::Serial(serial) = choice else {
            anyhow::ensure!(!online.is_empty(), "--device all: no device online");
            chosen.extend(online.iter().map(|s| s.to_string()));
            continue;
        };
        let exact = names::exact(&serial, known.iter().map(|d| d.serial.as_str()));
        match known.iter().find(|d| Some(d.serial.as_str()) == exact) {
            Some(d) if d.state == "device" => chosen.push(d.serial.clone()),
            Some(d) => anyhow::bail!("device {serial} is {} (not usable)", d.state),
            None => {
                let near = names::closest(&serial, known.iter().map(|d| d.serial.as_str()));
                let hint = near.map(|near| format!("did you mean {near}? ")).unwrap_or_default();
                anyhow::bail!("device {serial} not found ({hint}adb knows: {})", serials_or_none(known))
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    chosen.retain(|s| seen.insert(s.clone()));
    Ok(chosen)
}

fn serials_or_none(known: &[crate::adb::DeviceEntry]) -> String {
    if known.is_empty() {
        return "none".into();
    }
    known.iter().map(|d| format!("{} ({})", d.serial, d.state)).collect::<Vec<_>>().join(", ")
}

/// `npugate devices --json`: every device the adb server knows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceList {
    /// Always [`DEVICE_LIST_SCHEMA`].
    pub schema: String,
    /// One entry per device, in adb's order.
    pub devices: Vec<DeviceInfo>,
}

/// One device as identified over adb.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DeviceInfo {
    /// adb serial.
    pub serial: String,
    /// adb state (`device`, `offline`, `unauthorized`, …).
    pub state: String,
    /// `android` when `getprop` answered, else `linux`; absent when the device was not probed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// Product model (`ro.product.model`) or the device-tree model of a board.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// SoC model, normalized when known (`SM8650`), else the raw `ro.soc.model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soc: Option<String>,
    /// Hexagon HTP arch of the SoC (`v75`), when the SoC is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hexagon_arch: Option<String>,
    /// Android release (`ro.build.version.release`), or the Linux distribution's pretty name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    /// ABI (`ro.product.cpu.abi`, e.g. `arm64-v8a`) or the kernel machine (`uname -m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abi: Option<String>,
    /// Rust target triple the harness for this device is built for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Build fingerprint (`ro.build.fingerprint`) or the kernel release on a Linux board.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// Every raw value read (property or file → value), for the record.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub raw: BTreeMap<String, String>,
    /// Applets of npugate's device command set the device's shell does not find (toybox builds
    /// differ: Debian's has no `tr`); what npugate reads or does with them is missing on this device.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_commands: Vec<String>,
    /// Why probing failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_error: Option<String>,
}

/// Device-side script printing `key=value` lines; every source is optional. First a `missing=NAME`
/// line for each applet of the device command set ([`APPLETS`]) the shell does not find, so a
/// value that could not be read for lack of one is a named gap, never a silent blank. The shell
/// drops the NUL that ends `/proc/device-tree/model` (mksh, dash and bash all do), so no `tr` is
/// needed: Debian's toybox has none.
fn probe_script() -> String {
    format!(
        r#"p() {{ printf '%s=%s\n' "$1" "$2"; }}
for c in {applets}; do command -v "$c" >/dev/null 2>&1 || p missing "$c"; done
if command -v getprop >/dev/null 2>&1; then
  for k in ro.product.model ro.product.manufacturer ro.soc.manufacturer ro.soc.model ro.board.platform \
           ro.build.version.release ro.build.version.sdk ro.product.cpu.abi ro.build.fingerprint; do
    p "$k" "$(getprop "$k")"
  done
fi
p soc0.soc_id "$(cat /sys/devices/soc0/soc_id 2>/dev/null)"
p uname.m "$(uname -m 2>/dev/null)"
p uname.r "$(uname -r 2>/dev/null)"
p os_release.pretty_name "$( (. /etc/os-release && echo "$PRETTY_NAME") 2>/dev/null)"
p device_tree.model "$(cat /proc/device-tree/model 2>/dev/null)"
"#,
        applets = APPLETS.join(" ")
    )
}

/// Reads everything [`DeviceInfo`] holds from one online device (one `adb shell`).
pub fn probe(adb: &Adb, serial: &str) -> Result<DeviceInfo, AdbError> {
    probe_shell(&adb.device(serial))
}

/// [`probe`] through any device shell.
pub fn probe_shell(shell: &dyn DeviceShell) -> Result<DeviceInfo, AdbError> {
    let stdout = shell.run_ok(&probe_script(), Duration::from_secs(30), "probe device")?;
    Ok(describe(shell.name(), "device", &stdout))
}

/// Lists every device the server knows; online ones are probed, a failed probe is recorded.
pub fn list(adb: &Adb) -> anyhow::Result<DeviceList> {
    let mut devices = Vec::new();
    for entry in adb.list_devices()? {
        let info = if entry.state == "device" {
            probe(adb, &entry.serial).unwrap_or_else(|e| DeviceInfo {
                serial: entry.serial.clone(),
                state: entry.state.clone(),
                probe_error: Some(e.to_string()),
                ..Default::default()
            })
        } else {
            DeviceInfo { serial: entry.serial, state: entry.state, ..Default::default() }
        };
        devices.push(info);
    }
    Ok(DeviceList { schema: DEVICE_LIST_SCHEMA.into(), devices })
}

impl DeviceInfo {
    /// One sentence naming the device's missing applets, when it misses any.
    pub fn gap(&self) -> Option<String> {
        (!self.missing_commands.is_empty()).then(|| {
            format!(
                "device {} lacks {} (not on its shell's PATH): npugate's device-side scripts use them, so what they read or do is \
                 missing on this device (README, \"Device-side commands\")",
                self.serial,
                self.missing_commands.join(", ")
            )
        })
    }
}

/// What the probe printed: the `key=value` pairs with a value, and the missing applets.
fn parse_probe(text: &str) -> (BTreeMap<String, String>, Vec<String>) {
    let mut raw = BTreeMap::new();
    let mut missing = Vec::new();
    for (key, value) in text.lines().filter_map(|line| line.split_once('=')).map(|(k, v)| (k.trim(), v.trim())) {
        match key {
            "missing" => missing.push(value.to_string()),
            _ if !value.is_empty() => {
                raw.insert(key.to_string(), value.to_string());
            }
            _ => {}
        }
    }
    (raw, missing)
}

/// Builds the typed description from what [`probe_script`] printed.
fn describe(serial: &str, state: &str, probed: &str) -> DeviceInfo {
    let (raw, missing_commands) = parse_probe(probed);
    let get = |k: &str| raw.get(k).cloned();
    let android = raw.keys().any(|k| k.starts_with("ro."));
    let clues = SocClues {
        soc_model: raw.get("ro.soc.model").map(String::as_str),
        board_platform: raw.get("ro.board.platform").map(String::as_str),
        soc_id: raw.get("soc0.soc_id").map(String::as_str),
    };
    let identified = hexagon::identify(&clues);
    let abi = if android { get("ro.product.cpu.abi") } else { get("uname.m") };
    DeviceInfo {
        serial: serial.into(),
        state: state.into(),
        os: Some(if android { "android" } else { "linux" }.into()),
        model: get("ro.product.model").or_else(|| get("device_tree.model")),
        soc: identified.map(|(model, _)| model.to_string()).or_else(|| get("ro.soc.model")),
        hexagon_arch: identified.map(|(_, arch)| arch.to_string()),
        release: if android { get("ro.build.version.release") } else { get("os_release.pretty_name") },
        target: abi.as_deref().and_then(|abi| target_triple(abi, android)).map(str::to_string),
        abi,
        fingerprint: if android { get("ro.build.fingerprint") } else { get("uname.r") },
        raw,
        missing_commands,
        probe_error: None,
    }
}

/// The Rust target triple of a harness that runs on this ABI.
fn target_triple(abi: &str, android: bool) -> Option<&'static str> {
    Some(match (abi, android) {
        ("arm64-v8a", true) => "aarch64-linux-android",
        ("x86_64", true) => "x86_64-linux-android",
        ("aarch64" | "arm64", false) => "aarch64-unknown-linux-gnu",
        ("x86_64", false) => "x86_64-unknown-linux-gnu",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_are_chosen_by_their_exact_serial_and_a_near_miss_names_the_closest() {
        let entry = |serial: &str, state: &str| crate::adb::DeviceEntry { serial: serial.into(), state: state.into() };
        let known = [entry("R58N12ABC", "device"), entry("127.0.0.1:6101", "device"), entry("R58N99XYZ", "offline")];
        let pick = |given: &[&str]| {
            let choices: Vec<DeviceChoice> = given.iter().map(|g| g.parse().unwrap()).collect();
            choose(&known, &choices, None).map_err(|e| e.to_string())
        };
        assert_eq!(pick(&["r58n12abc"]).unwrap(), ["R58N12ABC"], "a serial in any case");
        assert_eq!(pick(&["ALL"]).unwrap(), ["R58N12ABC", "127.0.0.1:6101"]);
        let near = pick(&["R58N12AB"]).unwrap_err();
        assert!(near.contains("device R58N12AB not found (did you mean R58N12ABC?"), "{near}");
        assert!(pick(&["R58N99XYZ"]).unwrap_err().contains("is offline"));
        assert!(pick(&[]).unwrap_err().contains("2 devices online"));
        let env = choose(&known, &[], Some(DeviceChoice::Serial("127.0.0.1:6101".into()))).unwrap();
        assert_eq!(env, ["127.0.0.1:6101"]);
        assert!("  ".parse::<DeviceChoice>().is_err());
    }

    #[test]
    fn android_phone_is_described_from_getprop() {
        let out = "ro.product.model=SM-S928B\nro.soc.model=SM8650\nro.board.platform=pineapple\n\
                   ro.build.version.release=14\nro.product.cpu.abi=arm64-v8a\n\
                   ro.build.fingerprint=samsung/e3q/e3q:14/UP1A/1:user/release-keys\nsoc0.soc_id=557\n\
                   uname.m=aarch64\nuname.r=6.1.25\nos_release.pretty_name=\n";
        let info = describe("R5CX", "device", out);
        assert_eq!(info.os.as_deref(), Some("android"));
        assert_eq!(info.model.as_deref(), Some("SM-S928B"));
        assert_eq!((info.soc.as_deref(), info.hexagon_arch.as_deref()), (Some("SM8650"), Some("v75")));
        assert_eq!(info.abi.as_deref(), Some("arm64-v8a"));
        assert_eq!(info.target.as_deref(), Some("aarch64-linux-android"));
        assert_eq!(info.release.as_deref(), Some("14"));
        assert!(info.fingerprint.unwrap().starts_with("samsung/"));
    }

    #[test]
    fn the_probe_runs_on_a_phone_shell_and_names_missing_applets() {
        let info = probe_shell(&crate::adb::LocalShell).unwrap();
        assert_eq!(info.missing_commands, Vec::<String>::new(), "Debian's toybox has every applet of the set");
        assert_eq!(info.abi.as_deref(), Some(std::env::consts::ARCH));
        assert_eq!(info.gap(), None);
        let info = describe("board", "device", "missing=tr\nmissing=sha256sum\nuname.m=aarch64\n");
        assert_eq!(info.missing_commands, ["tr", "sha256sum"]);
        assert!(
            info.gap().unwrap().starts_with("device board lacks tr, sha256sum (not on its shell's PATH)"),
            "{:?}",
            info.gap()
        );
        assert!(!info.raw.contains_key("missing"));
    }

    #[test]
    fn linux_board_without_getprop_uses_uname_and_sysfs() {
        let out = "soc0.soc_id=519\nuname.m=aarch64\nuname.r=6.6.0-qcom\n\
                   os_release.pretty_name=Debian GNU/Linux 13 (trixie)\ndevice_tree.model=Qualcomm RB5=x\n";
        let info = describe("board", "device", out);
        assert_eq!(info.os.as_deref(), Some("linux"));
        assert_eq!(info.model.as_deref(), Some("Qualcomm RB5=x"));
        assert_eq!(info.hexagon_arch.as_deref(), Some("v73"));
        assert_eq!(info.target.as_deref(), Some("aarch64-unknown-linux-gnu"));
        assert_eq!(info.fingerprint.as_deref(), Some("6.6.0-qcom"));
    }
}
