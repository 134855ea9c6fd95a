//! Runtimes from an Android AAR (`onnxruntime-android-qnn`): the arm64 libraries under
//! `jni/arm64-v8a/`. Qualcomm's AAR carries the QNN plugin EP (`libonnxruntime_providers_qnn.so`)
//! and the QNN libraries; Microsoft's has the QNN EP built into `libonnxruntime.so` (QNN libraries
//! come from the `qnn-runtime` AAR or a QAIRT SDK, see [`super::qairt`]).

use std::path::Path;

use anyhow::{bail, Result};

use npugate_host::runtime::{install, pypi, EpLibrary, RuntimeManifest, Staged};

/// Target triple of `jni/arm64-v8a`.
pub const ANDROID_TARGET: &str = "aarch64-linux-android";
/// The arm64 native libraries inside an AAR.
const ARM64_LIBRARIES: &str = "jni/arm64-v8a/*.so";
/// The Java binding's JNI library: not needed by the harness, so not pushed.
const JNI_BINDING: &str = "libonnxruntime4j_jni.so";
/// ONNX Runtime's library name on Android.
const ORT_LIBRARY: &str = "libonnxruntime.so";
/// The QNN plugin EP library.
const QNN_PLUGIN: &str = "libonnxruntime_providers_qnn.so";

/// Imports the AAR at `aar` as runtime `name` (`ort_version` as the user states it: an AAR's file
/// name carries its own package version, which for Qualcomm's plugin AAR is not ORT's).
pub fn import(aar: &Path, name: &str, ort_version: &str) -> Result<RuntimeManifest> {
    if !aar.is_file() {
        bail!("AAR {} does not exist; pass the path of an onnxruntime-android-qnn .aar", aar.display());
    }
    install(name, |staging| {
        let files = pypi::extract(aar, &[ARM64_LIBRARIES.to_string()], staging)?;
        if files.iter().any(|f| f == JNI_BINDING) {
            std::fs::remove_file(staging.join(JNI_BINDING))?;
        }
        if !files.iter().any(|f| f == ORT_LIBRARY) {
            bail!("{} has no jni/arm64-v8a/{ORT_LIBRARY}; is it an onnxruntime-android AAR?", aar.display());
        }
        let ep = if files.iter().any(|f| f == QNN_PLUGIN) {
            EpLibrary { name: "QNNExecutionProvider".into(), attach: "plugin".into(), library: Some(QNN_PLUGIN.into()) }
        } else {
            EpLibrary { name: "QNNExecutionProvider".into(), attach: "builtin".into(), library: None }
        };
        let file_name = aar.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        Ok(Staged {
            target: ANDROID_TARGET.into(),
            ort_version: ort_version.into(),
            ort_library: ORT_LIBRARY.into(),
            ep: Some(ep),
            sources: vec![format!("aar:{file_name}")],
        })
    })
}
