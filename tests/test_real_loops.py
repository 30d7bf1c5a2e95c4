"""Issue 20, loops as real code writes them: each exports through ``unbranch.export`` in both modes
and matches eager on inputs taking each exit and at other sizes, or is refused at export with an
UnbranchError naming the line and the reason.
"""

import pytest
import torch
from helpers import MODES, assert_same, line_of
from torch.export import Dim

import unbranch


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


class WhileElse(torch.nn.Module):
    def forward(self, x):
        acc, t = torch.zeros(x.shape[1]), 0
        while t < x.shape[0]:
            if x[t].sum() > 3:
                break
            acc = acc + x[t]
            t += 1
        else:
            acc = acc * 2
        return acc


class FlagAfterBreak(torch.nn.Module):
    """A Python bool set before a tensor ``break``, read after the loop."""

    def forward(self, x):
        found = False
        acc = torch.zeros(x.shape[1])
        for t in range(x.shape[0]):
            if x[t].sum() > 3:
                found = True
                break
            acc = acc + x[t]
        return acc * 2 if found else acc


class CountAbove(torch.nn.Module):
    """A Python int counter stepped under a tensor condition."""

    def forward(self, x):
        count = 0
        for t in range(x.shape[0]):
            if x[t].sum() > 3:
                count += 1
        if count > 1:
            x = x - 1
        return x * count


class ReturnInModuleList(torch.nn.Module):
    """Each layer doubles ``x``: rows of 6, 3 and 1.5 return after layer 1, 2 and 3; rows of 1 never."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))
        with torch.no_grad():
            for layer in self.layers:
                layer.weight.copy_(2 * torch.eye(4))
                layer.bias.zero_()

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
            if x.abs().max() > 10:
                return x
        return x * 2


class CountDown(torch.nn.Module):
    """``reversed(range(n))`` with an if and an append: the steps start at the last row."""

    def forward(self, x):
        h = torch.zeros(x.shape[1])
        outs = []
        for i in reversed(range(x.shape[0])):
            h = h * 0.5 + x[i]
            if h.sum() > 4:
                h = h - 1
            outs.append(h)
        return torch.stack(outs)


class UnbindRows(torch.nn.Module):
    def forward(self, x):
        acc = torch.zeros(x.shape[1])
        for row in x.unbind(0):
            if row.sum() > 2:
                acc = acc + row
            else:
                acc = acc - 1
        return acc


class LenBound(torch.nn.Module):
    """``range(len(x))``: Python's len would fix the length to the example's under non-strict export."""

    def forward(self, x):
        acc = torch.ones(x.shape[1])
        for i in range(len(x)):
            if x[i].sum() > 2:
                acc = acc * 2
            acc = acc + x[i] * i
        return acc


class WhileLen(torch.nn.Module):
    """``while i < len(x)``: the while test's length stays symbolic."""

    def forward(self, x):
        i = 0
        acc = torch.zeros(x.shape[1])
        while i < len(x):
            if x[i].sum() > 2:
                acc = acc + x[i]
            i += 1
        return acc


class EnumeratedPairs(torch.nn.Module):
    def forward(self, x):
        acc = torch.zeros(x.shape[1])
        for i, (a, b) in enumerate(zip(x, x.flip(0))):
            if (a * b).sum() > 2:
                acc = acc + a * i
            else:
                acc = acc - b
        return acc


CONVERTED = {
    WhileIndex: [_rows(1, 0.5, 3, 1), _rows(0.1, 0.2), _rows(5, 1, 1, 1, 1, 1), _rows(1, 1, 1, 1, 1, 1, 1)],
    TernaryInLoop: [_rows(1, -1, 2), _rows(-3, -1), _rows(4, 4, 4, 4, -4)],
    SelectNarrow: [torch.randn(3, 4), torch.randn(6, 4), torch.randn(1, 4)],
    DictInLoop: [torch.randn(3, 4), torch.randn(7, 4)],
    WhileChanged: [_rows(1, 2, 3) * 2, _rows(0, 0.5), _rows(30, 1, 1, 1)],
    ClosureAfterLoop: [torch.randn(3, 4), torch.randn(8, 4)],
    ReturnUnderNoGrad: [_rows(1, 2, 3), _rows(-1, -2)],
    LookAhead: [_rows(1, -2, 3, 4), _rows(-1, 2), _rows(5), _rows(1, 1, -1, 1, -1, 1)],
    ForElse: [_rows(1, 1, 5, 1), _rows(1, 1), _rows(5), _rows(1, 1, 1, 1, 1, 1)],
    WhileElse: [_rows(1, 1, 5, 1), _rows(1, 1), _rows(5), _rows(1, 1, 1, 1, 1, 1)],
    FlagAfterBreak: [_rows(1, 1, 5, 1), _rows(1, 1), _rows(5), _rows(1, 1, 1, 1, 1, 1)],
    CountAbove: [_rows(1, 5, 5, 1), _rows(1, 1), _rows(5), _rows(9, 1, 1, 1, 1, 1)],
    ReturnInModuleList: [_rows(24, 4, 4), _rows(12, 12), _rows(6), _rows(4, 4, 4, 4, 4)],
    CountDown: [_rows(1, 5, 1, 5), _rows(9, 1), _rows(1), _rows(1, 1, 1, 8, 1, 1, 1)],
    UnbindRows: [_rows(1, 5, 1, 5), _rows(3, 1), _rows(1), _rows(1, 1, 1, 8, 1, 1, 1)],
    LenBound: [_rows(1, 5, 1, 5), _rows(3, 1), _rows(1), _rows(1, 1, 1, 8, 1, 1, 1)],
    WhileLen: [_rows(1, 5, 1, 5), _rows(3, 1), _rows(1), _rows(1, 1, 1, 8, 1, 1, 1)],
    EnumeratedPairs: [_rows(4, 4, 1, 4), _rows(4, 1), _rows(4, 1, 4), _rows(5, 5, 5, 1, 5, 5, 1)],
}


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize("make", list(CONVERTED), ids=lambda c: c.__name__)
def test_loop_exports_and_matches(make, strict):
    model = make()
    inputs = CONVERTED[make]
    ep = unbranch.export(model, (inputs[0],), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict)
    expected = [model(x.clone()) for x in inputs]
    for x, want in zip(inputs, expected):
        assert_same(ep.module()(x.clone()), want)
    with unbranch.torch_export_rewrite(rewrite=[make.forward]):  # the rewritten code, eagerly
        for x, want in zip(inputs, expected):
            assert_same(model(x.clone()), want)


# still refused: the line and the reason
class BreakOverAnIterable(torch.nn.Module):
    def forward(self, x, rows):
        for row in rows:  # any iterable (a generator must not be advanced after the break)
            if row.sum() > 3:
                break
            x = x + row
        return x


@pytest.mark.parametrize("strict", MODES)
def test_break_over_an_argument_in_a_function_torch_named(strict):
    model, shapes = BreakOverAnIterable(), (None, {0: Dim.DYNAMIC})
    ep = unbranch.export(model, (torch.zeros(4), _rows(1, 1, 5, 1)), dynamic_shapes=shapes, strict=strict)
    for x, rows in [
        (torch.zeros(4), _rows(1, 1, 5, 1)),
        (torch.ones(4), _rows(1, 1)),
        (torch.zeros(4), _rows(5, 1, 1)),
    ]:
        assert_same(ep.module()(x, rows), model(x, rows))


def test_break_over_a_generator_advances_it_as_far_as_the_break():
    # torch named the function (the guided path's options): the rows may be a generator, which the
    # eager loop stops taking from at the break, as the original does
    from unbranch.load.rewriting import options_for, rewrite

    forward = BreakOverAnIterable.forward
    rm = rewrite(forward, options_for(forward, strict=False, lengths=True))
    assert "stops=" in rm.code
    rows = [torch.zeros(4), torch.full((4,), 2.0), torch.ones(4), torch.ones(4)]  # the break at the second
    theirs, mine = iter(rows), iter(rows)
    assert_same(rm.func(None, torch.zeros(4), mine), forward(None, torch.zeros(4), theirs))
    assert len(list(mine)) == len(list(theirs)) == 2


def test_rows_of_a_dynamic_width():
    """The rows' own size is symbolic: the buffer is carried (per-step rows need a static row size)."""
    model, shapes = TernaryInLoop(), ({0: Dim.DYNAMIC, 1: Dim.DYNAMIC},)
    ep = unbranch.export(model, (torch.randn(4, 5),), dynamic_shapes=shapes)
    for x in (torch.randn(6, 3), _rows(1, -1, 2), torch.randn(1, 7)):
        assert_same(ep.module()(x), model(x))
    # strict export: the rows are the scan's per-step outputs (no row size read in the step, where
    # dynamo failed on the symbolic one: "argument of type: LazyProxy")
    ep = unbranch.export(model, (torch.randn(4, 5),), dynamic_shapes=shapes, strict=True)
    for x in (torch.randn(6, 3), _rows(1, -1, 2), torch.randn(1, 7)):
        assert_same(ep.module()(x), model(x))


class DictInBranchInLoop(torch.nn.Module):
    """A dict's entries rebound in a branch on data inside a converted loop (found by the loop fuzzer)."""

    def forward(self, x):
        stats = {"sum": torch.zeros(x.shape[1]), "n": torch.zeros(())}
        acc = torch.zeros(x.shape[1])
        for i in range(x.shape[0]):
            if x[i].sum() > 0:
                stats["sum"] = stats["sum"] + x[i]
                stats["n"] = stats["n"] + 1
            else:
                acc = acc - x[i]
        return stats["sum"] / stats["n"].clamp(min=1), acc, stats


@pytest.mark.parametrize("strict", MODES)
def test_dict_entries_rebound_in_a_branch(strict):
    model, shapes = DictInBranchInLoop(), ({0: Dim.DYNAMIC},)
    ep = unbranch.export(model, (_rows(1, -1, 2),), dynamic_shapes=shapes, strict=strict)
    for x in (_rows(1, -1, 2), _rows(-1, -2), _rows(3, 3, 3, 3, 3), _rows(1, -1, 1, -1, 1, -1)):
        assert_same(ep.module()(x.clone()), model(x.clone()))  # the dict comes back with the same entries


class ReturnInFirstStep(torch.nn.Module):
    def forward(self, x):
        for _ in range(x.shape[0]):  # left as Python (a return in the loop body): range() fixes the size
            x = x * 2
            return x
        return x - 1


@pytest.mark.parametrize("strict", MODES)
def test_a_dimension_fixed_by_code_left_as_python_is_named(strict):
    """Torch names no frame when Python code fixes a dynamic dimension: the error points at what stayed Python."""
    with pytest.raises(unbranch.UnbranchError, match="fixed a dimension declared dynamic.*a return") as info:
        with unbranch.torch_export_rewrite(rewrite=[ReturnInFirstStep.forward]):
            torch.export.export(ReturnInFirstStep(), (_rows(1, 2),), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict)
    assert (info.value.path, info.value.line) == (__file__, line_of(ReturnInFirstStep.forward, "for _ in range"))


class RowsOfALinear(torch.nn.Module):
    """Rows of an activation (it requires grad), read at the index, an if on data in the body."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        with torch.no_grad():
            self.lin.weight.copy_(torch.eye(4))
            self.lin.bias.zero_()

    def forward(self, x):
        y = self.lin(x)
        out = torch.zeros_like(y)
        for i in range(y.shape[0]):
            r = y[i]
            if r.sum() > 0:
                r = r * 2
            out[i] = r + 1
        return out


def _scan_steps(ep):
    """The ops of every scan step of ``ep``."""
    return [
        str(node.target)
        for module in ep.graph_module.modules()
        if module is not ep.graph_module
        for node in module.graph.nodes
        if node.op == "call_function"
    ]


@pytest.mark.parametrize("grad", [pytest.param(True, id="grad"), pytest.param(False, id="no_grad")])
@pytest.mark.parametrize("strict", MODES)
def test_rows_read_at_the_index_are_the_scans_slices(strict, grad):
    """``y[i]`` of a tensor the body never changes: the scan slices ``y`` (no index op per step).
    Strict export with grad enabled failed on the index op's gradient ("'SymInt' object has no
    attribute 'unsqueeze'", torch 2.13)."""
    model = RowsOfALinear()
    with torch.set_grad_enabled(grad):
        ep = unbranch.export(model, (_rows(1, -1, 2),), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict)
    assert not [op for op in _scan_steps(ep) if "index" in op]
    with torch.no_grad():
        for x in (_rows(1, -1, 2), _rows(-3, -1), _rows(4, 4, 4, 4, -4), _rows(2)):
            assert_same(ep.module()(x), model(x))


class ShortRows(torch.nn.Module):
    def forward(self, x, z, out):
        for i in range(x.shape[0]):
            out[i] = x[i] + 1
            out[i] = out[i] + z[i]
        return out


def test_a_row_read_eagerly_fails_where_the_original_does():
    """Eagerly the rewritten body reads ``z[i]`` itself, at the same point: the same IndexError,
    with the same rows written before it."""
    assert "_ub.row(z_row, z, i)" in unbranch.transform_method(ShortRows.forward).code
    x, z = torch.ones(3, 4), torch.ones(2, 4)
    plain, rewritten = torch.zeros(3, 4), torch.zeros(3, 4)
    with pytest.raises(IndexError) as original:
        ShortRows()(x, z, plain)
    with unbranch.torch_export_rewrite(rewrite=[ShortRows.forward]):
        with pytest.raises(IndexError) as inside:
            ShortRows()(x, z, rewritten)
    assert str(inside.value) == str(original.value)
    assert_same(rewritten, plain)  # rows 0 and 1 written, row 2 only its first statement


class WriteBackwards(torch.nn.Module):
    """Rows of an input buffer written once per step, counting down, the index in the value."""

    def forward(self, x, out):
        for i in reversed(range(x.shape[0])):
            v = x[i] * 2
            if v.sum() > 4:
                v = -v
            out[i] = v + i
        return out.sum(0)


@pytest.mark.parametrize("strict", MODES)
def test_rows_written_counting_down_land_at_their_index_in_the_callers_buffer(strict):
    """The steps take the rows flipped: each row must still land at its own index, in the buffer the
    caller passed (changed in place, as eagerly), on both sides of the if and at other sizes."""
    model = WriteBackwards()
    dims = ({0: Dim.DYNAMIC}, {0: Dim.DYNAMIC})
    ep = unbranch.export(model, (_rows(1, 5, 1, 5), torch.zeros(4, 4)), dynamic_shapes=dims, strict=strict)
    for x in (_rows(1, 5, 1, 5, 9), _rows(3, 1), _rows(7)):
        mine, theirs = torch.zeros_like(x), torch.zeros_like(x)
        assert_same(ep.module()(x.clone(), mine), model(x.clone(), theirs))
        assert_same(mine, theirs)
