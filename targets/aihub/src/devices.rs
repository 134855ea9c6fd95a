//! AI Hub's devices and how a `--aihub` value chooses one: a device's exact name (`Samsung Galaxy
//! S24 (Family)`), a part of one name, case-insensitive (`S24`, when it names one device), or
//! attribute selectors (`chipset:qualcomm-snapdragon-8gen3`, several joined by `,`).

use crate::client::{ApiError, Client};
use crate::messages::{Device, DeviceList};

/// Every device AI Hub offers (`GET devices/`).
pub fn list(client: &Client) -> Result<Vec<Device>, ApiError> {
    Ok(client.get::<DeviceList>("devices", &[])?.devices)
}

/// The value of a device's attribute `key` (`chipset`, `hexagon`, `os`, …), if it has one.
pub fn attribute<'d>(device: &'d Device, key: &str) -> Option<&'d str> {
    device.attributes.iter().find_map(|a| a.strip_prefix(key).and_then(|rest| rest.strip_prefix(':')))
}

/// Every value of a device's attribute `key` (`framework` has several).
pub fn attributes<'d>(device: &'d Device, key: &'d str) -> impl Iterator<Item = &'d str> + 'd {
    device.attributes.iter().filter_map(move |a| a.strip_prefix(key).and_then(|rest| rest.strip_prefix(':')))
}

/// A device chosen by a selector, with how it was chosen when that was a choice among several.
#[derive(Debug, Clone, PartialEq)]
pub struct Chosen {
    /// The device.
    pub device: Device,
    /// A sentence on the choice made for the user (several matched the attributes), if any.
    pub note: Option<String>,
}

/// The device `selector` names among `devices`; an error lists the candidates.
pub fn select(devices: &[Device], selector: &str) -> Result<Chosen, String> {
    let selector = selector.trim();
    if selector.is_empty() {
        return Err("an empty --aihub value; name a device (`npugate devices --aihub` lists them)".into());
    }
    let names = |matches: &[&Device]| -> String {
        let mut names: Vec<&str> = matches.iter().map(|d| d.name.as_str()).collect();
        names.dedup();
        names.join(", ")
    };
    if let Some(device) = devices.iter().find(|d| d.name == selector) {
        return Ok(Chosen { device: device.clone(), note: None });
    }
    if selector.contains(':') {
        let wanted: Vec<&str> = selector.split(',').map(str::trim).filter(|a| !a.is_empty()).collect();
        let matches: Vec<&Device> = devices
            .iter()
            .filter(|d| wanted.iter().all(|w| d.attributes.iter().any(|a| a.eq_ignore_ascii_case(w))))
            .collect();
        return match matches.as_slice() {
            [] => Err(format!("no AI Hub device has the attributes {selector}; `npugate devices --aihub` lists each device's chipset, Hexagon arch and frameworks")),
            [one] => Ok(Chosen { device: (*one).clone(), note: None }),
            [first, ..] => Ok(Chosen {
                device: (*first).clone(),
                note: Some(format!(
                    "--aihub {selector}: {} devices have these attributes ({}); using the first AI Hub lists, {} (name it to choose another)",
                    matches.len(),
                    names(&matches),
                    first.name
                )),
            }),
        };
    }
    let lower = selector.to_lowercase();
    let matches: Vec<&Device> = devices.iter().filter(|d| d.name.to_lowercase().contains(&lower)).collect();
    let exact: Vec<&Device> = matches.iter().copied().filter(|d| d.name.eq_ignore_ascii_case(selector)).collect();
    let distinct =
        |list: &[&Device]| list.iter().map(|d| d.name.as_str()).collect::<std::collections::BTreeSet<_>>().len();
    match (exact.as_slice(), matches.as_slice()) {
        ([one, ..], _) => Ok(Chosen { device: (*one).clone(), note: None }),
        (_, []) => Err(format!("no AI Hub device is named like {selector:?}; `npugate devices --aihub` lists them")),
        (_, [one, ..]) if distinct(&matches) == 1 => Ok(Chosen { device: (*one).clone(), note: None }),
        _ => Err(format!(
            "--aihub {selector:?} names {} AI Hub devices ({}); give more of one name, or its exact name",
            distinct(&matches),
            names(&matches)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(name: &str, attributes: &[&str]) -> Device {
        Device {
            name: name.into(),
            os: "14".into(),
            attributes: attributes.iter().map(|a| a.to_string()).collect(),
            soc_description: String::new(),
        }
    }

    #[test]
    fn a_name_a_unique_part_of_one_or_attributes_choose_a_device_and_ambiguity_lists_the_candidates() {
        let devices = [
            device(
                "Samsung Galaxy S24 (Family)",
                &["chipset:qualcomm-snapdragon-8gen3", "hexagon:v75", "framework:onnx"],
            ),
            device("Samsung Galaxy S24 Ultra", &["chipset:qualcomm-snapdragon-8gen3", "hexagon:v75"]),
            device(
                "Samsung Galaxy S25 (Family)",
                &["chipset:qualcomm-snapdragon-8-elite", "hexagon:v79", "framework:onnx"],
            ),
        ];
        assert_eq!(select(&devices, "Samsung Galaxy S24 (Family)").unwrap().device.name, "Samsung Galaxy S24 (Family)");
        assert_eq!(select(&devices, "s25").unwrap().device.name, "Samsung Galaxy S25 (Family)");
        assert_eq!(select(&devices, "samsung galaxy s24 ultra").unwrap().device.name, "Samsung Galaxy S24 Ultra");
        let ambiguous = select(&devices, "S24").unwrap_err();
        assert!(ambiguous.contains("names 2 AI Hub devices") && ambiguous.contains("S24 Ultra"), "{ambiguous}");
        let by_chip = select(&devices, "chipset:qualcomm-snapdragon-8gen3").unwrap();
        assert_eq!(by_chip.device.name, "Samsung Galaxy S24 (Family)");
        assert!(by_chip.note.unwrap().contains("2 devices"));
        assert_eq!(select(&devices, "hexagon:v79,framework:onnx").unwrap().device.name, "Samsung Galaxy S25 (Family)");
        assert!(select(&devices, "hexagon:v81").unwrap_err().contains("no AI Hub device has the attributes"));
        assert!(select(&devices, "Pixel").unwrap_err().contains("npugate devices --aihub"));
        assert_eq!(attribute(&devices[0], "hexagon"), Some("v75"));
        assert_eq!(attributes(&devices[0], "framework").collect::<Vec<_>>(), ["onnx"]);
    }
}
