"""Validate every architecture: one forked process per model, a time limit, results kept on disk.

Each result is a JSON file in the results directory, written when its model finishes; a
re-run skips the models that have one, so an interrupted sweep resumes where it stopped.
The parent imports torch and transformers once; children fork from it, so a model costs
its own build and exports only, and a crash or a hang costs that model alone.
"""

from __future__ import annotations

import inspect
import json
import multiprocessing
import os
import re
import sys
import time
from collections import Counter
from dataclasses import fields

import torch

from .validate import OUTCOMES, Result, error_line, validate
from .zoo import MODELS


def targets(pattern: str | None = None, shard: tuple[int, int] | None = None, source: str | None = None) -> list[str]:
    """Zoo models, then every base model class of transformers, matching ``pattern``; shard ``(i, n)`` of them.

    ``source``: only the models whose modeling file matches it (``torch.float16|finfo``: a
    float16-only branch is likely, worth a float16 sweep).
    """
    from .factory import base_model_classes

    names = list(dict.fromkeys([*MODELS, *sorted(set(base_model_classes().values()))]))
    if pattern:
        names = [n for n in names if re.search(pattern, n)]
    if source:
        names = [n for n in names if re.search(source, _modeling_source(n))]
    if shard:
        i, n = shard
        names = names[i - 1 :: n]
    return names


def _modeling_source(name: str) -> str:
    from .factory import model_class

    try:
        return inspect.getsource(sys.modules[model_class(name).__module__])
    except Exception:  # a class that does not import (missing optional library): no source to match
        return ""


def result_path(directory: str, name: str, dtype: str, strict: bool) -> str:
    return os.path.join(directory, f"{name}.{dtype}{'.strict' if strict else ''}.json")


def load(path: str) -> Result:
    with open(path) as f:
        d = json.load(f)
    known = {f.name for f in fields(Result)}
    return Result(**{k: v for k, v in d.items() if k in known})


def _save(res: Result, path: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res.as_dict(log=True), f, indent=1, default=sorted)
    os.replace(tmp, path)  # a result file is complete or absent


def _child(name: str, dtype: str, strict: bool, path: str) -> None:
    torch.set_num_threads(1)  # --jobs decides the parallelism
    try:
        res = validate(name, getattr(torch, dtype), strict=strict)
    except Exception as e:  # a name the factory cannot resolve...: a result, not a traceback on the console
        res = Result(name, dtype, strict=strict, built=error_line(e))
    _save(res, path)


def run_forked(tasks: dict, paths: dict, jobs: int, timeout: float, lost, progress=None) -> None:
    """Run each task ``name -> (target, args)`` whose result file ``paths[name]`` is not there yet in a
    forked process of its own, ``jobs`` at a time, killed after ``timeout`` seconds.

    ``lost(name, why, seconds)`` saves a result for a child that left none (timed out, crashed);
    ``progress(done, todo, result)`` is called as each finishes. Interrupted (Ctrl-C), it stops
    there: what finished is kept, and a re-run goes on from there.
    """
    pending = [n for n in tasks if not os.path.exists(paths[n])]
    ctx = multiprocessing.get_context("fork")
    running: dict[str, tuple] = {}
    done, todo = 0, len(pending)
    try:
        while pending or running:
            while pending and len(running) < jobs:
                name = pending.pop(0)
                target, args = tasks[name]
                proc = ctx.Process(target=target, args=args, daemon=True)
                proc.start()
                running[name] = (proc, time.monotonic())
            time.sleep(0.2)
            for name, (proc, started) in list(running.items()):
                elapsed = time.monotonic() - started
                if proc.is_alive() and elapsed < timeout:
                    continue
                if proc.is_alive():
                    proc.kill()
                    why = f"TimeoutError: no result within {timeout:.0f}s"
                else:
                    why = f"crashed (exit code {proc.exitcode})"
                proc.join()
                if not os.path.exists(paths[name]):
                    lost(name, why, elapsed)
                del running[name]
                done += 1
                if progress:
                    progress(done, todo, load(paths[name]))
    except KeyboardInterrupt:
        for proc, _ in running.values():
            proc.kill()
            proc.join()


def sweep(
    names: list[str],
    directory: str,
    dtype: str = "float32",
    strict: bool = False,
    jobs: int = 1,
    timeout: float = 300.0,
    progress=None,
) -> list[Result]:
    """Validate ``names`` not yet in ``directory``, ``jobs`` at a time; the results for ``names``.

    Interrupted (Ctrl-C), it returns the results there are; a re-run goes on from there.

    ``progress(done, todo, result)`` is called as each model of this run finishes.
    """
    os.makedirs(directory, exist_ok=True)
    paths = {n: result_path(directory, n, dtype, strict) for n in names}
    run_forked(
        {n: (_child, (n, dtype, strict, paths[n])) for n in names},
        paths,
        jobs,
        timeout,
        lambda n, why, elapsed: _save(Result(n, dtype, strict=strict, plain=why, seconds=elapsed), paths[n]),
        progress,
    )
    return [load(paths[n]) for n in names if os.path.exists(paths[n])]


def counts(results: list[Result]) -> Counter:
    return Counter(r.outcome[0] for r in results)


def summary(results: list[Result]) -> str:
    """Outcome counts, then every case other than no-harm and fixed with its reason."""
    c = counts(results)
    lines = ["  ".join(f"{o} {c[o]}" for o in OUTCOMES) + f"  (total {len(results)})"]
    for outcome in ("harm", "not fixed", "fixed"):
        for r in results:
            if r.outcome[0] == outcome:
                lines.append(f"  {outcome:<10} {r.model}: {r.outcome[1] or r.plain_where}")
    return "\n".join(lines)


def _cell(text: str, width: int = 140) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def markdown(results: list[Result], title: str, planned: int, verbose: bool = False, run: str = "") -> str:
    """The sweep's report: counts, the cases that matter with their reasons, then every architecture.

    ``run``: what this run of the sweep did (how many models it validated, in what wall time).
    """
    c = counts(results)
    seconds = sum(r.seconds for r in results)
    out = [
        f"# {title}",
        "",
        f"torch {torch.__version__}, transformers {_transformers_version()}; {len(results)} of {planned} models "
        f"validated, {seconds / 60:.0f} min of model time (the sum of each model's build, exports and comparisons).",
        *([run] if run else []),
        "",
        "| " + " | ".join(OUTCOMES) + " |",
        "|" + "---|" * len(OUTCOMES),
        "| " + " | ".join(str(c[o]) for o in OUTCOMES) + " |",
        "",
    ]
    for outcome in ("harm", "not fixed", "fixed"):
        chosen = [r for r in results if r.outcome[0] == outcome]
        if chosen:
            out += [f"## {outcome}", "", "| model | plain export | where | unbranch |", "|---|---|---|---|"]
            out += [
                f"| {r.model} | {_cell(r.plain, 80)} | {r.plain_where} | {_cell(r.outcome[1] or 'ok', 240)} |"
                for r in chosen
            ]
            out.append("")
    reasons = Counter(_cell(r.outcome[1], 100) for r in results if r.outcome[0] in ("not built", "other failure"))
    if reasons:
        out += ["## Not built and other failures, by reason", "", "| models | reason |", "|---|---|"]
        out += [f"| {n} | {reason} |" for reason, n in reasons.most_common()]
        out.append("")
    out += ["## All models", "", "| model | source | outcome | reason | s |", "|---|---|---|---|---|"]
    out += [f"| {r.model} | {r.source} | {r.outcome[0]} | {_cell(r.outcome[1])} | {r.seconds:.0f} |" for r in results]
    if verbose:
        out += ["", "## Logs", ""]
        for r in results:
            if r.log.strip():
                out += [
                    f"<details><summary>{r.model}</summary>",
                    "",
                    "```",
                    r.log.strip()[-20000:],
                    "```",
                    "</details>",
                ]
    return "\n".join(out) + "\n"


def _transformers_version() -> str:
    import transformers

    return transformers.__version__


def progress_line(done: int, total: int, res: Result, started: float, stream=sys.stderr) -> None:
    """``[done/total] elapsed, eta  model  outcome``, rewritten in place."""
    elapsed = time.monotonic() - started
    eta = f"{elapsed / done * (total - done) / 60:.0f} min left" if done else ""
    line = f"[{done}/{total}] {elapsed / 60:.0f} min, {eta}  {res.model:<32} {res.outcome[0]}"
    print(f"\r{line:<100}", end="" if done < total else "\n", file=stream, flush=True)
