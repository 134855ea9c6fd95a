"""Publishes what one `npugate run|compare|sweep` in CI wrote, read from npugate's typed JSON.

Called by `ci/npugate-ci run` after npugate ended. Layout of the work directory:

    result/            npugate's --out: verdict.json | compare.json (one run on this machine),
                       rack.json + <serial>/ (devices), sweep.json + matrix.md (a sweep, a merge of
                       shards); a shard of a sweep writes shard-I-of-N/ instead (--result)
    report/            verdict|compare.{txt,md,github.txt,junit.xml} of a run on this machine
    result/<serial>/report/   the same for each device
    evidence/          the signed evidence bundle, when a key was given
    npugate.stderr     what npugate said

It writes `summary.md` (the Markdown verdict) and `junit/<label>.xml` (one JUnit file per judged
target), prints the terminal report, and publishes the outputs verdict, npu_flops_pct, median_ms,
cv_pct, report_dir and exit_code:

- github: appends the summary to $GITHUB_STEP_SUMMARY and the outputs to $GITHUB_OUTPUT, and prints
  the `--format github` workflow commands (annotations naming the fallen nodes);
- gitlab: prints the summary and writes the outputs to `outputs.env`, the job's dotenv report
  (NPUGATE_VERDICT, NPUGATE_NPU_FLOPS_PCT, … for later jobs).

Every number comes from the JSON documents, whose `schema` is checked; none is read from text.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

VERDICT = "npugate.verdict/1"
COMPARE = "npugate.compare/1"
RACK = "npugate.rack/1"
SWEEP = "npugate.sweep/1"
OUTCOME_OF_EXIT = {0: "pass", 1: "fail", 2: "error"}


class Unreadable(Exception):
    """A document npugate should have written is not what this script reads."""


def read_document(path: Path, schema: str) -> dict:
    """The JSON document at `path`, refused unless its `schema` is `schema`."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise Unreadable(f"{path}: {error}") from error
    if not isinstance(document, dict) or document.get("schema") != schema:
        found = document.get("schema") if isinstance(document, dict) else type(document).__name__
        raise Unreadable(f"{path}: schema is {found!r}, expected {schema!r} (written by another npugate version?)")
    return document


@dataclass
class Target:
    """One judged target: this machine or a device."""

    label: str
    document: Optional[dict] = None
    report_dir: Optional[Path] = None
    problem: Optional[str] = None

    def report(self, stem: str, suffix: str) -> Optional[Path]:
        """A report npugate wrote for this target (`verdict.md`, `compare.junit.xml`, …), if it exists."""
        if self.report_dir is None:
            return None
        path = self.report_dir / f"{stem}.{suffix}"
        return path if path.is_file() else None


@dataclass
class Outcome:
    """What the run produced: its targets and the numbers the outputs carry."""

    mode: str
    exit_code: int
    targets: list = field(default_factory=list)
    sweep: Optional[dict] = None
    problems: list = field(default_factory=list)

    @property
    def stem(self) -> str:
        return "compare" if self.mode == "compare" else "verdict"

    def verdict(self) -> str:
        """pass | fail | error: the outcome npugate wrote (rack and sweep: their exit code), else error."""
        if self.sweep is not None and self.sweep.get("exit_code") is not None:
            return OUTCOME_OF_EXIT.get(self.sweep["exit_code"], "error")
        documents = [t.document for t in self.targets if t.document is not None]
        if not documents or any(t.document is None for t in self.targets):
            return "error"
        outcomes = {d["outcome"] for d in documents}
        return "error" if "error" in outcomes else "fail" if "fail" in outcomes else "pass"

    def numbers(self) -> dict:
        """npu_flops_pct (lowest), median_ms and cv_pct (highest) over the judged targets or cells."""
        flops, medians, cvs = [], [], []
        if self.sweep is not None:
            for cell in self.sweep.get("cells", []):
                record = cell.get("record") or {}
                flops.append(record.get("npu_flops_pct"))
                if record.get("emulated"):
                    continue  # host time on the emulator: no device's median or CV
                medians.append(None if record.get("median_ns") is None else record["median_ns"] / 1e6)
                cvs.append(record.get("cv_pct"))
        for target in self.targets:
            side = (target.document or {}).get("candidate") if self.mode == "compare" else target.document
            placement = (side or {}).get("placement") or {}
            latency = (side or {}).get("latency") or {}
            flops.append(placement.get("preferred_flops_pct"))
            medians.append(None if latency.get("median_ns") is None else latency["median_ns"] / 1e6)
            cvs.append(latency.get("cv_pct"))

        def pick(values, choose):
            known = [v for v in values if v is not None]
            # The shortest text that reads back as the same double, as npugate's JSON writes it.
            return "" if not known else repr(float(choose(known)))

        return {"npu_flops_pct": pick(flops, min), "median_ms": pick(medians, max), "cv_pct": pick(cvs, max)}


def collect(mode: str, work: Path, result: Path, exit_code: int) -> Outcome:
    """Reads every document of the run in `work` (npugate's --out is `result`)."""
    outcome = Outcome(mode=mode, exit_code=exit_code)
    try:
        if mode == "sweep":
            if (result / "sweep.json").is_file():
                outcome.sweep = read_document(result / "sweep.json", SWEEP)
            return outcome
        schema, name = (COMPARE, "compare.json") if mode == "compare" else (VERDICT, "verdict.json")
        if (result / "rack.json").is_file():
            rack = read_document(result / "rack.json", RACK)
            for device in rack["devices"]:
                target = Target(label=device["serial"])
                directory = device.get("result_dir")
                if directory and (Path(directory) / name).is_file():
                    target.document = read_document(Path(directory) / name, schema)
                    target.report_dir = Path(directory) / "report"
                else:
                    target.problem = device.get("infrastructure_error") or f"no {name} (exit {device['exit_code']})"
                outcome.targets.append(target)
        elif (result / name).is_file():
            outcome.targets.append(Target(label="local", document=read_document(result / name, schema), report_dir=work / "report"))
    except Unreadable as error:
        outcome.problems.append(str(error))
    return outcome


def last_error(work: Path) -> str:
    """npugate's last error line (for people: the summary and an annotation), or a pointer to the log."""
    try:
        lines = (work / "npugate.stderr").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or [line for line in lines if line.strip()] or ["npugate wrote no result; see the job log"])[-1].strip()


def summary(outcome: Outcome, work: Path, result: Path) -> str:
    """The Markdown verdict: npugate's own Markdown per target, headed per device when there are several."""
    parts = []
    for problem in outcome.problems:
        parts.append(f"**npugate-ci could not read a result:** {problem}\n")
    if outcome.mode == "sweep":
        matrix = result / "matrix.md"
        parts.append(matrix.read_text(encoding="utf-8") if matrix.is_file() else "")
    several = len(outcome.targets) > 1
    if several:
        parts.append("| device | outcome |\n|---|---|\n" + "".join(
            f"| `{t.label}` | {t.document['outcome'] if t.document else 'not judged: ' + (t.problem or '')} |\n" for t in outcome.targets))
    for target in outcome.targets:
        markdown = target.report(outcome.stem, "md")
        if several:
            parts.append(f"\n### {target.label}\n")
        if markdown is not None:
            parts.append(markdown.read_text(encoding="utf-8"))
        elif target.problem:
            parts.append(f"{target.label}: not judged: {target.problem}\n")
    if not outcome.targets and outcome.sweep is None:
        parts.append(f"## npugate: could not judge (exit {outcome.exit_code})\n\n```\n{last_error(work)}\n```\n")
    return "\n".join(p for p in parts if p)


def annotations(outcome: Outcome, work: Path) -> str:
    """GitHub workflow commands: npugate's `--format github` per target, or one error when nothing was judged."""
    def command(kind: str, title: str, message: str) -> str:
        escape = lambda s: s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        title = escape(title).replace(":", "%3A").replace(",", "%2C")
        return f"::{kind} title={title}::{escape(message)}\n"

    text = "".join(command("error", "npugate", problem) for problem in outcome.problems)
    for target in outcome.targets:
        github = target.report(outcome.stem, "github.txt")
        if github is not None:
            text += github.read_text(encoding="utf-8")
        elif target.problem:
            text += command("error", f"npugate {target.label}", f"not judged: {target.problem}")
    if outcome.sweep is not None:
        for cell in outcome.sweep.get("cells", []):
            key = cell["key"]
            name = f"{key['model']} on {key['device']} with {key['runtime']}"
            record = cell.get("record")
            if record is not None and record.get("failed_rules"):
                text += command("error", "npugate sweep", f"{name}: {record['outcome']}: {', '.join(record['failed_rules'])}")
            elif cell.get("state") != "finished":
                text += command("error", "npugate sweep", f"{name}: {cell.get('state')}: {cell.get('error') or 'not run'}")
    if not outcome.targets and outcome.sweep is None:
        text += command("error", "npugate", last_error(work))
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--platform", choices=["github", "gitlab"], required=True)
    parser.add_argument("--mode", choices=["run", "compare", "sweep"], required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--result", default="result", help="npugate's --out below --work (a shard's: shard-I-of-N)")
    parser.add_argument("--exit-code", type=int, required=True)
    args = parser.parse_args()

    result = args.work / args.result
    outcome = collect(args.mode, args.work, result, args.exit_code)
    outputs = {"verdict": outcome.verdict(), **outcome.numbers(), "report_dir": str(args.work), "exit_code": str(args.exit_code)}
    markdown = summary(outcome, args.work, result)
    (args.work / "summary.md").write_text(markdown, encoding="utf-8")
    junit = args.work / "junit"
    for target in outcome.targets:
        report = target.report(outcome.stem, "junit.xml")
        if report is not None:
            junit.mkdir(exist_ok=True)
            shutil.copyfile(report, junit / f"{target.label.replace(':', '_').replace('/', '_')}.xml")

    for target in outcome.targets:
        text = target.report(outcome.stem, "txt")
        if text is not None:
            if args.platform == "github":
                print(f"::group::npugate report: {target.label}")
            print(text.read_text(encoding="utf-8"), end="")
            if args.platform == "github":
                print("::endgroup::")
    if args.platform == "github":
        print(annotations(outcome, args.work), end="")
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a", encoding="utf-8") as step_summary:
            step_summary.write(markdown + "\n")
        with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as step_outputs:
            step_outputs.writelines(f"{name}={value}\n" for name, value in outputs.items())
    else:
        print(markdown)
        (args.work / "outputs.env").write_text(
            "".join(f"NPUGATE_{name.upper()}={value}\n" for name, value in outputs.items()), encoding="utf-8")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
