"""Export cost of a loop a break on data stops, against its number of steps (issue 54).

``for _ in range(steps): ...; if err < tol: break`` (Newton's square root) is one while_loop for the
steps after the first, whatever ``steps`` is: the export time must not grow with it. Each count is
exported with ``unbranch.export`` (dynamic batch, non-strict and strict); the program's run time is
recorded against eager (every step runs: the test is never true).

    python benchmarks/loop_export_cost.py            # about a minute
"""

from __future__ import annotations

import time

import torch
from _common import machine, stats, write
from torch.export import Dim

import unbranch


class Converges(torch.nn.Module):
    def __init__(self, steps: int):
        super().__init__()
        self.steps = steps

    def forward(self, a):
        y = a * 1
        for _ in range(self.steps):
            z = y - 0.5 * (y * y - a) / y
            err = (z - y).abs().max()
            y = z
            if err < 0:  # (never true: every step runs, in eager and in the program)
                break
        return y


def _timed(fn, x, rounds=20) -> list[float]:
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn(x)
        out.append(time.perf_counter() - start)
    return out


def main():
    torch.set_num_threads(1)
    unbranch.export(Converges(2), (torch.rand(3, 4) + 1,), dynamic_shapes=({0: Dim.DYNAMIC},))  # warm-up
    rows = []
    for strict in (False, True):
        for steps in (10, 100, 1000):
            model, x = Converges(steps), torch.rand(8, 4) + 1
            start = time.perf_counter()
            ep = unbranch.export(model, (x,), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict)
            seconds = time.perf_counter() - start
            program = ep.module()
            assert torch.allclose(program(x), model(x))
            loops = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]
            rows.append(
                {
                    "strict": strict,
                    "steps": steps,
                    "export_s": seconds,
                    "loop_ops": sum("while_loop" in t or "scan" in t for t in loops),
                    "program_ms": stats(_timed(program, x))["median_ms"],
                    "eager_ms": stats(_timed(model, x))["median_ms"],
                }
            )
            print(rows[-1], flush=True)
    write("loop_export_cost", {"rows": rows, "machine": machine()})


if __name__ == "__main__":
    main()
