"""Conditions that are not provably Python are dispatched, and Python's truth tests on tensors export.

Each model is exported inside ``torch_export_rewrite(rewrite=[Model.forward])`` with every
dim dynamic, in both export modes; ``ep.module()`` must match the original eager module on
inputs that take each branch and on another shape, with a cond in the graph.
"""

import textwrap

import pytest
import torch
from helpers import MODES, all_dynamic, assert_same, count_branches, export_rewritten

import unbranch
from unbranch import runtime

pos = lambda *s: torch.rand(*s) + 0.5  # noqa: E731
neg = lambda *s: -torch.rand(*s) - 0.5  # noqa: E731


def check(model, example, inputs, strict):
    ep = export_rewritten(model, example, strict)
    assert count_branches(ep) >= 1
    for args in inputs:
        assert_same(ep.module()(*args), model(*args))
    return ep


# --- self.x that is a buffer or a parameter (was STATIC: any self.x) ---------------------------


class ScaleBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.tensor(1.0))

    def forward(self, x):
        if self.scale > 0:
            x = x * self.scale
        else:
            x = x - 1
        return x


class ScaleParameter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor([2.0]))

    def forward(self, x):
        if self.scale > 0:
            y = x * self.scale
        else:
            y = x.abs()
        return y


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize("cls", [ScaleBuffer, ScaleParameter])
def test_if_on_a_registered_tensor_attribute(cls, strict):
    model = cls()
    ep = check(model, (torch.randn(3, 4),), [(torch.randn(3, 4),), (torch.randn(6, 2),)], strict)
    # the other branch: the same value set in the original and in the exported module
    exported = ep.module()
    with torch.no_grad():
        model.scale.fill_(-1.0)
        exported.scale.fill_(-1.0)
    for x in (torch.randn(3, 4), torch.randn(5, 1)):
        assert_same(exported(x), model(x))


# --- flags that are tensors (was STATIC: is_/has_/use_... names) --------------------------------


class PadFlag(torch.nn.Module):
    def forward(self, x, is_pad):
        if is_pad:
            x = torch.nn.functional.pad(x, (0, 1))[:, 1:]
        return x * 2


class HasFlag(torch.nn.Module):
    def forward(self, x, has_x):
        if has_x:
            return x + 1
        return x - 1


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize("cls", [PadFlag, HasFlag])
def test_if_on_a_flag_named_tensor(cls, strict):
    yes, no = torch.tensor(True), torch.tensor(False)
    inputs = [(torch.randn(3, 4), yes), (torch.randn(3, 4), no), (torch.randn(5, 2), yes), (torch.randn(2, 6), no)]
    check(cls(), (torch.randn(3, 4), yes), inputs, strict)


def test_python_flag_stays_exact_and_adds_no_cond():
    assert "_ub.if_stmt(is_pad," in unbranch.transform_method(PadFlag.forward).code  # dispatched
    model, x = PadFlag(), torch.randn(3, 4)
    flags = (True, False, 0, 1, None, "")
    expected = [model(x, flag) for flag in flags]  # the original code, outside the context
    with unbranch.torch_export_rewrite(rewrite=[PadFlag.forward]):
        for flag, value in zip(flags, expected):
            assert_same(model(x, flag), value)
        ep = torch.export.export(model, (x, True), dynamic_shapes=all_dynamic((x, True)), strict=False)
    assert count_branches(ep) == 0
    y = torch.randn(5, 3)
    assert_same(ep.module()(y, True), model(y, True))


# --- kwargs.get (was STATIC: .get) ---------------------------------------------------------------


class KwargsFlag(torch.nn.Module):
    def forward(self, x, **kwargs):
        if kwargs.get("mask_flag"):
            x = x.masked_fill(x < 0, 0.0)
        return x + 1


class PassesKwargs(torch.nn.Module):
    """Calls KwargsFlag with **options (torch 2.13 rejects every dynamic_shapes spec for a **kwargs
    input of the exported module itself: "Must provide a tree_name when there might be a mismatch")."""

    def __init__(self):
        super().__init__()
        self.inner = KwargsFlag()

    def forward(self, x, options):
        return self.inner(x, **options)


@pytest.mark.parametrize("strict", MODES)
def test_if_on_a_tensor_from_kwargs_get(strict):
    model, x = PassesKwargs(), torch.randn(3, 4)
    example = (x, {"mask_flag": torch.tensor(True)})
    dims = ({0: torch.export.Dim.DYNAMIC, 1: torch.export.Dim.DYNAMIC}, {"mask_flag": None})
    ep = export_rewritten(model, example, strict, rewrite=[KwargsFlag.forward], dynamic_shapes=dims)
    assert count_branches(ep) == 1
    for y, flag in [(x, True), (x, False), (torch.randn(6, 2), True), (torch.randn(2, 5), False)]:
        options = {"mask_flag": torch.tensor(flag)}
        assert_same(ep.module()(y, options), model(y, options))


# --- x in t (was STATIC: in) ---------------------------------------------------------------------


class PadIn(torch.nn.Module):
    pad_id = 0

    def forward(self, ids):
        if self.pad_id in ids[:, -1]:
            ids = ids + 100
        return ids


class PadNotIn(torch.nn.Module):
    def forward(self, ids, pad):
        if pad not in ids:
            return ids * 2
        return ids


@pytest.mark.parametrize("strict", MODES)
def test_in_on_a_tensor(strict):
    padded, full = torch.tensor([[1, 2, 0], [3, 4, 5]]), torch.tensor([[1, 2, 3], [3, 4, 5]])
    inputs = [(padded,), (full,), (torch.tensor([[7, 0]] * 4),), (torch.tensor([[7, 1, 2, 3]] * 5),)]
    check(PadIn(), (padded,), inputs, strict)


@pytest.mark.parametrize("strict", MODES)
def test_not_in_on_a_tensor(strict):
    ids, pad = torch.tensor([[1, 2, 0], [3, 4, 5]]), torch.tensor(0)
    inputs = [(ids, pad), (ids, torch.tensor(9)), (torch.arange(12).reshape(4, 3), torch.tensor(11))]
    inputs.append((torch.arange(10).reshape(2, 5), torch.tensor(-1)))
    check(PadNotIn(), (ids, pad), inputs, strict)


# --- bool(t), int(n) == 3 ------------------------------------------------------------------------


class BoolCall(torch.nn.Module):
    def forward(self, x):
        t = x.sum().clamp(min=0)  # 0.0 (false) when the sum is negative
        if bool(t):
            x = x.cos()
        return x


class IntCall(torch.nn.Module):
    def forward(self, x):
        n = (x > 0).sum()
        if int(n) == 3:
            return x * 3
        return x


@pytest.mark.parametrize("strict", MODES)
def test_bool_of_a_tensor(strict):
    inputs = [(pos(3, 4),), (neg(3, 4),), (pos(5, 2),), (neg(2, 7),)]
    check(BoolCall(), (pos(3, 4),), inputs, strict)


@pytest.mark.parametrize("strict", MODES)
def test_int_of_a_tensor(strict):
    three = torch.tensor([[1.0, -1.0], [2.0, 3.0]])
    inputs = [(three,), (pos(2, 2),), (torch.cat([three, neg(2, 2)]),), (neg(3, 5),)]
    check(IntCall(), (three,), inputs, strict)


# --- any(...) / all(...) over tensors ------------------------------------------------------------


class AnyOf(torch.nn.Module):
    def forward(self, a, b):
        xs = (a > 2, b < -2)
        if any(t.any() for t in xs):
            return a + b
        return a - b


class AllOf(torch.nn.Module):
    def forward(self, a, b):
        if all([(a > 0).all(), (b > 0).all()]):
            return a * b
        return a + b


@pytest.mark.parametrize("strict", MODES)
def test_any_of_tensors(strict):
    small = torch.zeros(3, 4)
    inputs = [(small, small), (small + 3, small), (small, small - 3), (torch.zeros(5, 2), torch.full((5, 2), -9.0))]
    check(AnyOf(), (small, small.clone()), inputs, strict)  # two inputs, not one seen twice


@pytest.mark.parametrize("strict", MODES)
def test_all_of_tensors(strict):
    inputs = [(pos(3, 4), pos(3, 4)), (pos(3, 4), neg(3, 4)), (neg(2, 5), pos(2, 5)), (pos(6, 1), pos(6, 1))]
    check(AllOf(), (pos(3, 4), pos(3, 4)), inputs, strict)


# --- torch.equal ----------------------------------------------------------------------------------


class Equal(torch.nn.Module):
    def forward(self, a, b):
        if torch.equal(a, b):
            return a * 0
        return a + 1


@pytest.mark.parametrize("strict", MODES)
def test_torch_equal(strict):
    a = torch.arange(6.0).reshape(3, 2)
    inputs = [(a, a.clone()), (a, a + 1), (a, torch.arange(8.0).reshape(4, 2)), (a[:2], a[:2].clone())]
    inputs.append((torch.zeros(0, 2), torch.zeros(0, 2)))
    ep = check(Equal(), (a, a + 1), inputs, strict)
    assert count_branches(ep) == 1


class WhileBool(torch.nn.Module):
    def forward(self, x):
        while bool(x.sum() > 0):
            x = x - 1
        return x


@pytest.mark.parametrize("strict", MODES)
def test_bool_in_a_while_test(strict):
    ep = export_rewritten(WhileBool(), (pos(3, 2),), strict)
    assert any(n.target is torch.ops.higher_order.while_loop for n in ep.graph.nodes)
    for x in (pos(3, 2) * 3, neg(4, 2), pos(6, 1)):
        assert_same(ep.module()(x), WhileBool()(x))


# --- Python values stay Python --------------------------------------------------------------------


class PythonBool(torch.nn.Module):
    def forward(self, x):
        if bool(3):
            x = x + 1
        return x


def test_python_valued_forms_are_left_alone():
    assert not unbranch.transform_method(PythonBool.forward).notes
    code = unbranch.rewrite_source(
        """
        def forward(self, x, n):
            if int(n) == 3 and any(v > 0 for v in [1, -1]) and bool(n):
                x = x + 1
            return x
        """
    )
    scope = {"_ub": runtime, "torch": torch}
    exec(code, scope)
    for n in (3, 3.5, 2, torch.tensor(3), torch.tensor(3.9), torch.tensor(2)):
        expected = torch.ones(2) + 1 if int(n) == 3 and bool(n) else torch.ones(2)
        assert_same(scope["forward"](None, torch.ones(2), n), expected)
    ep = export_rewritten(PythonBool(), (torch.randn(3, 2),), strict=False)
    assert count_branches(ep) == 0


@pytest.mark.parametrize(
    "value",
    [0, 1, 2.5, float("nan"), "", "a", [], [0], None, torch.tensor(0.0), torch.tensor([2]), torch.tensor(True)],
)
def test_helpers_equal_python_eagerly(value):
    assert runtime.bool_(value) == bool(value)
    assert runtime.any_([value, 0]) == any([value, 0])
    assert runtime.all_(iter([value, 1])) == all([value, 1])
    if isinstance(value, (int, float, torch.Tensor)) and value == value:
        assert runtime.int_(value) == int(value) and runtime.float_(value) == float(value)
    t = torch.tensor([0, 1, 2])
    if isinstance(value, (int, float, torch.Tensor)):
        assert runtime.in_(value, t) == (value in t) and runtime.not_in(value, t) == (value not in t)
    a = torch.arange(3)
    assert runtime.equal(a, a.clone()) is True and runtime.equal(a, a[:2]) is False


def test_helpers_fail_as_python_does():
    with pytest.raises(RuntimeError, match="ambiguous"):
        runtime.bool_(torch.ones(2))
    with pytest.raises(RuntimeError, match="only supports Tensor or scalar"):
        runtime.in_("a", torch.ones(2))


# --- the pass's own examples ---------------------------------------------------------------------


def _text(code):
    return textwrap.dedent(code).lstrip("\n")


def test_only_tests_of_dispatched_ifs_are_rewritten():
    code = unbranch.rewrite_source(
        """
        def forward(self, x, t):
            y = bool(t)
            if f(bool(t)) or x is None:
                x = x + 1
            if bool(t):
                x = x - 1
            return x, y
        """
    )
    assert "y = bool(t)" in code and "f(bool(t))" in code and "_ub.bool_(t)" in code


def test_a_shadowed_builtin_is_not_rewritten():
    code = unbranch.rewrite_source(
        """
        def forward(self, x, any):
            if any(v.any() for v in x):
                x = x + 1
            return x
        """
    )
    assert "_ub.any_" not in code and "any(v.any() for v in x)" in code


# --- match/case ------------------------------------------------------------------------------------


class Modes(torch.nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.mode = mode

    def forward(self, x):
        match self.mode:
            case "a":
                if x.sum() > 0:
                    x = x * 2
                else:
                    x = x - 1
            case ("b" | "c") as other:
                x = x + len(other)
        return x


@pytest.mark.parametrize("strict", MODES)
def test_if_inside_a_match_case(strict):
    model = Modes("a")
    inputs = [(pos(3, 4),), (neg(3, 4),), (pos(5, 2),), (neg(2, 6),)]
    ep = check(model, (pos(3, 4),), inputs, strict)
    assert count_branches(ep) == 1
    for mode in ("b", "z"):
        other = Modes(mode)
        expected = other(torch.ones(2))
        with unbranch.torch_export_rewrite(rewrite=[Modes.forward]):
            assert_same(other(torch.ones(2)), expected)
