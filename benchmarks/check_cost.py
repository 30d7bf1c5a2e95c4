"""What ``unbranch.export``'s check of the program (``check=True``, exporting/checked.py) costs.

The check runs the program and eager on the example and on inputs of other sizes: at least two
eager and two program runs, plus building ``ep.module()``. Measured against ``check=False`` on
the zoo's models that need a rewrite (tiny configs, random weights) and on two small loops, as
the median of ``--repeats`` interleaved rounds of the whole ``unbranch.export``:

    python benchmarks/check_cost.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from _common import machine, write
from torch.export import Dim

import unbranch
from unbranch.hf import zoo

ZOO = (("BartModel", torch.float16), ("FSMTModel", torch.float32), ("LEDModel", torch.float32))


class Halting(torch.nn.Module):
    """A while loop on data carrying a tensor: a while_loop in the program."""

    def forward(self, x):
        while x.abs().max() > 1:
            x = x / 2
        return x


class Rows(torch.nn.Module):
    """A loop over a dynamic number of rows with a branch per row: a scan."""

    def forward(self, x):
        acc = x[0] * 0
        for row in x:
            if row.sum() > 0:
                acc = acc + row
            else:
                acc = acc - row
        return acc


def cases():
    for name, dtype in ZOO:
        tiny = zoo.MODELS[name]
        kwargs = tiny.inputs(2, 7)
        label = f"{name} {str(dtype).removeprefix('torch.')}"
        yield label, tiny.build(name, dtype), (), kwargs, tiny.dynamic_shapes(kwargs)
    for model in (Halting(), Rows()):
        yield type(model).__name__, model, (torch.randn(6, 4) * 8,), {}, ({0: Dim.DYNAMIC, 1: Dim.DYNAMIC},)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    out = {}
    for label, model, example, kwargs, shapes in cases():
        times: dict = {True: [], False: []}
        for r in range(args.repeats + 1):  # (the first round warms up: not counted)
            for check in (True, False) if r % 2 else (False, True):
                start = time.perf_counter()
                unbranch.export(model, example, kwargs, dynamic_shapes=shapes, check=check)
                if r:
                    times[check].append(time.perf_counter() - start)
        on, off = statistics.median(times[True]), statistics.median(times[False])
        out[label] = {"checked_s": on, "unchecked_s": off, "check_s": on - off, "ratio": on / off}
        print(f"{label}: export {off:.2f} s, checked {on:.2f} s (+{on - off:.2f} s, {on / off:.2f}x)", flush=True)
    path = write("check_cost", {"machine": machine(), "repeats": args.repeats, "models": out})
    print(f"written to {path}")


if __name__ == "__main__":
    main()
