"""What ``torch_export_rewrite(model)`` adds to the export of models that export fine without it (issue 7).

Users wrap every export in the context, so its price on models that export fine already is
what most of them pay. For each tiny float32 model of tests/test_do_no_harm.py, in one
process: the export without and inside the context, interleaved (order alternating) so a
busy moment on a shared machine hits both, ratio of the medians of ``--repeats`` runs and
median of the per-pair ratios, in CPU time (wall time recorded too); and the context alone
(discovery, rewriting, swapping in and out), cold (empty rewrite cache, as in a fresh
process) and warm. The function calls of one export of each kind are counted too: unlike
times, a count the load cannot move.

    python benchmarks/harm_overhead.py [MODEL ...] [--repeats 7]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
import warnings

import torch
from _common import calls, machine, write

import unbranch
from unbranch.hf.zoo import EXPORT_TODAY, MODELS

MODELS_COVERED = EXPORT_TODAY  # the do-no-harm suite's models


def timed(call) -> tuple[float, float]:
    """(wall, CPU) seconds of one call: another process on the cores inflates wall time more than CPU time."""
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - wall, time.process_time() - cpu


def measure(name: str, repeats: int) -> dict:
    tiny = MODELS[name]
    model = tiny.build(name)
    example = tiny.inputs(2, 7)
    dynamic = tiny.dynamic_shapes(example)

    def plain():
        torch.export.export(model, (), kwargs=example, dynamic_shapes=dynamic)

    def rewritten():
        with unbranch.torch_export_rewrite(model):
            plain()

    def context():
        with unbranch.torch_export_rewrite(model) as report:
            return report

    with torch.no_grad():
        model(**example)
    plain()  # the first exports of a model pay one-time setup: not measured
    rewritten()
    unbranch.load.cache.clear()
    cold = timed(context)[1]
    runs: dict[str, list] = {"plain": [], "rewritten": []}
    order = [("plain", plain), ("rewritten", rewritten)]
    for i in range(repeats):
        for label, call in order if i % 2 == 0 else order[::-1]:
            runs[label].append(timed(call))
    warm = statistics.median(timed(context)[1] for _ in range(max(repeats, 5)))
    counted = calls(plain), calls(rewritten)
    cpu = {k: statistics.median(c for _, c in v) for k, v in runs.items()}
    # each rewritten run over the plain run next to it: load that drifts over seconds cancels out
    paired = statistics.median(r[1] / p[1] for p, r in zip(runs["plain"], runs["rewritten"]))
    wall = {k: statistics.median(w for w, _ in v) for k, v in runs.items()}
    return {
        "rewritten_functions": [rm.qualname for rm in context()],
        "plain_cpu_s": round(cpu["plain"], 4),
        "rewritten_cpu_s": round(cpu["rewritten"], 4),
        "ratio": round(cpu["rewritten"] / cpu["plain"], 4),
        "paired_ratio": round(paired, 4),
        "wall_ratio": round(wall["rewritten"] / wall["plain"], 4),
        "calls": {"plain": counted[0], "rewritten": counted[1], "ratio": round(counted[1] / counted[0], 5)},
        "context_cold_cpu_s": round(cold, 5),
        "context_warm_cpu_s": round(warm, 5),
        "runs_wall_cpu_s": {k: [[round(w, 4), round(c, 4)] for w, c in v] for k, v in runs.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=MODELS_COVERED)
    parser.add_argument("--repeats", type=int, default=7, help="exports of each kind per model (interleaved)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)  # tiny configs make transformers warn about token ids
    torch.set_num_threads(1)  # a second OpenMP thread stalls whenever another process takes a core
    info = machine()
    results = {}
    for name in args.models:
        results[name] = res = measure(name, args.repeats)
        print(
            f"{name:22s} plain {res['plain_cpu_s']:6.3f}s  in context {res['rewritten_cpu_s']:6.3f}s  "
            f"ratio {res['ratio']:.3f} (paired {res['paired_ratio']:.3f}, wall {res['wall_ratio']:.3f})  context cold "
            f"{res['context_cold_cpu_s'] * 1e3:6.1f}ms warm {res['context_warm_cpu_s'] * 1e3:5.2f}ms  "
            f"calls {res['calls']['rewritten'] - res['calls']['plain']:+d}  rewrote {len(res['rewritten_functions'])}",
            flush=True,
        )
    ratios = [r["ratio"] for r in results.values()]
    summary = {
        "median_ratio": round(statistics.median(ratios), 4),
        "max_ratio": max(ratios),
        "median_paired_ratio": round(statistics.median(r["paired_ratio"] for r in results.values()), 4),
        "max_context_cold_cpu_s": max(r["context_cold_cpu_s"] for r in results.values()),
        "max_context_warm_cpu_s": max(r["context_warm_cpu_s"] for r in results.values()),
        "max_calls_ratio": max(r["calls"]["ratio"] for r in results.values()),
    }
    result = {
        "machine": info,
        "what": "export CPU time inside torch_export_rewrite(model) / plain; float32, inputs (2, 7), "
        "dynamic batch and sequence (batch only for pixels and mel frames), non-strict export",
        "repeats": args.repeats,
        "torch_threads": torch.get_num_threads(),
        "summary": summary,
        "models": results,
    }
    path = write("harm_overhead", result)
    print(f"median ratio {summary['median_ratio']:.3f}, max {summary['max_ratio']:.3f} -> {path}")


if __name__ == "__main__":
    main()
