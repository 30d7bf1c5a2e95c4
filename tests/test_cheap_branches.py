"""An if whose sides are a few elementwise operations: both sides and ``torch.where`` in a non-strict
export, where that is cheaper than a cond (issue 39); a cond otherwise, or when asked."""

import libcst as cst
import pytest
import torch
from helpers import count_branches, count_ops
from torch.export import Dim

import unbranch
from unbranch.compiler.analysis.cost import elementwise_ops
from unbranch.runtime.control_flow import CHEAP_ELEMENTS

D0 = ({0: Dim.DYNAMIC},)
WHERE = torch.ops.aten.where.self
COND = torch.ops.higher_order.cond


class Cheap(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor(1.5))

    def forward(self, x):
        if x.sum() > 0:
            y = x.clamp(min=0) * self.scale
        else:
            y = -x + 1
        return y * 2


class CallsAModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        if x.sum() > 0:
            y = self.lin(x)
        else:
            y = x - 1
        return y


class DividesByData(torch.nn.Module):
    def forward(self, x):
        if x.min() > 0:
            y = 1 / x  # (evaluated on the other side too, where x may hold 0: an infinite gradient)
        else:
            y = x
        return y


def _sides(model, n=5):
    return [torch.rand(n, 4) + 0.1, -torch.rand(n + 2, 4) - 0.1]


def _same(ep, model, inputs):
    for x in inputs:
        torch.testing.assert_close(ep.module()(x), model(x))


def test_cheap_sides_become_a_where_and_match_eager_on_both_sides():
    model = Cheap()
    ep = unbranch.export(model, (torch.rand(3, 4),), dynamic_shapes=D0)
    assert count_ops(ep, COND) == 0 and count_ops(ep, WHERE) == 1 and count_branches(ep) == 1
    _same(ep, model, _sides(model))


def test_branches_cond_keeps_the_cond():
    model = Cheap()
    ep = unbranch.export(model, (torch.rand(3, 4),), dynamic_shapes=D0, branches="cond")
    assert count_ops(ep, COND) == 1 and count_ops(ep, WHERE) == 0
    _same(ep, model, _sides(model))
    with unbranch.torch_export_rewrite(model=model, branches="cond"):
        in_context = torch.export.export(model, (torch.rand(3, 4),), dynamic_shapes=D0)
    assert count_ops(in_context, COND) == 1


def test_strict_export_keeps_the_cond():
    model = Cheap()
    ep = unbranch.export(model, (torch.rand(3, 4),), dynamic_shapes=D0, strict=True)
    assert count_ops(ep, COND) == 1
    _same(ep, model, _sides(model))


@pytest.mark.parametrize("model", [CallsAModule(), DividesByData()], ids=["module call", "division by data"])
def test_sides_that_are_not_cheap_elementwise_stay_a_cond(model):
    ep = unbranch.export(model, (torch.rand(3, 4) + 0.1,), dynamic_shapes=D0, branches="where")
    assert count_ops(ep, COND) == 1 and count_ops(ep, WHERE) == 0
    _same(ep, model, _sides(model))


def test_a_large_example_keeps_the_cond_unless_where_is_asked():
    model = Cheap()
    big = torch.rand(CHEAP_ELEMENTS // 4 + 1, 4)
    assert count_ops(unbranch.export(model, (big,), dynamic_shapes=D0), COND) == 1
    ep = unbranch.export(model, (big,), dynamic_shapes=D0, branches="where")
    assert count_ops(ep, COND) == 0 and count_branches(ep) == 1
    _same(ep, model, _sides(model))


def test_the_gradient_through_the_where_is_eagers():
    model = Cheap()
    ep = unbranch.export(model, (torch.rand(3, 4),), dynamic_shapes=D0)
    assert count_ops(ep, WHERE) == 1
    for x in _sides(model):
        mine, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
        ep.module()(mine).sum().backward()
        model(theirs).sum().backward()
        torch.testing.assert_close(mine.grad, theirs.grad)


def test_an_unknown_branches_mode_is_refused():
    with pytest.raises(unbranch.UnbranchError, match="branches='fast'"):
        unbranch.export(Cheap(), (torch.rand(3, 4),), branches="fast")


@pytest.mark.parametrize(
    "code, ops",
    [
        ("y = x * 2\n", 1),
        ("y = x.clamp(min=0) * self.scale\nz = -y\n", 3),
        ("return torch.relu(x) + 1, x > 0\n", 3),
        ("return x / 2\n", 1),
        ("pass\n", 0),
        ("y = x / z\n", None),  # (an infinite gradient where z is 0 on the side not taken)
        ("y = x.exp()\n", None),
        ("y = self.lin(x)\n", None),
        ("y = self.sign(x)\n", None),  # (the module's own method: the user's code)
        ("x += 1\n", None),  # (in place)
        ("print(x)\n", None),
    ],
)
def test_what_counts_as_cheap_elementwise(code, ops):
    assert elementwise_ops(cst.parse_module(code).body) == ops


# --- the condition every lowering takes (issue 52): Python's truth of a one-element tensor ----------


class OneElementRow(torch.nn.Module):
    """A ``(1,)`` condition: a where on it left as it is broadcast the 0-d result to ``(1,)``."""

    def forward(self, x):
        s = x.sum()
        if (x[:, 0] > 0).any(dim=0, keepdim=True):
            s = s * 2
        return s


class OneElementMatrix(torch.nn.Module):
    """A ``(1, 1)`` condition and a ``(4,)`` side: ``(1, 4)`` through a where on it as it is."""

    def forward(self, x):
        y = x[0] * 1
        if (x[:1, :1] > 0).reshape(1, 1):
            y = y * 2
        return y


class FloatCondition(torch.nn.Module):
    """A float condition, which Python takes (0.0 is false) and torch.where does not."""

    def forward(self, x):
        y = x * 1
        if x.sum():
            y = y + 1
        else:
            y = y - 1
        return y


class IntRowCondition(torch.nn.Module):
    def forward(self, x):
        k = (x > 0).sum()
        y = x[:, 0] * 1
        y = y + 1 if (x[:1] > 0).sum(dim=1) else y * 2
        return k, y


def _exactly_eager(ep, model, inputs):
    for x in inputs:
        got, expected = ep.module()(x), model(x)
        for g, e in zip(
            got if isinstance(got, tuple) else (got,), expected if isinstance(expected, tuple) else (expected,)
        ):
            assert g.shape == e.shape and g.dtype == e.dtype
            torch.testing.assert_close(g, e)


ONE_ELEMENT = [OneElementRow, OneElementMatrix, FloatCondition, IntRowCondition]
SIDES = [torch.rand(3, 4) + 0.1, -torch.rand(5, 4) - 0.1, torch.zeros(2, 4)]  # each side, other sizes


@pytest.mark.parametrize("branches", ["auto", "where", "cond"])
@pytest.mark.parametrize("strict", [False, True], ids=["nonstrict", "strict"])
@pytest.mark.parametrize("model", ONE_ELEMENT, ids=[m.__name__ for m in ONE_ELEMENT])
def test_a_one_element_condition_of_any_rank_and_dtype_keeps_each_sides_shape(model, strict, branches):
    m = model()
    ep = unbranch.export(m, (torch.rand(3, 4),), dynamic_shapes=D0, strict=strict, branches=branches)
    assert count_branches(ep) >= 1
    _exactly_eager(ep, m, SIDES)


def test_the_context_path_keeps_each_sides_shape_too():
    m = OneElementMatrix()
    with unbranch.torch_export_rewrite(m):
        ep = torch.export.export(m, (torch.rand(3, 4),), dynamic_shapes=D0)
    assert count_ops(ep, WHERE) == 1
    _exactly_eager(ep, m, SIDES)


class SeveralElements(torch.nn.Module):
    def forward(self, x):
        y = x * 1
        if x[0] > 0:
            y = y + 1
        return y


@pytest.mark.parametrize("strict", [False, True], ids=["nonstrict", "strict"])
def test_a_condition_of_several_elements_fails_the_export_as_python_fails(strict):
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value is ambiguous"):
        SeveralElements()(torch.rand(3, 4))
    with pytest.raises(Exception, match="Boolean value of Tensor with more than one value is ambiguous"):
        unbranch.export(SeveralElements(), (torch.rand(3, 4),), dynamic_shapes=D0, strict=strict)
