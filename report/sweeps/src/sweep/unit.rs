//! What a sweep runs on, cut into units that never share a phone: each `[[device]]` entry of the
//! plan (one serial, or a SoC class: every connected device of that SoC), each host-HTP SoC of
//! `socs`, or — for a plan without `[[device]]` — each device `--device` chose. Units are listed
//! in plan order before any device is probed; a shard (`--shard I/N`) takes whole units, so one
//! phone is never in two shards. (`execute::plan_units` lists a plan's units.)

use serde::{Deserialize, Serialize};

/// One unit of a sweep: what one shard takes whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// `[[device]] serial = "…"`: that device.
    Serial(String),
    /// `[[device]] soc = "…"`: every connected device with that SoC, but those the plan names by serial.
    Soc(String),
    /// `socs = ["…"]`: Qualcomm's host HTP emulator configured as that SoC.
    HostHtp(String),
    /// A device `--device` chose (a plan without `[[device]]`).
    Device(String),
    /// `aihub = ["…"]`: a Qualcomm AI Hub device, as the plan names it.
    #[serde(rename = "aihub")]
    AiHub(String),
}

impl Unit {
    /// What chose the unit's devices, as `sweep.json` records it: `serial`, `soc=SM8650`, `socs`, `--device`.
    pub fn chosen_by(&self) -> String {
        match self {
            Unit::Serial(_) => "serial".into(),
            Unit::Soc(soc) => format!("soc={soc}"),
            Unit::HostHtp(_) => "socs".into(),
            Unit::Device(_) => "--device".into(),
            Unit::AiHub(_) => "aihub".into(),
        }
    }

    /// For people: `device R5CX123`, `every device with SoC SM8650`, `host HTP as SM8650`.
    pub fn label(&self) -> String {
        match self {
            Unit::Serial(serial) | Unit::Device(serial) => format!("device {serial}"),
            Unit::Soc(soc) => format!("every device with SoC {soc}"),
            Unit::HostHtp(soc) => format!("host HTP as {soc}"),
            Unit::AiHub(device) => format!("AI Hub device {device}"),
        }
    }

    /// The directory its cells live in below the sweep dir, when known without resolving the unit
    /// (a SoC class is only known once its devices are listed, an AI Hub device once AI Hub
    /// named the device the plan's selector chooses).
    pub fn known_dir(&self) -> Option<String> {
        match self {
            Unit::Serial(serial) | Unit::Device(serial) => {
                npugate_engine::device_rack::result_dir_names(std::slice::from_ref(serial)).pop()
            }
            Unit::HostHtp(soc) => Some(host_htp_dir(soc)),
            Unit::Soc(_) | Unit::AiHub(_) => None,
        }
    }
}

/// The directory (and target name) of the host HTP emulator as `soc`: `htp-SM8650`.
pub fn host_htp_dir(soc: &str) -> String {
    format!("htp-{soc}")
}

/// The serials the plan names one by one: a SoC class leaves them to their own units.
pub fn named_serials(units: &[Unit]) -> Vec<&str> {
    units
        .iter()
        .filter_map(|unit| match unit {
            Unit::Serial(serial) | Unit::Device(serial) => Some(serial.as_str()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_read_as_sweep_json_writes_them() {
        let units = [
            Unit::Serial("R5CX".into()),
            Unit::Soc("SM8650".into()),
            Unit::HostHtp("SM8350".into()),
            Unit::Device("a:1".into()),
            Unit::AiHub("S24".into()),
        ];
        let json = serde_json::to_string(&units).unwrap();
        assert_eq!(
            json,
            r#"[{"serial":"R5CX"},{"soc":"SM8650"},{"host_htp":"SM8350"},{"device":"a:1"},{"aihub":"S24"}]"#
        );
        assert_eq!(serde_json::from_str::<Vec<Unit>>(&json).unwrap(), units);
        let dirs: Vec<Option<String>> = units.iter().map(Unit::known_dir).collect();
        assert_eq!(dirs, [Some("R5CX".into()), None, Some("htp-SM8350".into()), Some("a_1".into()), None]);
        assert_eq!(named_serials(&units), ["R5CX", "a:1"]);
    }
}
