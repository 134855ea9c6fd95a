//! The system fingerprint: CPU, memory, OS and kernel from sysinfo; Android properties from
//! `getprop`; Linux board identity from `/sys/devices/soc0`. Absent sources are recorded, never fatal.

use std::collections::BTreeMap;
use std::process::Command;

use npugate_result::SystemFingerprint;
use sysinfo::System;

/// Android properties that identify a device and its SoC.
pub const ANDROID_PROPERTIES: &[&str] = &[
    "ro.product.manufacturer",
    "ro.product.model",
    "ro.product.device",
    "ro.soc.manufacturer",
    "ro.soc.model",
    "ro.board.platform",
    "ro.hardware",
    "ro.build.version.release",
    "ro.build.version.sdk",
    "ro.build.fingerprint",
    "ro.product.cpu.abi",
];

/// `/sys/devices/soc0` attributes that identify a Qualcomm board's SoC.
pub const SOC_ATTRIBUTES: &[&str] = &["soc_id", "machine", "family", "revision", "vendor"];

/// Reads the fingerprint of the machine the harness runs on.
pub fn collect() -> SystemFingerprint {
    let mut system = System::new();
    system.refresh_cpu_all();
    system.refresh_memory();
    let mut absent = Vec::new();
    let android_properties = android_properties(&mut absent);
    let soc = soc_attributes(&mut absent);
    SystemFingerprint {
        hostname: System::host_name(),
        cpu_model: system.cpus().first().map(|c| c.brand().trim().to_string()).filter(|b| !b.is_empty()),
        logical_cores: system.cpus().len(),
        physical_cores: system.physical_core_count(),
        memory_bytes: system.total_memory(),
        os_name: System::name(),
        os_version: System::os_version(),
        kernel: System::kernel_version(),
        arch: std::env::consts::ARCH.to_string(),
        android_properties,
        soc,
        absent,
    }
}

fn android_properties(absent: &mut Vec<String>) -> BTreeMap<String, String> {
    let mut properties = BTreeMap::new();
    for key in ANDROID_PROPERTIES {
        match Command::new("getprop").arg(key).output() {
            Ok(out) if out.status.success() => {
                let value = String::from_utf8_lossy(&out.stdout).trim().to_string();
                if !value.is_empty() {
                    properties.insert(key.to_string(), value);
                }
            }
            Ok(out) => {
                absent.push(format!("getprop {key}: exit status {}", out.status));
                return properties;
            }
            Err(e) => {
                absent.push(format!("getprop: {e}"));
                return properties;
            }
        }
    }
    properties
}

fn soc_attributes(absent: &mut Vec<String>) -> BTreeMap<String, String> {
    let mut attributes = BTreeMap::new();
    for name in SOC_ATTRIBUTES {
        let path = format!("/sys/devices/soc0/{name}");
        match std::fs::read_to_string(&path) {
            Ok(value) => {
                attributes.insert(name.to_string(), value.trim().to_string());
            }
            Err(e) => absent.push(format!("{path}: {e}")),
        }
    }
    attributes
}
