//! `npugate choose`: for every Snapdragon, the variant of a model (float, fp16, w8a8, w8a16, …)
//! that runs whole on its HTP, keeps the float model's accuracy and is fastest — judged on
//! Qualcomm's host HTP emulator per SoC ([`npugate_htp::choose`]) — and the deployment manifest an
//! app loads. Exit 0 every SoC has a variant, 1 a SoC has none (or, with `--baseline`, lost its
//! variant or changed it), 2 could not judge.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use npugate_engine::evidence::Bundle;
use npugate_engine::model::GivenModel;
use npugate_host::hash_cache::HashCache;
use npugate_htp::choose::{self, AccuracyRule, ChooseReport, ChooseRequest, Variant};
use npugate_htp::HostHtp;
use npugate_plan::{Command, Installed, ModelFlags, Place, Plan, Request, Resources};
use npugate_result::contract;
use npugate_result::report::Finished;
use npugate_settings::{EpKind, SessionSettings};

use super::console::Console;
use super::options::{EmulatorArgs, EvidenceArgs, JsonArg, OutArg, RuntimeArgs};

/// Arguments of `npugate choose`.
#[derive(Debug, Args)]
pub struct ChooseArgs {
    /// A folder of the model's variants: every `.onnx` file in it is one.
    #[arg(long, value_name = "DIR")]
    pub variants: Option<PathBuf>,
    /// One variant (repeatable; with or without --variants).
    #[arg(long = "variant", value_name = "FILE")]
    pub variant: Vec<PathBuf>,
    /// The float model every variant's outputs are compared with [default: the one variant
    /// without quantization nodes].
    #[arg(long, value_name = "FILE")]
    pub reference_model: Option<PathBuf>,
    /// `--soc`, `--qnn`: the Snapdragons to choose for (one QNN version).
    #[command(flatten)]
    pub emulator: EmulatorArgs,
    /// Evaluation inputs: one folder of `<input>.npy` files per sample (for a one-input model, one
    /// `.npy` file per sample) [default: one sample of seeded random inputs, said so].
    #[arg(long, value_name = "DIR")]
    pub eval: Option<PathBuf>,
    /// Least top-1 agreement with the float model for class-score outputs, percent.
    #[arg(long, value_name = "PCT", default_value_t = AccuracyRule::default().min_top1_pct)]
    pub min_top1: f64,
    /// Least SQNR against the float model for every output (class scores too), dB.
    #[arg(long, value_name = "DB", default_value_t = AccuracyRule::default().min_sqnr_db)]
    pub min_sqnr: f64,
    /// An earlier `choose.json`: exit 1 when a SoC lost its variant or its chosen variant changed.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// `--runtime` (the host HTP's), `--harness`.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    /// `--out` [default: npugate-results/<float model>/choose]: `choose.json`, `manifest.json`,
    /// `models/`, `choose.md`, `choose.html`, `runs/`.
    #[command(flatten)]
    pub out: OutArg,
    /// `--json`: `npugate.choose/1` instead of the table.
    #[command(flatten)]
    pub json: JsonArg,
    /// `--evidence`, `--signing-key`: a signed bundle of the report, the deployment manifest, every
    /// variant and the runtime that judged them.
    #[command(flatten)]
    pub evidence: EvidenceArgs,
    /// How each session is made (`--shape`, QNN options, `--enable-htp-fp16-precision`, …).
    #[command(flatten)]
    pub session: SessionSettings,
}

impl ChooseArgs {
    /// The variant files: `--variants DIR`'s `.onnx` files, then each `--variant`.
    fn variant_files(&self) -> Result<Vec<PathBuf>> {
        let mut files = Vec::new();
        if let Some(dir) = &self.variants {
            let entries = std::fs::read_dir(dir).with_context(|| {
                format!("--variants {} cannot be read; pass a folder of .onnx files", dir.display())
            })?;
            let mut found: Vec<PathBuf> = entries
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|path| path.is_file() && path.extension().is_some_and(|e| e == "onnx"))
                .collect();
            found.sort();
            files.extend(found);
        }
        files.extend(self.variant.iter().cloned());
        if files.len() < 2 {
            bail!("npugate choose needs at least two variants of the model: pass --variants DIR or --variant FILE (repeatable)");
        }
        Ok(files)
    }

    /// The plan request: the host HTP emulator, the float variant as the model, as looked at.
    pub fn request<'a>(&'a self, float: &'a GivenModel) -> Request<'a> {
        Request {
            given: Some(float),
            flags: ModelFlags::of(&self.session, None),
            fp16: self.session.qnn.enable_htp_fp16_precision,
            runtime: self.runtime.runtime.as_deref(),
            harness: self.runtime.harness.harness.as_deref(),
            socs: self.emulator.socs(),
            qnn: self.emulator.qnn(),
            out: self.out.out.as_deref(),
            ..Request::new(Command::Choose, &float.path, Place::Emulator, EpKind::Qnn)
        }
    }
}

/// The variants of a choice, each looked at once with the command's one hash cache, and the
/// index of the float one among them.
struct Variants {
    /// The variants, in the order given (`--reference-model` last when it is none of them).
    variants: Vec<Variant>,
    /// Each variant's model as looked at, in the same order.
    models: Vec<GivenModel>,
    /// The float variant's index.
    float: usize,
}

impl Variants {
    /// Reads every variant file of `args` and the float one with `resources`' hash cache.
    fn read(args: &ChooseArgs, resources: &dyn Resources) -> Result<Variants> {
        let hashes = resources.hash_cache();
        let mut read = Variants { variants: Vec::new(), models: Vec::new(), float: 0 };
        for file in args.variant_files()? {
            let (variant, model) = Variant::read(&file, &hashes)?;
            if let Some(same) = read.variants.iter().find(|v| v.name == variant.name) {
                bail!(
                    "variants {} and {} have the same name {:?}; rename one",
                    same.path.display(),
                    file.display(),
                    variant.name
                );
            }
            read.variants.push(variant);
            read.models.push(model);
        }
        read.float = read.float_variant(args.reference_model.as_deref(), &hashes)?;
        Ok(read)
    }

    /// The index of the float variant: `reference` (`--reference-model`, added as a variant when
    /// it is none of them: not one of their files, nor their bytes), else the only variant
    /// without quantization nodes.
    fn float_variant(&mut self, reference: Option<&Path>, hashes: &HashCache) -> Result<usize> {
        let variants = &mut self.variants;
        if let Some(path) = reference {
            let same_file =
                |v: &Variant| v.path.canonicalize().ok().is_some_and(|p| path.canonicalize().ok() == Some(p));
            if let Some(index) = variants.iter().position(same_file) {
                return Ok(index);
            }
            let (float, model) = Variant::read(path, hashes)?;
            return Ok(match variants.iter().position(|v| v.sha256 == float.sha256) {
                Some(index) => index,
                None => {
                    variants.push(float);
                    self.models.push(model);
                    variants.len() - 1
                }
            });
        }
        let floats: Vec<usize> = (0..variants.len()).filter(|&i| variants[i].kind == "float").collect();
        match floats.as_slice() {
            [one] => Ok(*one),
            [] => bail!(
                "no variant is a float model (each has quantization nodes); pass --reference-model with the float .onnx"
            ),
            _ => bail!(
                "{} variants are float models ({}); pass --reference-model with the one the others are compared with",
                floats.len(),
                floats.iter().map(|&i| variants[i].name.as_str()).collect::<Vec<_>>().join(", ")
            ),
        }
    }
}

/// Runs `npugate choose`.
pub fn run(args: ChooseArgs, console: &Console) -> Result<u8> {
    let Variants { variants, models, float } = Variants::read(&args, &Installed)?;
    let evidence = args.evidence.bundle()?;
    let baseline: Option<ChooseReport> = match &args.baseline {
        Some(path) => Some(
            contract::read(path)
                .with_context(|| format!("--baseline {} is not a choose.json of npugate choose", path.display()))?,
        ),
        None => None,
    };
    // Every flag becomes a typed value before the plan: after it, the command reads only the plan
    // and these.
    let (eval, session, json) = (args.eval.clone(), args.session.clone(), args.json.json);
    let rule = AccuracyRule { min_top1_pct: args.min_top1, min_sqnr_db: args.min_sqnr };
    let plan = Plan::resolve(&args.request(&models[float]), &Installed)?;
    plan.announce();
    let host = one_host(&plan)?;
    let socs: Vec<_> = plan.targets.iter().filter_map(|t| t.soc).collect();
    let (harness, runtime) = npugate_plan::reference_tools(&Installed)?;
    let inputs = model_inputs(&variants[float].path)?;
    let samples = choose::samples(eval.as_deref(), &inputs)?;
    let request = ChooseRequest {
        host: &host,
        reference_tools: (&harness, &runtime),
        variants: &variants,
        models: &models,
        float,
        socs: &socs,
        samples: &samples,
        session: &session,
        fp16: plan.fp16,
        timeouts: plan.timeouts,
        rule,
        baseline: baseline.as_ref(),
    };
    let report = request.run(&plan.out, &console.policy(0))?;
    std::fs::write(plan.out.join("choose.md"), choose::render::markdown(&report))?;
    std::fs::write(plan.out.join("choose.html"), choose::render::html(&report).into_string())?;
    if let Some((dir, key)) = evidence {
        let manifest = evidence_bundle(&report.variants, &models, &plan.out, &host).write(&dir, &key)?;
        eprintln!("npugate: evidence bundle of {} file(s) in {}", manifest.files.len(), dir.display());
    }
    let saved = format!(
        "choose.json, manifest.json (+ models/), choose.md, choose.html and each run in {}",
        plan.out.display()
    );
    Ok(console.finished(json, Finished::saved(&report, saved)))
}

/// The plan's one host HTP runtime (choose judges with one QNN version).
fn one_host(plan: &Plan) -> Result<HostHtp> {
    let first = plan.targets.first().context("the plan has no SoC")?;
    if plan.targets.iter().any(|t| t.runtime.dir != first.runtime.dir) {
        bail!("npugate choose judges with one QNN version; pass one --qnn (or none: the newest)");
    }
    Ok(HostHtp { harness: first.harness.clone(), runtime: first.runtime.clone() })
}

/// The model's input names, in order.
fn model_inputs(path: &Path) -> Result<Vec<String>> {
    let model = npugate_onnx::Model::read(path)?;
    let graph = model.proto().graph.as_ref().with_context(|| format!("{} has no graph", path.display()))?;
    let initializers: Vec<&str> = graph.initializer.iter().map(|i| i.name()).collect();
    Ok(graph.input.iter().map(|i| i.name().to_string()).filter(|name| !initializers.contains(&name.as_str())).collect())
}

/// The evidence of a choice in `out`: the report, the deployment manifest with the files it
/// names, every variant as judged (`models`, in the order of `variants`, as the command looked at
/// them) and the runtime that judged them.
fn evidence_bundle(variants: &[Variant], models: &[GivenModel], out: &Path, host: &HostHtp) -> Bundle {
    let mut bundle = Bundle::new()
        .file("choose", &format!("choose/{}", choose::REPORT_FILE), &out.join(choose::REPORT_FILE))
        .file("deploy_manifest", &format!("choose/{}", choose::MANIFEST_FILE), &out.join(choose::MANIFEST_FILE));
    for (variant, model) in variants.iter().zip(models) {
        bundle = bundle.model("variant", &format!("variants/{}", variant.name), model);
    }
    bundle.runtime(&host.runtime)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use npugate_engine::model::testing::identity_model;
    use npugate_engine::model::ModelFiles;
    use npugate_plan::fake::Fake;

    #[test]
    fn choose_hashes_each_variant_once_with_one_cache_from_reading_to_evidence() {
        let fake = Fake::machine();
        let work = tempfile::tempdir().unwrap();
        let (float, quantized) = (work.path().join("m_float.onnx"), work.path().join("m_w8.onnx"));
        identity_model(&float, &[Some(1), Some(3)]);
        identity_model(&quantized, &[Some(1), Some(4)]);
        let text = |path: &Path| path.display().to_string();
        let line = ["npugate", "choose", "--variant", &text(&float), "--variant", &text(&quantized)];
        let cli =
            crate::cmd::Cli::try_parse_from(line.into_iter().chain(["--reference-model", &text(&float)])).unwrap();
        let Some(crate::cmd::Command::Choose(args)) = cli.command else { panic!("choose parses as choose") };
        let Variants { variants, models, float: index } = Variants::read(&args, &fake).unwrap();
        assert_eq!((variants.len(), index), (2, 0), "--reference-model is the first variant, not a third");
        assert_eq!(fake.hashes.lookups(), 2, "each variant's one file hashed once, --reference-model not again");
        let plan = Plan::resolve(&args.request(&models[index]), &fake).unwrap();
        assert_eq!(plan.model.given().unwrap().files, models[index].files, "the plan's model is the float variant");

        // Other models in their places from here: a second hash (with any cache) would see them.
        identity_model(&float, &[Some(1), Some(5)]);
        identity_model(&quantized, &[Some(1), Some(6)]);
        evidence_bundle(&variants, &models, &plan.out, &one_host(&plan).unwrap());
        assert_eq!(fake.hashes.lookups(), 2, "neither the plan nor the bundle hashed a variant again");
        assert_ne!(ModelFiles::read(&float, &fake.hashes).unwrap().sha256, variants[0].sha256, "the test can tell");
    }
}
