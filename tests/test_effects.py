"""Side effects inside converted branches and loops: kept exactly, or the construct stays Python.

Each model runs three ways on inputs taking every branch, at shapes other than the
example's: the original eagerly, the original inside the context (the rewritten code,
eagerly) and the exported program. Outputs *and* the inputs after the call (what the
code changed in place) must agree.
"""

import libcst as cst
import pytest
import torch
from helpers import MODES, all_dynamic, assert_same, count_branches
from torch.export import Dim
from torch.utils import _pytree as pytree

import unbranch
from unbranch.compiler.analysis.effects import block_effects
from unbranch.errors import UnbranchError


def run_three_ways(model, example, inputs, strict, rewrite, conds=None):
    """Export inside the context; compare original, rewritten-eager and exported, inputs' state included."""
    with unbranch.torch_export_rewrite(rewrite=rewrite):
        ep = torch.export.export(model, example, dynamic_shapes=all_dynamic(example), strict=strict)
    if conds is not None:
        assert count_branches(ep) == conds
    for args in inputs:
        original = [a.clone() for a in args]
        expected = model(*original)
        rewritten = [a.clone() for a in args]
        with unbranch.torch_export_rewrite(rewrite=rewrite):
            eager = model(*rewritten)
        exported = [a.clone() for a in args]
        actual = ep.module()(*exported)
        for got, state in ((eager, rewritten), (actual, exported)):
            assert_same(pytree.tree_leaves(got), pytree.tree_leaves(expected))
            assert_same(state, original)  # what the call changed in place
    return ep


def fill(ids):
    """A helper that fixes its argument in place, as tokenizer-side code does."""
    if (ids < 0).any():
        ids.masked_fill_(ids < 0, 0)


class FillsInPlace(torch.nn.Module):
    def forward(self, x):
        ids = x * 2
        fill(ids)  # the caller keeps using its tensor: the change must reach it
        fill(x)  # and a model input is changed in place, as the original does
        return ids


MIXED = [(torch.randn(5, 3),), (torch.rand(6, 2) + 0.1,), (-torch.rand(2, 4),)]


@pytest.mark.parametrize("strict", MODES)
def test_helper_mutating_its_argument(strict):
    run_three_ways(FillsInPlace(), (torch.randn(4, 3),), MIXED, strict, [fill], conds=2)


class ClipsInMethod(torch.nn.Module):
    def _clip(self, h):
        if h.abs().max() > 1:
            h.clamp_(-1, 1)

    def forward(self, x):
        h = x * 3
        self._clip(h)
        return h + 1


@pytest.mark.parametrize("strict", MODES)
def test_method_clamping_in_place(strict):
    inputs = [(torch.randn(5, 3),), (torch.rand(3, 2) * 0.1,)]
    run_three_ways(ClipsInMethod(), (torch.randn(4, 3),), inputs, strict, [ClipsInMethod._clip], conds=1)


class InplaceModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.act = torch.nn.ReLU(inplace=True)

    def forward(self, x):
        h = x * 1
        kept = h  # the inplace ReLU changes this object too
        if x.sum() > 0:
            h = self.act(h)
        return kept + 0, h


@pytest.mark.parametrize("strict", MODES)
def test_inplace_module_on_an_operand(strict):
    inputs = [(torch.randn(5, 3) + 0.5,), (torch.randn(3, 4) - 0.5,)]
    run_three_ways(InplaceModule(), (torch.randn(4, 3),), inputs, strict, [InplaceModule.forward], conds=1)


class UpdatesThroughView(torch.nn.Module):
    def forward(self, x):
        out = x * 1
        head = out[:, 0]
        if x.sum() > 0:
            head += 10
        return out


class UpdatesThroughAlias(torch.nn.Module):
    def forward(self, x):
        y = x
        if x.sum() > 0:
            y += 1
        else:
            y -= 1
        return y * 2


SIGNED = [(torch.rand(5, 3) + 0.1,), (-torch.rand(6, 2) - 0.1,)]


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize("model", [UpdatesThroughView, UpdatesThroughAlias], ids=lambda m: m.__name__)
def test_augmented_assignment_keeps_aliasing(model, strict):
    run_three_ways(model(), (torch.randn(4, 3),), SIGNED, strict, [model.forward], conds=1)


def test_augmented_assignment_aliasing_in_eager():
    x = torch.ones(3)
    with unbranch.torch_export_rewrite(rewrite=[UpdatesThroughAlias.forward]):
        UpdatesThroughAlias()(x)
    assert torch.equal(x, torch.full((3,), 2.0))  # y += 1 changed x, as the original does


class EmptyContainerOperand(torch.nn.Module):
    def forward(self, x):
        extra = []
        y = x * 1
        if x.sum() > 0:
            k = len(extra) + 1
            y[:, 0] = k
        return y


@pytest.mark.parametrize("strict", MODES)
def test_empty_container_among_operands(strict):
    run_three_ways(EmptyContainerOperand(), (torch.randn(4, 3),), SIGNED, strict, [EmptyContainerOperand.forward])


class CarryThroughView(torch.nn.Module):
    def forward(self, x):
        out = torch.zeros(2, x.shape[1])
        acc = out[0]
        for i in range(x.shape[0]):
            acc += x[i]
        acc.mul_(2)  # still a row of out after the loop
        return out


@pytest.mark.parametrize("strict", MODES)
def test_loop_carry_changed_in_place(strict):
    inputs = [(torch.randn(5, 3),), (torch.randn(2, 4),)]
    ep = run_three_ways(CarryThroughView(), (torch.randn(4, 3),), inputs, strict, [CarryThroughView.forward])
    ops = {n.target for n in ep.graph.nodes if n.op == "call_function"}
    assert torch.ops.higher_order.scan in ops


class AppendsInBranch(torch.nn.Module):
    def forward(self, x):
        aux = []
        if x.sum() > 0:
            aux.append(x * 2)
        return x + 1, aux


class ClosureSeesRebinding(torch.nn.Module):
    def forward(self, x):
        scale = x * 2

        def scaled():
            return scale + 1

        if x.sum() > 0:
            scale = x * 3
            r = scaled()
        else:
            r = x
        return r


class ClosureSeesChangeInPlace(torch.nn.Module):
    """The branch changes x in place, then runs a function reading x: in a cond the branch changes
    a clone, which the function never sees (found by fuzz --realcode --effects, seed 91)."""

    def forward(self, x):
        def scaled():
            return x * 0.5

        if x.sum() > 0:
            x[x > 1.0] = 0.5
            return x + scaled()
        return x - scaled()


class SetsAttribute(torch.nn.Module):
    """An attribute the branch only sets (it may not exist before): no local can stand for it.
    (A buffer the branch updates is converted: test_attribute_state.py.)"""

    def forward(self, x):
        if x.sum() > 0:
            self.last = x * 2
        return x * 2


class RebindsOnOneSide(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            x = x * 2
        x += 1  # the caller's tensor changes only when the branch was not taken
        return x


class ViewThenChanged(torch.nn.Module):
    def forward(self, x):
        y = x + 1
        if x.sum() > 0:
            y = x.view_as(x)
        x.mul_(0.5)  # reaches y when the branch made it a view of x (found by the effects fuzzer)
        return y * 2


REFUSED = [
    (RebindsOnOneSide, "'x' is rebound in one branch only and changed in place after the if"),
    (ViewThenChanged, "'y' may be a view of another tensor after the if and 'x' is changed in place later"),
    (AppendsInBranch, "the container 'aux' is changed in a branch"),
    (ClosureSeesRebinding, "'scale' is rebound in a branch and read by the nested function 'scaled'"),
    (SetsAttribute, "an assignment to an attribute in a branch"),
    (ClosureSeesChangeInPlace, "'x' is changed in place in a branch and read by the nested function 'scaled'"),
]


@pytest.mark.parametrize("model, reason", REFUSED, ids=[m.__name__ for m, _ in REFUSED])
def test_effects_a_branch_function_would_lose_are_refused(model, reason):
    # the if stays Python: eager runs inside the context are the original's, and the export
    # fails with the reason and the line instead of computing something else
    m = model()
    rm = unbranch.transform_method(model.forward, strict=False)
    assert reason in rm.code and "_ub.unconverted(" in rm.code
    for x in (torch.rand(4, 3), -torch.rand(5, 3)):
        expected = model()(x.clone())
        with unbranch.torch_export_rewrite(rewrite=[model.forward], strict=False):
            got = model()(x.clone())
        assert_same(pytree.tree_leaves(got), pytree.tree_leaves(expected))
    for strict in (False, True):  # strict export too: the reason, not dynamo's "Observed exception"
        with pytest.raises(UnbranchError, match=reason.replace("(", r"\(").replace(")", r"\)")) as info:
            with unbranch.torch_export_rewrite(rewrite=[model.forward], strict=False):
                example = (torch.randn(4, 3),)
                torch.export.export(m, example, dynamic_shapes=all_dynamic(example), strict=strict)
        assert "test_effects.py" in str(info.value)


class ViewedButNothingChangesLater(torch.nn.Module):
    """``y`` may be a view of ``x`` after the if, but what changes in place later is a fresh
    buffer. It is first bound to None, as the branch binds ``scale``: None was once taken for an
    object both could share, and the if was left as Python."""

    def forward(self, x):
        y = x + 1
        y.mul_(2.0)  # a fresh tensor changed before the if: only what changes after it matters
        if x.sum() > 0:
            scale = None
            y = x.view_as(x) if scale is None else x * scale
        buf = None
        buf = torch.zeros_like(x)
        buf[0] = 1.0
        return y * 2 + buf


class RebindsOnOneSideThenChangesAFreshTensor(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            x = x * 2
        y = x + 1
        y.add_(1)  # reaches no tensor the caller holds, whichever branch ran
        return y


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize(
    "model", [ViewedButNothingChangesLater, RebindsOnOneSideThenChangesAFreshTensor], ids=lambda m: m.__name__
)
def test_outputs_whose_identity_nothing_later_can_observe_are_converted(model, strict):
    run_three_ways(model(), (torch.randn(4, 3),), SIGNED, strict, [model.forward], conds=1)


def walrus_check(x, flag: bool):
    if flag and (m := x.abs().max()) > 1:
        raise ValueError(f"too large: {m}")
    return x * 2


def test_walrus_in_a_lazy_operand_binds_in_the_function():
    rewritten = unbranch.transform_method(walrus_check).func
    big = torch.full((3,), 5.0)
    with pytest.raises(ValueError, match="too large: 5.0"):
        walrus_check(big, True)
    with pytest.raises(ValueError, match="too large: 5.0"):
        rewritten(big, True)
    assert_same(rewritten(big, False), walrus_check(big, False))  # not evaluated: no NameError either
    assert_same(rewritten(big * 0.1, True), walrus_check(big * 0.1, True))


def halve_(t):
    t.mul_(0.5)


def clip_twice(t):
    halve_(t)  # followed through helpers of helpers
    t.clamp_(-1, 1)


class CallsMutatingHelper(torch.nn.Module):
    def forward(self, x):
        h = x * 4
        if x.sum() > 0:
            clip_twice(h)
        else:
            halve_(h)
        return h


@pytest.mark.parametrize("strict", MODES)
def test_branch_calling_helpers_that_change_arguments(strict):
    code = unbranch.transform_method(CallsMutatingHelper.forward).code
    assert "mutated=(0,)" in code
    run_three_ways(CallsMutatingHelper(), (torch.randn(4, 3),), SIGNED, strict, [CallsMutatingHelper.forward], 1)


class ChangesOneOfTwoAliases(torch.nn.Module):
    def forward(self, x):
        y = x * 1
        a = y.view_as(y)
        if x.sum() > 0:
            a.add_(1.0)
            r = -y  # sees the change through the other name
        else:
            r = y
        return r, a


@pytest.mark.parametrize("strict", MODES)
def test_change_through_one_of_two_aliased_operands_is_refused(strict):
    for x in (torch.rand(4, 3), -torch.rand(5, 3)):  # eager inside the context stays exact
        with unbranch.torch_export_rewrite(rewrite=[ChangesOneOfTwoAliases.forward]):
            got = ChangesOneOfTwoAliases()(x)
        assert_same(got, ChangesOneOfTwoAliases()(x))
    example = (torch.randn(4, 3),)
    with pytest.raises(UnbranchError, match=r"changes 'a' \(sharing memory with 'y'\) in place"):
        with unbranch.torch_export_rewrite(rewrite=[ChangesOneOfTwoAliases.forward]):
            torch.export.export(ChangesOneOfTwoAliases(), example, dynamic_shapes=all_dynamic(example), strict=strict)


def walrus_scale(x, flag: bool):
    if flag and (m := x.abs().max()) > 1:
        raise ValueError("too large")
    return x * 2 + m  # bound by the condition, in this function's scope


class WalrusScale(torch.nn.Module):
    def forward(self, x):
        return walrus_scale(x, True)


@pytest.mark.parametrize("strict", MODES)
def test_walrus_in_a_lazy_operand_under_export(strict):
    example = (torch.rand(4, 3) * 0.5,)
    with unbranch.torch_export_rewrite(rewrite=[walrus_scale]):
        ep = torch.export.export(WalrusScale(), example, dynamic_shapes=all_dynamic(example), strict=strict)
    small = torch.rand(6, 2) * 0.5
    assert_same(ep.module()(small), WalrusScale()(small))
    with pytest.raises(RuntimeError, match="ValueError: too large"):  # the check is kept in the graph
        ep.module()(torch.full((5, 3), 5.0))


class LoopInBranchChangesInPlace(torch.nn.Module):
    def forward(self, x, y):
        if (y * torch.tanh(y)).sum() > 0:
            for _ in range(3):
                for _ in range(x.shape[0]):  # a scan whose carry y is only changed in place
                    if x.size(0) < 4:
                        break
                    y -= y.relu()
                y += y  # must reach the same object the cond writes back
        return y


@pytest.mark.parametrize("strict", [False, True])
def test_a_carry_a_converted_loop_keeps_is_still_the_same_object_for_the_enclosing_cond(strict):
    # found by the jumps fuzzer: the if rule read `y = _ub.for_range(..., kept=...)` as a rebinding
    example = (torch.rand(4, 3), torch.rand(4, 3))
    dynamic = ({0: Dim.DYNAMIC}, {0: Dim.DYNAMIC})
    with unbranch.torch_export_rewrite(rewrite=[LoopInBranchChangesInPlace.forward]):
        ep = torch.export.export(LoopInBranchChangesInPlace(), example, dynamic_shapes=dynamic, strict=strict)
    for n in (2, 3, 4, 6):
        for sign in (1, -1):
            x, y = torch.rand(n, 3), sign * (torch.rand(n, 3) + 0.1)
            assert_same(ep.module()(x.clone(), y.clone()), LoopInBranchChangesInPlace()(x.clone(), y.clone()))
    assert (
        block_effects(cst.parse_module("y = _ub.if_stmt(p, a, b, (y,), mutated=(0,), kept=((0, 0),))\n").body).rebound
        == frozenset()
    )


def _effects_of(code: str):
    return block_effects(cst.parse_module(code).body)


def test_augmented_assignment_on_a_tuple_written_out_is_a_new_tuple():
    """``outputs = (h,)`` then ``outputs += (w,)`` binds a new tuple: ``h`` is not changed in place."""
    effects = _effects_of("outputs = (h,)\nif flag:\n    outputs += (w,)\n")
    assert "h" not in effects.mutated and "outputs" in effects.rebound
    # unpacking a display binds its elements: ``a += 1`` changes the tensor ``x`` in place
    assert {"a", "x"} <= _effects_of("a, b = x, y\na += 1\n").mutated
    # bound to something else on another path: what ``+=`` does is not known, so it counts
    assert "h" in _effects_of("outputs = (h,)\nif flag:\n    outputs = h\noutputs += (w,)\n").mutated


class OutputsTuple(torch.nn.Module):
    """TableTransformer's encoder layer: a clamp rebinding the argument, then a tuple grown after it."""

    def forward(self, hidden_states, output_attentions: bool = True):
        hidden_states = hidden_states * 2
        if not torch.isfinite(hidden_states).all():
            hidden_states = torch.nan_to_num(hidden_states, posinf=1e4, neginf=-1e4)
        outputs = (hidden_states,)
        if output_attentions:
            outputs += (hidden_states.sum(-1),)
        return outputs


@pytest.mark.parametrize("strict", MODES)
def test_tuple_grown_after_a_one_sided_rebinding_converts(strict):
    model = OutputsTuple()
    x = torch.randn(3, 4)
    ep = unbranch.export(model, (x,), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict)
    assert count_branches(ep) == 1
    inf = torch.randn(5, 4)
    inf[1, 2] = float("inf")
    for args in [(x,), (inf,), (torch.randn(2, 4),)]:
        assert_same(ep.module()(*args), model(*args))


class CopiedBeforeChanged(torch.nn.Module):
    """``ids`` rebound on one side of the first if, then changed in place later only after a copy of
    its own: the change never reaches the object the first if chose (byte-level ids clamped, then
    negatives zeroed)."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 3)

    def forward(self, ids):
        if (ids >= 10).any():
            ids = ids.clamp(max=9)
        if (ids < 0).any():
            ids = ids.clone()
            ids[ids < 0] = 0
        return self.emb(ids)


@pytest.mark.parametrize("strict", MODES)
def test_a_change_after_a_copy_does_not_block_a_one_sided_rebinding(strict):
    torch.manual_seed(0)
    inputs = [(torch.tensor([[1, 2, 3]]),), (torch.tensor([[30, 5, -1], [2, -2, 11]]),), (torch.tensor([[1, -7]]),)]
    run_three_ways(
        CopiedBeforeChanged(),
        (torch.tensor([[1, 2, 3], [4, 5, 6]]),),
        inputs,
        strict,
        [CopiedBeforeChanged.forward],
        conds=2,
    )
