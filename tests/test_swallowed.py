"""A data-dependent stop the user's own ``except`` swallowed is a failure, never a program to return.

Non-strict export runs the user's code: ``if x.sum() > 0`` raises inside it, a ``try`` around
the branch catches that, and the plain export "works" with the ``except`` side baked in for
every input (strict export fails loudly instead). ``unbranch.export`` and the context notice the
swallowed error, rewrite the function that branched and export again; where nothing converts,
an UnbranchError says the plain program would be wrong there. An ``except`` that names torch's
data-dependent error itself is a deliberate fallback and is left alone.
"""

import pytest
import torch
from helpers import MODES, assert_same, count_branches, line_of
from torch.export import Dim
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

import unbranch
from unbranch import UnbranchError

HOW = ["unbranch.export", "context", "rewrite=model"]


class TryAroundIf(torch.nn.Module):
    def forward(self, x):
        try:
            if x.sum() > 0:
                y = x * 2
            else:
                y = -x
        except Exception:
            y = x
        return y


def safe_normalise(x):
    """A helper that falls back where it cannot decide (the fallback hides torch's stop)."""
    try:
        if x.abs().max() > 1:
            return x / x.abs().max()
        return x
    except Exception:
        return x


class HelperSwallows(torch.nn.Module):
    def forward(self, x):
        return safe_normalise(x) + 1


class EqualInCondition(torch.nn.Module):
    def forward(self, x, y):
        if torch.equal(x, y):
            return x * 3
        return x - y


def contiguous_or_false(t):
    try:
        return bool(t.sum() > 0)
    except GuardOnDataDependentSymNode:  # a deliberate fallback: torch's own error, named
        return False


class DeliberateFallback(torch.nn.Module):
    def forward(self, x):
        return x * 2 if contiguous_or_false(x) else x - 1


def wants_python_value(x):
    try:
        n = int(x.sum().item() > 0)  # (kept a Python int: nothing converts it)
        return x * n
    except Exception:
        return x


class SwallowedUnconvertible(torch.nn.Module):
    def forward(self, x):
        return wants_python_value(x) + 1


def _rows(n, sign=1.0):
    return sign * (torch.arange(n * 3, dtype=torch.float32).reshape(n, 3) / (n * 3) + 0.5)


CASES = {
    "try around a tensor if": (TryAroundIf, (_rows(4),), [(_rows(6),), (_rows(3, -1),)]),
    "a helper that swallows it": (HelperSwallows, (_rows(4) * 3,), [(_rows(5) * 3,), (_rows(2) * 0.1,)]),
}


def _export(how, model, example, strict):
    shapes = tuple({0: Dim.DYNAMIC} for _ in example)
    if how == "unbranch.export":
        return unbranch.export(model, example, dynamic_shapes=shapes, strict=strict)
    context = unbranch.torch_export_rewrite(model) if how == "context" else unbranch.torch_export_rewrite(rewrite=model)
    with context:
        return torch.export.export(model, example, dynamic_shapes=shapes, strict=strict)


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize("case", list(CASES))
def test_swallowed_branch_is_converted(case, strict, how):
    make, example, inputs = CASES[case]
    model = make()
    ep = _export(how, model, example, strict)
    assert count_branches(ep) == 1
    for args in [example, *inputs]:
        assert_same(ep.module()(*args), model(*args))


def test_the_plain_program_was_wrong():
    """What this guards against: plain non-strict export returns the except side for every input."""
    model = TryAroundIf()
    ep = torch.export.export(model, (_rows(4),), dynamic_shapes=({0: Dim.DYNAMIC},))
    assert count_branches(ep) == 0
    assert not torch.equal(ep.module()(_rows(4)), model(_rows(4)))


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("strict", MODES)
def test_equal_found_guided(strict, how):
    model = EqualInCondition()
    x = _rows(4)
    ep = _export(how, model, (x, x + 1), strict)
    assert count_branches(ep) == 1
    for a, b in [(x, x.clone()), (x, x + 1), (_rows(6), _rows(6)), (_rows(2), _rows(2) * 2)]:
        assert_same(ep.module()(a, b), model(a, b))


def test_named_except_is_a_deliberate_fallback():
    # (non-strict: strict export fails at the branch on what the helper returns, and converts it)
    model = DeliberateFallback()
    plain = torch.export.export(model, (_rows(4),), dynamic_shapes=({0: Dim.DYNAMIC},))
    ep = unbranch.export(model, (_rows(4),), dynamic_shapes=({0: Dim.DYNAMIC},))
    assert str(ep.graph) == str(plain.graph)  # the plain program, as the code asked for
    assert unbranch.report_of(ep).attempts[0].error == ""


@pytest.mark.parametrize("how", HOW)
def test_swallowed_and_unconvertible_is_an_error(how):
    with pytest.raises(UnbranchError, match="caught by the try at .*except side for every input") as info:
        _export(how, SwallowedUnconvertible(), (_rows(4),), strict=False)
    assert info.value.line == line_of(wants_python_value, "n = int(")


def test_context_with_the_function_not_named_says_so():
    with pytest.raises(UnbranchError, match="caught by the try") as info:
        with unbranch.torch_export_rewrite(rewrite=[torch.nn.Identity.forward]):
            torch.export.export(TryAroundIf(), (_rows(4),), dynamic_shapes=({0: Dim.DYNAMIC},))
    assert info.value.line == line_of(TryAroundIf.forward, "if x.sum() > 0:")
