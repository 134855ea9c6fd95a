//! The sweep plan (`sweep.toml`): devices (serials or SoC classes), runtimes, models with their
//! gate rules, and the harness settings of every cell. Loading resolves paths against the plan's
//! folder and checks everything that needs no device; each error is one line naming the plan file
//! and the field.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use npugate_gate::Rules;
use serde::{Deserialize, Serialize};

use npugate_host::hexagon::Soc;
use npugate_host::runtime::RuntimeManifest;
use npugate_htp::compiled::ReferenceChoice;
use npugate_settings::{EpKind, HarnessSettings, InputFile, KeyValue, SessionSettings, ShapeSpec};

/// `sweep.toml` as written (before paths are resolved and runtimes loaded).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanFile {
    /// Sweep name (default: the plan file's stem); history keys sweeps by name and night.
    name: Option<String>,
    /// Harness settings of every cell (`runs`, `warmup`, `profile_runs`, `ep`, …).
    #[serde(default)]
    settings: HarnessSettings,
    /// Devices; empty means `--device` on the command line chooses.
    #[serde(default)]
    device: Vec<DeviceSpec>,
    /// Runtime names (or runtime directories): the firmware/SDK axis.
    #[serde(default)]
    runtimes: Vec<String>,
    /// The EP a runtime's cells run on, by runtime (as listed in `runtimes`), instead of the
    /// settings' `ep`: OpenVINO and CPU runtimes as two columns of one matrix.
    #[serde(default)]
    runtime_ep: BTreeMap<String, RuntimeEp>,
    /// Snapdragons for host-HTP cells: the model on Qualcomm's HTP emulator configured as each SoC
    /// (placement and outputs; speed is not judged).
    #[serde(default)]
    socs: Vec<String>,
    /// The runtime of the host-HTP cells (default: the pinned Windows x64 QNN runtime).
    htp_runtime: Option<String>,
    /// QNN versions of the host-HTP cells (`"2.49.40"`, `"2.51"`, `"all"`): one runtime column
    /// per version, instead of `htp_runtime`.
    #[serde(default)]
    qnn: Vec<String>,
    /// Models with their rules.
    model: Vec<ModelEntry>,
}

/// `[runtime_ep."<runtime>"]`: the EP (and its options) of one runtime's cells.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeEp {
    /// The EP, as `--ep` spells it.
    pub ep: EpKind,
    /// Its options (`--ep-option`), replacing the settings' `ep_options`.
    #[serde(default)]
    pub ep_options: Vec<KeyValue>,
}

/// One `[[device]]`: a serial, or a class of devices by SoC.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpec {
    /// An adb serial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// Every connected device whose SoC (as `npugate devices` reports it) matches, e.g. `SM8650`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soc: Option<String>,
}

/// One `[[model]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelEntry {
    /// Name in the layout and reports (default: the file stem).
    name: Option<String>,
    /// The ONNX file, relative to the plan.
    path: PathBuf,
    /// A gate.toml for this model, relative to the plan.
    gate: Option<PathBuf>,
    /// Inline gate rules (the keys of gate.toml).
    rules: Option<Rules>,
    /// `--shape` values for this model's dynamic inputs.
    #[serde(default)]
    shapes: Vec<String>,
    /// `--input name=file.npy` values for this model, files relative to the plan.
    #[serde(default)]
    inputs: Vec<String>,
    /// A compiled model's source model, relative to the plan (`--reference-model`; default: the
    /// source recorded by npugate compile when it is at hand and unchanged).
    reference_model: Option<PathBuf>,
}

/// A loaded, checked plan.
#[derive(Debug)]
pub struct SweepPlan {
    /// The plan file.
    pub file: PathBuf,
    /// Sweep name.
    pub name: String,
    /// Device selectors in plan order (empty: the command line's `--device`).
    pub devices: Vec<DeviceSpec>,
    /// Runtimes in plan order.
    pub runtimes: Vec<RuntimeManifest>,
    /// The EP of a runtime's cells, by runtime name, where it is not the settings' `ep`.
    pub runtime_eps: BTreeMap<String, RuntimeEp>,
    /// SoCs of the host-HTP cells, in plan order.
    pub socs: Vec<Soc>,
    /// The runtimes of the host-HTP cells, one per QNN version (loaded when `socs` is not empty).
    pub htp_runtimes: Vec<RuntimeManifest>,
    /// Models in plan order.
    pub models: Vec<PlannedModel>,
}

/// A model of the plan with everything its cells need.
#[derive(Debug)]
pub struct PlannedModel {
    /// Name (unique within the plan, safe as a directory name).
    pub name: String,
    /// The ONNX file, or the LLM folder (or its `genai_config.json`).
    pub path: PathBuf,
    /// Gate rules (defaults, then the model's gate file or inline rules).
    pub rules: Rules,
    /// Harness settings: the plan's, plus this model's shapes and inputs (a compiled model's
    /// recorded source shapes when it gives none).
    pub settings: HarnessSettings,
    /// The model whose CPU run is its reference: a compiled model's source, as `npugate run` finds it.
    pub reference: ReferenceChoice,
}

impl SweepPlan {
    /// Reads and checks the plan.
    pub fn load(file: &Path) -> Result<SweepPlan> {
        let shown = file.display();
        let text = std::fs::read_to_string(file).with_context(|| format!("cannot read sweep plan {shown}"))?;
        let raw: PlanFile = toml::from_str(&text).map_err(|e| anyhow::anyhow!("{shown}{}", toml_error(&text, &e)))?;
        let base = file.parent().unwrap_or(Path::new("."));
        let field_error = |field: String, message: String| anyhow::anyhow!("{shown}: {field}: {message}");

        if raw.settings.runs == 0 {
            return Err(field_error("settings.runs".into(), "must be at least 1".into()));
        }
        let settings = raw.settings.with_input_paths(|input| base.join(&input.path));
        for (index, spec) in raw.device.iter().enumerate() {
            if spec.serial.is_some() == spec.soc.is_some() {
                return Err(field_error(
                    format!("device[{index}]"),
                    "give exactly one of serial = \"…\" or soc = \"…\"".into(),
                ));
            }
        }
        if raw.runtimes.is_empty() && raw.socs.is_empty() {
            return Err(field_error("runtimes".into(), "list at least one runtime, e.g. [\"ort-1.31.1-linux-x86_64\"] (or socs = [\"SM8650\"] for host-HTP cells)".into()));
        }
        let mut socs: Vec<Soc> = Vec::new();
        for (index, name) in raw.socs.iter().enumerate() {
            let soc = npugate_host::hexagon::find(name).map_err(|e| field_error(format!("socs[{index}]"), e))?;
            if socs.contains(&soc) {
                return Err(field_error(format!("socs[{index}]"), format!("SoC {} is listed twice", soc.model)));
            }
            socs.push(soc);
        }
        let mut runtimes: Vec<RuntimeManifest> = Vec::new();
        for (index, name) in raw.runtimes.iter().enumerate() {
            let manifest =
                RuntimeManifest::load(name).map_err(|e| field_error(format!("runtimes[{index}]"), format!("{e:#}")))?;
            if runtimes.iter().any(|r| r.name == manifest.name) {
                return Err(field_error(
                    format!("runtimes[{index}]"),
                    format!("runtime {} is listed twice", manifest.name),
                ));
            }
            runtimes.push(manifest);
        }
        let mut runtime_eps = BTreeMap::new();
        for (listed, ep) in raw.runtime_ep {
            let field = format!("runtime_ep.{listed:?}");
            let Some(index) = raw.runtimes.iter().position(|r| *r == listed) else {
                return Err(field_error(field, format!("{listed:?} is not in runtimes = {:?}", raw.runtimes)));
            };
            runtime_eps.insert(runtimes[index].name.clone(), ep);
        }
        if raw.model.is_empty() {
            return Err(field_error("model".into(), "add at least one [[model]] with path = \"….onnx\"".into()));
        }
        let mut models = Vec::new();
        let mut names = BTreeSet::new();
        for (index, entry) in raw.model.into_iter().enumerate() {
            let field = |key: &str| format!("model[{index}].{key}");
            let path = base.join(&entry.path);
            // A model is an .onnx file, or an LLM folder (its genai_config.json, or the folder).
            let llm_folder = npugate_onnx::genai::config_path(&path)
                .filter(|config| config.is_file())
                .and_then(|config| config.parent().map(Path::to_path_buf));
            if !path.is_file() && llm_folder.is_none() {
                return Err(field_error(
                    field("path"),
                    format!(
                        "model {} not found; give an .onnx file or an LLM folder holding genai_config.json",
                        path.display()
                    ),
                ));
            }
            let name = match entry.name {
                Some(name) => name,
                None => llm_folder
                    .as_deref()
                    .unwrap_or(&path)
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            };
            npugate_host::paths::check_plain_name(&name, "the model name")
                .map_err(|e| field_error(field("name"), e.to_string()))?;
            if !names.insert(name.clone()) {
                return Err(field_error(
                    field("name"),
                    format!("two models are named {name:?}; give one another name = \"…\""),
                ));
            }
            let rules = match (entry.gate, entry.rules) {
                (Some(_), Some(_)) => {
                    return Err(field_error(
                        field("gate"),
                        "give either gate = \"gate.toml\" or rules = { … }, not both".into(),
                    ))
                }
                (Some(gate), None) => {
                    Rules::load(Some(&base.join(gate)), &[]).map_err(|e| field_error(field("gate"), e.to_string()))?
                }
                (None, Some(rules)) => rules,
                (None, None) => Rules::default(),
            };
            let mut model_settings = settings.clone();
            for (at, text) in entry.shapes.iter().enumerate() {
                let shape: ShapeSpec =
                    text.parse().map_err(|e: String| field_error(field(&format!("shapes[{at}]")), e))?;
                model_settings.shapes.push(shape);
            }
            for (at, text) in entry.inputs.iter().enumerate() {
                let mut input: InputFile =
                    text.parse().map_err(|e: String| field_error(field(&format!("inputs[{at}]")), e))?;
                input.path = base.join(&input.path);
                model_settings.inputs.push(input);
            }
            for (at, input) in model_settings.inputs.iter().enumerate() {
                if !input.path.is_file() {
                    return Err(field_error(
                        field(&format!("inputs[{at}]")),
                        format!("input file {} not found", input.path.display()),
                    ));
                }
            }
            npugate_engine::model::check_any(&path, &model_settings)
                .map_err(|e| field_error(field("shapes"), format!("{e:#}")))?;
            let reference_model = entry.reference_model.map(|given| base.join(given));
            if let Some(given) = reference_model.as_ref().filter(|given| !given.is_file()) {
                return Err(field_error(field("reference_model"), format!("model file {} not found", given.display())));
            }
            let reference = ReferenceChoice::resolve(
                &path,
                reference_model.as_deref(),
                "set reference_model = \"<its source .onnx>\" in its [[model]]",
            )
            .map_err(|e| field_error(field("path"), format!("{e:#}")))?;
            let model_settings = reference.settings_for(&model_settings);
            models.push(PlannedModel { name, path, rules, settings: model_settings, reference });
        }
        let qnn = npugate_plan::QnnChoice::from_flags(&raw.qnn);
        let htp_runtimes = match (socs.is_empty(), &raw.htp_runtime, &qnn) {
            (true, Some(_), _) => {
                return Err(field_error(
                    "htp_runtime".into(),
                    "applies to host-HTP cells only; add socs = [\"SM8650\"] or drop it".into(),
                ))
            }
            (true, None, npugate_plan::QnnChoice::Any) => Vec::new(),
            (true, None, _) => {
                return Err(field_error(
                    "qnn".into(),
                    "applies to host-HTP cells only; add socs = [\"SM8650\"] or drop it".into(),
                ))
            }
            (false, name, _) => {
                // The host-HTP cells resolve like `npugate run --local --ep qnn --soc … --qnn …` of
                // each model (a compiled model is checked against every SoC and QNN version).
                let field = if raw.qnn.is_empty() { "socs" } else { "qnn" };
                let mut runtimes: Vec<RuntimeManifest> = Vec::new();
                for model in &models {
                    let request = npugate_plan::Request {
                        command: npugate_plan::Command::Run,
                        model: &model.path,
                        place: npugate_plan::Place::Emulator,
                        ep: EpKind::Qnn,
                        runtime: name.as_deref(),
                        harness: None,
                        socs: socs.clone(),
                        qnn: qnn.clone(),
                        out: None,
                    };
                    let plan = npugate_plan::Plan::resolve(&request, &npugate_plan::Installed)
                        .map_err(|e| field_error(field.into(), format!("{e:#}")))?;
                    runtimes.clear();
                    for planned in plan.targets {
                        if !runtimes.iter().any(|r| r.dir == planned.runtime.dir) {
                            runtimes.push(planned.runtime);
                        }
                    }
                }
                runtimes
            }
        };
        let name = raw.name.unwrap_or_else(|| {
            file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "sweep".into())
        });
        npugate_host::paths::check_plain_name(&name, "the sweep name")
            .map_err(|e| field_error("name".into(), e.to_string()))?;
        Ok(SweepPlan {
            file: file.to_path_buf(),
            name,
            devices: raw.device,
            runtimes,
            runtime_eps,
            socs,
            htp_runtimes,
            models,
        })
    }

    /// The harness settings of `model`'s cell on `runtime`: the model's, with the runtime's EP.
    pub fn cell_settings(&self, model: &PlannedModel, runtime: &RuntimeManifest) -> HarnessSettings {
        match self.runtime_eps.get(&runtime.name) {
            Some(RuntimeEp { ep, ep_options }) => HarnessSettings {
                session: SessionSettings { ep: *ep, ep_options: ep_options.clone(), ..model.settings.session.clone() },
                ..model.settings.clone()
            },
            None => model.settings.clone(),
        }
    }

    /// Every runtime of the plan: the device runtimes, then the host-HTP runtimes.
    pub fn all_runtimes(&self) -> impl Iterator<Item = &RuntimeManifest> {
        self.runtimes.iter().chain(&self.htp_runtimes)
    }

    /// `plan-file: field: message` for errors found after loading (device selection).
    pub fn error(&self, field: &str, message: impl std::fmt::Display) -> anyhow::Error {
        anyhow::anyhow!("{}: {field}: {message}", self.file.display())
    }
}

/// ` line N: message` from a TOML error (one line; toml's own text carries a source excerpt).
fn toml_error(text: &str, error: &toml::de::Error) -> String {
    let line = error.span().map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
    let message = error.message().replace('\n', " ");
    match line {
        Some(line) => format!(" line {line}: {message}"),
        None => format!(": {message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use npugate_engine::model::testing::identity_model;

    fn plan_in(dir: &Path, text: &str) -> Result<SweepPlan> {
        let file = dir.join("sweep.toml");
        std::fs::write(&file, text).unwrap();
        SweepPlan::load(&file)
    }

    fn runtime_dir(dir: &Path) -> String {
        let runtime = dir.join("rt");
        std::fs::create_dir_all(&runtime).unwrap();
        std::fs::write(runtime.join("libonnxruntime.so"), "lib").unwrap();
        RuntimeManifest::write_for_dir(
            &runtime,
            "rt-test",
            "x86_64-unknown-linux-gnu",
            "1.31.1",
            "libonnxruntime.so",
            None,
            vec![],
        )
        .unwrap();
        runtime.display().to_string()
    }

    #[test]
    fn a_folder_without_genai_config_is_no_model() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = runtime_dir(dir.path());
        std::fs::create_dir_all(dir.path().join("empty")).unwrap();
        let error = format!(
            "{:#}",
            plan_in(dir.path(), &format!("runtimes = [{runtime:?}]\n[[model]]\npath = \"empty\"\n")).unwrap_err()
        );
        assert!(
            error.contains("model[0].path")
                && error.contains("an .onnx file or an LLM folder holding genai_config.json"),
            "{error}"
        );
    }

    #[test]
    fn a_plan_resolves_models_rules_and_settings() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = runtime_dir(dir.path());
        identity_model(&dir.path().join("a.onnx"), &[Some(1), Some(3)]);
        std::fs::write(dir.path().join("gate.toml"), "cv_pct = 3\n").unwrap();
        let plan = plan_in(
            dir.path(),
            &format!(
                "name = \"nightly\"\nruntimes = [{runtime:?}]\n[settings]\nruns = 20\nprofile_runs = 2\n\
                 [[device]]\nsoc = \"SM8650\"\n[[model]]\npath = \"a.onnx\"\ngate = \"gate.toml\"\n\
                 [[model]]\nname = \"a2\"\npath = \"a.onnx\"\nrules = {{ median_ms = 5 }}\nshapes = [\"x=1x3\"]\n"
            ),
        )
        .unwrap();
        assert_eq!(plan.name, "nightly");
        assert_eq!(plan.runtimes[0].name, "rt-test");
        assert_eq!((plan.models[0].name.as_str(), plan.models[0].rules.cv_pct), ("a", Some(3.0)));
        assert_eq!(plan.models[1].rules.median_ms, Some(5.0));
        assert_eq!(plan.models[1].rules.cv_pct, Some(8.0), "inline rules keep the defaults");
        assert_eq!((plan.models[1].settings.runs, plan.models[1].settings.warmup), (20, 3));
        assert_eq!(plan.models[1].settings.shapes, ["x=1x3".parse::<ShapeSpec>().unwrap()]);
        assert_eq!(plan.devices[0].soc.as_deref(), Some("SM8650"));
        assert_eq!(plan.cell_settings(&plan.models[1], &plan.runtimes[0]), plan.models[1].settings);
    }

    #[test]
    fn a_runtime_can_run_its_cells_on_its_own_ep() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = runtime_dir(dir.path());
        identity_model(&dir.path().join("a.onnx"), &[Some(1), Some(3)]);
        let text = format!(
            "runtimes = [{runtime:?}]\n[settings]\nep_options = [\"x=1\"]\n[runtime_ep.{runtime:?}]\nep = \"openvino\"\n\
             ep_options = [\"device_type=CPU\"]\n[[model]]\npath = \"a.onnx\"\n"
        );
        let plan = plan_in(dir.path(), &text).unwrap();
        let settings = plan.cell_settings(&plan.models[0], &plan.runtimes[0]);
        assert_eq!(settings.ep, EpKind::OpenVino);
        assert_eq!(settings.ep_options, ["device_type=CPU".parse::<KeyValue>().unwrap()]);
        assert_eq!(plan.models[0].settings.ep, EpKind::Cpu, "the model's own settings are unchanged");
        let unknown =
            format!("runtimes = [{runtime:?}]\n[runtime_ep.\"nope\"]\nep = \"cpu\"\n[[model]]\npath = \"a.onnx\"\n");
        let error = format!("{:#}", plan_in(dir.path(), &unknown).unwrap_err());
        assert!(error.contains("runtime_ep.\"nope\": \"nope\" is not in runtimes"), "{error}");
    }

    #[test]
    fn plan_errors_are_one_line_and_name_the_field_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = runtime_dir(dir.path());
        identity_model(&dir.path().join("a.onnx"), &[Some(1), Some(3)]);
        let cases = [
            (
                format!("runtimes = [{runtime:?}]\n[settings]\nrunz = 3\n[[model]]\npath = \"a.onnx\"\n"),
                "line 2: unknown setting `runz`",
            ),
            (format!("runtimes = [{runtime:?}]\n[[model]]\npath = \"b.onnx\"\n"), "model[0].path: model"),
            (
                format!("name = \"../x\"\nruntimes = [{runtime:?}]\n[[model]]\npath = \"a.onnx\"\n"),
                "name: the sweep name \"../x\" must be",
            ),
            (
                format!("runtimes = [{runtime:?}]\n[[model]]\nname = \"a/b\"\npath = \"a.onnx\"\n"),
                "model[0].name: the model name \"a/b\"",
            ),
            (
                "runtimes = [\"ort-0.0.0-nowhere\"]\n[[model]]\npath = \"a.onnx\"\n".to_string(),
                "runtimes[0]: runtime \"ort-0.0.0-nowhere\"",
            ),
            (
                format!("runtimes = [{runtime:?}]\n[[device]]\n[[model]]\npath = \"a.onnx\"\n"),
                "device[0]: give exactly one",
            ),
            (
                format!("runtimes = [{runtime:?}]\n[[model]]\npath = \"a.onnx\"\nrules = {{ cv_pc = 1 }}\n"),
                "unknown field `cv_pc`",
            ),
            (
                format!("runtimes = [{runtime:?}]\n[[model]]\npath = \"a.onnx\"\n[[model]]\npath = \"a.onnx\"\n"),
                "model[1].name: two models",
            ),
            (
                format!("runtimes = [{runtime:?}]\n[[model]]\npath = \"a.onnx\"\nshapes = [\"x=1x3\", \"y=1x0\"]\n"),
                "model[0].shapes[1]: dimension \"0\"",
            ),
            (
                format!("runtimes = [{runtime:?}]\n[[model]]\npath = \"a.onnx\"\nshapes = [\"y=1x3\"]\n"),
                "model[0].shapes: model",
            ),
            (
                format!("runtimes = [{runtime:?}]\n[[model]]\npath = \"a.onnx\"\nshapes = [\"x=1x3x5\"]\n"),
                "model[0].shapes: model",
            ),
            (
                format!("runtimes = [{runtime:?}]\n[[model]]\npath = \"a.onnx\"\ninputs = [\"x=missing.npy\"]\n"),
                "model[0].inputs[0]: input file",
            ),
            (
                format!("runtimes = [{runtime:?}]\n[settings]\nshapes = [\"x=big\"]\n[[model]]\npath = \"a.onnx\"\n"),
                "line 2: dimension \"big\"",
            ),
            (
                "socs = [\"SM9999\"]\n[[model]]\npath = \"a.onnx\"\n".to_string(),
                "socs[0]: unknown SoC \"SM9999\"; known SoCs: SM8350 (v68)",
            ),
            (
                "socs = [\"SM8650\", \"sm8650\"]\n[[model]]\npath = \"a.onnx\"\n".to_string(),
                "socs[1]: SoC SM8650 is listed twice",
            ),
            (
                format!("runtimes = [{runtime:?}]\nhtp_runtime = \"x\"\n[[model]]\npath = \"a.onnx\"\n"),
                "htp_runtime: applies to host-HTP cells only",
            ),
            (
                format!("runtimes = [{runtime:?}]\nqnn = [\"2.51\"]\n[[model]]\npath = \"a.onnx\"\n"),
                "qnn: applies to host-HTP cells only",
            ),
            ("[[model]]\npath = \"a.onnx\"\n".to_string(), "runtimes: list at least one runtime"),
        ];
        for (text, expected) in cases {
            let error = format!("{:#}", plan_in(dir.path(), &text).unwrap_err());
            assert!(error.contains("sweep.toml") && error.contains(expected), "{error}");
            assert!(!error.contains('\n'), "one line: {error}");
        }
    }
}
