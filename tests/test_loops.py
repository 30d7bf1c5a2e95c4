"""Loops over a dynamic dimension become scan / while_loop; static loops stay Python.

Each exported program is compared with the original eager module on loop lengths other
than the example's. More loop forms: test_loop_forms.py.
"""

import pytest
import torch
from helpers import MODES, count_loops, count_ops, export_rewritten
from torch.export import Dim

import unbranch


def check(model, example, lengths, strict, dims, scans=0, whiles=0, make=None):
    ep = export_rewritten(model, example, strict, dynamic_shapes=dims)
    assert count_loops(ep) == scans  # (a loop whose steps carry nothing is a vmap under non-strict export)
    assert count_ops(ep, torch.ops.higher_order.while_loop) == whiles
    for n in lengths:
        args = make(n)
        torch.testing.assert_close(ep.module()(*args), model(*args))
    return ep


class Distances(torch.nn.Module):
    """Squared euclidean distances, filled row by row."""

    def forward(self, x, y):
        z = torch.empty(x.shape[0], y.shape[0])
        for i in range(x.shape[0]):
            z[i] = ((x[i] - y) ** 2).sum(-1)
        return z


@pytest.mark.parametrize("strict", MODES)
def test_distance_matrix_row_by_row(strict):
    make = lambda n: (torch.randn(n, 3), torch.randn(4, 3))  # noqa: E731
    check(Distances(), make(5), [3, 8], strict, ({0: Dim.DYNAMIC}, None), scans=1, make=make)


class RunningSum(torch.nn.Module):
    def forward(self, x):
        n = x.shape[0]
        acc = torch.zeros(x.shape[1])
        for i in range(n):
            acc += torch.tanh(x[i]) * 2
        return acc


@pytest.mark.parametrize("strict", MODES)
def test_running_sum_carried(strict):
    make = lambda n: (torch.randn(n, 4),)  # noqa: E731
    check(RunningSum(), make(6), [2, 9], strict, ({0: Dim.DYNAMIC},), scans=1, make=make)


class RowsAndCarry(torch.nn.Module):
    """A recurrent cell: carries the state and writes every step's output."""

    def __init__(self):
        super().__init__()
        self.cell = torch.nn.Linear(8, 4)

    def forward(self, xs):
        h = torch.zeros(xs.shape[1], 4)
        out = torch.zeros(xs.shape[0], xs.shape[1], 4)
        for t in range(xs.shape[0]):
            h = torch.tanh(self.cell(torch.cat([xs[t], h], dim=-1)))
            out[t] = h
        return out, h


@pytest.mark.parametrize("strict", MODES)
def test_rows_and_carry(strict):
    make = lambda n: (torch.randn(n, 2, 4),)  # noqa: E731
    check(RowsAndCarry(), make(5), [3, 7], strict, ({0: Dim.DYNAMIC},), scans=1, make=make)


class OverRows(torch.nn.Module):
    def forward(self, x):
        total = torch.zeros(x.shape[1])
        for row in x:
            total = total * 0.5 + row.relu()
        return total


@pytest.mark.parametrize("strict", MODES)
def test_for_row_in_tensor(strict):
    make = lambda n: (torch.randn(n, 3),)  # noqa: E731
    check(OverRows(), make(4), [2, 6], strict, ({0: Dim.DYNAMIC},), scans=1, make=make)


class CountDown(torch.nn.Module):
    def forward(self, x):
        n = (x.abs().sum() * 3).long() % 7
        acc = torch.zeros(x.shape[1])
        while n > 0:
            acc += x.mean(0) * n
            n -= 1
        return acc


@pytest.mark.parametrize("strict", MODES)
def test_while_counting_down_a_tensor(strict):
    def make(n):
        return (torch.randn(n, 3),)

    ep = check(CountDown(), make(4), [2, 6], strict, ({0: Dim.DYNAMIC},), whiles=1, make=make)
    torch.testing.assert_close(ep.module()(torch.zeros(3, 3)), torch.zeros(3))  # zero iterations


class DoubleUntil(torch.nn.Module):
    def forward(self, x):
        while x.abs().sum() < 100:
            if x.max() > 30:
                break
            x = x * 2 + 1
        return x


@pytest.mark.parametrize("strict", MODES)
def test_while_with_leading_break(strict):
    make = lambda n: (torch.rand(n, 2),)  # noqa: E731
    ep = check(DoubleUntil(), make(3), [2, 5], strict, ({0: Dim.DYNAMIC},), whiles=1, make=make)
    big = torch.full((2, 2), 40.0)
    torch.testing.assert_close(ep.module()(big), big)


class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(3, 3) for _ in range(3))
        self.num_layers = 3

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        for i in range(self.num_layers):
            x = x + i
        return x


@pytest.mark.parametrize("strict", MODES)
def test_static_loops_stay_unrolled(strict):
    assert not unbranch.transform_method(Stack.forward).changed
    m = Stack()
    make = lambda n: (torch.randn(n, 3),)  # noqa: E731
    ep = check(m, make(4), [2, 7], strict, ({0: Dim.DYNAMIC},), make=make)
    assert count_ops(ep, torch.ops.aten.linear.default) == 3


class IndexArithmetic(torch.nn.Module):
    def forward(self, x):
        out = x.clone()
        for i in range(1, x.shape[0]):
            out[i] = out[i - 1] + x[i]
        return out


@pytest.mark.parametrize("strict", MODES)
def test_index_arithmetic_becomes_a_loop(strict):
    make = lambda n: (torch.randn(n, 2),)  # noqa: E731
    check(IndexArithmetic(), make(4), [1, 2, 6], strict, ({0: Dim.DYNAMIC},), whiles=1, make=make)
    x = torch.randn(4, 2)
    with unbranch.torch_export_rewrite(rewrite=[IndexArithmetic.forward]):
        torch.testing.assert_close(IndexArithmetic()(x), torch.cumsum(x, 0))


class LoopIndexUsedElsewhere(torch.nn.Module):
    def forward(self, x):
        acc = x[0] * 0
        for i in range(x.shape[0]):
            acc = acc + x[i] * i
        return acc


@pytest.mark.parametrize("strict", MODES)
def test_loop_index_in_arithmetic(strict):
    make = lambda n: (torch.randn(n, 3),)  # noqa: E731
    check(LoopIndexUsedElsewhere(), make(5), [1, 3, 8], strict, ({0: Dim.DYNAMIC},), scans=1, make=make)
