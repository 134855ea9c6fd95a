//! An EP plugin that ONNX Runtime itself refuses: the plugin library registered, but ORT's sanity
//! check of the EP it creates failed — the plugin was built against another ONNX Runtime EP ABI
//! (onnxruntime-qnn 2.3.0 on ORT 1.28+: `OrtEp has invalid ort_version_supported=0 (expected at
//! least 22)`). The EP's backend was never reached, so this is neither "the backend did not
//! start" nor a verdict on the model: the runtime pairs the plugin with the wrong ORT core.

use npugate_host::runtime::catalog;
use npugate_host::runtime::RuntimeManifest;

/// Phrases of ORT's own refusal of a plugin EP (`ep_plugin_provider_interfaces.cc`).
const REFUSAL_MARKERS: &[&str] = &["SanityCheckOrtEp", "ort_version_supported"];

/// When `error` (a session error) is ORT refusing `runtime`'s EP plugin, one sentence naming the
/// runtime's ORT, the plugin, ORT's words and the fix (the catalog's runtime that pairs the same
/// plugin with an ORT core it loads into, when there is one).
pub fn refusal(error: &str, runtime: &RuntimeManifest) -> Option<String> {
    if !REFUSAL_MARKERS.iter().any(|marker| error.contains(marker)) {
        return None;
    }
    let words = match error.split_once("SanityCheckOrtEp ") {
        Some((_, after)) => after,
        None => error.rsplit(" : ").next().unwrap_or(error),
    };
    let words = words.trim().trim_end_matches('.');
    let plugin = runtime.ep.as_ref().and_then(|ep| ep.library.clone()).unwrap_or_else(|| "its EP plugin".into());
    Some(format!(
        "ONNX Runtime {} refused the EP plugin {plugin} of runtime {} ({words}): the plugin was built for another ONNX Runtime \
         EP ABI, nothing reached its backend; {}",
        runtime.ort_version,
        runtime.name,
        fix(runtime)
    ))
}

/// The runtime of the catalog with the same plugin wheel for the same target and another ORT core.
fn fix(runtime: &RuntimeManifest) -> String {
    let plugin_wheels: Vec<&str> = runtime
        .sources
        .iter()
        .filter(|s| s.starts_with("pypi:") && !s.starts_with("pypi:onnxruntime=="))
        .map(String::as_str)
        .collect();
    let paired = catalog::catalog().ok().and_then(|catalog| {
        catalog.runtime.into_iter().find(|entry| {
            entry.name != runtime.name
                && entry.target == runtime.target
                && entry.wheel.iter().any(|pin| {
                    plugin_wheels
                        .iter()
                        .any(|source| source.starts_with(&format!("pypi:{}=={} ", pin.package, pin.version)))
                })
        })
    });
    match paired {
        Some(entry) => format!(
            "use runtime {} (npugate runtime fetch {}): {}",
            entry.name,
            entry.name,
            entry.ort_pairing.unwrap_or_default()
        ),
        None => "pair the plugin with an ONNX Runtime core it loads into (npugate runtime list)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use npugate_host::runtime::EpLibrary;

    /// The session error of onnxruntime-qnn 2.3.0's plugin on ORT 1.31.1 (Windows x64, under wine),
    /// as the harness recorded it in result.json (`session_error`), 2026-11.
    const REFUSED: &str = "cannot create a session for model Z:\\root\\.cache\\npugate\\models\\smallcnn_qdq.onnx: \
        N:\\_work\\1\\s\\onnxruntime\\core\\session\\plugin_ep\\ep_plugin_provider_interfaces.cc:71 \
        onnxruntime::PluginExecutionProviderFactory::CreateProvider Error creating execution provider: [ONNXRuntimeError] : 1 : \
        FAIL : ep_plugin_provider_interfaces.cc:84 onnxruntime::SanityCheckOrtEp OrtEp has invalid ort_version_supported=0 (expected at least 22).";

    fn runtime() -> RuntimeManifest {
        let mut runtime = RuntimeManifest::for_tests(std::path::Path::new("/nowhere"));
        runtime.name = "qnn-2.3.0-ort-1.31.1-windows-x86_64".into();
        runtime.target = crate::targets::wine::TRIPLE.into();
        runtime.ep = Some(EpLibrary {
            name: "QNNExecutionProvider".into(),
            attach: "plugin".into(),
            library: Some("onnxruntime_providers_qnn.dll".into()),
        });
        runtime.sources = vec![
            "pypi:onnxruntime==1.31.1 (onnxruntime-1.31.1-cp311-cp311-win_amd64.whl)".into(),
            "pypi:onnxruntime-qnn==2.3.0 (onnxruntime_qnn-2.3.0-cp311-cp311-win_amd64.whl)".into(),
        ];
        runtime
    }

    #[test]
    fn an_abi_refusal_is_named_as_such_with_the_runtime_that_pairs_the_plugin() {
        let text = refusal(REFUSED, &runtime()).unwrap();
        assert!(text.starts_with("ONNX Runtime 1.31.1 refused the EP plugin onnxruntime_providers_qnn.dll of runtime qnn-2.3.0-ort-1.31.1-windows-x86_64"), "{text}");
        assert!(text.contains("(OrtEp has invalid ort_version_supported=0 (expected at least 22))"), "{text}");
        assert!(text.contains("use runtime qnn-2.3.0-ort-1.27.0-windows-x86_64"), "{text}");
        assert!(!text.contains("did not start"), "{text}");
        assert_eq!(refusal("Failed to finalize QNN graph. Code: 1002", &runtime()), None);
    }
}
