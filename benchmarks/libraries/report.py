"""The sweep's results, gathered: one JSON file for every model and mode, and a markdown report.

    python -m benchmarks.libraries.report [--results DIR] [--json FILE] [--markdown FILE] [--run-note TEXT]

The JSON (``benchmarks/results/libraries.json``) keeps every field of each result but the logs;
the markdown has the counts per library and mode (non-strict, strict), then every model that
is not no-harm with its outcome and cause, then every model.
"""

from __future__ import annotations

import argparse
import glob
import importlib.metadata
import json
import os
import subprocess
from collections import Counter

import torch

from unbranch.hf.validate import OUTCOMES

from .harness import RESULTS, LibResult, load

LIBRARIES = ("torchvision", "timm", "diffusers", "kornia")
# the sweep of other fields (results/libraries_fields.json, docs/sweep-libraries-fields.md)
FIELDS = ("torch_geometric", "gpytorch", "pyro", "nflows", "stable_baselines3")
ORDER = LIBRARIES + FIELDS
# the distributions to read versions of, for each library: its own, then what it needs that matters
DISTRIBUTIONS = {
    "torch_geometric": ("torch_geometric",),
    "gpytorch": ("gpytorch", "linear_operator"),
    "pyro": ("pyro-ppl",),
    "nflows": ("nflows",),
    "stable_baselines3": ("stable-baselines3", "gymnasium"),
}


def results(directory: str) -> list[LibResult]:

    out = [load(p) for p in sorted(glob.glob(os.path.join(directory, "*", "*.json")))]
    return sorted(out, key=lambda r: (ORDER.index(r.library) if r.library in ORDER else 99, r.model, r.strict))


def versions(libraries=LIBRARIES) -> dict:
    """torch's and each library's version (the four of the first sweep, or those of the results given)."""
    out = {"torch": torch.__version__}
    for library in libraries:
        for name in DISTRIBUTIONS.get(library, (library,)):
            try:
                out[name] = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                out[name] = None
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    out["unbranch commit"] = head.stdout.strip()
    return out


def record(r: LibResult) -> dict:
    d = r.as_dict(log=False)
    d["both_sides"], d["flipped"] = r.both_sides, r.flipped
    return d


def write_json(directory: str, path: str, note: str = "") -> None:
    found = results(directory)
    data = {"versions": versions(_libraries(found)), "note": note, "results": [record(r) for r in found]}
    with open(path, "w") as f:
        json.dump(data, f, indent=1, default=sorted)


def _libraries(found: list[LibResult]) -> tuple:
    """The libraries of the first sweep where the results are theirs (as before), else those the results have."""
    present = tuple(dict.fromkeys(r.library for r in found))
    return LIBRARIES if not present or set(present) <= set(LIBRARIES) else present


def _cell(text: str, width: int = 200) -> str:
    text = str(text).replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def counts_table(found: list[LibResult]) -> list[str]:
    out = [
        "| library | mode | models | " + " | ".join(OUTCOMES) + " | model time |",
        "|---" * (len(OUTCOMES) + 4) + "|",
    ]
    for library in ORDER:
        for strict in (False, True):
            chosen = [r for r in found if r.library == library and r.strict == strict]
            if not chosen:
                continue
            c = Counter(r.outcome[0] for r in chosen)
            minutes = sum(r.seconds for r in chosen) / 60
            cells = " | ".join(str(c[o]) for o in OUTCOMES)
            out.append(
                f"| {library} | {'strict' if strict else 'non-strict'} | {len(chosen)} | {cells} | {minutes:.0f} min |"
            )
    return out


def cause(r: LibResult) -> str:
    """Where it stops and why, in one line: the outcome's reason, else the plain export's error."""
    outcome, reason = r.outcome
    if outcome == "not built":
        return reason
    where = r.rewritten_where if outcome in ("not fixed", "harm") and r.rewritten_where else r.plain_where
    return f"{where} — {reason or r.plain}" if where else (reason or r.plain)


def write_markdown(directory: str, path: str, note: str = "", causes: dict | None = None, preamble: str = "") -> None:
    """``causes``: model name -> the checked cause (a short phrase), shown instead of the raw reason;
    ``preamble``: markdown placed after the counts (what the sweep found, in words)."""
    found = results(directory)
    causes = causes or {}
    libraries = _libraries(found)
    v = versions(libraries)
    out = [
        f"# Sweep over other libraries: {', '.join(libraries)}",
        "",
        ", ".join(f"{k} {val}" for k, val in v.items() if val) + ".",
        *([note] if note else []),
        "",
        *counts_table(found),
        "",
        *([preamble.strip(), ""] if preamble else []),
    ]
    for outcome in ("harm", "fixed", "not fixed", "other failure", "not built"):
        chosen = [r for r in found if r.outcome[0] == outcome]
        if not chosen:
            continue
        out += [f"## {outcome}", "", "| library | model | mode | dims | cause |", "|---|---|---|---|---|"]
        for r in chosen:
            text = causes.get(f"{r.model}{'.strict' if r.strict else ''}") or causes.get(r.model) or cause(r)
            dims = r.level or "-"
            out.append(
                f"| {r.library} | {r.model} | {'strict' if r.strict else 'non-strict'} | {dims} | {_cell(text, 300)} |"
            )
        out.append("")
    lowered = [r for r in found if r.tried and not r.strict]
    if lowered:
        out += [
            "## Dynamic dimensions given up",
            "",
            "Where the plain export failed for another reason than control flow on data, the next level was "
            "tried (dynamic batch only, Dim.AUTO, static); where a branch had fixed a dimension declared "
            "dynamic, unbranch.export was tried at that level first (its error after the plain one).",
            "",
            "| library | model | level used | why each level above failed |",
            "|---|---|---|---|",
        ]
        for r in lowered:
            why = "; ".join(f"{t[0]}: {' / unbranch: '.join(t[1:])}" for t in r.tried)
            out.append(f"| {r.library} | {r.model} | {r.level} | {_cell(why, 400)} |")
        out.append("")
    out += ["## Every model", "", "| library | model | mode | outcome | dims | s |", "|---|---|---|---|---|---|"]
    out += [
        f"| {r.library} | {r.model} | {'strict' if r.strict else 'non-strict'} | {r.outcome[0]} | "
        f"{r.level or '-'} | {r.seconds:.0f} |"
        for r in found
    ]
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main(argv=None) -> int:

    p = argparse.ArgumentParser(prog="python -m benchmarks.libraries.report", description=__doc__.splitlines()[0])
    p.add_argument("--results", default=RESULTS)
    p.add_argument("--json")
    p.add_argument("--markdown")
    p.add_argument("--causes", help="a JSON file: model -> checked cause (a short phrase)")
    p.add_argument("--note", default="", help="a line under the title (wall time of the run...)")
    p.add_argument("--preamble", help="a markdown file placed after the counts")
    args = p.parse_args(argv)
    causes = json.load(open(args.causes)) if args.causes else None
    if args.json:
        write_json(args.results, args.json, args.note)
    if args.markdown:
        preamble = open(args.preamble).read() if args.preamble else ""
        write_markdown(args.results, args.markdown, args.note, causes, preamble)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
