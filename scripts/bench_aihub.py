"""The steps of scripts/bench-aihub (see there): preflight the rebuilt AI Hub architectures, collect
their graph features, and print placement agreement with AI Hub's published device runs.

    python scripts/bench_aihub.py preflight MODELS_DIR NPUGATE
    python scripts/bench_aihub.py features MODELS_DIR NPUGATE DATA_DIR
    python scripts/bench_aihub.py agreement MODELS_DIR DATA_DIR
    python scripts/bench_aihub.py heldout MODELS_DIR NPUGATE DATA_DIR

Standard library only.
"""

import csv
import json
import os
import subprocess
import sys
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

# The SoCs npugate's host HTP judges that AI Hub measured `onnx` rows on (QCS6490 is QCM6490's die;
# AI Hub ran no float onnx rows there). SA8295P has no `onnx` rows: its qnn_dlc rows are compared when
# a preflight judged SA8295 (add it here; left out by default to spare a loaded 2-core machine).
FLOAT_SOCS = ["SM8650", "SM8750", "SM8850"]
QUANTIZED_SOCS = ["SM8650", "SM8750", "SM8850", "QCM6490"]
# npugate SoC -> (AI Hub SoC in data/aihub/perf.csv, the runtime compared, the device whose row is read).
COMPARED = {
    "SM8650": ("SM8650", "onnx", "Samsung Galaxy S24"),
    "SM8750": ("SM8750", "onnx", "Samsung Galaxy S25"),
    "SM8850": ("SM8850", "onnx", "Snapdragon 8 Elite Gen 5 QRD"),
    "QCM6490": ("QCS6490", "onnx", "Dragonwing RB3 Gen 2 Vision Kit"),
    "SA8295": ("SA8295P", "qnn_dlc", "SA8295P ADP"),
}
# Models kept out of the estimator's reference features: the acceptance check estimates them
# (a classifier, a segmenter and a detector users ship: #47).
HELD_OUT = ["resnet50", "segformer_base", "yolov8_det"]


def variants(models_dir):
    """(model id, precision, path) of every rebuilt model file, in build order."""
    for model_id in sorted(os.listdir(models_dir)):
        meta_path = os.path.join(models_dir, model_id, "model.json")
        if not os.path.exists(meta_path):
            continue
        meta = json.load(open(meta_path))
        for precision, name in meta["files"].items():
            yield model_id, precision, os.path.join(models_dir, model_id, name)


def preflight_dir(path):
    return path[: -len(".onnx")] + ".preflight"


def preflight(models_dir, npugate, timeout="900"):
    """Preflights every rebuilt model not yet judged (floats first); a preflight still running after
    `timeout` seconds is stopped and left unjudged (named, never counted)."""
    ordered = sorted(variants(models_dir), key=lambda v: v[1] != "float")
    for model_id, precision, path in ordered:
        out = preflight_dir(path)
        report = os.path.join(out, "preflight.json")
        if os.path.exists(report) and os.path.getmtime(report) > os.path.getmtime(path):
            continue
        socs = FLOAT_SOCS if precision == "float" else QUANTIZED_SOCS
        args = [npugate, "preflight", "--model", path, "--no-execute", "--out", out]
        for soc in socs:
            args += ["--soc", soc]
        child = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            _, stderr = child.communicate(timeout=float(timeout))
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, 15)
            child.communicate()
            print(f"preflight {model_id} {precision}: stopped after {timeout} s, not judged", file=sys.stderr)
            continue
        state = {0: "pass", 1: "fail"}.get(child.returncode, f"exit {child.returncode}")
        print(f"preflight {model_id} {precision}: {state}", file=sys.stderr)
        if child.returncode > 1:
            print(stderr[-2000:], file=sys.stderr)


def features(models_dir, npugate, data_dir):
    """data_dir/features.json: each rebuilt model's graph features, as `npugate estimate` computes them."""
    def one(variant):
        model_id, precision, path = variant
        out = preflight_dir(path)[: -len(".preflight")] + ".estimate"
        args = [npugate, "estimate", "--model", path, "--json", "--out", out]
        done = subprocess.run(args, capture_output=True, text=True)
        if done.returncode > 1:
            sys.exit(f"bench-aihub: npugate estimate --model {path} failed: {done.stderr[-2000:]}")
        return {"model": model_id, "precision": precision, "features": json.loads(done.stdout)["features"]}

    with ThreadPoolExecutor(max_workers=6) as pool:
        computed = list(pool.map(one, variants(models_dir)))
    # Entries of models not rebuilt in models_dir are kept from the existing file: a few models can
    # be added without rebuilding every one.
    path = os.path.join(data_dir, "features.json")
    rebuilt = {(e["model"], e["precision"]) for e in computed}
    if os.path.exists(path):
        kept = json.load(open(path))
        computed += [
            e
            for e in kept["models"] + kept.get("held_out_models", [])
            if (e["model"], e["precision"]) not in rebuilt
        ]
    computed.sort(key=lambda e: (e["model"], e["precision"]))
    entries = [e for e in computed if e["model"] not in HELD_OUT]
    held_out = [e for e in computed if e["model"] in HELD_OUT]
    document = {
        "schema": "npugate.aihub-features/1",
        "made_by": "scripts/bench-aihub (npugate estimate --json on scripts/aihub_models.py's rebuilt models)",
        "held_out": HELD_OUT,
        "models": entries,
        "held_out_models": held_out,
    }
    with open(path, "w") as handle:
        json.dump(document, handle, indent=1, sort_keys=True)
        handle.write("\n")
    print(f"bench-aihub: features of {len(entries)} model files in {data_dir}/features.json", file=sys.stderr)


def published(data_dir):
    """(model, precision, AI Hub SoC, runtime, device) -> the row."""
    rows = {}
    with open(os.path.join(data_dir, "perf.csv")) as handle:
        for row in csv.DictReader(handle):
            rows[(row["model"], row["precision"], row["soc"], row["runtime"], row["device"])] = row
    return rows


def npugate_view(soc):
    """(all on the HTP, what stayed off) from one SoC's preflight verdict."""
    if not soc["compiled"]:
        error = (soc.get("error") or "").splitlines()[0:1]
        return False, "not compiled: " + (error[0][:90] if error else "?")
    left = sorted({f["op_type"] for f in soc["fallback"] if not f.get("expected")})
    if left:
        return False, f"{sum(1 for f in soc['fallback'] if not f.get('expected'))} nodes on CPU: " + ",".join(left)
    return True, "all on HTP"


def agreement(models_dir, data_dir):
    rows = published(data_dir)
    lines, tally = [], defaultdict(lambda: [0, 0])
    for model_id, precision, path in variants(models_dir):
        report_path = os.path.join(preflight_dir(path), "preflight.json")
        if not os.path.exists(report_path):
            continue
        for soc in json.load(open(report_path))["socs"]:
            hub_soc, runtime, device = COMPARED[soc["soc"]]
            row = rows.get((model_id, precision, hub_soc, runtime, device))
            if row is None or soc["outcome"] == "error":
                continue
            total, npu = int(row["layers_total"] or 0), int(row["layers_npu"] or 0)
            hub_all = total > 0 and npu == total
            ours_all, ours = npugate_view(soc)
            agree = hub_all == ours_all
            tally[(soc["soc"], runtime)][0] += agree
            tally[(soc["soc"], runtime)][1] += 1
            hub = "all on NPU" if hub_all else f"{total - npu} of {total} layers off the NPU"
            lines.append((model_id, precision, soc["soc"], runtime, "yes" if agree else "NO", hub, ours))
    header = ("model", "precision", "soc", "AI Hub runtime", "agree", "AI Hub (device)", "npugate preflight (host HTP)")
    widths = [max(len(str(x[i])) for x in lines + [header]) for i in range(len(header))]
    print("Placement: npugate preflight (QNN 2.51.0 host HTP) vs AI Hub's published layer counts")
    for line in [header] + lines:
        print("  ".join(str(v).ljust(w) for v, w in zip(line, widths)).rstrip())
    print()
    agreed = sum(a for a, _ in tally.values())
    judged = sum(n for _, n in tally.values())
    for (soc, runtime), (a, n) in sorted(tally.items()):
        print(f"agreement {soc} ({runtime}): {a}/{n} = {100 * a / n:.0f}%")
    onnx = [(a, n) for (s, r), (a, n) in tally.items() if r == "onnx"]
    print(f"agreement, onnx rows: {sum(a for a, _ in onnx)}/{sum(n for _, n in onnx)}"
          f" = {100 * sum(a for a, _ in onnx) / max(1, sum(n for _, n in onnx)):.0f}%;"
          f" all rows: {agreed}/{judged} = {100 * agreed / max(1, judged):.0f}%"
          f" over {len({l[0] for l in lines})} architectures")


def heldout(models_dir, npugate, data_dir):
    rows = published(data_dir)
    print("Held-out check: npugate estimate on models kept out of the fit vs AI Hub's onnx rows")
    for model_id in HELD_OUT:
        for _, precision, path in [v for v in variants(models_dir) if v[0] == model_id]:
            for soc in ["SM8650", "SM8750", "SM8850"]:
                done = subprocess.run(
                    [npugate, "estimate", "--model", path, "--soc", soc, "--json", "--reference", data_dir],
                    capture_output=True, text=True,
                )
                if done.returncode > 1:
                    print(f"  {model_id} {precision} {soc}: npugate estimate failed: {done.stderr.strip()[-300:]}")
                    continue
                estimate = json.loads(done.stdout)["socs"][0]
                row = rows.get((model_id, precision, soc, "onnx", COMPARED[soc][2]))
                if row is None or estimate.get("estimate_ms") is None:
                    print(f"  {model_id} {precision} {soc}: no comparison ({estimate.get('no_estimate') or 'no AI Hub row'})")
                    continue
                measured = float(row["inference_time_ms"])
                predicted = estimate["estimate_ms"]
                error = estimate["error"]
                relative = abs(predicted - measured) / measured
                within = "within" if relative <= error["p90_rel"] else "OUTSIDE"
                print(
                    f"  {model_id} {precision} {soc}: estimate {predicted:.3f} ms vs AI Hub {measured:.3f} ms"
                    f" ({COMPARED[soc][2]}): {100 * relative:.0f}% off; stated error median"
                    f" {100 * error['median_rel']:.0f}%, p90 {100 * error['p90_rel']:.0f}%: {within} the p90"
                )


def main():
    command, args = sys.argv[1], sys.argv[2:]
    {"preflight": preflight, "features": features, "agreement": agreement, "heldout": heldout}[command](*args)


if __name__ == "__main__":
    main()
