//! Loading the ONNX Runtime library and creating the one environment, with every ORT log message
//! captured into a file (never the terminal).

use std::fs::File;
use std::io::{LineWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use ort::environment::Environment;
use ort::logging::LogLevel;

/// The oldest ONNX Runtime minor version the harness loads (ORT API level `api-24`).
pub const MIN_ORT_MINOR: u32 = ort::MINOR_VERSION;

/// Loads `ort_lib`, checks its version and creates the environment with a file logger at `level`
/// (the environment's level, which [`Environment::set_log_level`] changes later).
pub fn create_environment(ort_lib: &Path, log_file: &Path, level: LogLevel) -> Result<Environment> {
    if !ort_lib.exists() {
        bail!(
            "ONNX Runtime library {} does not exist; pass --ort-lib with the path of libonnxruntime.so \
             (fetch one with `npugate runtime fetch`)",
            ort_lib.display()
        );
    }
    let builder = ort::init_from(ort_lib).map_err(|e| load_error(ort_lib, e))?;
    let log = File::create(log_file).with_context(|| format!("cannot create log file {}", log_file.display()))?;
    let sink = Arc::new(Mutex::new(LineWriter::new(log)));
    let logger = Arc::new(move |level: LogLevel, category: &str, id: &str, location: &str, message: &str| {
        if let Ok(mut out) = sink.lock() {
            // A failed log write must never disturb the run; the log is evidence, not an interface.
            let _ = writeln!(out, "[{}:{category}:{id}, {location}] {message}", level_letter(level));
        }
    });
    let env = builder
        .with_name("npugate")
        .with_logger(logger)
        .build()
        .map_err(|e| anyhow::anyhow!("cannot create the ONNX Runtime environment: {e}"))?;
    env.set_log_level(level);
    Ok(env)
}

/// The version string of the ONNX Runtime library at `ort_lib` (`OrtGetApiBase()->GetVersionString()`).
pub fn ort_version(ort_lib: &Path) -> Result<String> {
    // SAFETY: loading ONNX Runtime runs no user code beyond its initializers; `ort::init_from`
    // already loaded the same file, so this only bumps its reference count.
    let library =
        unsafe { libloading::Library::new(ort_lib) }.with_context(|| format!("cannot load {}", ort_lib.display()))?;
    // SAFETY: the symbol has this signature in every ONNX Runtime release; the returned pointers
    // are static strings owned by the library, which stays loaded for the process lifetime.
    unsafe {
        let get_base: libloading::Symbol<unsafe extern "C" fn() -> *const ort::sys::OrtApiBase> = library
            .get(b"OrtGetApiBase")
            .with_context(|| format!("{} does not export OrtGetApiBase", ort_lib.display()))?;
        let base = get_base();
        if base.is_null() {
            bail!("{} returned no OrtApiBase", ort_lib.display());
        }
        let version = ((*base).GetVersionString)();
        Ok(std::ffi::CStr::from_ptr(version).to_string_lossy().into_owned())
    }
}

fn level_letter(level: LogLevel) -> char {
    match level {
        LogLevel::Verbose => 'V',
        LogLevel::Info => 'I',
        LogLevel::Warning => 'W',
        LogLevel::Error => 'E',
        LogLevel::Fatal => 'F',
    }
}

fn load_error(path: &Path, error: ort::LoadDynamicError) -> anyhow::Error {
    use ort::LoadDynamicError as E;
    match error {
        E::Dlopen { error, .. } => anyhow::anyhow!(
            "cannot load ONNX Runtime library {}: {error}; pass --ort-lib with a libonnxruntime.so built for {} \
             (a missing file, a file of another CPU architecture or a missing dependency all end here)",
            path.display(),
            std::env::consts::ARCH
        ),
        E::MissingApi { .. } => anyhow::anyhow!(
            "{} is not an ONNX Runtime library (it does not export OrtGetApiBase); pass --ort-lib with libonnxruntime.so",
            path.display()
        ),
        E::BadVersion { version_str, .. } => anyhow::anyhow!(
            "{} is ONNX Runtime {version_str}, too old: npugate-harness needs ONNX Runtime 1.{MIN_ORT_MINOR} or newer \
             (for Session_GetEpGraphAssignmentInfo); use a newer runtime",
            path.display()
        ),
        other => anyhow::anyhow!("cannot load ONNX Runtime library {}: {other}", path.display()),
    }
}
