"""Issue 20: what real code writes. Each pattern exports through ``unbranch.export`` in both modes and
matches eager on inputs taking each side and at another size, or fails at export time with an
UnbranchError naming the file, the line and the reason.
"""

import logging

import pytest
import torch
from helpers import MODES, assert_same, count_branches, line_of
from torch.export import Dim

import unbranch

DYNAMIC = ({0: Dim.DYNAMIC},)


def _rows(n, scale=1.0):
    return scale * (torch.arange(n * 4, dtype=torch.float32).reshape(n, 4) / (n * 4) - 0.25)


def _exports(model, strict, inputs, example=None):
    example = example if example is not None else inputs[0]
    ep = unbranch.export(model, example, dynamic_shapes=DYNAMIC * len(example), strict=strict)
    for args in inputs:
        assert_same(ep.module()(*args), model(*args))
    return ep


class ClosureReadAfter(torch.nn.Module):
    """The silent wrong result: ``scaled`` reads the cell the branch rebinds, after the if."""

    def forward(self, x):
        temperature = torch.ones(())

        def scaled(t):
            return t / temperature

        if x.abs().max() > 2:
            temperature = x.abs().max()
        return scaled(x)


@pytest.mark.parametrize("strict", MODES)
def test_closure_called_after_the_if_sees_the_rebinding(strict):
    model = ClosureReadAfter()
    inputs = [(_rows(5, 20),), (_rows(3),), (_rows(8, 40),)]
    rewritten = unbranch.transform_method(ClosureReadAfter.forward).func
    for (x,) in inputs:  # eagerly, the rewritten code is the original
        assert_same(rewritten(model, x), model(x))
    _exports(model, strict, inputs)


def _check(condition, message):
    if not condition:
        raise ValueError(message)


class Checks(torch.nn.Module):
    """``bool()`` around the checked tensor, and a kornia-style check helper."""

    def forward(self, x):
        err = (x - x.mean()).abs()
        if bool((err > 100).any()):
            raise ValueError(f"too far from the mean: {err.max()}")
        _check((x > -50).all(), "below -50")
        return x * 2


@pytest.mark.parametrize("strict", MODES)
def test_checks_through_bool_and_a_helper(strict):
    model = Checks()
    ep = _exports(model, strict, [(_rows(5),), (_rows(9, 3),)])
    rewritten = {rm.qualname for rm in unbranch.report_of(ep).rewritten}
    assert rewritten == {"Checks.forward", "_check"}
    for bad, raised in [(_rows(4, 1000), "too far"), (torch.full((3, 4), -60.0), "below -50")]:
        with pytest.raises(ValueError, match=raised):
            model(bad)
        with pytest.raises(Exception, match=raised):  # (under strict export, the message's source text)
            ep.module()(bad)


class NestedChecks(torch.nn.Module):
    """The else side's own if does nothing but check: a cond without outputs inside a branch."""

    def forward(self, x):
        if x.sum() > 0:
            x = x * 2
        else:
            if x.max() > 0:
                assert x.abs().max() < 50, "beyond 50"
            else:
                _check((x > -20).all(), "below -20")
        return x + 1


@pytest.mark.parametrize("strict", MODES)
def test_checks_in_a_nested_if_stay_in_the_program(strict):
    model = NestedChecks()
    positive, mixed, negative = _rows(5, 4) + 2, _rows(6, 4), -(_rows(3, 4) ** 2) - 1
    ep = _exports(model, strict, [(positive,), (mixed,), (negative,)], example=(mixed,))
    mixed_far = torch.cat([torch.full((2, 4), -100.0), torch.full((1, 4), 60.0)])
    for bad, raised in [(mixed_far, "beyond 50"), (torch.full((4, 4), -30.0), "below -20")]:
        with pytest.raises((AssertionError, ValueError), match=raised):
            model(bad)
        with pytest.raises(Exception, match=raised):
            ep.module()(bad)


class TableStep(torch.nn.Module):
    """diffusers' DDIM/DDPM step: a table read at a 0-d timestep inside the branches of its test."""

    def __init__(self):
        super().__init__()
        self.register_buffer("alphas", torch.linspace(0.9, 0.1, 20))
        self.final = torch.tensor(1.0)

    def forward(self, timestep, x):
        prev = timestep - 5
        a = self.alphas[prev] if prev >= 0 else self.final
        if timestep < 19:
            b = self.alphas[timestep + 1] * 2
        else:
            b = self.final
        return x * a + b


@pytest.mark.parametrize("strict", MODES)
def test_table_read_at_a_tensor_index_in_a_branch(strict):
    model = TableStep()
    example = (torch.tensor(10), _rows(4))
    ep = unbranch.export(model, example, dynamic_shapes=(None, {0: Dim.DYNAMIC}), strict=strict)
    assert count_branches(ep) == 2
    for t, n in [(10, 4), (2, 6), (19, 3), (0, 2)]:
        args = (torch.tensor(t), _rows(n))
        assert_same(ep.module()(*args), model(*args))


def fuzzed(x, y, n, mask):
    """Conds three deep beside size tests, a closure and a check (found by the fuzzer): torch 2.13's
    dynamo generates a branch graph with a duplicate argument name ('child') under strict export."""
    s = x * 0.5

    def scaled():
        return s + 1.0

    a = y * torch.tanh(y)
    if not s.size(0) < 4:
        if bool((x > -0.5).any()):
            if not -1.0 <= y.sum() < n:
                x = y + s
                return ((y - y) - (y + s)) + scaled()
            elif (mask is None) or (not x.size(0) < 4):
                x += x
            else:
                y *= torch.tanh(y)
            _check((x.abs() < 40.0).all(), "beyond 40")
    elif bool((a > 0.5).any()):
        if mask is not None:
            a = a * mask
    return (y * (n * 0.5)) + scaled()


class NestedConds(torch.nn.Module):
    def forward(self, x, y):
        return fuzzed(x, y, 3, None)


@pytest.mark.parametrize("strict", MODES)
def test_torch_bug_with_nested_conds_is_named(strict):
    model = NestedConds()
    g = torch.Generator().manual_seed(0)
    example = (torch.randn(4, 3, generator=g), torch.randn(4, 3, generator=g))
    inputs = [example, (torch.randn(6, 3, generator=g), torch.randn(6, 3, generator=g)), (-torch.ones(5, 3),) * 2]
    try:
        ep = unbranch.export(model, example, dynamic_shapes=DYNAMIC * 2, strict=strict)
    except unbranch.UnbranchError as e:
        assert strict and "two arguments of one name" in str(e)  # torch's bug, named
        return
    # (the size test the first export narrowed the batch by is rewritten: batch 3 is covered too)
    inputs.append((torch.randn(3, 3, generator=g), torch.randn(3, 3, generator=g)))
    for args in inputs:  # x += x changes the caller's tensor: each side gets its own, compared after
        mine, theirs = [a.clone() for a in args], [a.clone() for a in args]
        assert_same(ep.module()(*mine), model(*theirs))
        assert_same(mine, theirs)


class CountingLoop(torch.nn.Module):
    """An int64 counter carried beside a sum that requires grad (torch's scan failed to export it)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        count = torch.zeros((), dtype=torch.int64)
        acc = torch.zeros(4)
        for i in range(x.shape[0]):
            acc = acc + self.lin(x[i])
            count = count + (x[i].sum() > 0).long()
        return acc, count


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("strict", MODES)
def test_integer_counter_carried_beside_a_parameter(strict, grad):
    model = CountingLoop()
    with torch.set_grad_enabled(grad):
        ep = _exports(model, strict, [(_rows(5),), (_rows(8, -1),), (_rows(3, 2) - 0.2,)])
    acc, count = ep.module()(_rows(7) - 0.3)
    assert count.dtype == torch.int64 and count.item() == int(((_rows(7) - 0.3).sum(1) > 0).sum())


def count_down(x, n: int):
    """Refers to itself (recursion): its own name must stay the module's global."""
    if n > 0:
        return count_down(x * 2, n - 1)
    if x.sum() > 0:
        return x
    return -x


class Recursive(torch.nn.Module):
    def forward(self, x):
        return count_down(x, 2)


@pytest.mark.parametrize("strict", MODES)
def test_function_referring_to_itself(strict):
    model = Recursive()
    _exports(model, strict, [(_rows(5),), (-_rows(3),), (_rows(8, -2),)])
    assert_same(unbranch.transform_method(count_down).func(_rows(3), 2), count_down(_rows(3), 2))


class StateReturnedAsItIs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pos = torch.nn.Parameter(torch.linspace(-1, 1, 4))
        self.register_buffer("table", torch.linspace(2, 3, 4))

    def forward(self, x):
        if x.sum() > 0:
            p = self.pos
        else:
            p = self.table
        return x + p


@pytest.mark.parametrize("strict", MODES)
def test_branch_returning_a_parameter_or_buffer_unchanged(strict):
    model = StateReturnedAsItIs()
    ep = _exports(model, strict, [(_rows(5, 4),), (-_rows(3, 4),), (_rows(8, 4),)])
    assert count_branches(ep) == 1


class NonlocalRebound(torch.nn.Module):
    def forward(self, x):
        scale = torch.ones(())

        def bump():
            nonlocal scale
            if x.sum() > 0:
                scale = scale * 2

        bump()
        return x * scale


@pytest.mark.parametrize("strict", MODES)
def test_nonlocal_rebound_in_a_branch(strict):
    _exports(NonlocalRebound(), strict, [(_rows(5, 4),), (-_rows(3, 4),), (_rows(9, 4),)])


class Chained(torch.nn.Module):
    calls = 0

    def middle(self, x):
        Chained.calls += 1
        return x.mean()

    def forward(self, x):
        if 0.1 < self.middle(x) < 0.5:
            x = x * 2
        if not -1 < x.min() <= 0:
            x = x - 1
        return x


@pytest.mark.parametrize("strict", MODES)
def test_chained_comparison(strict):
    model = Chained()
    inputs = [(_rows(5, 1) + 0.3,), (_rows(3),), (_rows(7, 4) + 5,), (_rows(2) - 3,)]
    ep = _exports(model, strict, inputs)
    assert count_branches(ep) == 2
    rewritten = unbranch.transform_method(Chained.forward).func
    Chained.calls = 0
    for (x,) in inputs:  # the middle operand is evaluated once, as Python does
        assert_same(rewritten(model, x), model(x))
    assert Chained.calls == 2 * len(inputs)


class TernaryInLambda(torch.nn.Module):
    def forward(self, x):
        def pick(t):
            return t * 2 if t.sum() > 0 else t - 1

        rows = list(map(lambda t: t.abs() if t.mean() > 0 else t, x.unbind(0)))
        return pick(torch.stack(rows))


@pytest.mark.parametrize("strict", MODES)
def test_conditional_expressions_in_a_lambda_and_a_nested_function(strict):
    model = TernaryInLambda()
    example = (torch.tensor([[1.0, -2.0], [-3.0, 1.0], [0.5, 0.5]]),)
    ep = unbranch.export(model, example, dynamic_shapes=({1: Dim.DYNAMIC},), strict=strict)
    for x in [example[0], -example[0], torch.tensor([[2.0, -1.0, 3.0], [-1.0, -1.0, -1.0], [1.0, 1.0, -9.0]])]:
        assert_same(ep.module()(x), model(x))


class Filtered(torch.nn.Module):
    def forward(self, x):
        kept = [row for row in x.unbind(0) if row.sum() > 0]
        return torch.stack(kept)


def test_comprehension_filtered_on_data_is_refused_with_its_reason():
    with pytest.raises(unbranch.UnbranchError, match="comprehension filtered on a tensor condition") as info:
        unbranch.export(Filtered(), (torch.ones(3, 4),), dynamic_shapes=({1: Dim.DYNAMIC},))
    assert (info.value.path, info.value.line) == (__file__, line_of(Filtered, "kept = [row"))


class UnderAutocast(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = self.lin(x)
            if y.sum() > 0:
                y = y * 2
        return y.float()


def test_cond_under_autocast():
    """Non-strict export keeps it right; strict export records the cond in the wrong dtype (torch 2.13),
    whose program would fail when run: refused at export time, with the way out."""
    torch.manual_seed(0)
    model = UnderAutocast()
    _exports(model, False, [(_rows(5),), (-_rows(7, 9),), (_rows(3, 9),)])
    with pytest.raises(unbranch.UnbranchError, match="autocast.*strict=False") as info:
        unbranch.export(model, (_rows(5),), dynamic_shapes=DYNAMIC, strict=True)
    assert (info.value.path, info.value.line) == (__file__, line_of(UnderAutocast, "if y.sum() > 0"))


class NoneOnOneSide(torch.nn.Module):
    def forward(self, x, mask):
        valid = None
        if mask.any():
            valid = ~mask
        if valid is not None:
            x = x * valid
        return x


@pytest.mark.parametrize("strict", MODES)
def test_none_on_one_side_moves_the_rest_into_both_branches(strict):
    args = (_rows(3), _rows(3) > 0)
    ep = unbranch.export(NoneOnOneSide(), args, dynamic_shapes=DYNAMIC * 2, strict=strict)
    assert count_branches(ep) == 1
    for x, mask in [args, (_rows(5), _rows(5) > 9), (_rows(2), _rows(2) < 0.2)]:
        assert_same(ep.module()(x, mask), NoneOnOneSide()(x, mask))


class BoxCheck(torch.nn.Module):
    """torchvision's detection models: the failing block computes its message, then torch._assert(False, ...)."""

    def forward(self, boxes):
        degenerate = boxes[:, 2:] <= boxes[:, :2]
        if degenerate.any():
            index = torch.where(degenerate.any(dim=1))[0][0]
            box: list[float] = boxes[index].tolist()
            torch._assert(False, f"boxes need a positive height and width, found {box}")
        return boxes * 2


@pytest.mark.parametrize("strict", MODES)
def test_failing_block_computing_its_message(strict):
    model = BoxCheck()
    good = torch.tensor([[0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 3.0, 4.0], [0.0, 1.0, 2.0, 3.0]])
    bad = torch.tensor([[0.0, 0.0, 1.0, 1.0], [3.0, 1.0, 1.0, 4.0]])
    ep = _exports(model, strict, [(good,), (good[:2],), (torch.cat([good, good]),)])
    with pytest.raises(AssertionError, match=r"found \[3.0, 1.0, 1.0, 4.0\]"):
        unbranch.transform_method(BoxCheck.forward).func(model, bad)  # eagerly, the original message
    with pytest.raises(RuntimeError, match="boxes need a positive height and width"):
        ep.module()(bad)


class FlagSetOnOneSide(torch.nn.Module):
    """A Python bool and a Python int set under tensor conditions, tested and used later."""

    def forward(self, x):
        clipped, hits = False, 0
        if x.abs().max() > 10:
            x = x.clamp(-10, 10)
            clipped = True
        if x.sum() > 0:
            hits += 1
        if clipped:
            x = x / 10
        return x * (hits + 1)


@pytest.mark.parametrize("strict", MODES)
def test_python_flags_set_under_a_tensor_condition(strict):
    model = FlagSetOnOneSide()
    cases = [(_rows(3, 100),), (_rows(5),), (-_rows(2, 100),), (-_rows(6),)]  # clipped or not, sum > 0 or not
    ep = _exports(model, strict, cases)
    assert count_branches(ep) == 3


def _flags(x):
    clipped, hits = False, 0
    if x.abs().max() > 10:
        clipped = True
    if x.sum() > 0:
        hits += 1
    return clipped, hits


def test_python_flags_stay_python_values_eagerly():
    rm = unbranch.transform_method(_flags)
    assert rm.code.count("literals=(0,)") == 2  # both ifs give their flag as a tensor under export
    for x in (_rows(3, 100), _rows(5), -_rows(2, 100), -_rows(6)):
        clipped, hits = rm.func(x)
        assert (clipped, hits) == _flags(x) and type(clipped) is bool and type(hits) is int


class TernaryChangingInPlace(torch.nn.Module):
    """Both sides change ``y`` in place and give it back: ``z`` is ``y`` itself."""

    def forward(self, x):
        y = x.clone()
        z = y.add_(1) if x.sum() > 0 else y.mul_(2)
        return z + y, y


@pytest.mark.parametrize("strict", MODES)
def test_conditional_expression_changing_a_tensor_in_place(strict):
    model = TernaryChangingInPlace()
    ep = _exports(model, strict, [(_rows(3),), (-_rows(5),), (_rows(6, 2),)])
    assert count_branches(ep) == 1
    x = -_rows(4)
    with unbranch.torch_export_rewrite(rewrite=[TernaryChangingInPlace.forward]):
        total, y = model(x)  # eagerly `z` is still `y` itself: z + y is 2 * y
    assert_same(total, 2 * y)


class AliasInNestedConds(torch.nn.Module):
    """Found by the effects fuzzer (seed 32, --export-every 3): ``b`` is ``x``, ``y`` is changed in
    place on one side, three conds deep. Non-strict export gave ``y``'s values for ``b``: the
    runtime passed a copy of ``x`` for ``b``, and dynamo mixed up the nested cond's inputs."""

    def forward(self, x, y):
        if not (y.sum() > 0):
            return x, y
        elif not (x.max() > y.min()):
            y.mul_(0.5)
            return y, x
        else:
            b = x
            if b.size(0) < 4:
                c = x[:]
                if (b - b).abs().mean() > 1.0:
                    y += 1
                    return x, c
        return x, b


@pytest.mark.parametrize("strict", [pytest.param(False, id="nonstrict"), pytest.param(True, id="strict")])
def test_an_alias_through_nested_conds(strict):
    """One tensor under two names goes into a cond once, and is one tensor in its branches."""
    model = AliasInNestedConds()
    example = (torch.randn(4, 3), torch.randn(4, 3))
    dynamic = ({0: Dim.DYNAMIC}, {0: Dim.DYNAMIC})
    with unbranch.torch_export_rewrite(rewrite=[AliasInNestedConds.forward]):  # the size test a cond too
        ep = torch.export.export(model, example, dynamic_shapes=dynamic, strict=strict)
    x = torch.tensor([[-50.0, -60.0, 1.0], [-256.0, -22.0, -119.0]])
    y = torch.tensor([[-41.0, 14.0, 39.0], [-137.0, 119.0, 18.0]])
    # the else side, the first, the else side again, the elif (y halved in place), five rows
    inputs = (
        (x, y),
        (-y, x),
        (x, -x),
        (-5 * torch.ones(2, 3), 3 * torch.ones(2, 3)),
        (torch.randn(5, 3), 1 + torch.rand(5, 3)),
    )
    for a, b in inputs:
        ours, theirs = (a.clone(), b.clone()), (a.clone(), b.clone())
        got, want = ep.module()(*ours), model(*theirs)
        for g, w in zip(got, want):
            assert_same(g, w)
        assert_same(ours, theirs)  # y as the original changed it in place


_log = logging.getLogger("unbranch.tests.user_model")


class LogsInABranch(torch.nn.Module):
    """A warning logged on the side that repairs the input, and in a loop's branch."""

    def forward(self, x):
        if torch.isnan(x).any():
            _log.warning("nan in the input, replaced by 0")
            x = torch.nan_to_num(x)
        acc = torch.zeros(x.shape[1])
        for i in range(x.shape[0]):
            if x[i].sum() > 2:
                _log.info("a large row")
                acc = acc + x[i]
        return acc


@pytest.mark.parametrize("strict", [False, True])
def test_logging_in_converted_code_is_dropped_from_the_program_as_strict_export_drops_it(strict, caplog):
    """Non-strict export failed ("logging.Logger method not supported for non-export cases"):
    torch traces the branches with dynamo outside export mode. Eagerly the warnings still come."""
    model = LogsInABranch()
    ep = unbranch.export(model, (torch.randn(4, 3),), dynamic_shapes=({0: torch.export.Dim.DYNAMIC},), strict=strict)
    big, nan = torch.full((5, 3), 1.0), torch.randn(3, 3)
    nan[1, 1] = float("nan")
    for x in (big, nan, torch.zeros(2, 3)):
        torch.testing.assert_close(ep.module()(x.clone()), model(x.clone()))
    with unbranch.torch_export_rewrite(rewrite=[LogsInABranch.forward]), caplog.at_level(logging.INFO):
        model(nan.clone())
    assert "nan in the input" in caplog.text
    assert torch._dynamo.config.ignore_logging_functions == set()  # nothing left behind
