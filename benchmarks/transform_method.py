"""Cold vs warm ``transform_method`` on a few real functions: what the cache saves.

A context manager entered around every export calls ``transform_method`` again on the same
functions; only the first call may pay for parsing and rewriting, the rest must be cache
hits. Each cold call follows ``unbranch.load.cache.clear()``; the libcst parse + codegen of the
same source is the floor a call that rewrites cannot go below.

    python benchmarks/transform_method.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import textwrap
import time

import torch
from _common import machine, parse_floor, stats, write
from transformers.models.bart.modeling_bart import BartEncoderLayer
from transformers.models.led.modeling_led import LEDEncoder
from transformers.models.longt5.modeling_longt5 import LongT5Block

import unbranch


def gated(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """A small user function: one if on tensor data."""
    if x.sum() > 0:
        z = x * y
    else:
        z = x - y
    return z


FUNCTIONS = [BartEncoderLayer.forward, LongT5Block.forward, LEDEncoder.forward, gated]


def timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def bench(fn, repeat: int) -> dict:
    source = textwrap.dedent(inspect.getsource(inspect.unwrap(fn)))
    cold, warm, floor = [], [], []
    for _ in range(repeat):  # interleaved, so a busy moment hits all three alike
        unbranch.load.cache.clear()
        cold.append(timed(lambda: unbranch.transform_method(fn)))
        warm.extend(timed(lambda: unbranch.transform_method(fn)) for _ in range(20))
        floor.append(timed(lambda: parse_floor(source)))
    rm = unbranch.transform_method(fn)
    c, w, f = statistics.median(cold), statistics.median(warm), statistics.median(floor)
    return {
        "function": rm.qualname,
        "source_lines": source.count("\n"),
        "changed": rm.changed,
        "notes": len(rm.notes),  # sites the rewrite reports (converted or left as Python)
        "cold": stats(cold),
        "warm": stats(warm),
        "floor": stats(floor),
        "cold/warm (medians)": c / w,
        "cold/floor (medians)": c / f,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="cold calls per function")
    args = parser.parse_args()
    info = machine()
    rows = [bench(fn, args.repeat) for fn in FUNCTIONS]
    write("transform_method", {"machine": info, "repeat": args.repeat, "functions": rows})
    for r in rows:
        print(
            f"{r['function']:28s} cold {r['cold']['median_ms']:8.2f} ms  warm {r['warm']['median_ms'] * 1e3:6.1f} us"
            f"  floor {r['floor']['median_ms']:7.2f} ms  cold/warm {r['cold/warm (medians)']:8.0f}"
            f"  cold/floor {r['cold/floor (medians)']:5.2f}"
        )


if __name__ == "__main__":
    main()
