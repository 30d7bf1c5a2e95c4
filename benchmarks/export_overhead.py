"""What ``torch_export_rewrite`` costs a tiny BART: export time, eager time, entering the context.

Users wrap every export in the context manager and may leave eager code running inside it,
so both must stay close to plain: export within 10%, an eager forward within 5%. Float32
keeps the plain export working (the float16 clamp is skipped by Python's own ``and``), so
the two exports trace the same graph and differ only by unbranch. Plain and rewritten runs
alternate in one process, in both orders, so a busy moment on a shared machine hits both;
the function calls of one export of each kind are counted too, a measure load cannot move.

    python benchmarks/export_overhead.py [--exports 15] [--eager-blocks 1000]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch
from _common import calls, machine, stats, write

import unbranch
from unbranch.hf.zoo import MODELS

NAME = "BartModel"


def timed(call) -> tuple[float, float]:
    """(wall, CPU) seconds of one call: another process on the cores inflates wall time, hardly CPU time."""
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - wall, time.process_time() - cpu


def compare(plain: list, inside: list, samples: bool = False) -> dict:
    """Stats of both series, wall and CPU, and the inside/plain ratio of their medians."""
    out = {"n": len(plain)}
    for i, clock in enumerate(("wall", "cpu")):
        a, b = [t[i] for t in plain], [t[i] for t in inside]
        out[clock] = {
            "plain": stats(a),
            "inside_context": stats(b),
            "ratio": statistics.median(b) / statistics.median(a),
        }
        if samples:
            out[clock]["samples_ms"] = {"plain": [x * 1e3 for x in a], "inside_context": [x * 1e3 for x in b]}
    return out


def enter_exit(model) -> tuple[float, float, list]:
    """Seconds to enter (discovery + rewrite + swap) and to leave the context, and what it rewrote."""
    cm = unbranch.torch_export_rewrite(model)
    start = time.perf_counter()
    report = cm.__enter__()
    entered = time.perf_counter()
    cm.__exit__(None, None, None)
    return entered - start, time.perf_counter() - entered, [rm.qualname for rm in report]


def export_runs(model, kwargs, ds, runs: int) -> dict:
    def export():
        torch.export.export(model, (), kwargs=kwargs, dynamic_shapes=ds, strict=False)

    def rewritten():
        with unbranch.torch_export_rewrite(model):
            export()

    export()  # first export in the process pays torch's one-time setup: not measured
    rewritten()
    plain, inside = [], []
    for i in range(runs):
        order = [(plain, export), (inside, rewritten)]
        for samples, call in order if i % 2 == 0 else order[::-1]:
            samples.append(timed(call))
    out = compare(plain, inside, samples=True)
    counted = calls(export), calls(rewritten)
    out["calls"] = {"plain": counted[0], "inside_context": counted[1], "ratio": counted[1] / counted[0]}
    return out


def eager_runs(model, kwargs, functions: list, blocks: int, calls: int) -> dict:
    """Short alternating blocks of forwards outside and inside the context, many of them.

    Inside, the context is given the functions discovery chose (``rewrite=``): the same code
    is swapped in, but entering takes microseconds instead of a discovery, so blocks can be a
    few calls long and drifting load hits both sides alike (long blocks swung the ratio ±15%).
    """
    outside, inside = [], []
    with torch.no_grad():
        for i in range(blocks):
            for rewritten in (i % 2 == 0, i % 2 == 1):
                with unbranch.torch_export_rewrite(rewrite=functions if rewritten else []):
                    (inside if rewritten else outside).extend(timed(lambda: model(**kwargs)) for _ in range(calls))
    return compare(outside, inside)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exports", type=int, default=15, help="exports of each kind (interleaved)")
    parser.add_argument("--eager-blocks", type=int, default=1000, help="alternating blocks of 3 eager forwards")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    # one intra-op thread: on two shared cores a second OpenMP thread stalls for a whole
    # scheduler slice whenever the other process runs (forwards jump from 1 ms to 250 ms)
    torch.set_num_threads(1)
    info = machine()
    tiny = MODELS[NAME]
    model = tiny.build(NAME, torch.float32)
    kwargs = tiny.inputs(2, 7)
    ds = tiny.dynamic_shapes(kwargs)
    with torch.no_grad():
        model(**kwargs)

    cold, warm = [], []
    for _ in range(5):
        unbranch.load.cache.clear()
        cold.append(enter_exit(model))
        warm.extend(enter_exit(model) for _ in range(10))
    with unbranch.torch_export_rewrite(model) as report:
        functions = [rm.function for rm in report]
    context = {
        "rewritten": cold[0][2],
        "enter_cold": stats([c[0] for c in cold]),
        "enter_warm": stats([w[0] for w in warm]),
        "exit": stats([w[1] for w in warm]),
    }
    export = export_runs(model, kwargs, ds, args.exports)
    eager = eager_runs(model, kwargs, functions, args.eager_blocks, 3)
    result = {
        "machine": info,
        "model": f"{NAME} float32, inputs (2, 7), dynamic batch and sequence, non-strict export",
        "torch_threads": torch.get_num_threads(),
        "context": context,
        "export": export,
        "eager": eager,
        "targets (CPU-time medians)": {
            "export overhead <= 10%": export["cpu"]["ratio"] <= 1.10,
            "eager overhead <= 5%": eager["cpu"]["ratio"] <= 1.05,
        },
    }
    path = write("export_overhead", result)
    for what, r in (("export", export), ("eager forward", eager)):
        cpu = r["cpu"]
        print(
            f"{what}: {cpu['plain']['median_ms']:.3f} ms CPU plain vs {cpu['inside_context']['median_ms']:.3f}"
            f" inside (x{cpu['ratio']:.3f}; wall x{r['wall']['ratio']:.3f})"
        )
    counted = export["calls"]
    print(f"export calls: x{counted['ratio']:.4f} ({counted['inside_context'] - counted['plain']:+d})")
    print(
        f"enter: cold {context['enter_cold']['median_ms']:.1f} ms, warm {context['enter_warm']['median_ms']:.2f} ms"
        f" -> {path}"
    )


if __name__ == "__main__":
    main()
