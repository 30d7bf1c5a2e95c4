"""Nested early returns at depth 1..10: emitted lines and rewrite time per depth.

Each level does some work, may return early on a tensor condition, does more work after
its inner level and has an ``else`` that does not return: copying the rest of the function
into every branch would grow the code with each level; it must stay linear in the depth.

    PYTHONPATH=src python benchmarks/nested_return.py   # -> benchmarks/results/nested_return.json
"""

from __future__ import annotations

import json
import sys
import time

from _common import RESULTS, machine

import unbranch


def nested(depth: int) -> str:
    lines = ["def forward(self, x):", "    x = x + 1"]
    for d in range(1, depth + 1):
        pad = "    " * d
        lines += [f"{pad}if x.sum() > {d}:", f"{pad}    x = x * {d + 1}"]
    lines += ["    " * (depth + 1) + "return x"]
    for d in range(depth, 0, -1):
        pad = "    " * d
        tail = [f"{pad}    x = x - {d}"] if d < depth else []
        lines += [*tail, f"{pad}else:", f"{pad}    x = x / {d + 1}"]
    lines += ["    return x * 2", ""]
    return "\n".join(lines)


def sequential(depth: int) -> str:
    """``depth`` ifs in a row, each with a one-sided return inside and an else falling through.

    Copying the rest of the function into both branches of each doubles it: 2**depth copies.
    """
    lines = ["def forward(self, x):"]
    for d in range(1, depth + 1):
        lines += [
            f"    if x.sum() > {d}:",
            f"        if x.max() > {d + 1}:",
            f"            return x * {d}",
            f"        x = x + {d}",
            "    else:",
            f"        x = x - {d}",
        ]
    lines += ["    return x", ""]
    return "\n".join(lines)


SHAPES = {"nested": nested, "sequential": sequential}


def measure(depth: int, repeat: int = 3, shape: str = "nested") -> dict:
    src = SHAPES[shape](depth)
    best, out = float("inf"), ""
    for _ in range(repeat):
        start = time.perf_counter()
        out = unbranch.rewrite_source(src)
        best = min(best, time.perf_counter() - start)
    return {
        "shape": shape,
        "depth": depth,
        "source_lines": src.count("\n"),
        "emitted_lines": out.count("\n"),
        "rewrite_ms": best * 1e3,
    }


def main(max_depth: int = 10) -> list[dict]:
    rows = [measure(d, shape=shape) for shape in SHAPES for d in range(1, max_depth + 1)]
    for r in rows:
        lines = f"{r['source_lines']:3d} -> {r['emitted_lines']:4d} lines"
        print(f"{r['shape']:10s} depth {r['depth']:2d}: {lines}, {r['rewrite_ms']:8.1f} ms")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "nested_return.json").write_text(json.dumps({"machine": machine(), "rows": rows}, indent=2) + "\n")
    return rows


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
