"""Every ``forward`` in transformers' modeling files through ``transform_method``: robustness and cost.

Real code is the test that matters: the compiler must never crash (only refuse with
``UnbranchError``), should process nearly everything, and must cost little more than the
libcst parse + codegen it cannot avoid (``libcst.parse_module(src).code``, the floor).
Warm calls must be cache hits, and a method that needs nothing must stay its own code object
and cost less than parsing it.

    python benchmarks/corpus.py                 # all ~6,500 methods, a few minutes
    python benchmarks/corpus.py --limit 300     # a quick run
    python benchmarks/corpus.py --profile 200   # also cProfile the cold path on a 200-method sample
    python benchmarks/corpus.py --peer          # side by side with onnx-diagnostic's transform_method

``--peer`` needs ``pip install --no-deps onnx-diagnostic==0.9.3``: its package does not import
with transformers 5, so its ``torch_export_patches/patch_module.py`` is loaded from the file.
Each method is then rewritten cold by both, one after the other, the order alternating.
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
import sys
import textwrap
import time
import traceback
import types
import warnings
from pathlib import Path

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


def load_peer():
    """onnx-diagnostic's ``transform_method``, from its file (with parents that run no ``__init__``)."""
    spec = importlib.util.find_spec("onnx_diagnostic")
    if spec is None:
        sys.exit("--peer needs: pip install --no-deps onnx-diagnostic==0.9.3")
    root = Path(spec.submodule_search_locations[0])
    patches = root / "torch_export_patches"
    for name, folder in (("onnx_diagnostic", root), ("onnx_diagnostic.torch_export_patches", patches)):
        package = types.ModuleType(name)
        package.__path__ = [str(folder)]
        sys.modules.setdefault(name, package)
    name = "onnx_diagnostic.torch_export_patches.patch_module"
    found = importlib.util.spec_from_file_location(name, patches / "patch_module.py")
    module = importlib.util.module_from_spec(found)
    sys.modules[name] = module
    found.loader.exec_module(module)
    return module.transform_method, importlib.metadata.version("onnx-diagnostic")


def time_peer(peer, fn) -> dict:
    start = time.perf_counter()
    try:
        peer(fn)
    except Exception as e:  # the peer refuses what it cannot rewrite by raising: timed all the same
        return {"peer": time.perf_counter() - start, "peer_failed": f"{type(e).__name__}"}
    return {"peer": time.perf_counter() - start}


def measure(fn, peer=None, peer_first: bool = False) -> dict:
    """Cold, warm and floor seconds for one method, and what transform_method made of it."""
    row = where(fn)
    start = time.perf_counter()
    source = textwrap.dedent(inspect.getsource(fn))  # also reads the file into linecache for the cold call
    row["inspect"] = time.perf_counter() - start  # for reference: unbranch reads sources its own way
    row["branchy"] = bool(_BRANCHY.search(source))
    if peer is not None and peer_first:
        row.update(time_peer(peer, fn))
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
    if peer is not None and not peer_first:
        row.update(time_peer(peer, fn))
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


def side_by_side(rows: list[dict], version: str) -> dict:
    """unbranch and the peer on the same methods, cold: totals, medians, 95th percentiles, ratios."""
    ours, theirs = stats([r["cold"] for r in rows]), stats([r["peer"] for r in rows])
    changed = [r for r in rows if r["status"] == "changed"]
    # what p95 would be if every rewritten method cost no more than libcst's parse + codegen of
    # it: the least a compiler that parses the whole function with libcst can reach
    at_floor = stats([r["floor"] if r["status"] == "changed" and r["floor"] else r["cold"] for r in rows])
    return {
        "peer": f"onnx-diagnostic {version}",
        "methods": len(rows),
        "peer_failed": collections.Counter(r["peer_failed"] for r in rows if "peer_failed" in r).most_common(),
        "unbranch": ours,
        "onnx-diagnostic": theirs,
        "total ratio (unbranch/peer)": ratio(ours["total_ms"], theirs["total_ms"]),
        "median ratio": ratio(ours["median_ms"], theirs["median_ms"]),
        "p95 ratio": ratio(ours["p95_ms"], theirs["p95_ms"]),
        "p95 with every rewritten method at its floor": at_floor["p95_ms"],
        "p95 ratio with every rewritten method at its floor": ratio(at_floor["p95_ms"], theirs["p95_ms"]),
        "methods unbranch rewrites": {
            "unbranch": stats([r["cold"] for r in changed]),
            "onnx-diagnostic": stats([r["peer"] for r in changed]),
        },
    }


def where_of(r: dict) -> dict:
    return {"qualname": r["qualname"], "file": r["file"].split("site-packages/")[-1], "line": r["line"]}


def targets(s: dict) -> dict:
    u = s["unchanged_methods"]["all"]
    return {
        "no crash": s["crashed"] == 0,
        ">=99% processed": s["processed_fraction"] >= 0.99,
        "cold <= 2x floor (totals)": s["timing_all"]["cold/floor total"] <= 2,
        "rewritten cold <= 2x floor (totals)": s["timing_by_status"].get("changed", {}).get("cold/floor total", 0) <= 2,
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
    parser.add_argument("--peer", action="store_true", help="also time onnx-diagnostic's transform_method")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    peer, peer_version = load_peer() if args.peer else (None, None)
    info = machine()
    start = time.perf_counter()
    functions, failed, seen = collect()
    collected = time.perf_counter() - start
    # the ~750,000 objects of 500 imported modules would be rescanned by every full collection
    # (0.5 s each), a pause charged to whichever method happens to be timed: exempt them. The
    # heap still grows during the run (what both tools keep, the peer's cyclic garbage), and a full
    # collection, triggered by whatever allocates when it is due, took up to 1.8 s on one method
    # (measured with gc.callbacks): full collections run between methods instead, untimed and
    # recorded; the young generations still collect inside the timed calls, as they would.
    gc.collect()
    gc.freeze()
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], 10**9)
    functions = functions[: args.limit] if args.limit else functions
    rows, full_collections = [], 0.0
    for i, fn in enumerate(functions, 1):
        rows.append(measure(fn, peer, peer_first=i % 2 == 0))
        if i % 100 == 0:
            paused = time.perf_counter()
            gc.collect()
            full_collections += time.perf_counter() - paused
        if i % 500 == 0:
            print(f"{i}/{len(functions)} methods, {time.perf_counter() - start:.0f} s", flush=True)
    gc.set_threshold(*thresholds)
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
        "side_by_side": side_by_side(rows, peer_version) if peer else None,
        "wall_seconds": time.perf_counter() - start,
        "full_collections_between_methods_seconds": full_collections,
    }
    if peer:
        result["targets"]["p95 <= the peer's (same run)"] = result["side_by_side"]["p95 ratio"] <= 1
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
