"""Every ``forward`` in transformers' modeling files through ``transform_method``: robustness and cost.

Real code is the test that matters: the compiler must never crash (only refuse with
``UnbranchError``), should process nearly everything, and must cost little more than the
libcst parse + codegen it cannot avoid (``libcst.parse_module(src).code``, the floor).
Warm calls must be cache hits, and a method that needs nothing must stay its own code object
and cost less than parsing it.

    python benchmarks/corpus.py                 # all ~6,500 methods, a few minutes
    python benchmarks/corpus.py --limit 300     # a quick run
    python benchmarks/corpus.py --profile 200   # also cProfile the cold path on a 200-method sample
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import gc
import importlib
import inspect
import io
import pkgutil
import pstats
import re
import statistics
import textwrap
import time
import traceback
import warnings

import libcst
import torch
import transformers.models
from _common import machine, parse_floor, stats, write

import unbranch

# sources without these words are answered without parsing (unbranch.compiler.pipeline's shortcut)
_BRANCHY = re.compile(r"\b(if|for|while|assert)\b")


def modeling_modules() -> list[str]:
    names = []
    for pkg in pkgutil.iter_modules(transformers.models.__path__):
        if pkg.ispkg:
            spec = importlib.util.find_spec(f"transformers.models.{pkg.name}")
            for mod in pkgutil.iter_modules(spec.submodule_search_locations):
                if mod.name.startswith("modeling_"):
                    names.append(f"transformers.models.{pkg.name}.{mod.name}")
    return names


def collect() -> tuple[list, dict, int]:
    """(unique forward functions, modules that failed to import -> error, forward definitions seen)."""
    found: dict = {}
    failed = {}
    seen = 0
    for name in modeling_modules():
        try:
            module = importlib.import_module(name)
        except Exception as e:  # a missing optional dependency: counted, not benchmarked
            failed[name] = f"{type(e).__name__}: {e}"
            continue
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, torch.nn.Module)
                and value.__module__ == name
                and "forward" in value.__dict__
            ):
                seen += 1
                fn = inspect.unwrap(value.__dict__["forward"])
                found.setdefault(getattr(fn, "__code__", fn), fn)
    return list(found.values()), failed, seen


def where(fn) -> dict:
    code = fn.__code__
    return {"qualname": fn.__qualname__, "file": code.co_filename, "line": code.co_firstlineno}


def measure(fn) -> dict:
    """Cold, warm and floor seconds for one method, and what transform_method made of it."""
    row = where(fn)
    start = time.perf_counter()
    source = textwrap.dedent(inspect.getsource(fn))  # also reads the file into linecache for the cold call
    row["inspect"] = time.perf_counter() - start  # for reference: unbranch reads sources its own way
    row["branchy"] = bool(_BRANCHY.search(source))
    unbranch.load.cache.clear()
    start = time.perf_counter()
    try:
        rm = unbranch.transform_method(fn, strict=False)
    except unbranch.UnbranchError as e:
        row.update(status="refused", cold=time.perf_counter() - start, reason=e.reason, construct=e.construct)
    except Exception as e:
        row.update(status="crash", cold=time.perf_counter() - start, error=f"{type(e).__name__}: {e}")
        row["frames"] = [f"{f.filename}:{f.lineno} {f.name}" for f in traceback.extract_tb(e.__traceback__)]
    else:
        row["cold"] = time.perf_counter() - start
        row["status"] = "changed" if rm.changed else "unchanged"
        if not rm.changed:
            row["own_code"] = rm.code_object is fn.__code__
        start = time.perf_counter()
        unbranch.transform_method(fn, strict=False)
        row["warm"] = time.perf_counter() - start
    start = time.perf_counter()
    try:
        parse_floor(source)
    except libcst.ParserSyntaxError:
        row["floor"] = None
    else:
        row["floor"] = time.perf_counter() - start
    return row


def ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def timing(rows: list[dict]) -> dict:
    cold = [r["cold"] for r in rows]
    floor = [r["floor"] for r in rows]
    out = {"cold": stats(cold), "floor": stats(floor), "inspect.getsource": stats([r["inspect"] for r in rows])}
    out["cold/floor total"] = ratio(sum(cold), sum(floor))
    out["cold/floor median per method"] = statistics.median(c / f for c, f in zip(cold, floor)) if rows else None
    return out


def crash_groups(crashes: list[dict]) -> list[dict]:
    """Crashes grouped by exception type and the innermost unbranch frame that raised."""
    groups: dict = collections.defaultdict(list)
    for r in crashes:
        inner = next((f for f in reversed(r["frames"]) if "/unbranch/" in f), r["frames"][-1])
        groups[(r["error"].split(":")[0], inner.split("/src/")[-1])].append(r)
    return [
        {
            "exception": exc,
            "raised_at": frame,
            "count": len(rs),
            "example": rs[0]["error"],
            "methods": [f"{r['qualname']} ({r['file'].split('site-packages/')[-1]}:{r['line']})" for r in rs],
        }
        for (exc, frame), rs in sorted(groups.items(), key=lambda kv: -len(kv[1]))
    ]


def summarise(rows: list[dict]) -> dict:
    by = collections.defaultdict(list)
    for r in rows:
        by[r["status"]].append(r)
    processed = len(by["changed"]) + len(by["unchanged"])
    timed = [r for r in rows if r["floor"] is not None]
    done = [r for r in timed if "warm" in r]
    cold_done, warm = sum(r["cold"] for r in done), sum(r["warm"] for r in done)
    unchanged = [r for r in by["unchanged"] if r["floor"] is not None]
    slowest = sorted(timed, key=lambda r: r["cold"] / r["floor"], reverse=True)[:15]
    return {
        "methods": len(rows),
        "processed": processed,
        "changed": len(by["changed"]),
        "unchanged": len(by["unchanged"]),
        "refused": len(by["refused"]),
        "crashed": len(by["crash"]),
        "processed_fraction": processed / len(rows) if rows else None,
        "floor_unparsable": len(rows) - len(timed),
        "timing_all": timing(timed),
        "warm": stats([r["warm"] for r in done]),
        "cold/warm total": ratio(cold_done, warm),
        "cold/warm median per method": statistics.median(r["cold"] / r["warm"] for r in done) if done else None,
        "timing_by_status": {s: timing([r for r in timed if r["status"] == s]) for s in by},
        "unchanged_methods": {
            "own_code_object": sum(r["own_code"] for r in by["unchanged"]),
            "not_own_code_object": [where_of(r) for r in by["unchanged"] if not r["own_code"]],
            "all": timing(unchanged),
            "without if/for/while/assert (not parsed)": timing([r for r in unchanged if not r["branchy"]]),
            "with if/for/while/assert (parsed)": timing([r for r in unchanged if r["branchy"]]),
            "cheaper than floor": sum(r["cold"] < r["floor"] for r in unchanged),
        },
        "refusals": collections.Counter(r["reason"] for r in by["refused"]).most_common(),
        "crashes": crash_groups(by["crash"]),
        "highest cold/floor": [
            {**where_of(r), "status": r["status"], "cold_ms": r["cold"] * 1e3, "floor_ms": r["floor"] * 1e3}
            for r in slowest
        ],
    }


def where_of(r: dict) -> dict:
    return {"qualname": r["qualname"], "file": r["file"].split("site-packages/")[-1], "line": r["line"]}


def targets(s: dict) -> dict:
    u = s["unchanged_methods"]["all"]
    return {
        "no crash": s["crashed"] == 0,
        ">=99% processed": s["processed_fraction"] >= 0.99,
        "cold <= 2x floor (totals)": s["timing_all"]["cold/floor total"] <= 2,
        "warm >= 50x faster than cold (totals)": s["cold/warm total"] >= 50,
        "unchanged cheaper than parsing (totals)": u["cold/floor total"] < 1,
        "unchanged keep their code object": not s["unchanged_methods"]["not_own_code_object"],
    }


def profile(functions: list, n: int) -> dict:
    """cProfile the cold path on ``n`` methods spread over the corpus: where unbranch's time goes."""
    sample = functions[:: max(1, len(functions) // n)][:n]
    prof = cProfile.Profile()
    for fn in sample:
        unbranch.load.cache.clear()
        prof.enable()
        try:
            unbranch.transform_method(fn, strict=False)
        except Exception:  # refusals and crashes are counted by the main run
            pass
        prof.disable()
    st = pstats.Stats(prof, stream=io.StringIO())
    total = st.total_tt
    rows = []
    for (path, line, name), (_, calls, tottime, cumtime, _) in st.stats.items():
        rows.append(
            {
                "function": f"{path.split('/src/')[-1].split('site-packages/')[-1]}:{line}({name})",
                "calls": calls,
                "tottime_s": tottime,
                "cumtime_s": cumtime,
            }
        )
    rows.sort(key=lambda r: -r["cumtime_s"])
    return {
        "methods": len(sample),
        "total_s": total,
        "top_unbranch_cumulative": [r for r in rows if r["function"].startswith("unbranch/")][:30],
        "top_tottime": sorted(rows, key=lambda r: -r["tottime_s"])[:25],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, help="only the first N methods")
    parser.add_argument("--profile", type=int, metavar="N", help="also profile the cold path on N methods")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    info = machine()
    start = time.perf_counter()
    functions, failed, seen = collect()
    collected = time.perf_counter() - start
    # the ~750,000 objects of 500 imported modules would be rescanned by every full collection
    # (0.5 s each), a pause charged to whichever method happens to be timed: exempt them
    gc.collect()
    gc.freeze()
    functions = functions[: args.limit] if args.limit else functions
    rows = []
    for i, fn in enumerate(functions, 1):
        rows.append(measure(fn))
        if i % 500 == 0:
            print(f"{i}/{len(functions)} methods, {time.perf_counter() - start:.0f} s", flush=True)
    summary = summarise(rows)
    result = {
        "machine": info,
        "modules_failed_to_import": failed,
        "forward_definitions_seen": seen,
        "unique_forward_methods": len(functions),
        "collect_seconds": collected,
        "limit": args.limit,
        "summary": summary,
        "targets": targets(summary),
        "wall_seconds": time.perf_counter() - start,
    }
    if args.profile:
        result["profile"] = profile(functions, args.profile)
    path = write("corpus" if not args.limit else f"corpus_limit{args.limit}", result)
    t = summary["timing_all"]
    print(
        f"{len(rows)} methods: {summary['processed']} processed ({summary['changed']} changed), "
        f"{summary['refused']} refused, {summary['crashed']} crashed; cold/floor {t['cold/floor total']:.2f}, "
        f"cold/warm {summary['cold/warm total']:.0f}; targets {result['targets']} -> {path}"
    )


if __name__ == "__main__":
    main()
