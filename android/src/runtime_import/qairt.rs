//! Runtimes from a QAIRT (QNN) SDK folder: a base runtime (ONNX Runtime + QNN EP, e.g. from an AAR)
//! plus the SDK's Android libraries from `lib/aarch64-android/` and, per device Hexagon
//! architecture, the DSP-side Skel from `lib/hexagon-vNN/unsigned/`. Stubs and Skels of other
//! architectures are left out so only what the devices load is pushed.

use std::path::Path;

use anyhow::{bail, Context, Result};

use npugate_host::runtime::{install, manifest::role_of, RuntimeManifest, Staged};

/// Android (bionic, arm64) host libraries inside a QAIRT SDK.
const ANDROID_LIBS: &str = "lib/aarch64-android";

/// Imports the SDK at `sdk` on top of runtime `base` as runtime `name`, for the Hexagon
/// architectures `arches` (`v75`, `v79`…). SDK files replace same-named base files.
pub fn import(sdk: &Path, name: &str, base: &str, arches: &[String]) -> Result<RuntimeManifest> {
    let base = RuntimeManifest::load(base)?;
    if base.ep.is_none() {
        bail!("base runtime {} has no QNN EP; pass --base with an onnxruntime-android-qnn runtime (npugate runtime import-aar)", base.name);
    }
    let libs = sdk.join(ANDROID_LIBS);
    if !libs.is_dir() {
        bail!(
            "{} is not a QAIRT SDK folder ({} is missing); pass the SDK root (the folder with lib/ and include/)",
            sdk.display(),
            libs.display()
        );
    }
    let arches: Vec<String> = arches.iter().map(|a| normalize_arch(a)).collect::<Result<_>>()?;
    install(name, |staging| {
        for file in &base.files {
            std::fs::copy(base.dir.join(&file.name), staging.join(&file.name))
                .with_context(|| format!("cannot copy {} from runtime {}", file.name, base.name))?;
        }
        for library in shared_objects(&libs)? {
            let file = library.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let (role, arch) = role_of(&file);
            let wanted = role != "qnn_skel" && arch.as_ref().is_none_or(|a| arches.contains(a));
            if wanted {
                std::fs::copy(&library, staging.join(&file))
                    .with_context(|| format!("cannot copy {}", library.display()))?;
            }
        }
        for arch in &arches {
            let skels = sdk.join("lib").join(format!("hexagon-{arch}")).join("unsigned");
            let found = shared_objects(&skels)
                .with_context(|| format!("the SDK has no Skel for {arch} ({} is missing)", skels.display()))?;
            if found.is_empty() {
                bail!("{} holds no .so: the SDK has no Skel for {arch}", skels.display());
            }
            for skel in found {
                let file = skel.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                std::fs::copy(&skel, staging.join(&file)).with_context(|| format!("cannot copy {}", skel.display()))?;
            }
        }
        let mut sources = base.sources.clone();
        sources.push(format!("qairt:{} ({})", sdk.display(), arches.join(",")));
        Ok(Staged {
            target: base.target.clone(),
            ort_version: base.ort_version.clone(),
            ort_library: base.ort_library.clone(),
            ep: base.ep.clone(),
            sources,
        })
    })
}

/// `75`, `V75`, `v75` → `v75`; anything else is refused.
fn normalize_arch(arch: &str) -> Result<String> {
    let digits = arch.trim_start_matches(['v', 'V']);
    if digits.len() != 2 || !digits.chars().all(|c| c.is_ascii_digit()) {
        bail!("--arch {arch:?} is not a Hexagon architecture; pass e.g. --arch v75 (8 Gen 3) or --arch v79 (8 Elite)");
    }
    Ok(format!("v{digits}"))
}

/// The `.so` files directly in `dir`, sorted.
fn shared_objects(dir: &Path) -> Result<Vec<std::path::PathBuf>> {
    let mut found: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "so"))
        .collect();
    found.sort();
    Ok(found)
}
