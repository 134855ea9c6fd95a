//! The sweep plan (`sweep.toml`): devices (serials or SoC classes), runtimes, models with their
//! gate rules, and the harness settings of every cell. Loading resolves paths against the plan's
//! folder and checks everything that needs no device; each error is one line naming the plan file
//! and the field.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use npugate_gate::Rules;
use serde::{Deserialize, Serialize};

use npugate_host::hash_cache::HashCache;
use npugate_host::runtime::RuntimeManifest;
use npugate_plan::{ModelFlags, Subject};
use npugate_result::hexagon::Soc;
use npugate_settings::{EpKind, HarnessSettings, InputFile, KeyValue, SessionSettings, ShapeSpec};

/// `sweep.toml` as written (before paths are resolved and runtimes loaded).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanFile {
    /// Sweep name (default: the plan file's stem); history keys sweeps by name and night.
    name: Option<String>,
    /// Harness settings of every cell (`runs`, `warmup`, `profile_runs`, `ep`, …): the flags of
    /// `npugate run` as a table, parsed by the same parser ([`HarnessSettings::from_table`]).
    #[serde(default)]
    settings: toml::Table,
    /// Devices; empty means `--device` on the command line chooses.
    #[serde(default)]
    device: Vec<DeviceSpec>,
    /// Runtime names (or runtime directories): the firmware/SDK axis.
    #[serde(default)]
    runtimes: Vec<String>,
    /// The EP a runtime's cells run on, by runtime (as listed in `runtimes`), instead of the
    /// settings' `ep`: OpenVINO and CPU runtimes as two columns of one matrix. Each is a table of
    /// `ep` and `ep_options`, checked with the settings it overrides.
    #[serde(default)]
    runtime_ep: BTreeMap<String, toml::Table>,
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
    /// Qualcomm AI Hub devices (as `--aihub` takes them: a name, a part of one, attributes): one
    /// row of cells each, in the runtime column [`AIHUB_RUNTIME`].
    #[serde(default)]
    aihub: Vec<String>,
    /// Models with their rules.
    model: Vec<ModelEntry>,
}

/// The runtime column of AI Hub cells: AI Hub runs the model with its own tools (their versions
/// are in each cell's result); this machine's CPU runtime runs the local reference pass.
pub const AIHUB_RUNTIME: &str = "aihub";

/// `[runtime_ep."<runtime>"]`: the EP (and its options) of one runtime's cells.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeEp {
    /// The EP, as `--ep` spells it.
    pub ep: EpKind,
    /// Its options (`--ep-option`), replacing the settings' `ep_options`.
    pub ep_options: Vec<KeyValue>,
}

/// The keys a `[runtime_ep."<runtime>"]` table may set.
const RUNTIME_EP_KEYS: &[&str] = &["ep", "ep_options"];

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
    /// AI Hub devices of the plan's `aihub`, in plan order, each listed once.
    pub aihub: Vec<String>,
    /// The runtime of the AI Hub cells (named [`AIHUB_RUNTIME`]): this machine's CPU runtime for
    /// the local reference pass; loaded when `aihub` is not empty.
    pub aihub_runtimes: Vec<RuntimeManifest>,
    /// Models in plan order.
    pub models: Vec<PlannedModel>,
}

/// A model of the plan with everything its cells need.
#[derive(Debug)]
pub struct PlannedModel {
    /// Name (unique within the plan, safe as a directory name).
    pub name: String,
    /// The ONNX file, or the LLM folder (or its `genai_config.json`), looked at once as `npugate
    /// run` looks at it: its kind, its reference (a compiled model's source), its files hashed once.
    pub subject: Subject,
    /// Gate rules (defaults, then the model's gate file or inline rules).
    pub rules: Rules,
    /// Harness settings: the plan's, plus this model's shapes and inputs (a compiled model's
    /// recorded source shapes when it gives none).
    pub settings: HarnessSettings,
}

impl PlanFile {
    /// The plan file parsed (syntax and field names only).
    fn read(file: &Path) -> Result<PlanFile> {
        let shown = file.display();
        let text = std::fs::read_to_string(file).with_context(|| format!("cannot read sweep plan {shown}"))?;
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{shown}{}", toml_error(&text, &e)))
    }

    /// What checks a plan read from `file`: paths resolve against its folder, errors name it,
    /// its models are hashed with the sweep's one cache.
    fn context(file: &Path) -> PlanContext<'_> {
        PlanContext { file, base: file.parent().unwrap_or(Path::new(".")), hashes: HashCache::default_cache() }
    }
}

/// The checks of a plan's sections, each error one line: `plan-file: field: message`.
struct PlanContext<'a> {
    file: &'a Path,
    base: &'a Path,
    /// The sweep's hash cache: every model of the plan is hashed with it, once.
    hashes: HashCache,
}

impl PlanContext<'_> {
    fn error(&self, field: &str, message: impl std::fmt::Display) -> anyhow::Error {
        anyhow::anyhow!("{}: {field}: {message}", self.file.display())
    }

    /// `[settings]`, parsed as `npugate run`'s flags are, its `--input` files relative to the plan.
    fn settings(&self, table: &toml::Table) -> Result<HarnessSettings> {
        let settings =
            HarnessSettings::from_table(table).map_err(|e| self.error(&format!("settings.{}", e.field), e.message))?;
        Ok(settings.with_input_paths(|input| self.base.join(&input.path)))
    }

    fn check_devices(&self, devices: &[DeviceSpec]) -> Result<()> {
        match devices.iter().position(|spec| spec.serial.is_some() == spec.soc.is_some()) {
            Some(index) => {
                Err(self.error(&format!("device[{index}]"), "give exactly one of serial = \"…\" or soc = \"…\""))
            }
            None => Ok(()),
        }
    }

    /// The host-HTP SoCs, each named exactly once.
    fn socs(&self, names: &[String]) -> Result<Vec<Soc>> {
        let mut socs: Vec<Soc> = Vec::new();
        for (index, name) in names.iter().enumerate() {
            let soc = npugate_result::hexagon::find(name).map_err(|e| self.error(&format!("socs[{index}]"), e))?;
            if socs.contains(&soc) {
                return Err(self.error(&format!("socs[{index}]"), format!("SoC {} is listed twice", soc.model)));
            }
            socs.push(soc);
        }
        Ok(socs)
    }

    /// The device runtimes, fetched, each listed once.
    fn runtimes(&self, names: &[String]) -> Result<Vec<RuntimeManifest>> {
        let mut runtimes: Vec<RuntimeManifest> = Vec::new();
        for (index, name) in names.iter().enumerate() {
            let field = format!("runtimes[{index}]");
            let manifest = RuntimeManifest::load(name).map_err(|e| self.error(&field, format!("{e:#}")))?;
            if runtimes.iter().any(|r| r.name == manifest.name) {
                return Err(self.error(&field, format!("runtime {} is listed twice", manifest.name)));
            }
            runtimes.push(manifest);
        }
        Ok(runtimes)
    }

    /// `[runtime_ep."<runtime>"]`, by runtime name: each checked as the settings it overrides.
    fn runtime_eps(&self, raw: &PlanFile, runtimes: &[RuntimeManifest]) -> Result<BTreeMap<String, RuntimeEp>> {
        let mut runtime_eps = BTreeMap::new();
        for (listed, table) in &raw.runtime_ep {
            let field = format!("runtime_ep.{listed:?}");
            let Some(index) = raw.runtimes.iter().position(|r| r == listed) else {
                return Err(self.error(&field, format!("{listed:?} is not in runtimes = {:?}", raw.runtimes)));
            };
            if let Some(key) = table.keys().find(|key| !RUNTIME_EP_KEYS.contains(&key.as_str())) {
                return Err(self.error(
                    &format!("{field}.{key}"),
                    "a runtime sets only ep and ep_options; the other settings are the plan's [settings]",
                ));
            }
            let mut merged = raw.settings.clone();
            merged.extend(table.iter().map(|(key, value)| (key.clone(), value.clone())));
            let cell = HarnessSettings::from_table(&merged)
                .map_err(|e| self.error(&format!("{field}.{}", e.field), e.message))?;
            runtime_eps
                .insert(runtimes[index].name.clone(), RuntimeEp { ep: cell.ep, ep_options: cell.ep_options.clone() });
        }
        Ok(runtime_eps)
    }

    /// Every `[[model]]`, named uniquely.
    fn models(&self, entries: Vec<ModelEntry>, settings: &HarnessSettings) -> Result<Vec<PlannedModel>> {
        if entries.is_empty() {
            return Err(self.error("model", "add at least one [[model]] with path = \"….onnx\""));
        }
        let mut names = BTreeSet::new();
        let mut models = Vec::new();
        for (index, entry) in entries.into_iter().enumerate() {
            models.push(self.model(index, entry, settings, &mut names)?);
        }
        Ok(models)
    }

    /// One `[[model]]`: its file (or LLM folder), its name (not among `names`, then added), rules,
    /// and the settings with its shapes and inputs.
    fn model(
        &self,
        index: usize,
        entry: ModelEntry,
        settings: &HarnessSettings,
        names: &mut BTreeSet<String>,
    ) -> Result<PlannedModel> {
        let field = |key: &str| format!("model[{index}].{key}");
        let path = self.base.join(&entry.path);
        // A model is an .onnx file, or an LLM folder (its genai_config.json, or the folder).
        let llm_folder = npugate_onnx::genai::config_path(&path)
            .filter(|config| config.is_file())
            .and_then(|config| config.parent().map(Path::to_path_buf));
        if !path.is_file() && llm_folder.is_none() {
            let message = format!(
                "model {} not found; give an .onnx file or an LLM folder holding genai_config.json",
                path.display()
            );
            return Err(self.error(&field("path"), message));
        }
        let name = match &entry.name {
            Some(name) => name.clone(),
            None => llm_folder
                .as_deref()
                .unwrap_or(&path)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
        };
        npugate_host::paths::check_plain_name(&name, "the model name").map_err(|e| self.error(&field("name"), e))?;
        if !names.insert(name.clone()) {
            let message = format!("two models are named {name:?}; give one another name = \"…\"");
            return Err(self.error(&field("name"), message));
        }
        let rules = self.rules(&field("gate"), entry.gate.as_deref(), entry.rules.clone())?;
        let model_settings = self.model_settings(index, &entry, settings)?;
        let reference_model = entry.reference_model.map(|given| self.base.join(given));
        if let Some(given) = reference_model.as_ref().filter(|given| !given.is_file()) {
            return Err(self.error(&field("reference_model"), format!("model file {} not found", given.display())));
        }
        // The model looked at as `npugate run` looks at it: its kind, what the kind refuses, its reference.
        let name_it = "set reference_model = \"<its source .onnx>\" in its [[model]]";
        let subject = Subject::classify_in(&path, reference_model.as_deref(), name_it, self.hashes.clone())
            .map_err(|e| self.error(&field("path"), format!("{e:#}")))?;
        let flags = ModelFlags::of(&model_settings.session, Some(&model_settings.generation));
        subject
            .refuse(npugate_plan::Command::Run, &flags)
            .and_then(|()| npugate_engine::model::check_run(&path, subject.llm(), &model_settings))
            .map_err(|e| self.error(&field("shapes"), format!("{e:#}")))?;
        let model_settings = subject.reference.settings_for(&model_settings);
        Ok(PlannedModel { name, rules, settings: model_settings, subject })
    }

    /// A model's rules: its gate file or its inline rules (not both), over the defaults.
    fn rules(&self, field: &str, gate: Option<&Path>, inline: Option<Rules>) -> Result<Rules> {
        match (gate, inline) {
            (Some(_), Some(_)) => Err(self.error(field, "give either gate = \"gate.toml\" or rules = { … }, not both")),
            (Some(gate), None) => Rules::load(Some(&self.base.join(gate)), &[]).map_err(|e| self.error(field, e)),
            (None, Some(rules)) => Ok(rules),
            (None, None) => Ok(Rules::default()),
        }
    }

    /// The plan's settings with a model's own shapes and input files (relative to the plan).
    fn model_settings(&self, index: usize, entry: &ModelEntry, settings: &HarnessSettings) -> Result<HarnessSettings> {
        let field = |key: &str, at: usize| format!("model[{index}].{key}[{at}]");
        let mut model_settings = settings.clone();
        for (at, text) in entry.shapes.iter().enumerate() {
            let shape: ShapeSpec = text.parse().map_err(|e: String| self.error(&field("shapes", at), e))?;
            model_settings.shapes.push(shape);
        }
        for (at, text) in entry.inputs.iter().enumerate() {
            let mut input: InputFile = text.parse().map_err(|e: String| self.error(&field("inputs", at), e))?;
            input.path = self.base.join(&input.path);
            model_settings.inputs.push(input);
        }
        if let Some((at, input)) = model_settings.inputs.iter().enumerate().find(|(_, input)| !input.path.is_file()) {
            return Err(self.error(&field("inputs", at), format!("input file {} not found", input.path.display())));
        }
        Ok(model_settings)
    }

    /// The runtimes of the host-HTP cells, one per QNN version: resolved like `npugate run --local
    /// --ep qnn --soc … --qnn …` of each model (a compiled model is checked against every SoC and
    /// QNN version). None without `socs`, where `htp_runtime` and `qnn` are refused.
    fn htp_runtimes(
        &self,
        socs: &[Soc],
        htp_runtime: Option<&str>,
        qnn: &[String],
        models: &[PlannedModel],
    ) -> Result<Vec<RuntimeManifest>> {
        let mut flags = Vec::new();
        for (index, text) in qnn.iter().enumerate() {
            flags.push(text.parse::<npugate_plan::QnnFlag>().map_err(|e| self.error(&format!("qnn[{index}]"), e))?);
        }
        let choice = npugate_plan::QnnChoice::from_flags(&flags);
        if socs.is_empty() {
            let given = if htp_runtime.is_some() { Some("htp_runtime") } else { (!qnn.is_empty()).then_some("qnn") };
            return match given {
                Some(field) => {
                    Err(self.error(field, "applies to host-HTP cells only; add socs = [\"SM8650\"] or drop it"))
                }
                None => Ok(Vec::new()),
            };
        }
        let field = if qnn.is_empty() { "socs" } else { "qnn" };
        let mut runtimes: Vec<RuntimeManifest> = Vec::new();
        for model in models {
            let given = model.subject.given().map_err(|e| self.error(field, format!("{e:#}")))?;
            let request = npugate_plan::Request {
                given: Some(given),
                runtime: htp_runtime,
                socs: socs.to_vec(),
                qnn: choice.clone(),
                ..npugate_plan::Request::new(
                    npugate_plan::Command::Run,
                    &model.subject.path,
                    npugate_plan::Place::Emulator,
                    EpKind::Qnn,
                )
            };
            let plan = npugate_plan::Plan::resolve(&request, &npugate_plan::Installed)
                .map_err(|e| self.error(field, format!("{e:#}")))?;
            runtimes.clear();
            for planned in plan.targets {
                if !runtimes.iter().any(|r| r.dir == planned.runtime.dir) {
                    runtimes.push(planned.runtime);
                }
            }
        }
        Ok(runtimes)
    }

    /// The AI Hub devices, each listed once, and the runtime of their cells (none without any).
    fn aihub(&self, devices: &[String]) -> Result<(Vec<String>, Vec<RuntimeManifest>)> {
        for (index, device) in devices.iter().enumerate() {
            if device.trim().is_empty() {
                return Err(self.error(
                    &format!("aihub[{index}]"),
                    "name an AI Hub device (`npugate devices --aihub` lists them)",
                ));
            }
            if devices[..index].contains(device) {
                return Err(self.error(&format!("aihub[{index}]"), format!("AI Hub device {device:?} is listed twice")));
            }
        }
        if devices.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let (_, host) = npugate_plan::reference_tools(&npugate_plan::Installed).map_err(|e| {
            self.error("aihub", format!("{e:#} (AI Hub cells run the model once on this machine's CPU)"))
        })?;
        Ok((devices.to_vec(), vec![RuntimeManifest { name: AIHUB_RUNTIME.into(), ..host }]))
    }
}

impl SweepPlan {
    /// Reads and checks the plan: parse the file, check every section against the plan's folder
    /// and the fetched runtimes, then resolve the host-HTP runtimes as `npugate run` would.
    pub fn load(file: &Path) -> Result<SweepPlan> {
        let raw = PlanFile::read(file)?;
        let at = PlanFile::context(file);
        let settings = at.settings(&raw.settings)?;
        at.check_devices(&raw.device)?;
        if raw.runtimes.is_empty() && raw.socs.is_empty() && raw.aihub.is_empty() {
            return Err(at.error("runtimes", "list at least one runtime, e.g. [\"ort-1.31.1-linux-x86_64\"] (or socs = [\"SM8650\"] for host-HTP cells, aihub = [\"Samsung Galaxy S24 (Family)\"] for AI Hub cells)"));
        }
        let socs = at.socs(&raw.socs)?;
        let runtimes = at.runtimes(&raw.runtimes)?;
        let runtime_eps = at.runtime_eps(&raw, &runtimes)?;
        let models = at.models(raw.model, &settings)?;
        let htp_runtimes = at.htp_runtimes(&socs, raw.htp_runtime.as_deref(), &raw.qnn, &models)?;
        let (aihub, aihub_runtimes) = at.aihub(&raw.aihub)?;
        let name = raw.name.unwrap_or_else(|| {
            file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "sweep".into())
        });
        npugate_host::paths::check_plain_name(&name, "the sweep name").map_err(|e| at.error("name", e))?;
        Ok(SweepPlan {
            file: file.to_path_buf(),
            name,
            devices: raw.device,
            runtimes,
            runtime_eps,
            socs,
            htp_runtimes,
            aihub,
            aihub_runtimes,
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

    /// Every runtime of the plan: the device runtimes, the host-HTP runtimes, the AI Hub cells'.
    pub fn all_runtimes(&self) -> impl Iterator<Item = &RuntimeManifest> {
        self.runtimes.iter().chain(&self.htp_runtimes).chain(&self.aihub_runtimes)
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

    #[test]
    fn an_aihub_device_listed_twice_or_empty_is_refused_naming_its_entry() {
        let dir = tempfile::tempdir().unwrap();
        identity_model(&dir.path().join("m.onnx"), &[Some(1), Some(3)]);
        let refused = |aihub: &str| {
            let text = format!("aihub = {aihub}\n[[model]]\npath = \"m.onnx\"\n");
            format!("{:#}", plan_in(dir.path(), &text).unwrap_err())
        };
        let twice = refused(r#"["S24", "S25", "S24"]"#);
        assert!(twice.contains("aihub[2]: AI Hub device \"S24\" is listed twice"), "{twice}");
        let empty = refused(r#"[" "]"#);
        assert!(empty.contains("aihub[0]: name an AI Hub device"), "{empty}");
    }

    #[test]
    fn a_folder_without_genai_config_is_no_model() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = crate::sweep::testing::runtime_dir(dir.path());
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
        let runtime = crate::sweep::testing::runtime_dir(dir.path());
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
        let runtime = crate::sweep::testing::runtime_dir(dir.path());
        identity_model(&dir.path().join("a.onnx"), &[Some(1), Some(3)]);
        let text = format!(
            "runtimes = [{runtime:?}]\n[runtime_ep.{runtime:?}]\nep = \"openvino\"\n\
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
    fn settings_that_do_not_fit_together_are_refused_at_load_naming_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = crate::sweep::testing::runtime_dir(dir.path());
        identity_model(&dir.path().join("a.onnx"), &[Some(1), Some(3)]);
        let plan = |settings: &str, runtime_ep: &str| {
            let text =
                format!("runtimes = [{runtime:?}]\n[settings]\n{settings}\n{runtime_ep}[[model]]\npath = \"a.onnx\"\n");
            plan_in(dir.path(), &text).map(|_| ()).map_err(|e| format!("{e:#}"))
        };
        let once = plan("execute_once = true", "").unwrap_err();
        assert!(
            once.ends_with(
                "sweep.toml: settings.execute_once: needs session_only = true as well; add it, or drop execute_once"
            ),
            "{once}"
        );
        plan("execute_once = true\nsession_only = true", "").unwrap();
        let zero = plan("runs = 0", "").unwrap_err();
        assert!(zero.contains("sweep.toml: settings.runs: invalid value '0' for 'runs'"), "{zero}");
        let strict = plan("strict = true", "").unwrap_err();
        assert!(strict.contains("sweep.toml: settings.strict: applies to an accelerator EP"), "{strict}");
        let vtcm = plan("[settings.qnn]\nvtcm_mb = 8", "").unwrap_err();
        assert!(vtcm.contains("sweep.toml: settings.qnn.vtcm_mb: applies to ep = \"qnn\" only"), "{vtcm}");
        // The runtime's EP is checked with the settings it overrides.
        let on_cpu = format!("[runtime_ep.{runtime:?}]\nep = \"cpu\"\n");
        plan("ep = \"openvino\"\nstrict = true", "").unwrap();
        let runtime_cpu = plan("ep = \"openvino\"\nstrict = true", &on_cpu).unwrap_err();
        assert!(
            runtime_cpu.contains(&format!("sweep.toml: runtime_ep.{runtime:?}.strict: applies to an accelerator EP")),
            "{runtime_cpu}"
        );
        let bad_ep = plan("", &format!("[runtime_ep.{runtime:?}]\nep = \"qnnn\"\n")).unwrap_err();
        assert!(
            bad_ep.contains(&format!("runtime_ep.{runtime:?}.ep: invalid value 'qnnn'")) && bad_ep.contains("'qnn'"),
            "{bad_ep}"
        );
    }

    #[test]
    fn plan_errors_are_one_line_and_name_the_field_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = crate::sweep::testing::runtime_dir(dir.path());
        identity_model(&dir.path().join("a.onnx"), &[Some(1), Some(3)]);
        let cases = [
            (
                format!("runtimes = [{runtime:?}]\n[settings]\nrunz = 3\n[[model]]\npath = \"a.onnx\"\n"),
                "settings.runz: unknown setting; did you mean `runs`?",
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
                "settings.shapes: invalid value 'x=big' for 'shapes': dimension \"big\"",
            ),
            (
                "socs = [\"SM9999\"]\n[[model]]\npath = \"a.onnx\"\n".to_string(),
                "socs[0]: unknown SoC \"SM9999\"; known: SM8350, QCM6490",
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
            (
                "socs = [\"SM86501\"]\n[[model]]\npath = \"a.onnx\"\n".to_string(),
                "socs[0]: unknown SoC \"SM86501\": did you mean SM8650?",
            ),
            (
                "socs = [\"SM8650\"]\nqnn = [\"2.x\"]\n[[model]]\npath = \"a.onnx\"\n".to_string(),
                "qnn[0]: \"2.x\" is not a QNN version",
            ),
            (
                format!("runtimes = [{runtime:?}]\n[settings]\nep = \"openvino\"\n[runtime_ep.{runtime:?}]\nep = \"cpu\"\nruns = 3\n[[model]]\npath = \"a.onnx\"\n"),
                "runtime_ep.\"RT\".runs: a runtime sets only ep and ep_options",
            ),
        ];
        for (text, expected) in cases {
            let expected = expected.replace("\"RT\"", &format!("{runtime:?}"));
            let error = format!("{:#}", plan_in(dir.path(), &text).unwrap_err());
            assert!(error.contains("sweep.toml") && error.contains(&expected), "{error}");
            assert!(!error.contains('\n'), "one line: {error}");
        }
    }
}
