"""Differential fuzzing of the loop model (issue 54): loops that data leaves, over counts that are
sizes, carrying tensors, Python numbers and names the loop binds first, changing rows in place.

Each program is one loop, drawn from: a static ``range``, ``range(x.shape[0])``, the rows of ``x``
(plain, ``enumerate``, ``unbind``) and a ``while`` on data; an exit on data (``break`` at the start,
middle or end of the step, ``continue``, ``return``, ``for ... else``, a nested loop's break through a
flag) or none; carried values (a tensor, an int counter, a float that changes, a name first bound in
the loop, a row changed in place, the loop variable read after the loop). Every program is compared
with Python eagerly (the rewritten function), exported through ``unbranch.export`` with a dynamic
batch, strict and non-strict in turn, and run on inputs taking each exit at three batch sizes:
outputs must match in shape, dtype and value (a counter Python gives as an int may come back as a
0-d tensor: counted apart), an input that raises eagerly must raise in the program. A refusal is
counted with its reason, never as a match.

    python benchmarks/fuzz_loops.py --programs 200     # about 10 minutes on two cores
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import torch
from _common import machine, write

sys.path.insert(0, str(Path(__file__).resolve().parent / "programs"))
from loop_model import check, program  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=54)
    parser.add_argument("--out", default="fuzz_loops")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rng = random.Random(args.seed)
    counts: dict = {}
    by_family: dict = {}
    cases, started = [], time.perf_counter()
    for n in range(args.programs):
        source, drawn = program(rng)
        strict = n % 2 == 1
        outcome = check(source, n, strict)
        key = outcome["result"]
        counts[key] = counts.get(key, 0) + 1
        family = f"{drawn['loop']}/{drawn['exit']}"
        by_family.setdefault(family, {}).setdefault(key, 0)
        by_family[family][key] += 1
        if key != "match":
            cases.append({"source": source, "strict": strict, **drawn, **outcome})
        if (n + 1) % 25 == 0:
            print(f"{n + 1}/{args.programs} programs, {time.perf_counter() - started:.0f} s: {counts}", flush=True)
    result = {
        "programs": args.programs,
        "seed": args.seed,
        "counts": counts,
        "by_family": dict(sorted(by_family.items())),
        "not_matched": cases,
        "seconds": time.perf_counter() - started,
        "machine": machine(),
    }
    write(args.out, result)
    print(counts)


if __name__ == "__main__":
    main()
