"""Small programs, one per construct and lowering, for the deployment matrix (tests and benchmark).

Each ``Program`` names its construct, the lowering unbranch gives it, the model, how to make
inputs of ``n`` rows, and inputs that take each branch or loop exit (``sides``). Programs are
exported inside ``torch_export_rewrite(rewrite=[Model.forward], **context)`` with a dynamic
first dimension; the example has ``EXAMPLE_ROWS`` rows (ExecuTorch plans memory for the
example's size: larger inputs are rejected there, so every input here has at most as many).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.export import Dim

import unbranch

EXAMPLE_ROWS = 8


def rows(width: int):
    def make(n: int, seed: int = 0):
        return (torch.randn(n, width, generator=torch.Generator().manual_seed(n * 100 + seed)),)

    return make


class Renormalise(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        if y.abs().max() > 1:
            y = y / y.abs().max()
        return y


class Guarded(torch.nn.Module):
    def forward(self, x):
        if (x > 100).any():
            raise ValueError("input out of range")
        return x.cumsum(0)


class DoubleUntil(torch.nn.Module):
    """A while on a tensor condition, its state the whole input (dynamic shape)."""

    def forward(self, x):
        while x.abs().sum() < 100:
            x = x * 2 + 1
        return x


class Halvings(torch.nn.Module):
    """A while on a tensor condition whose state has a fixed shape (a column summary, a count)."""

    def forward(self, x):
        s = x.sum(0)
        n = torch.zeros((), dtype=torch.long, device=x.device)
        while s.abs().max() > 1:
            s = s / 2
            n = n + 1
        return s, n


class RowLoop(torch.nn.Module):
    """The issue's row loop: one row of a buffer written per step."""

    def forward(self, x):
        out = torch.zeros(x.shape[0], x.shape[1], device=x.device)
        for i in range(x.shape[0]):
            out[i] = x[i] * 2 + 1
        return out


class RowsAfterACond(torch.nn.Module):
    """A row loop whose step holds a cond (which vmap cannot batch): rows written once per step."""

    def forward(self, x):
        out = torch.zeros(x.shape[0], x.shape[1], device=x.device)
        for i in range(x.shape[0]):
            if x[i].sum() > 0:
                v = x[i] * 2
            else:
                v = -x[i]
            out[i] = v
        return out


class Backwards(torch.nn.Module):
    """A recurrence run from the last row to the first (``reversed(range(n))``), its states stacked."""

    def forward(self, x):
        h = torch.zeros(x.shape[1], device=x.device)
        outs = []
        for i in reversed(range(x.shape[0])):
            h = torch.tanh(h * 0.5 + x[i])
            outs.append(h)
        return torch.stack(outs)


class RunningSum(torch.nn.Module):
    """A loop carrying an accumulator of fixed shape."""

    def forward(self, x):
        acc = torch.zeros(x.shape[1], device=x.device)
        for i in range(x.shape[0]):
            acc = acc + torch.tanh(x[i]) * 2
        return acc


class Appends(torch.nn.Module):
    """outs.append(...) then torch.stack(outs): the scan's stacked outputs, with a carried state."""

    def forward(self, x):
        outs = []
        h = torch.zeros(x.shape[1], device=x.device)
        for row in x:
            h = torch.tanh(row + h)
            outs.append(h * 2)
        return torch.stack(outs)


class Recurrence(torch.nn.Module):
    """range(1, n): no scan can count it without pinning n away from 1 (a while_loop)."""

    def forward(self, x):
        acc = torch.zeros(x.shape[1], device=x.device)
        for i in range(1, x.shape[0]):
            acc = acc * 0.5 + x[i]
        return acc


class Previous(torch.nn.Module):
    """The index in arithmetic: x[i - 1] reads the last row at i = 0, as Python's indexing wraps."""

    def forward(self, x):
        acc = torch.zeros(x.shape[1], device=x.device)
        for i in range(x.shape[0]):
            acc = acc * 0.5 + x[i - 1] * x[i]
        return acc


class FirstBig(torch.nn.Module):
    """A break on a tensor condition: lowered to a flag guarding the rest of the body."""

    def forward(self, x):
        acc = torch.zeros(x.shape[1], device=x.device)
        for i in range(x.shape[0]):
            if x[i].sum() > 2:
                break
            acc = acc + x[i]
        return acc


@dataclass(frozen=True)
class Program:
    name: str
    construct: str
    lowering: str
    model: type
    make: object
    sides: dict  # label -> input tuple, each taking another branch / loop exit
    context: dict = field(default_factory=dict)  # extra torch_export_rewrite options

    def build(self) -> torch.nn.Module:
        return self.model()

    def export(self, model=None, device="cpu", **context):
        model = model if model is not None else self.build()
        example = on(device, self.make(EXAMPLE_ROWS))
        with unbranch.torch_export_rewrite(rewrite=[self.model.forward], **{**self.context, **context}):
            return torch.export.export(model, example, dynamic_shapes=tuple({0: Dim.DYNAMIC} for _ in example))

    def inputs(self, device="cpu") -> dict:
        """Every side, and two sizes other than the example's."""
        every = {**self.sides, "3 rows": self.make(3), "5 rows": self.make(5, seed=1)}
        return {label: on(device, args) for label, args in every.items()}


def on(device, args: tuple) -> tuple:
    """``args`` on ``device``: inputs are made on the CPU (seeded generators), then moved."""
    return tuple(a.to(device) for a in args)


def _filled(n, width, value):
    return (torch.full((n, width), value),)


PROGRAMS = {
    p.name: p
    for p in [
        Program(
            "if",
            "`if` on a tensor",
            "cond",
            Renormalise,
            rows(4),
            {"then": (torch.randn(5, 4) * 10,), "else": (torch.randn(6, 4) * 0.001,)},
        ),
        Program(
            "raise",
            "`if …: raise`",
            "check (`_assert_async`)",
            Guarded,
            rows(4),
            {"passes": (torch.randn(6, 4),)},
        ),
        Program(
            "while",
            "`while` on a tensor (state of dynamic shape)",
            "while_loop",
            DoubleUntil,
            lambda n, seed=0: _filled(n, 2, 0.01 * (seed + 1)),
            {"7 iterations": _filled(5, 2, 0.01), "0 iterations": _filled(3, 2, 40.0)},
        ),
        Program(
            "while-fixed",
            "`while` on a tensor (state of fixed shape)",
            "while_loop",
            Halvings,
            lambda n, seed=0: (torch.randn(n, 3, generator=torch.Generator().manual_seed(n + seed)) * 20,),
            {"several iterations": (torch.randn(5, 3) * 50,), "0 iterations": (torch.full((4, 3), 0.01),)},
        ),
        Program(
            "while-bounded",
            "`while` on a tensor (state of fixed shape), `target='executorch', max_loop_iterations=64`",
            "scan of 64 `cond` steps",
            Halvings,
            lambda n, seed=0: (torch.randn(n, 3, generator=torch.Generator().manual_seed(n + seed)) * 20,),
            {"several iterations": (torch.randn(5, 3) * 50,), "0 iterations": (torch.full((4, 3), 0.01),)},
            {"target": "executorch", "max_loop_iterations": 64},
        ),
        Program(
            "rows",
            "`for i in range(n): out[i] = f(x[i])`",
            "vmap over the steps (non-strict export; strict: scan, rows as stacked outputs)",
            RowLoop,
            rows(16),
            {"rows": (torch.randn(6, 16),)},
        ),
        Program(
            "rows-cond",
            "`for i in range(n): if x[i].sum() > 0: … out[i] = v`",
            "scan, rows as stacked outputs, a cond in the step",
            RowsAfterACond,
            rows(4),
            {"both sides": (torch.cat([torch.ones(2, 4), -torch.ones(3, 4)]),)},
        ),
        Program(
            "carry",
            "`for i in range(n): acc = acc + f(x[i])`",
            "scan, carried accumulator",
            RunningSum,
            rows(4),
            {"rows": (torch.randn(6, 4),)},
        ),
        Program(
            "appends",
            "`for row in x: outs.append(f(row))`, `torch.stack(outs)`",
            "scan, stacked outputs",
            Appends,
            rows(4),
            {"rows": (torch.randn(6, 4),)},
        ),
        Program(
            "backwards",
            "`for i in reversed(range(n)): h = f(h, x[i]); outs.append(h)`",
            "scan taking the rows backwards, stacked outputs",
            Backwards,
            rows(4),
            {"rows": (torch.randn(6, 4),), "1 row": (torch.randn(1, 4),)},
        ),
        Program(
            "index-arithmetic",
            "`for i in range(n): … x[i - 1] …`",
            "scan, reads with `aten.index`",
            Previous,
            rows(3),
            {"1 row": (torch.randn(1, 3),), "6 rows": (torch.randn(6, 3),)},
        ),
        Program(
            "range-from-one",
            "`for i in range(1, n)`",
            "while_loop",
            Recurrence,
            rows(4),
            {"1 row (no step)": (torch.randn(1, 4),), "6 rows": (torch.randn(6, 4),)},
        ),
        Program(
            "range-bounded",
            "`for i in range(1, n)`, `target='executorch', max_loop_iterations=64`",
            "scan of 64 `cond` steps",
            Recurrence,
            rows(4),
            {"1 row (no step)": (torch.randn(1, 4),), "6 rows": (torch.randn(6, 4),)},
            {"target": "executorch", "max_loop_iterations": 64},
        ),
        Program(
            "break",
            "loop with a tensor `break`",
            "flags in a scan",
            FirstBig,
            rows(4),
            {"breaks at row 1": (torch.tensor([[0.1] * 4, [1.0] * 4, [0.2] * 4]),), "never breaks": _filled(4, 4, 0.1)},
        ),
    ]
}
