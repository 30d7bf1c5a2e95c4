"""Loops as real code writes them: index arithmetic, general subscripts, iteration forms.

Each model is exported inside ``torch_export_rewrite`` with ``Dim.DYNAMIC`` on the looped
dimension, in both modes, and ``ep.module()`` is compared with the original eager module on
lengths 1, the example's and others; a rewritten loop over a tensor length leaves a
``scan`` (``range(n)``, rows, ``enumerate``, ``zip``) or a ``while_loop`` (``range(a, b, step)``).
Eager runs inside the context give exactly the original results.
"""

import pytest
import torch
from helpers import MODES, count_loops, count_ops, count_vmaps, export_rewritten
from torch.export import Dim

import unbranch

SCAN, WHILE = torch.ops.higher_order.scan, torch.ops.higher_order.while_loop


def rows(*widths):
    def make(n):
        g = torch.Generator().manual_seed(n)
        return tuple(torch.randn(n, w, generator=g) for w in widths)

    return make


def check(model, make, strict, dims=None, scans=0, whiles=0, lengths=(1, 2, 3, 7), example=5):
    example_args = make(example)
    dims = dims or tuple({0: Dim.DYNAMIC} for _ in example_args)
    original = {n: model(*make(n)) for n in (1, 4)}  # (inside the context, forward is the rewritten code)
    with unbranch.torch_export_rewrite(rewrite=[type(model).forward]):
        for n in (1, 4):  # eager inside the context: the original's results
            torch.testing.assert_close(model(*make(n)), original[n])
    ep = export_rewritten(model, example_args, strict, dynamic_shapes=dims)
    assert count_loops(ep) == scans  # (a loop whose steps carry nothing is a vmap under non-strict export)
    assert count_ops(ep, WHILE) == whiles
    for n in lengths:
        torch.testing.assert_close(ep.module()(*make(n)), model(*make(n)))
    return ep


class Recurrence(torch.nn.Module):
    """out[i] depends on out[i - 1]: range(1, n), index arithmetic, a tuple subscript."""

    def forward(self, x):
        out = x.clone()
        for i in range(1, x.shape[0]):
            out[i, :] = out[i - 1] * 0.5 + x[i] * (i % 2)
        return out


@pytest.mark.parametrize("strict", MODES)
def test_recurrence_over_range_from_one(strict):
    check(Recurrence(), rows(3), strict, whiles=1)


class Weighted(torch.nn.Module):
    """The index in arithmetic: (i + 1) * x[i], and a buffer written as buf[i] = ..."""

    def forward(self, x):
        buf = torch.zeros_like(x)
        acc = torch.zeros(x.shape[1])
        for i in range(x.shape[0]):
            buf[i] = x[i] * (i + 1)
            acc = acc + (i + 1) * x[i]
        return buf, acc


@pytest.mark.parametrize("strict", MODES)
def test_index_in_arithmetic_and_row_writes(strict):
    check(Weighted(), rows(4), strict, scans=1)


class Columns(torch.nn.Module):
    """A time loop over the second dimension with an nn.Module cell: h = cell(x[:, t], h)."""

    def __init__(self):
        super().__init__()
        self.cell = torch.nn.GRUCell(3, 5)

    def forward(self, x):
        h = torch.zeros(x.shape[0], 5)
        for t in range(x.shape[1]):
            h = self.cell(x[:, t], h)
        return h


@pytest.mark.parametrize("strict", MODES)
def test_time_loop_over_second_dimension(strict):
    def make(n):
        return (torch.randn(2, n, 3, generator=torch.Generator().manual_seed(n)),)

    check(Columns(), make, strict, dims=({1: Dim.DYNAMIC},), scans=1)


class Grid(torch.nn.Module):
    """Nested loops: x[i, j] and out[i, j] = ..., the inner loop converted inside the outer body."""

    def forward(self, x):
        out = torch.zeros_like(x)
        for i in range(x.shape[0]):
            for j in range(x.shape[1]):
                out[i, j] = x[i, j] * (i + j) + out[i - 1, j]
        return out


@pytest.mark.parametrize("strict", MODES)
def test_nested_loops(strict):
    def make(n):
        return (torch.randn(n, n + 1, generator=torch.Generator().manual_seed(n)),)

    check(Grid(), make, strict, dims=({0: Dim.DYNAMIC, 1: Dim.DYNAMIC},), scans=2, lengths=(1, 2, 4))


class BranchInLoop(torch.nn.Module):
    """An if on the index and one on data inside the loop, writing out[i]."""

    def forward(self, x):
        out = torch.zeros_like(x)
        for i in range(x.shape[0]):
            if i % 2 == 0:
                out[i] = x[i] * 2
            else:
                out[i] = -x[i]
            if x[i].sum() > 0:
                out[i] += 1
        return out


@pytest.mark.parametrize("strict", MODES)
def test_branch_inside_loop(strict):
    check(BranchInLoop(), rows(3), strict, scans=1)


class LoopInBranch(torch.nn.Module):
    def forward(self, x):
        acc = torch.zeros(x.shape[1])
        if x.sum() > 0:
            for i in range(x.shape[0]):
                acc = acc + x[i] * i
        else:
            acc = acc - 1
        return acc


@pytest.mark.parametrize("strict", MODES)
def test_loop_inside_branch(strict):
    ep = check(LoopInBranch(), rows(3), strict, scans=1)
    neg = -torch.ones(3, 3)
    torch.testing.assert_close(ep.module()(neg), LoopInBranch()(neg))


class Enumerated(torch.nn.Module):
    def forward(self, x, y):
        total = torch.zeros(x.shape[1])
        for t, (row) in enumerate(x):
            total = total * 0.5 + row * t
        for a, b in zip(x, y):
            total = total + a * b
        else:
            total = total + 1
        return total


@pytest.mark.parametrize("strict", MODES)
def test_enumerate_zip_and_for_else(strict):
    check(Enumerated(), rows(3, 3), strict, scans=2)


class Strided(torch.nn.Module):
    def forward(self, x):
        acc = torch.zeros(x.shape[1])
        for i in range(x.shape[0] - 1, -1, -2):
            acc = acc * 2 + x[i]
        return acc


@pytest.mark.parametrize("strict", MODES)
def test_range_with_symbolic_bounds_and_negative_step(strict):
    check(Strided(), rows(2), strict, whiles=1)


class Triangular(torch.nn.Module):
    """An inner range(i): its length is the outer index (a while_loop inside the scan)."""

    def forward(self, x):
        out = torch.zeros_like(x)
        for i in range(x.shape[0]):
            for j in range(i):
                out[i] += x[j]
        return out


@pytest.mark.parametrize("strict", MODES)
def test_inner_length_from_outer_index(strict):
    check(Triangular(), rows(2), strict, scans=1, whiles=1)


def test_slice_bounded_by_the_index_stays_python_with_a_note():
    class Prefix(torch.nn.Module):
        def forward(self, x):
            acc = x[0] * 0
            for i in range(x.shape[0]):
                acc = acc + x[:i].sum(0)
            return acc

    rm = unbranch.transform_method(Prefix.forward)
    assert "for_range" not in rm.code
    assert any("bounds a slice" in n.detail for n in rm.notes)


def test_data_dependent_sequence_fails_clearly():
    class Experts(torch.nn.Module):
        def forward(self, x):
            hit = (x[:, 0] > 0).nonzero()
            acc = torch.zeros(x.shape[1])
            for e in hit:
                acc = acc + x[e[0]]
            return acc

    x = torch.randn(5, 3)
    original = Experts()(x)
    with unbranch.torch_export_rewrite(rewrite=[Experts.forward]):
        torch.testing.assert_close(Experts()(x), original)
    with pytest.raises(Exception, match="depends on tensor data"):
        export_rewritten(Experts(), (x,), False, dynamic_shapes=({0: Dim.DYNAMIC},))


class RowViewChanged(torch.nn.Module):
    def forward(self, x):
        out = x.clone()
        for i in range(x.shape[0]):
            r = out[i]
            r.mul_(2)
            out[i][0] = 1.0
        return out


def test_row_changed_through_a_view_stays_python_with_a_note():
    rm = unbranch.transform_method(RowViewChanged.forward)
    assert "for_range" not in rm.code
    assert any("changed in place (under export it is a copy)" in n.detail for n in rm.notes)
    x = torch.randn(3, 2)
    original = RowViewChanged()(x)
    with unbranch.torch_export_rewrite(rewrite=[RowViewChanged.forward]):
        torch.testing.assert_close(RowViewChanged()(x), original)


class RowsInPlace(torch.nn.Module):
    """In-place updates of rows written back by assignment: out[i] += v, out[i] = f(out[i])."""

    def forward(self, x):
        out = x.clone()
        for i in range(x.shape[0]):
            out[i] += x[i - 1]
            out[i] = torch.relu(out[i]) * 2
            out[:, 0] += out[i, 1]
        return out


@pytest.mark.parametrize("strict", MODES)
def test_rows_updated_in_place(strict):
    check(RowsInPlace(), rows(3), strict, scans=1)


class Appends(torch.nn.Module):
    """outs.append(f(x[i])) then torch.stack / torch.cat: the list becomes the scan's outputs."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        outs = []
        firsts = []
        h = torch.zeros(x.shape[1])
        for i in range(x.shape[0]):
            h = torch.tanh(self.lin(x[i]) + h)
            outs.append(h * (i + 1))
            firsts.append(x[i, :1])
        return torch.stack(outs), torch.cat(outs, dim=-1), torch.stack(outs, dim=1), torch.cat(firsts), h


@pytest.mark.parametrize("strict", MODES)
def test_appended_list_stacked_after_the_loop(strict):
    check(Appends(), rows(3), strict, scans=1)


class AppendRows(torch.nn.Module):
    def forward(self, x):
        outs = []
        for row in x:
            outs.append(row.relu() + 1)
        return torch.stack(outs, dim=-1)


@pytest.mark.parametrize("strict", MODES)
def test_appended_rows(strict):
    ep = check(AppendRows(), rows(2), strict, scans=1)
    assert count_vmaps(ep) == (0 if strict else 1)  # steps that only append: batched, except under dynamo


def test_list_used_otherwise_stays_python_with_a_note():
    class Counted(torch.nn.Module):
        def forward(self, x):
            outs = []
            for i in range(x.shape[0]):
                outs.append(x[i])
            return torch.stack(outs) * len(outs)

    rm = unbranch.transform_method(Counted.forward)
    assert "for_range" not in rm.code
    assert any("container 'outs'" in n.detail for n in rm.notes)


class WhileCounter(torch.nn.Module):
    """i = 0; while i < n: ... x[i] ...; i += 1 (a counter with a parameter in the body)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        i = 0
        h = torch.zeros(3)
        out = torch.zeros_like(x)
        while i < x.shape[0]:
            h = torch.tanh(self.lin(x[i]) + h)
            out[i, 0] = h[1] * 2
            i += 1
        return h, out


@pytest.mark.parametrize("strict", MODES)
def test_while_with_an_int_counter(strict):
    check(WhileCounter(), rows(3), strict, whiles=1)
