"""Code the guided path reaches as naming does (issue 38): a decorator's wrapper that branches on data,
a forward made by a closure factory, a property named explicitly (its getter)."""

import functools
import types

import pytest
import torch
from helpers import MODES, count_branches
from torch.export import Dim

import unbranch

D0 = ({0: Dim.DYNAMIC},)


def halved_when_saturated(threshold):
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            out = fn(self, *args, **kwargs)
            if (out.abs() > threshold).float().mean() > 0.5:
                out = out * 0.5
            return out

        return wrapper

    return deco


class WrappedForward(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 4)

    @halved_when_saturated(0.9)
    def forward(self, x):
        return torch.tanh(self.lin(x))


def make_forward(k):
    def forward(self, x):
        if x.sum() > 0:
            return x * k
        return x - k

    return forward


class FactoryForward(torch.nn.Module):
    forward = make_forward(0.4)


class PropertyScale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(-1, 2, 4))

    @property
    def scale(self):
        if self.w.sum() > 0:
            return self.w * 2
        return -self.w

    def forward(self, x):
        return x * self.scale


def _both_sides(ep, model, inputs):
    for x in inputs:
        torch.testing.assert_close(ep.module()(x), model(x))


@pytest.mark.parametrize("strict", MODES)
def test_a_decorators_wrapper_is_rewritten_where_torch_stops_in_it(strict):
    model = WrappedForward()
    ep = unbranch.export(model, (torch.randn(3, 4),), dynamic_shapes=D0, strict=strict)
    assert count_branches(ep) == 1
    assert [rm.source.text.splitlines()[1].strip() for rm in unbranch.report_of(ep)] == [
        "def wrapper(self, *args, **kwargs):"
    ]
    _both_sides(ep, model, [torch.full((5, 4), 9.0), torch.zeros(6, 4)])
    assert model.forward.__wrapped__.__name__ == "forward"  # (the decoration is as it was)


@pytest.mark.parametrize("strict", MODES)
def test_a_forward_a_factory_made_is_the_function_rewritten(strict):
    model = FactoryForward()
    ep = unbranch.export(model, (torch.randn(3, 4),), dynamic_shapes=D0, strict=strict)
    assert count_branches(ep) == 1
    _both_sides(ep, model, [torch.ones(5, 4), -torch.ones(6, 4)])


@pytest.mark.parametrize("strict", MODES)
def test_a_property_named_explicitly_rewrites_its_getter(strict):
    model = PropertyScale()
    with unbranch.torch_export_rewrite(rewrite=[(PropertyScale, "scale")]) as report:
        ep = torch.export.export(model, (torch.randn(3, 4),), dynamic_shapes=D0, strict=strict)
    assert [rm.qualname for rm in report.rewritten] == ["PropertyScale.scale"]
    assert count_branches(ep) == 1
    x = torch.randn(5, 4)
    torch.testing.assert_close(ep.module()(x), model(x))
    flipped = PropertyScale()
    with torch.no_grad():
        flipped.w.neg_()  # the other side: the weights sum below 0
    exported = ep.module()
    exported.load_state_dict(flipped.state_dict())
    torch.testing.assert_close(exported(x), flipped(x))


class GaussianHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.lin = torch.nn.Linear(4, 2)

    def forward(self, x):
        h = self.lin(x)
        return torch.distributions.Normal(h[:, 0], h[:, 1].exp()).log_prob(x[:, 0])


def test_torch_distributions_argument_checks_are_rewritten_and_still_raise(monkeypatch):
    """A distribution validates its arguments (``if not valid.all(): raise``): torch.distributions is
    rewritten as user code is (never torch's tracing machinery), and the program raises as eager does."""
    torch._dynamo.eval_frame.TorchPatcher.patch()  # (dynamo's one-time patching, done: it turns validation off)
    monkeypatch.setattr(torch.distributions.Distribution, "_validate_args", True)  # (as in a fresh process)
    model = GaussianHead()
    ep = unbranch.export(model, (torch.randn(3, 4),), dynamic_shapes=D0)
    assert torch.distributions.Distribution._validate_args  # (unbranch's conds left it as it was)
    assert "Distribution.__init__" in [rm.qualname for rm in unbranch.report_of(ep)]
    x = torch.randn(5, 4)
    torch.testing.assert_close(ep.module()(x), model(x))
    broken = GaussianHead()
    with torch.no_grad():
        broken.lin.bias.fill_(float("nan"))  # loc NaN: eager raises ValueError in the constructor
    with pytest.raises(ValueError):
        broken(x)
    exported = ep.module()
    exported.load_state_dict(broken.state_dict(), strict=False)
    with pytest.raises(RuntimeError, match="Expected parameter"):
        exported(x)


class CategoricalPolicy(torch.nn.Module):
    """A discrete policy (stable-baselines3's form): Categorical's ``probs`` is a lazy_property, which the
    validation loop skips with a ``continue`` on a Python test (a flag made of Python values alone)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x, actions):
        return torch.distributions.Categorical(logits=self.lin(x)).log_prob(actions)


def test_distribution_with_a_lazy_parameter_exports_and_still_raises(monkeypatch):
    torch._dynamo.eval_frame.TorchPatcher.patch()
    monkeypatch.setattr(torch.distributions.Distribution, "_validate_args", True)
    model = CategoricalPolicy()
    ep = unbranch.export(model, (torch.randn(3, 4), torch.tensor([0, 2, 1])), dynamic_shapes=(D0[0], D0[0]))
    x, actions = torch.randn(6, 4), torch.tensor([2, 1, 0, 0, 1, 2])
    torch.testing.assert_close(ep.module()(x, actions), model(x, actions))
    broken = CategoricalPolicy()
    with torch.no_grad():
        broken.lin.bias.fill_(float("nan"))  # logits NaN: eager raises ValueError in the constructor
    with pytest.raises(ValueError):
        broken(x, actions)
    exported = ep.module()
    exported.load_state_dict(broken.state_dict(), strict=False)
    with pytest.raises(RuntimeError, match="Expected parameter"):
        exported(x, actions)


def doubled_when_positive(x):
    if x.sum() > 0:
        return x * 2
    return x


# a second function object running the same code (what a factory or a copy makes): naming the first
# swaps its code alone
_copy = types.FunctionType(doubled_when_positive.__code__, doubled_when_positive.__globals__, "doubled_when_positive")


class CallsTheCopy(torch.nn.Module):
    def forward(self, x):
        return _copy(x)


def test_a_named_function_whose_copy_ran_is_reported_as_rewritten_not_as_unnamed():
    with pytest.raises(unbranch.UnbranchError) as caught:
        with unbranch.torch_export_rewrite(rewrite=[doubled_when_positive]):
            torch.export.export(CallsTheCopy(), (torch.randn(3),))
    message = str(caught.value)
    assert "this context rewrote doubled_when_positive, but torch ran its original code" in message
    assert "did not rewrite" not in message


@pytest.mark.parametrize("strict", MODES)
def test_naming_a_decorated_forward_rewrites_its_wrapper_too(strict):
    model = WrappedForward()
    with unbranch.torch_export_rewrite(rewrite=[(WrappedForward, "forward")]) as report:
        ep = torch.export.export(model, (torch.randn(3, 4),), dynamic_shapes=D0, strict=strict)
    assert [rm.source.text.splitlines()[1].strip() for rm in report.rewritten] == [
        "def wrapper(self, *args, **kwargs):"
    ]
    assert count_branches(ep) == 1
    _both_sides(ep, model, [torch.full((5, 4), 9.0), torch.zeros(6, 4)])


class Resampled(torch.nn.Module):
    def forward(self, x):
        n = int(x.shape[-1] * 1.5)
        return torch.nn.functional.interpolate(x, size=n) + float(x.shape[-1]) / 4


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize("dim", [Dim.DYNAMIC, Dim("n", min=2, max=64)], ids=["DYNAMIC", "named"])
def test_an_int_of_a_size_keeps_the_dimension_dynamic(strict, dim):
    """``int(x.shape[-1] * 1.5)``: non-strict export fixes the size to the example's (plainly, a program
    that refuses other widths, or a constraint violation for a named Dim); the rewrite keeps it symbolic."""
    model = Resampled()
    ep = unbranch.export(model, (torch.rand(1, 2, 8),), dynamic_shapes=({2: dim},), strict=strict)
    for width in (8, 10, 31):
        x = torch.rand(1, 2, width)
        torch.testing.assert_close(ep.module()(x), model(x))


class TakesANumber(torch.nn.Module):
    def forward(self, x):
        n = int(x.sum().item())
        return x[:n].sum()


def test_a_named_function_with_nothing_to_convert_is_said_to_be_named():
    with pytest.raises(unbranch.UnbranchError) as caught:
        with unbranch.torch_export_rewrite(rewrite=[(TakesANumber, "forward")]):
            torch.export.export(TakesANumber(), (torch.rand(4),), strict=False)
    message = str(caught.value)
    assert "TakesANumber.forward was named" in message and "unbranch.export(...)" in message
    assert "did not rewrite" not in message
    ep = unbranch.export(TakesANumber(), (torch.rand(4),), strict=False)  # which it says converts it
    for x in (torch.tensor([3.0, 0.5, 0.2, 0.1]), torch.tensor([1.0, 0.1, 0.1, 0.1])):
        torch.testing.assert_close(ep.module()(x), TakesANumber()(x))


class GaussianLoss(torch.nn.Module):
    def forward(self, x, target, var):
        return torch.nn.functional.gaussian_nll_loss(x, target, var)


def test_torch_nn_functional_checks_are_rewritten_and_still_raise():
    """``gaussian_nll_loss`` refuses negative variances (``elif torch.any(var < 0): raise``): torch's
    nn.functional is rewritten where torch names it, and the program raises as eager does."""
    model = GaussianLoss()
    example = (torch.rand(4, 3), torch.rand(4, 3), torch.rand(4, 3) + 0.1)
    rows = Dim("rows")
    ep = unbranch.export(model, example, dynamic_shapes=({0: rows}, {0: rows}, {0: rows}))
    assert "gaussian_nll_loss" in [rm.qualname for rm in unbranch.report_of(ep)]
    args = (torch.rand(6, 3), torch.rand(6, 3), torch.rand(6, 3) + 0.5)
    torch.testing.assert_close(ep.module()(*args), model(*args))
    negative = (args[0], args[1], args[2] - 1.0)
    with pytest.raises(ValueError, match="negative"):
        model(*negative)
    with pytest.raises(RuntimeError, match="negative"):
        ep.module()(*negative)
