"""What a small ``if`` costs in the exported program: a ``torch.cond``, or both sides and ``torch.where``?

    python benchmarks/cheap_branches.py [--repeats 5]

One model, ``if x.sum() > 0: y = x * 2 else: y = x - 1; return y + 1``, exported with
``unbranch.export(..., branches="cond")`` and ``branches="where"``, run in ``ep.module()`` on one
CPU thread for inputs of 64 to 4M elements; beside them eager, and the plain program of the same
arithmetic without the branch (what ``ep.module()`` itself costs: torch's input checks). Each
figure is the median over ``--repeats`` rounds of a timed loop, in microseconds per call.
Records ``results/cheap_branches.json``; the runtime's CHEAP_ELEMENTS comes from where the two
curves cross.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch
from _common import machine, write
from torch.export import Dim

import unbranch
from unbranch.runtime.control_flow import CHEAP_ELEMENTS, CHEAP_OPS

SIZES = (64, 1024, 16384, 65536, 262144, 1 << 20, 1 << 22)


class Branch(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            y = x * 2
        else:
            y = x - 1
        return y + 1


class Straight(torch.nn.Module):
    """The arithmetic of one side, no branch: the floor any program of this model pays."""

    def forward(self, x):
        return x.sum() > 0, x * 2 + 1


def _per_call(fn, x, repeats: int) -> float:
    calls = max(5, min(2000, int(2e7 // x.numel())))
    rounds = []
    for _ in range(repeats):
        fn(x)
        start = time.perf_counter()
        for _ in range(calls):
            fn(x)
        rounds.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    dims = ({0: Dim.DYNAMIC},)
    example = torch.rand(64, 16)
    programs = {
        "cond": unbranch.export(Branch(), (example,), dynamic_shapes=dims, branches="cond").module(),
        "where": unbranch.export(Branch(), (example,), dynamic_shapes=dims, branches="where").module(),
        "straight": torch.export.export(Straight(), (example,), dynamic_shapes=dims).module(),
    }
    rows = []
    print(f"{'elements':>9} {'eager':>9} {'straight':>9} {'cond':>9} {'where':>9}  (us per call, 1 thread)")
    for numel in SIZES:
        x = torch.rand(numel // 16, 16) - 0.25
        row = {"elements": numel, "eager": _per_call(Branch(), x, args.repeats)}
        row.update({name: _per_call(program, x, args.repeats) for name, program in programs.items()})
        rows.append(row)
        print(f"{numel:>9} " + " ".join(f"{row[k]:>9.1f}" for k in ("eager", "straight", "cond", "where")))
    write(
        "cheap_branches",
        {
            "rows": rows,
            "cheap_ops": CHEAP_OPS,
            "cheap_elements": CHEAP_ELEMENTS,
            "threads": 1,
            "machine": machine(),
        },
    )


if __name__ == "__main__":
    main()
