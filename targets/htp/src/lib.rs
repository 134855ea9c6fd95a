//! The real Hexagon backend without a device: Qualcomm's x86_64 host build of the QNN HTP backend
//! (`QnnHtp.dll`, from the `onnxruntime-qnn` win_amd64 wheel) with the Windows x64 ONNX Runtime,
//! run under wine on this Linux machine ([`npugate_engine::targets::wine`]). For a chosen Snapdragon
//! (`soc_model`) it does what the device's backend would do before running: op validation and
//! graph finalize (compile), and it writes context binaries and executes graphs on its emulator.
//!
//! [`preflight`] judges a model per SoC and QNN version, [`choose`] picks one of a model's
//! variants per SoC (and writes the manifest an app loads), [`compile`] writes an EPContext model for
//! one SoC ([`compile_folder`]: an LLM folder into one weight-shared context), and [`compat`]
//! measures which QNN versions load which context binaries. What such a model was compiled for,
//! the measured rule and the emulator's runtime are the engine's ([`npugate_engine::compiled`],
//! [`npugate_engine::context_compat`], [`npugate_engine::host_htp`]), below this crate and the plan.

pub mod choose;
pub mod compat;
pub mod compile;
pub mod compile_folder;
pub mod compile_report;
pub mod folder_preflight;
pub mod preflight;
pub mod saver;

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use npugate_engine::host_htp::{check_runtime, HOST_HTP_RUNTIME};
use npugate_engine::model::{GivenModel, PreparedModel};
use npugate_engine::targets::wine::{self, SETUP_HINT};
use npugate_host::runtime::RuntimeManifest;
use npugate_settings::{InputFile, ShapeSpec};

/// The harness and runtime that run the host HTP.
#[derive(Debug, Clone)]
pub struct HostHtp {
    /// The Windows x64 harness (with the wine PRNG shim beside it).
    pub harness: PathBuf,
    /// The Windows x64 runtime with the QNN plugin and `QnnHtp.dll`.
    pub runtime: RuntimeManifest,
}

impl HostHtp {
    /// The runtime (default [`HOST_HTP_RUNTIME`]) and harness (default: the cargo layout's
    /// `x86_64-pc-windows-gnu/release` build), checked; every missing piece is one line naming the
    /// command that provides it.
    pub fn locate(runtime: Option<&str>, harness: Option<&Path>) -> Result<HostHtp> {
        if !wine::installed() {
            bail!("wine is not installed; {SETUP_HINT}");
        }
        let name = runtime.unwrap_or(HOST_HTP_RUNTIME);
        let runtime = RuntimeManifest::load(name)?;
        check_runtime(&runtime)?;
        let harness = match harness {
            Some(path) => path.to_path_buf(),
            None => npugate_engine::harnesses::for_target(wine::TRIPLE)
                .map_err(|_| anyhow::anyhow!("no Windows harness is built; {SETUP_HINT}"))?,
        };
        if !harness.is_file() {
            bail!("harness {} does not exist; {SETUP_HINT}", harness.display());
        }
        Ok(HostHtp { harness, runtime })
    }

    /// The QNN SDK version of its backend (`2.49.40`), `?` when the library names none.
    pub fn qnn_sdk(&self) -> String {
        self.runtime
            .qnn_build()
            .map_or_else(|| "?".into(), |build| npugate_host::runtime::manifest::qnn_sdk_version(&build).to_string())
    }
}

/// `model` (as its command looked at it) ready for a job on this machine (under wine or qemu): its
/// `--shape`s fixed into a copy where they change it, its tensors' sizes checked against this
/// machine's memory.
pub(crate) fn prepare_here(model: &GivenModel, shapes: &[ShapeSpec], inputs: &[InputFile]) -> Result<PreparedModel> {
    let cache = npugate_engine::model::default_cache();
    npugate_engine::model::prepare(model, shapes, inputs, &cache, npugate_engine::model::Memory::Here)
}
