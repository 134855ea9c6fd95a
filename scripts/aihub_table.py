"""Builds npugate's reference table of Qualcomm AI Hub's published device runs (scripts/aihub-table).

    python scripts/aihub_table.py AI_HUB_MODELS_DIR OUT_DIR [--release TAG --commit SHA]

AI_HUB_MODELS_DIR is a local copy of the qualcomm/ai-hub-models repository (a clone: its
qai_hub_models/models/<id>/ folders; or a copy of just the data: models/<id>/perf.yaml, info.yaml).
The release and commit are read from the clone (git describe / rev-parse, or qai_hub_models/_version.py)
or from a README naming them (`tag v0.47.0 (commit b61a0090)`); --release/--commit override.
Writes into OUT_DIR:
  perf.csv   one row per model x component x precision x device x runtime (see PROVENANCE.md)
  models.csv one row per model: name, input resolution, parameters, source repository, licence
  devices.csv every device with rows, its SoC (empty when not mapped: listed, never guessed)
  PROVENANCE.md what was read (release, commit, counts) and how
Deterministic: the same input gives the same bytes. Needs PyYAML.
"""

import csv
import os
import re
import subprocess
import sys

import yaml

# AI Hub device name -> SoC part. Marketing-named devices from their makers' specifications; the
# boards and automotive kits name their part in the device name. Devices not here get no SoC.
DEVICE_SOCS = {
    "Samsung Galaxy S24": "SM8650",
    "Samsung Galaxy S24 Ultra": "SM8650",
    "Samsung Galaxy S24+": "SM8650",
    "Samsung Galaxy S25": "SM8750",
    "Samsung Galaxy S25 Ultra": "SM8750",
    "Samsung Galaxy S25+": "SM8750",
    "Snapdragon 8 Elite QRD": "SM8750",
    "Snapdragon 8 Elite Gen 5 QRD": "SM8850",
    "Dragonwing RB3 Gen 2 Vision Kit": "QCS6490",
    "SA8295P ADP": "SA8295P",
    "SA8775P ADP": "SA8775P",
    "SA7255P ADP": "SA7255P",
    "QCS8550 (Proxy)": "QCS8550",
    "QCS8450 (Proxy)": "QCS8450",
    "QCS8275 (Proxy)": "QCS8275",
    "Dragonwing IQ-9075 EVK": "QCS9075",
    "Dragonwing Q-6690 MTP": "QCM6690",
}

PERF_COLUMNS = [
    "model", "component", "precision", "device", "soc", "runtime", "job_status", "inference_time_ms",
    "peak_memory_min_mb", "peak_memory_max_mb", "primary_compute_unit", "layers_total", "layers_npu",
    "layers_gpu", "layers_cpu", "qairt", "onnx_runtime", "tflite",
]
MODEL_COLUMNS = ["model", "name", "input_resolution", "parameters", "source_repo", "license_type"]


def models_dir(root):
    for candidate in (os.path.join(root, "qai_hub_models", "models"), os.path.join(root, "models")):
        if os.path.isdir(candidate):
            return candidate
    sys.exit(f"aihub-table: {root} has neither qai_hub_models/models/ nor models/; pass a copy of qualcomm/ai-hub-models")


def release_of(root, release, commit):
    """(release, commit) from the flags, a git clone, _version.py or a README that names them."""
    git = lambda *args: subprocess.run(["git", "-C", root, *args], capture_output=True, text=True)
    if os.path.exists(os.path.join(root, ".git")):
        release = release or git("describe", "--tags", "--always").stdout.strip()
        commit = commit or git("rev-parse", "HEAD").stdout.strip()
    version_file = os.path.join(root, "qai_hub_models", "_version.py")
    if not release and os.path.exists(version_file):
        found = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", open(version_file).read())
        release = found and "v" + found.group(1)
    readme = os.path.join(root, "README.md")
    if os.path.exists(readme):
        text = open(readme).read()
        found = re.search(r"tag (v[0-9][\w.]*) \(commit ([0-9a-f]{7,40})\)", text)
        if found:
            release, commit = release or found.group(1), commit or found.group(2)
    if not release or not commit:
        sys.exit(f"aihub-table: cannot tell which release/commit {root} is; pass --release TAG --commit SHA")
    return release, commit


def perf_rows(model_id, perf):
    for precision, by_precision in sorted((perf.get("precisions") or {}).items()):
        for component, by_component in sorted((by_precision.get("components") or {}).items()):
            for device, by_device in sorted((by_component.get("performance_metrics") or {}).items()):
                for runtime, run in sorted(by_device.items()):
                    memory = run.get("estimated_peak_memory_range_mb") or {}
                    layers = run.get("layer_counts") or {}
                    tools = run.get("tool_versions") or {}
                    yield {
                        "model": model_id,
                        "component": component,
                        "precision": precision,
                        "device": device,
                        "soc": DEVICE_SOCS.get(device, ""),
                        "runtime": runtime,
                        "job_status": run.get("job_status") or "",
                        "inference_time_ms": run.get("inference_time_milliseconds", ""),
                        "peak_memory_min_mb": memory.get("min", ""),
                        "peak_memory_max_mb": memory.get("max", ""),
                        "primary_compute_unit": run.get("primary_compute_unit") or "",
                        "layers_total": layers.get("total", ""),
                        "layers_npu": layers.get("npu", ""),
                        "layers_gpu": layers.get("gpu", ""),
                        "layers_cpu": layers.get("cpu", ""),
                        "qairt": tools.get("qairt", ""),
                        "onnx_runtime": tools.get("onnx_runtime", ""),
                        "tflite": tools.get("tflite", ""),
                    }


def model_row(model_id, info):
    details = info.get("technical_details") or {}
    return {
        "model": model_id,
        "name": info.get("name", ""),
        "input_resolution": str(details.get("Input resolution", "")),
        "parameters": str(details.get("Number of parameters", "")),
        "source_repo": info.get("source_repo", ""),
        "license_type": info.get("license_type", ""),
    }


def write_csv(path, columns, rows):
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def provenance(release, commit, rows, models, devices):
    onnx = [r for r in rows if r["runtime"] == "onnx"]
    unmapped = sorted(d for d in devices if not DEVICE_SOCS.get(d))
    mapped = "\n".join(f"| {d} | {DEVICE_SOCS[d]} |" for d in sorted(devices) if DEVICE_SOCS.get(d))
    return f"""# Provenance of data/aihub/

Qualcomm AI Hub's published measurements on real Snapdragon devices, from the public repository
qualcomm/ai-hub-models, release **{release}** (commit `{commit}`), licensed BSD-3-Clause (its
text: `LICENSE` beside this file). Made by `scripts/aihub-table <copy of ai-hub-models>`, which
reads each model's `perf.yaml` and `info.yaml` and nothing else; re-run it on a newer release to
replace these files. CI and the tests read these files, never the network.

- `perf.csv`: {len(rows)} rows, one per model × component × precision × device × runtime
  (`onnx` = ONNX Runtime with the QNN execution provider, `qnn_dlc`, `qnn_context_binary`,
  `precompiled_qnn_onnx`, `tflite`, `genie`), {len(onnx)} of them `onnx` rows over
  {len({r['model'] for r in onnx})} models. Columns: `model` (AI Hub id), `component` (a model
  may have several graphs), `precision` (`float`, `w8a8`, `w8a16`, …), `device`, `soc` (below),
  `runtime`, `job_status`, `inference_time_ms` (`inference_time_milliseconds`),
  `peak_memory_min_mb` / `peak_memory_max_mb` (`estimated_peak_memory_range_mb`),
  `primary_compute_unit`, `layers_total` / `layers_npu` / `layers_gpu` / `layers_cpu`
  (`layer_counts`), `qairt`, `onnx_runtime`, `tflite` (`tool_versions`).
- `models.csv`: {len(models)} models with their input resolution, parameter count, source
  repository and licence (`info.yaml`).
- `devices.csv`: every device with rows and its SoC.

**Devices → SoC.** Marketing-named devices are mapped by their makers' specifications; boards and
kits name their part. A device not mapped has an empty `soc` — listed, not guessed:
{', '.join(unmapped) or 'none'}.

| device | SoC |
|---|---|
{mapped}

QCS6490 (RB3 Gen 2) is the die npugate's SoC table calls QCM6490: one QNN `soc_model` (93), one
Hexagon v68 NPU. SA8295P is the table's SA8295 (`soc_model` 39).
"""


def main():
    args = sys.argv[1:]
    flags = {}
    for flag in ("--release", "--commit"):
        if flag in args:
            at = args.index(flag)
            flags[flag] = args[at + 1] if at + 1 < len(args) else sys.exit(f"aihub-table: {flag} needs a value")
            del args[at : at + 2]
    if len(args) != 2:
        sys.exit("usage: scripts/aihub-table AI_HUB_MODELS_DIR OUT_DIR [--release TAG --commit SHA]")
    root, out = args
    source = models_dir(root)
    release, commit = release_of(root, flags.get("--release"), flags.get("--commit"))
    rows, models = [], []
    for model_id in sorted(os.listdir(source)):
        folder = os.path.join(source, model_id)
        perf_path, info_path = os.path.join(folder, "perf.yaml"), os.path.join(folder, "info.yaml")
        if os.path.exists(perf_path):
            rows.extend(perf_rows(model_id, yaml.safe_load(open(perf_path)) or {}))
        if os.path.exists(info_path):
            models.append(model_row(model_id, yaml.safe_load(open(info_path)) or {}))
    if not rows:
        sys.exit(f"aihub-table: no perf.yaml under {source}")
    devices = sorted({r["device"] for r in rows})
    os.makedirs(out, exist_ok=True)
    write_csv(os.path.join(out, "perf.csv"), PERF_COLUMNS, rows)
    write_csv(os.path.join(out, "models.csv"), MODEL_COLUMNS, models)
    write_csv(os.path.join(out, "devices.csv"), ["device", "soc"], [{"device": d, "soc": DEVICE_SOCS.get(d, "")} for d in devices])
    with open(os.path.join(out, "PROVENANCE.md"), "w") as handle:
        handle.write(provenance(release, commit, rows, models, devices))
    print(f"aihub-table: {len(rows)} rows, {len(models)} models, {len(devices)} devices from {release} ({commit}) into {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
