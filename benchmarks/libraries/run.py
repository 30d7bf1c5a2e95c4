"""The sweep over other libraries' models: each validated in its own forked process, results kept per model.

    python -m benchmarks.libraries.run [--library L] [--filter RE] [--strict] [--jobs N]
                                       [--timeout S] [--results DIR] [--report FILE.md] [--json FILE]

As in ``unbranch validate --all`` (:mod:`unbranch.hf.sweep`), the parent imports torch and the
libraries once and forks a child per model; a child's result is one JSON file in ``--results``,
written when it finishes, so a re-run skips what is done and an interrupted sweep resumes.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
import time
from collections import Counter

import torch

from . import tv_ops

if importlib.util.find_spec("torchvision") is not None:  # (the other fields' sweeps run without it)
    tv_ops.install()  # before anything imports torchvision (timm does)

from unbranch.hf.sweep import progress_line, run_forked  # noqa: E402
from unbranch.hf.validate import OUTCOMES, error_line  # noqa: E402

from .harness import RESULTS, Entry, LibResult, load, save, validate  # noqa: E402

LIBRARIES = ("torchvision", "timm", "diffusers", "kornia")
# fields the first four lack (pip install torch_geometric==2.8.1 gpytorch==1.15.2 pyro-ppl==1.9.2 nflows==0.14
# stable-baselines3==2.9.2 -c <a file pinning torch>): benchmarks/results/libraries_fields.json
FIELDS = ("torch_geometric", "gpytorch", "pyro", "nflows", "stable_baselines3")
MODULES = {
    "torchvision": "tv",
    "timm": "timm_models",
    "diffusers": "diffusers_models",
    "kornia": "kornia_models",
    "torch_geometric": "pyg_models",
    "gpytorch": "gpytorch_models",
    "pyro": "pyro_models",
    "nflows": "nflows_models",
    "stable_baselines3": "sb3_models",
}


def entries(libraries=LIBRARIES) -> list[Entry]:
    import importlib

    out = []
    for library in libraries:
        out += importlib.import_module(f"benchmarks.libraries.{MODULES[library]}").entries()
    return out


def result_path(directory: str, entry: Entry, strict: bool) -> str:
    return os.path.join(directory, entry.library, f"{entry.name}{'.strict' if strict else ''}.json")


def _child(entry: Entry, strict: bool, path: str, level_limit: float | None) -> None:
    torch.set_num_threads(1)
    try:
        res = validate(entry, strict=strict, level_limit=level_limit)
    except Exception as e:
        res = LibResult(entry.name, "float32", strict=strict, source=entry.library, library=entry.library)
        res.built = error_line(e)
    save(res, path)


def sweep(
    chosen: list[Entry],
    directory: str,
    strict: bool,
    jobs: int,
    timeout: float,
    progress=None,
    level_limit: float | None = None,
) -> None:
    paths = {e.name: result_path(directory, e, strict) for e in chosen}
    entries = {e.name: e for e in chosen}

    def lost(name: str, why: str, elapsed: float) -> None:
        entry = entries[name]
        res = LibResult(name, "float32", strict=strict, source=entry.library, library=entry.library)
        res.mode, res.plain, res.seconds = entry.mode, why, elapsed
        save(res, paths[name])

    tasks = {e.name: (_child, (e, strict, paths[e.name], level_limit)) for e in chosen}
    run_forked(tasks, paths, jobs, timeout, lost, progress)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.libraries.run", description=__doc__.splitlines()[0])
    p.add_argument("--library", action="append", choices=LIBRARIES + FIELDS, help="repeatable; default: the first four")
    p.add_argument("--filter", help="regular expression on the model names")
    p.add_argument("--strict", action="store_true", help="strict torch.export (plain and unbranch.export)")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument(
        "--level-limit",
        type=float,
        help="seconds a plain export may take at a level of dynamic dimensions before the next level is tried",
    )
    p.add_argument("--results", default=RESULTS, help=f"one JSON per model (default {RESULTS}/)")
    p.add_argument("--report", help="write the markdown report (docs/sweep-libraries.md)")
    p.add_argument("--json", help="write every result in one JSON file (benchmarks/results/libraries.json)")
    p.add_argument(
        "--control-flow-only",
        action="store_true",
        help="only the models whose non-strict result in --results says the plain export stopped at control flow",
    )
    p.add_argument("--list", action="store_true", help="print the chosen models and stop")
    args = p.parse_args(argv)
    chosen = entries(args.library or LIBRARIES)
    if args.filter:
        chosen = [e for e in chosen if re.search(args.filter, e.name)]
    if args.control_flow_only:
        done = {e.name: result_path(args.results, e, False) for e in chosen}
        chosen = [e for e in chosen if os.path.exists(done[e.name]) and load(done[e.name]).plain_control_flow]
    if args.list:
        print("\n".join(f"{e.library:12} {e.name}" for e in chosen))
        return 0
    started = time.monotonic()
    sweep(
        chosen,
        args.results,
        args.strict,
        args.jobs,
        args.timeout,
        lambda d, t, r: progress_line(d, t, r, started),
        args.level_limit,
    )
    wall = time.monotonic() - started
    results = [load(p) for e in chosen if os.path.exists(p := result_path(args.results, e, args.strict))]
    print(summary(results))
    print(f"wall time of this run: {wall / 60:.1f} min")
    if args.json or args.report:
        from . import report

        if args.json:
            report.write_json(args.results, args.json)
        if args.report:
            report.write_markdown(args.results, args.report)
    return 0


def summary(results: list[LibResult]) -> str:
    lines = []
    for library in dict.fromkeys(r.library for r in results):
        c = Counter(r.outcome[0] for r in results if r.library == library)
        lines.append(f"{library:12} " + "  ".join(f"{o} {c[o]}" for o in OUTCOMES))
    for r in results:
        if r.outcome[0] in ("harm", "not fixed", "fixed"):
            lines.append(f"  {r.outcome[0]:<10} {r.library}/{r.model}: {r.outcome[1] or r.plain_where}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
