"""Each construct of the compiler core, exported with dynamic shapes in both export modes.

Every test compares ``ep.module()`` with the original eager module on inputs that take each
branch and on shapes other than the example's.
"""

import pytest
import torch
from helpers import MODES, assert_same, check_export, count_branches, export_rewritten
from torch.export import Dim

import unbranch

pos = lambda *s: torch.rand(*s) + 0.5  # noqa: E731
neg = lambda *s: -torch.rand(*s) - 0.5  # noqa: E731


class Bad1(torch.nn.Module):
    """The torch.export tutorial's first example."""

    def forward(self, x):
        if x.sum() > 0:
            return torch.sin(x)
        return torch.cos(x)


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_early_return_bad1(strict, dtype):
    inputs = [(pos(4, 3).to(dtype),), (neg(4, 3).to(dtype),), (pos(7, 2).to(dtype),), (neg(2, 5).to(dtype),)]
    check_export(Bad1(), (pos(3, 4).to(dtype),), inputs, strict, conds=1)


class DtypeAndTensor(torch.nn.Module):
    """BartEncoderLayer's float16 clamp: a Python test `and` a tensor test."""

    def forward(self, hidden_states):
        hidden_states = hidden_states * 2
        if hidden_states.dtype == torch.float16 and not torch.isfinite(hidden_states).all():
            clamp_value = torch.finfo(hidden_states.dtype).max - 1000
            hidden_states = torch.clamp(hidden_states, min=-clamp_value, max=clamp_value)
        return hidden_states + 1


@pytest.mark.parametrize("strict", MODES)
def test_dtype_and_tensor_float16(strict):
    big = torch.full((3, 4), 60000.0)  # overflows to inf once doubled in float16
    inputs = [(big.half(),), (torch.randn(3, 4).half(),), (torch.randn(5, 2).half(),), (-big[:2].half(),)]
    ep = check_export(DtypeAndTensor(), (torch.randn(2, 3).half(),), inputs, strict, conds=1)
    assert torch.isfinite(ep.module()(big.half())).all()


@pytest.mark.parametrize("strict", MODES)
def test_dtype_and_tensor_float32_is_plain(strict):
    inputs = [(torch.randn(3, 4),), (torch.randn(6, 2) * 1e30,)]
    check_export(DtypeAndTensor(), (torch.randn(2, 3),), inputs, strict, conds=0)


class Assigns(torch.nn.Module):
    def forward(self, x, y):
        if (x * y).sum() > 0:
            tmp = x * 2  # a temporary of the branch only
            z = tmp + y
            w = x.abs()
        else:
            z = x - y
            w = y.abs()
        return z * w


def test_liveness_keeps_temporaries_inside():
    code = unbranch.transform_method(Assigns.forward).code
    assert "return z, w" in code and "tmp" not in code.split("return z, w")[0].split("def branch_cond_then_1")[0]
    assert (
        "z, w = _ub.if_stmt((x * y).sum() > 0, branch_cond_then_1, branch_cond_else_1, (x, y), elementwise=5)" in code
    )


@pytest.mark.parametrize("strict", MODES)
def test_assign_both_branches(strict):
    inputs = [(pos(4, 3), pos(4, 3)), (pos(4, 3), neg(4, 3)), (pos(6, 5), neg(6, 5)), (neg(2, 2), neg(2, 2))]
    check_export(Assigns(), (pos(3, 4), pos(3, 4)), inputs, strict, conds=1)


class NoElse(torch.nn.Module):
    def forward(self, x):
        y = x + 1
        if y.mean() > 1:
            y = y * 10  # the missing else passes y through
        return y


@pytest.mark.parametrize("strict", MODES)
def test_if_without_else(strict):
    inputs = [(pos(4, 3) + 1,), (neg(4, 3),), (pos(7, 1) + 2,), (neg(2, 6),)]
    check_export(NoElse(), (pos(3, 4),), inputs, strict, conds=1)


class ElifChain(torch.nn.Module):
    def forward(self, x):
        m = x.mean()
        if m > 2:
            y = x * 3
        elif m > 1:
            y = x * 2
        elif m > 0:
            y = x + 100
        else:
            y = -x
        return y


@pytest.mark.parametrize("strict", MODES)
def test_elif_chain(strict):
    inputs = [(torch.full((4, 3), 3.0),), (torch.full((4, 3), 1.5),), (torch.full((5, 2), 0.5),), (neg(2, 2),)]
    check_export(ElifChain(), (pos(3, 4),), inputs, strict, conds=3)


class Nested(torch.nn.Module):
    def forward(self, x, y):
        if x.sum() > 0:
            if y.sum() > 0:
                out = x + y
            else:
                out = x - y
            out = out * 2
        else:
            if (x * y).mean() > 0:
                out = x * y
            else:
                out = y
                if y.max() > 0:
                    out = out.relu()
        return out


@pytest.mark.parametrize("strict", MODES)
def test_nested_ifs(strict):
    inputs = [(a, b) for a in (pos(4, 3), neg(4, 3)) for b in (pos(4, 3), neg(4, 3), torch.randn(4, 3))]
    inputs.append((neg(6, 2), torch.randn(6, 2)))
    check_export(Nested(), (pos(3, 4), pos(3, 4)), inputs, strict, conds=4)


class EarlyReturnNested(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        if y.sum() > 0:
            if y.max() > 3:
                return y - 3
            y = y + 1
        z = y.relu()
        return z * 2


@pytest.mark.parametrize("strict", MODES)
def test_early_return_in_nested_branch(strict):
    inputs = [(torch.full((4, 3), 2.0),), (torch.full((4, 3), 0.5),), (neg(5, 2),), (torch.full((2, 7), 1.0),)]
    check_export(EarlyReturnNested(), (pos(3, 4),), inputs, strict, conds=2)


class BoolOps(torch.nn.Module):
    def forward(self, x, y):
        if x.sum() > 0 and not y.sum() > 0:
            x = x + y
        if x.mean() > 10 or y.mean() < -10 or not x.max() > 0:
            x = x * 0
        return x


@pytest.mark.parametrize("strict", MODES)
def test_and_or_not_on_tensors(strict):
    inputs = [
        (pos(4, 3), neg(4, 3)),
        (pos(4, 3), pos(4, 3)),
        (neg(4, 3), pos(4, 3)),
        (pos(5, 2) * 100, pos(5, 2)),
        (neg(2, 3), neg(2, 3) * 100),
    ]
    check_export(BoolOps(), (pos(3, 4), pos(3, 4)), inputs, strict, conds=2)


class ShortCircuit(torch.nn.Module):
    """Python short circuit must hold: `mask.sum()` is never evaluated when mask is None."""

    def __init__(self, flag):
        super().__init__()
        self.flag = flag

    def forward(self, x, mask=None):
        if mask is not None and mask.sum() > 0:
            x = x * mask
        if self.flag or x.sum() > 0:
            x = x + 1
        return x


@pytest.mark.parametrize("strict", MODES)
def test_short_circuit_on_python_values(strict):
    # flag True: the `or` is decided by Python, no cond; mask None: the `and` likewise
    check_export(ShortCircuit(True), (pos(3, 4),), [(pos(4, 3),), (neg(2, 2),)], strict, conds=0)
    inputs = [(pos(4, 3), pos(4, 3)), (neg(4, 3), neg(4, 3)), (pos(6, 2), neg(6, 2))]
    check_export(ShortCircuit(False), (pos(3, 4), pos(3, 4)), inputs, strict, conds=2)


class AugAndMutation(torch.nn.Module):
    def forward(self, x):
        y = x * 1
        if y.sum() > 0:
            y += 1
            y[y > 2] = 0
            y.mul_(2)
        else:
            y -= x.abs()
        return y


def test_augmented_assignment_kept_as_written():
    # eager runs the user's in-place statements; only the traced cond works on a clone
    code = unbranch.transform_method(AugAndMutation.forward).code
    assert "y += 1" in code and "y -= x.abs()" in code and "mutated=(0,)" in code


@pytest.mark.parametrize("strict", MODES)
def test_augassign_and_inplace_writes(strict):
    inputs = [(pos(4, 3) * 2,), (neg(4, 3),), (pos(6, 2),), (neg(2, 5),)]
    check_export(AugAndMutation(), (pos(3, 4),), inputs, strict, conds=1)


class MutatesInput(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            x[x > 1] = 1
        return x * 2


@pytest.mark.parametrize("strict", MODES)
def test_mutating_an_input_in_a_branch(strict):
    ep = export_rewritten(MutatesInput(), (pos(3, 4),), strict)
    for x in (pos(4, 3) * 3, neg(4, 3), pos(2, 6)):
        expected = MutatesInput()(x.clone())
        torch.testing.assert_close(ep.module()(x.clone()), expected)


class StaticConditions(torch.nn.Module):
    def __init__(self, use_bias: bool):
        super().__init__()
        self.use_bias = use_bias
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, mask=None, scale: float = 1.0, output_extra: bool = False):
        if mask is None:
            mask = torch.ones_like(x)
        if self.training:
            x = torch.nn.functional.dropout(x, 0.5)
        if x.dtype == torch.float16:
            x = x.float()
        if isinstance(scale, float) and self.use_bias:
            x = self.lin(x) * scale
        extra = None
        if output_extra:
            extra = x.sum()
        return x * mask, extra


def test_static_conditions_are_untouched():
    rm = unbranch.transform_method(StaticConditions.forward)
    # all but `self.use_bias`, which may as well be a buffer: dispatched (a Python bool at run time)
    assert [n.line - rm.source.line for n in rm.notes] == [7] and rm.code.count("_ub.if_stmt(") == 1


@pytest.mark.parametrize("strict", MODES)
def test_static_conditions_export_without_cond(strict):
    m = StaticConditions(True).eval()
    ep = export_rewritten(m, (torch.randn(3, 4),), strict, dynamic_shapes=({0: Dim.DYNAMIC},))
    assert count_branches(ep) == 0
    x = torch.randn(5, 4)
    torch.testing.assert_close(ep.module()(x)[0], m(x)[0])


class FlagParam(torch.nn.Module):
    def forward(self, x, flag):
        if flag:  # a Python value at run time: dispatched, but never a cond
            x = x + 1
        else:
            x = x - 1
        return x


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize("flag", [True, False])
def test_python_flag_stays_python(strict, flag):
    m = FlagParam()
    ep = export_rewritten(m, (pos(3, 4), flag), strict)
    assert count_branches(ep) == 0
    x = pos(5, 2)
    torch.testing.assert_close(ep.module()(x, flag), m(x, flag))


class Checked(torch.nn.Module):
    def forward(self, x):
        if (x < 0).any():
            raise ValueError("negative input")
        return x.sqrt()


@pytest.mark.parametrize("strict", MODES)
def test_raise_becomes_runtime_check(strict):
    m = Checked()
    with pytest.raises(ValueError, match="negative input"):
        with unbranch.torch_export_rewrite(rewrite=[Checked.forward]):
            m(neg(2, 2))  # eager inside the context: the very same exception
    ep = check_export(m, (pos(3, 4),), [(pos(4, 3),), (pos(7, 2),)], strict, conds=0)
    with pytest.raises(RuntimeError, match="negative input"):
        ep.module()(neg(4, 3))


class ShapeChecked(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] < 3:
            raise ValueError("need three rows")
        return x[2] - x[0]


@pytest.mark.parametrize("strict", MODES)
def test_raise_on_shape_becomes_check(strict):
    ep = check_export(ShapeChecked(), (pos(3, 4),), [(pos(3, 3),), (pos(9, 2),)], strict)
    with pytest.raises(AssertionError, match=r"x.size\(\)\[0\] >= 3"):
        ep.module()(pos(2, 3))


class NoneOutput(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            y = x + 1
            extra = None
        else:
            y = x - 1
            extra = None
        return y, extra


def test_non_tensor_output_gives_clear_error():
    # None among the function's results on both sides: the rest of the function is in both branches
    # (its value a constant of each), and the result itself holds the None no cond returns
    with pytest.raises(unbranch.UnbranchError, match=r"test_export.py:\d+: .*a side gives None"):
        export_rewritten(NoneOutput(), (pos(3, 4),), strict=False, branches="cond")
    # (both sides cheap: torch.where picks y, and the None is the same either way)
    ep = export_rewritten(NoneOutput(), (pos(3, 4),), strict=False)
    for x in (pos(5, 4), -pos(2, 4)):
        assert_same(ep.module()(x), NoneOutput()(x))


class ShapeCondition(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 4:
            y = x.sum(0) * 2
        else:
            y = x.mean(0) + 1
        return y


@pytest.mark.parametrize("strict", MODES)
def test_shape_condition_becomes_cond(strict):
    # a plain `if` would silently specialise to one side; the cond keeps both
    inputs = [(pos(6, 3),), (pos(3, 3),), (pos(5, 2),), (pos(2, 2),), (pos(4, 4),)]
    check_export(ShapeCondition(), (pos(7, 3),), inputs, strict, conds=1)


class ShapeConditionPythonOutput(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 4:
            y, scale = x * 2, 0.5
        else:
            y, scale = x + 1, 2.0
        return y * scale


@pytest.mark.parametrize("strict", MODES)
def test_shape_condition_choosing_a_float_covers_both_sides(strict):
    # the float a side binds is no cond output: the rest of the function moves into both branches,
    # where it is a constant, and the program covers both sizes (no specialisation to the example's)
    assert "return _ub.if_stmt(x.shape[0] > 4" in unbranch.transform_method(ShapeConditionPythonOutput.forward).code
    ep = export_rewritten(ShapeConditionPythonOutput(), (pos(6, 3),), strict)
    assert count_branches(ep) == 1
    for x in (pos(7, 2), pos(3, 2)):
        torch.testing.assert_close(ep.module()(x), ShapeConditionPythonOutput()(x))


class UsesSuper(torch.nn.Linear):
    def forward(self, x):
        if x.sum() > 0:
            y = super().forward(x)
        else:
            y = super().forward(-x)
        return y


@pytest.mark.parametrize("strict", MODES)
def test_super_in_branch(strict):
    m = UsesSuper(3, 3)
    ep = export_rewritten(m, (pos(4, 3),), strict, dynamic_shapes=({0: Dim.DYNAMIC},))
    assert count_branches(ep) == 1
    for x in (pos(5, 3), neg(2, 3)):
        torch.testing.assert_close(ep.module()(x), m(x))


class Asserted(torch.nn.Module):
    def forward(self, x):
        assert (x > 0).all() and x.shape[0] > 1, "positive input with two rows needed"
        return x.log()


@pytest.mark.parametrize("strict", MODES)
def test_assert_becomes_runtime_check(strict):
    m = Asserted()
    with unbranch.torch_export_rewrite(rewrite=[Asserted.forward]):
        with pytest.raises(AssertionError, match="positive input"):
            m(neg(3, 2))
    ep = check_export(m, (pos(3, 4),), [(pos(4, 3),), (pos(7, 2),)], strict, conds=0)
    with pytest.raises(RuntimeError, match="positive input"):
        ep.module()(neg(4, 3))


class EmptyGuard(torch.nn.Module):
    def forward(self, x):
        if x.numel() == 0:  # impossible for dynamic sizes (>= 2): the export decides it alone
            x = x + 1
        if x.sum() > 0:
            x = x * 2
        return x


@pytest.mark.parametrize("strict", MODES)
def test_statically_decided_shape_condition_adds_no_cond(strict):
    ep = check_export(EmptyGuard(), (pos(3, 4),), [(pos(5, 2),), (neg(2, 3),)], strict, conds=1)
    assert "numel" not in "".join(
        str(n.meta.get("stack_trace")) for n in ep.graph_module.graph.nodes if n.target is torch.ops.higher_order.cond
    )


class SameTensorTwice(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            b = x * 2
            c = b
        else:
            b = x - 1
            c = x + 1
        return b + c


class OptionalMaskInBranch(torch.nn.Module):
    """Found by fuzzing: a None output once came back as () and took the wrong branch after."""

    def forward(self, x, mask=None):
        if x.sum() > 0:
            if mask is not None:
                mask = mask * 2
        if mask is None:
            return x + 1
        return x - 1


@pytest.mark.parametrize("strict", MODES)
def test_fuzz_regressions(strict):
    check_export(SameTensorTwice(), (pos(3, 4),), [(pos(4, 3),), (neg(2, 5),)], strict, conds=1)
    check_export(OptionalMaskInBranch(), (pos(3, 4),), [(pos(4, 3),), (neg(2, 5),)], strict)
