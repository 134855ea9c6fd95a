//! What makes two runs comparable: device, SoC, architecture, runtime library hashes, model digest and
//! the preferred EP. A baseline comparison across different fingerprints is refused unless forced.

use std::collections::BTreeMap;

use npugate_result::RunResult;
use serde::{Deserialize, Serialize};

/// Android properties naming the device, in order of preference.
const DEVICE_PROPERTIES: [&str; 2] = ["ro.product.manufacturer", "ro.product.model"];
/// Android properties naming the SoC, in order of preference.
const SOC_PROPERTIES: [&str; 2] = ["ro.soc.model", "ro.board.platform"];
/// `/sys/devices/soc0` keys naming the SoC on Linux boards, in order of preference.
const SOC_SYSFS_KEYS: [&str; 3] = ["machine", "soc_id", "family"];

/// The identity of the hardware and software a run measured.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Fingerprint {
    /// Device: Android manufacturer and model, else the CPU model (`unknown` when neither is known).
    pub device: String,
    /// SoC: `ro.soc.model` / board platform, else `/sys/devices/soc0`, else `unknown`.
    pub soc: String,
    /// CPU architecture.
    pub arch: String,
    /// ONNX Runtime version string.
    pub ort_version: String,
    /// sha256 of every deliberately loaded library, keyed `<role>:<file name>`.
    pub runtime_libraries: BTreeMap<String, String>,
    /// The model's digest: over the `.onnx` and every file it refers to, the `.onnx`'s sha256 for
    /// a one-file model (so baselines saved before digests existed still compare).
    #[serde(alias = "model_sha256")]
    pub model_digest: String,
    /// The EP the model was meant to run on.
    pub preferred_ep: String,
}

impl Fingerprint {
    /// The fingerprint of a run.
    pub fn of(run: &RunResult) -> Fingerprint {
        let fp = &run.fingerprint;
        let props: Vec<&str> =
            DEVICE_PROPERTIES.iter().filter_map(|k| fp.android_properties.get(*k).map(String::as_str)).collect();
        let device = if props.is_empty() {
            fp.cpu_model.clone().unwrap_or_else(|| "unknown".to_string())
        } else {
            props.join(" ")
        };
        let soc = SOC_PROPERTIES
            .iter()
            .find_map(|k| fp.android_properties.get(*k))
            .or_else(|| SOC_SYSFS_KEYS.iter().find_map(|k| fp.soc.get(*k)))
            .cloned()
            .unwrap_or_else(|| "unknown".to_string());
        let runtime_libraries = run
            .runtime
            .libraries
            .iter()
            .map(|lib| {
                let file = lib.path.rsplit(['/', '\\']).next().unwrap_or(&lib.path);
                (format!("{}:{file}", lib.role), lib.sha256.clone())
            })
            .collect();
        Fingerprint {
            device,
            soc,
            arch: fp.arch.clone(),
            ort_version: run.runtime.ort_version.clone(),
            runtime_libraries,
            model_digest: run.model.digest.clone(),
            preferred_ep: run.execution.preferred_ep.clone(),
        }
    }

    /// Every difference from `other` (the baseline), one sentence each; empty when comparable.
    pub fn differences(&self, baseline: &Fingerprint) -> Vec<String> {
        let mut out = Vec::new();
        let mut field = |name: &str, now: &str, then: &str| {
            if now != then {
                out.push(format!("{name} is {now:?}, baseline has {then:?}"));
            }
        };
        field("device", &self.device, &baseline.device);
        field("SoC", &self.soc, &baseline.soc);
        field("arch", &self.arch, &baseline.arch);
        field("ONNX Runtime version", &self.ort_version, &baseline.ort_version);
        field("model digest", &self.model_digest, &baseline.model_digest);
        field("preferred EP", &self.preferred_ep, &baseline.preferred_ep);
        let keys: std::collections::BTreeSet<&String> =
            self.runtime_libraries.keys().chain(baseline.runtime_libraries.keys()).collect();
        for key in keys {
            let now = self.runtime_libraries.get(key).map_or("absent", String::as_str);
            let then = baseline.runtime_libraries.get(key).map_or("absent", String::as_str);
            field(&format!("library {key} sha256"), now, then);
        }
        out
    }
}
