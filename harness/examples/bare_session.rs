//! The floor of a host-HTP preflight, for `scripts/bench-preflight`: a bare ONNX Runtime session
//! on the QNN HTP backend configured as one SoC — load ORT, register the QNN plugin, create the
//! session (op validation and graph finalize), nothing else (no log, no fingerprint, no result).
//! Prints the seconds the whole process took up to the session, and exits 0 when the session was
//! created.
//!
//! `bare_session ORT_LIB QNN_PLUGIN MODEL SOC_MODEL`

use std::time::Instant;

use ort::session::Session;

fn main() -> Result<(), String> {
    let started = Instant::now();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [ort_lib, plugin, model, soc_model] = args.as_slice() else {
        return Err("usage: bare_session ORT_LIB QNN_PLUGIN MODEL SOC_MODEL".into());
    };
    let env =
        ort::init_from(ort_lib).map_err(|e| e.to_string())?.with_name("bare").build().map_err(|e| e.to_string())?;
    env.register_ep_library("QNNExecutionProvider", plugin).map_err(|e| e.to_string())?;
    let device = env.devices().find(|d| d.ep().is_ok_and(|ep| ep == "QNNExecutionProvider")).ok_or("no QNN device")?;
    let options = [("backend_type", "htp"), ("soc_model", soc_model.as_str()), ("enable_htp_fp16_precision", "1")]
        .map(|(k, v)| (format!("QNNExecutionProvider.{k}"), v.to_string()));
    let session = Session::builder(&env)
        .map_err(|e| e.to_string())?
        .with_devices([device], Some(&options))
        .map_err(|e| e.to_string())?
        .commit_from_file(model)
        .map_err(|e| e.to_string())?;
    drop(session);
    println!("{:.3}", started.elapsed().as_secs_f64());
    Ok(())
}
