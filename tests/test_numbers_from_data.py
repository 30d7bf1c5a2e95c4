"""Python numbers decided by data: a cond's sides giving numbers (one from ``.item()``, a float), a
conditional expression computing numbers on both sides (diffusers' Euler ``gamma``), a table read at
a 0-d tensor index (strict export reads it as a Python int), through ``unbranch.export`` in both
modes, compared with eager on each side and at another size."""

import pytest
import torch
from helpers import MODES, assert_same, count_branches, count_ops
from torch.export import Dim

import unbranch


class IntFromItem(torch.nn.Module):
    """An int from ``.item()`` on one side, constants on the others (an elif: a cond in a cond)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.linspace(0.5, 2.0, 8))

    def forward(self, x):
        if x.sum() > 0:
            k = x.argmax().item() % 8
        elif x.sum() < -5:
            k = 7
        else:
            k = 0
        return x * self.table[k], k + 1


class FloatAndTensor(torch.nn.Module):
    """A tensor and a float from data chosen together, a literal float on the other side."""

    def forward(self, x):
        if x.max() > 1:
            y, s = x / x.max(), x.max().item()
        else:
            y, s = x, 1.0
        return y * 2, y.sum() * s


class FloatInResult(torch.nn.Module):
    """The float a branch binds is part of the function's result."""

    def forward(self, x):
        if x.sum() > 0:
            y, scale = x.clamp(max=1), 0.5
        else:
            y, scale = x, 1.0
        return y * scale, scale


class Gamma(torch.nn.Module):
    """diffusers' Euler step: ``gamma`` computed from settings on one side, 0.0 on the other; with the
    default ``churn`` both are 0.0, so the data decides nothing and ``if gamma > 0`` stays Python."""

    def __init__(self, churn=0.0):
        super().__init__()
        self.churn = churn
        self.register_buffer("sigmas", torch.linspace(1.0, 0.0, 11))

    def forward(self, x):
        sigma = x.abs().mean()
        gamma = min(self.churn / (len(self.sigmas) - 1), 2**0.5 - 1) if 0.5 <= sigma <= float("inf") else 0.0
        sigma_hat = sigma * (gamma + 1)
        if gamma > 0:
            x = x + (sigma_hat**2 - sigma**2) ** 0.5
        return x / sigma_hat, x.mean() if x.sum() > 0 else 0.0


def _inputs():
    torch.manual_seed(0)
    return [torch.randn(6).abs() + 3, -torch.randn(6).abs() - 3, torch.full((6,), 0.01), torch.randn(9) * 0.1]


def _check(model, strict):
    ep = unbranch.export(model, (torch.randn(4).abs() + 2,), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict)
    for x in _inputs():
        expected = model(x)
        got = ep.module()(x)
        for a, b in zip(got, expected):  # (a number eager gives is a tensor the program gives)
            assert_same(torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64))
    return ep


@pytest.mark.parametrize("strict", MODES)
def test_a_number_from_item_leaves_a_cond_as_a_number(strict):
    ep = _check(IntFromItem(), strict)
    assert count_branches(ep) == 2


@pytest.mark.parametrize("strict", MODES)
def test_a_float_from_item_beside_a_tensor(strict):
    ep = _check(FloatAndTensor(), strict)
    assert count_branches(ep) == 1


@pytest.mark.parametrize("strict", MODES)
def test_a_float_in_the_result(strict):
    ep = _check(FloatInResult(), strict)
    for x in _inputs()[:2]:
        got, want = ep.module()(x)[1], FloatInResult()(x)[1]
        assert type(got) is float and got == want


@pytest.mark.parametrize("strict", MODES)
def test_one_number_on_both_sides_stays_python(strict):
    # churn 0: gamma is 0.0 whatever sigma is, `if gamma > 0` is Python (only the last line's choice is data)
    ep = _check(Gamma(), strict)
    assert (_wheres(ep), count_ops(ep, torch.ops.higher_order.cond)) == (1, 0)
    # churn 0.5: gamma differs between the sides, a 0-d tensor chosen by torch.where, `if gamma > 0` a cond
    ep = _check(Gamma(0.5), strict)
    assert (_wheres(ep), count_ops(ep, torch.ops.higher_order.cond)) == (2, 1)


def _wheres(ep) -> int:
    return sum(count_ops(ep, op) for op in (torch.ops.aten.where.Scalar, torch.ops.aten.where.ScalarOther))


def test_both_sides_run_only_under_export():
    """Eagerly inside the context the side not taken never runs (it would divide by zero here)."""

    class OneEntry(Gamma):
        def __init__(self):
            super().__init__(0.5)
            self.sigmas = torch.ones(1)

    model = OneEntry()
    x = torch.full((4,), 0.01)  # sigma < 0.5: the else side, 0.0
    expected = model(x)
    with unbranch.torch_export_rewrite(rewrite=[Gamma.forward]):
        assert_same(model(x), expected)


class TableAtStep(torch.nn.Module):
    """diffusers' ``self.alphas_cumprod[timestep]``: no branch but the one on the step."""

    def __init__(self):
        super().__init__()
        self.register_buffer("alphas", torch.linspace(0.9, 0.1, 10))

    def forward(self, x, t):
        alpha = self.alphas[t]
        prev = self.alphas[t - 1] if t > 0 else torch.ones(())
        return x * alpha.sqrt() + (1 - prev) * x


@pytest.mark.parametrize("strict", MODES)
def test_a_table_read_at_a_tensor_index(strict):
    model = TableAtStep()
    ep = unbranch.export(
        model, (torch.randn(4), torch.tensor(3)), dynamic_shapes=({0: Dim.DYNAMIC}, None), strict=strict
    )
    for t in (0, 9, 4):  # the first step (the else side), the last, another
        x = torch.randn(7)
        assert_same(ep.module()(x, torch.tensor(t)), model(x, torch.tensor(t)))


class StepAsInt(torch.nn.Module):
    """A DDPM step taking its timestep as ``int(t.item())``: tables read at it, a conditional expression
    and an if on it (an unbacked int under export, which the sides close over)."""

    def __init__(self):
        super().__init__()
        betas = torch.linspace(1e-4, 0.2, 10)
        self.register_buffer("betas", betas)
        self.register_buffer("alphas", torch.cumprod(1 - betas, 0))

    def forward(self, sample, out, t):
        t = int(t.item())
        alpha = self.alphas[t]
        prev = self.alphas[t - 1] if t > 0 else torch.tensor(1.0)
        x0 = (sample - (1 - alpha).sqrt() * out) / alpha.sqrt()
        if t > 0:
            noise = ((1 - prev) / (1 - alpha) * self.betas[t]).sqrt() * 0.1
        else:
            noise = 0.0
        return prev.sqrt() * x0 + noise


@pytest.mark.parametrize("strict", MODES)
def test_a_step_read_as_an_int(strict):
    model, shapes = StepAsInt(), ({0: Dim.DYNAMIC}, {0: Dim.DYNAMIC}, None)
    ep = unbranch.export(
        model, (torch.randn(2, 3), torch.randn(2, 3), torch.tensor(5)), dynamic_shapes=shapes, strict=strict
    )
    for t, n in ((5, 2), (0, 4), (9, 3)):  # the then sides, the else sides (the first step), the last
        args = (torch.randn(n, 3), torch.randn(n, 3), torch.tensor(t))
        assert_same(ep.module()(*args), model(*args))
