//! Every execution provider ONNX Runtime builds in (or ships beside itself), attached the way ORT
//! expects: by name through `ort`'s own builder, with `error_on_failure` so a failed registration
//! is an error, never a silent CPU run. EP options (`--ep-option`) pass through unchanged; the two
//! EPs whose C API takes typed arguments instead of key/value pairs (NNAPI flags, DirectML device
//! selection) map a few documented keys and refuse any other.

use std::ffi::{c_char, CStr};
use std::ptr;

use anyhow::{anyhow, bail, Result};
use npugate_settings::EpKind;
use ort::ep::{self, ArbitrarilyConfigurableExecutionProvider, ExecutionProviderDispatch};

/// The EP options NNAPI takes (each `0` or `1`), as flags of `OrtSessionOptionsAppendExecutionProvider_Nnapi`.
const NNAPI_KEYS: &[&str] = &["use_fp16", "use_nchw", "disable_cpu", "cpu_only"];
/// The EP options DirectML takes.
const DML_KEYS: &[&str] = &["device_id", "performance_preference", "device_filter"];

/// The `ort` builder of a built-in EP, configured with `options`, failing loudly on registration.
pub fn builtin(kind: EpKind, options: &[(String, String)]) -> Result<ExecutionProviderDispatch> {
    fn configured<E: ArbitrarilyConfigurableExecutionProvider>(mut ep: E, options: &[(String, String)]) -> E {
        for (key, value) in options {
            ep = ep.with_arbitrary_config(key, value);
        }
        ep
    }
    let dispatch = match kind {
        EpKind::Qnn => configured(ep::QNN::default(), options).build(),
        EpKind::OpenVino => configured(ep::OpenVINO::default(), options).build(),
        EpKind::Xnnpack => configured(ep::XNNPACK::default(), options).build(),
        EpKind::CoreMl => configured(ep::CoreML::default(), options).build(),
        EpKind::Cuda => configured(ep::CUDA::default(), options).build(),
        EpKind::TensorRt => configured(ep::TensorRT::default(), options).build(),
        EpKind::WebGpu => configured(ep::WebGPU::default(), options).build(),
        EpKind::VitisAi => configured(ep::Vitis::default(), options).build(),
        EpKind::Nnapi => nnapi(options)?.build(),
        EpKind::Dml => directml(options)?.build(),
        EpKind::Cpu | EpKind::Plugin => bail!("--ep {} is not a built-in accelerator EP", kind.cli_name()),
    };
    Ok(dispatch.error_on_failure())
}

/// NNAPI from `use_fp16`, `use_nchw`, `disable_cpu`, `cpu_only` (`0`/`1`).
fn nnapi(options: &[(String, String)]) -> Result<ep::NNAPI> {
    let mut nnapi = ep::NNAPI::default();
    for (key, value) in options {
        let on = flag(key, value)?;
        nnapi = match key.as_str() {
            "use_fp16" => nnapi.with_fp16(on),
            "use_nchw" => nnapi.with_nchw(on),
            "disable_cpu" => nnapi.with_disable_cpu(on),
            "cpu_only" => nnapi.with_cpu_only(on),
            _ => bail!("--ep-option {key}: NNAPI takes {} (0 or 1)", NNAPI_KEYS.join(", ")),
        };
    }
    Ok(nnapi)
}

/// DirectML from `device_id` (an adapter index), `performance_preference`
/// (`default`|`high_performance`|`minimum_power`) and `device_filter` (`gpu`|`npu`|`any`).
fn directml(options: &[(String, String)]) -> Result<ep::DirectML> {
    use ep::directml::{DeviceFilter, PerformancePreference};
    let mut dml = ep::DirectML::default();
    for (key, value) in options {
        let bad = || anyhow!("--ep-option {key}={value}: not a value DirectML takes");
        dml = match key.as_str() {
            "device_id" => dml.with_device_id(value.parse().map_err(|_| bad())?),
            "performance_preference" => dml.with_performance_preference(match value.as_str() {
                "default" => PerformancePreference::Default,
                "high_performance" => PerformancePreference::HighPerformance,
                "minimum_power" => PerformancePreference::MinimumPower,
                _ => return Err(bad()),
            }),
            "device_filter" => dml.with_device_filter(match value.as_str() {
                "gpu" => DeviceFilter::Gpu,
                "npu" => DeviceFilter::Npu,
                "any" => DeviceFilter::Any,
                _ => return Err(bad()),
            }),
            _ => bail!("--ep-option {key}: DirectML takes {}", DML_KEYS.join(", ")),
        };
    }
    Ok(dml)
}

fn flag(key: &str, value: &str) -> Result<bool> {
    match value {
        "1" | "true" => Ok(true),
        "0" | "false" => Ok(false),
        _ => bail!("--ep-option {key}={value}: expected 0 or 1"),
    }
}

/// The EPs the loaded ONNX Runtime contains (`GetAvailableProviders`), in its order.
pub fn available() -> Result<Vec<String>> {
    let api = ort::api();
    let mut names: *mut *mut c_char = ptr::null_mut();
    let mut count: i32 = 0;
    // SAFETY: ORT fills `names` with `count` NUL-terminated strings, released below with the same count.
    unsafe {
        ort::Error::result_from_status((api.GetAvailableProviders)(&mut names, &mut count))
            .map_err(|e| anyhow!("GetAvailableProviders: {e}"))?;
        if names.is_null() {
            return Ok(Vec::new());
        }
        let list = (0..usize::try_from(count).unwrap_or(0))
            .map(|i| CStr::from_ptr(*names.add(i)).to_string_lossy().into_owned())
            .collect();
        // Releasing a list ORT just returned cannot fail in a way that changes the answer.
        let _ = ort::Error::result_from_status((api.ReleaseAvailableProviders)(names, count));
        Ok(list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn typed_eps_map_their_documented_keys_and_refuse_others() {
        assert!(nnapi(&options(&[("use_fp16", "1"), ("cpu_only", "0")])).is_ok());
        let error = nnapi(&options(&[("fp16", "1")])).unwrap_err().to_string();
        assert!(error.contains("use_fp16, use_nchw, disable_cpu, cpu_only"), "{error}");
        assert!(nnapi(&options(&[("use_fp16", "yes")])).unwrap_err().to_string().contains("expected 0 or 1"));
        assert!(directml(&options(&[("device_id", "1"), ("device_filter", "npu")])).is_ok());
        assert!(directml(&options(&[("device_filter", "tpu")])).unwrap_err().to_string().contains("device_filter=tpu"));
        assert!(builtin(EpKind::Cpu, &[]).is_err());
    }

    #[test]
    fn every_accelerator_but_plugin_has_a_builtin_builder() {
        for kind in <EpKind as clap::ValueEnum>::value_variants() {
            let built = builtin(*kind, &[]);
            assert_eq!(built.is_ok(), !matches!(kind, EpKind::Cpu | EpKind::Plugin), "{kind:?}");
            if let Ok(dispatch) = built {
                assert_eq!(Some(dispatch.name()), kind.ort_name(), "{kind:?}");
            }
        }
    }
}
