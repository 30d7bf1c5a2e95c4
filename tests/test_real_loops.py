"""Issue 20, loops as real code writes them: each exports through ``unbranch.export`` in both modes
and matches eager on inputs taking each exit and at other sizes, or is refused at export with an
UnbranchError naming the line and the reason.
"""

import inspect

import pytest
import torch
from helpers import assert_same
from torch.export import Dim

import unbranch

MODES = [pytest.param(False, id="nonstrict"), pytest.param(True, id="strict")]


def _rows(*sums):
    """One row of 4 per value, each row summing to it."""
    return torch.tensor([[s / 4] * 4 for s in sums])


class WhileIndex(torch.nn.Module):
    """A leading ``if …: break`` folds into the while test, which then reads ``x[i]``."""

    def forward(self, x):
        i = 0
        acc = torch.zeros(x.shape[1])
        while i < x.shape[0]:
            if x[i].sum() > 2:
                break
            acc = acc + x[i]
            i += 1
        return acc


class TernaryInLoop(torch.nn.Module):
    """The loop index on both sides of a conditional expression."""

    def forward(self, x):
        out = torch.zeros_like(x)
        for t in range(x.shape[0]):
            out[t] = x[t] * 2 if x[t].sum() > 0 else x[t] - 1
        return out


class SelectNarrow(torch.nn.Module):
    """The index in ``select``, ``narrow`` and Python arithmetic."""

    def forward(self, x):
        acc = torch.zeros(x.shape[1])
        for t in range(x.shape[0]):
            acc = acc + x.select(0, t) * (t + 1) + x.narrow(0, t, 1).squeeze(0)
        return acc


class DictInLoop(torch.nn.Module):
    """A dict updated in the body: its tensors are carried."""

    def forward(self, x):
        stats = {"sum": torch.zeros(x.shape[1]), "max": torch.full((x.shape[1],), -1e9)}
        for row in x:
            stats["sum"] = stats["sum"] + row
            stats["max"] = torch.maximum(stats["max"], row)
        return stats["sum"] * stats["max"]


class WhileChanged(torch.nn.Module):
    """``changed = bool(...)`` in the body of ``while changed``."""

    def forward(self, x):
        changed = True
        steps = 0
        while changed and steps < 10:
            y = torch.where(x > 1, x - 1, x)
            changed = bool((y != x).any())
            x = y
            steps += 1
        return x


class ClosureAfterLoop(torch.nn.Module):
    """A closure defined before the loop reads a name the loop rebinds."""

    def forward(self, x):
        scale = torch.ones(())

        def scaled(t):
            return t * scale

        for t in range(x.shape[0]):
            scale = scale + x[t].mean()
        return scaled(x)


class LookAhead(torch.nn.Module):
    """``i + 1 < n and x[i + 1] …``: traced, the right operand is read at the last step too."""

    def forward(self, x):
        acc = torch.zeros(x.shape[1])
        for i in range(x.shape[0]):
            if i + 1 < x.shape[0] and x[i + 1].sum() > 0:
                acc = acc + x[i]
        return acc


class ReturnUnderNoGrad(torch.nn.Module):
    def forward(self, x):
        with torch.no_grad():
            if x.sum() > 0:
                return x * 2
        return x - 1


CONVERTED = {
    WhileIndex: [_rows(1, 0.5, 3, 1), _rows(0.1, 0.2), _rows(5, 1, 1, 1, 1, 1), _rows(1, 1, 1, 1, 1, 1, 1)],
    TernaryInLoop: [_rows(1, -1, 2), _rows(-3, -1), _rows(4, 4, 4, 4, -4)],
    SelectNarrow: [torch.randn(3, 4), torch.randn(6, 4), torch.randn(1, 4)],
    DictInLoop: [torch.randn(3, 4), torch.randn(7, 4)],
    WhileChanged: [_rows(1, 2, 3) * 2, _rows(0, 0.5), _rows(30, 1, 1, 1)],
    ClosureAfterLoop: [torch.randn(3, 4), torch.randn(8, 4)],
    ReturnUnderNoGrad: [_rows(1, 2, 3), _rows(-1, -2)],
    LookAhead: [_rows(1, -2, 3, 4), _rows(-1, 2), _rows(5), _rows(1, 1, -1, 1, -1, 1)],
}


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize("make", list(CONVERTED), ids=lambda c: c.__name__)
def test_loop_exports_and_matches(make, strict):
    model = make()
    inputs = CONVERTED[make]
    ep = unbranch.export(model, (inputs[0],), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict)
    for x in inputs:
        assert_same(ep.module()(x.clone()), model(x.clone()))


class ForElse(torch.nn.Module):
    def forward(self, x):
        acc = torch.zeros(x.shape[1])
        for t in range(x.shape[0]):
            if x[t].sum() > 3:
                break
            acc = acc + x[t]
        else:
            acc = acc * 2
        return acc


class FlagAfterBreak(torch.nn.Module):
    def forward(self, x):
        found = False
        acc = torch.zeros(x.shape[1])
        for t in range(x.shape[0]):
            if x[t].sum() > 3:
                found = True
                break
            acc = acc + x[t]
        return acc * 2 if found else acc


class ReturnInModuleList(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
            if x.abs().max() > 10:
                return x
        return x * 2


# still refused (issue 20 asks for flags that would express them): the line and the reason
REFUSED = {
    ForElse: ("if x[t].sum() > 3", "break/continue leaving the branch"),
    FlagAfterBreak: ("for t in range", "produces a Python value"),  # (the loop, lowered to flags, is named)
    ReturnInModuleList: ("if x.abs().max() > 10", "a return on some paths of the if only"),
}


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize("make", list(REFUSED), ids=lambda c: c.__name__)
def test_loop_refused_with_line_and_reason(make, strict):
    text, reason = REFUSED[make]
    lines, first = inspect.getsourcelines(make.forward)
    line = first + next(k for k, src in enumerate(lines) if text in src)
    with pytest.raises(unbranch.UnbranchError, match=reason) as info:
        unbranch.export(make(), (_rows(1, 1, 5, 1),), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict)
    assert (info.value.path, info.value.line) == (__file__, line)


class RowsOfDynamicWidth(torch.nn.Module):
    def forward(self, x):
        out = torch.zeros_like(x)
        for i in range(x.shape[0]):
            out[i] = x[i] * 2 if x[i].sum() > 0 else x[i] - 1
        return out


def test_rows_of_a_dynamic_width():
    """The rows' own size is symbolic: the buffer is carried (per-step rows need a static row size)."""
    model, shapes = RowsOfDynamicWidth(), ({0: Dim.DYNAMIC, 1: Dim.DYNAMIC},)
    ep = unbranch.export(model, (torch.randn(4, 5),), dynamic_shapes=shapes)
    for x in (torch.randn(6, 3), _rows(1, -1, 2), torch.randn(1, 7)):
        assert_same(ep.module()(x), model(x))
    # strict export: dynamo fails inside torch's scan on the symbolic row ("argument of type: LazyProxy")
    with pytest.raises(unbranch.UnbranchError, match="after rewriting RowsOfDynamicWidth.forward"):
        unbranch.export(model, (torch.randn(4, 5),), dynamic_shapes=shapes, strict=True)
