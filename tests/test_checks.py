"""``raise``/``assert`` in converted code: checks whose messages are built only when they fail.

Each module is exported with every dim dynamic in both modes; a bad input must fail the
exported program with the user's message, eager runs stay exactly Python's.
"""

import pytest
import torch
from helpers import MODES, check_export, count_branches, export_rewritten

import unbranch

pos = lambda *s: torch.rand(*s) + 0.5  # noqa: E731
neg = lambda *s: -torch.rand(*s) - 0.5  # noqa: E731


class ElseRaises(torch.nn.Module):
    def forward(self, x):
        if (x >= 0).all():
            y = x.sqrt()
        else:
            raise ValueError("negative input")
        return y * 2


class ItemMessage(torch.nn.Module):
    def forward(self, x):
        if (x < 0).any():
            raise ValueError(f"negative input, min {x.min().item():.3f}")
        return x * 2


class ShapeMessage(torch.nn.Module):
    def forward(self, x):
        assert (x > 0).all(), f"non-positive input of shape {x.shape}"
        return x * 2


class CountedMessage(torch.nn.Module):
    """The message comes from a method: it must run only when the check fails."""

    def __init__(self):
        super().__init__()
        self.built = 0

    def describe(self, x):
        self.built += 1
        return f"bad input {x.sum().item()}"

    def forward(self, x):
        if (x < 0).any():
            raise ValueError(self.describe(x))
        return x + 1


class NamedMessage(torch.nn.Module):
    """torch.distributions' message: the names and types it formats are what eager shows."""

    name = "loc"

    def forward(self, value):
        param = self.name
        if not (value > 0).all():
            raise ValueError(
                f"Expected parameter {param} ({type(value).__name__} of {value.dim()} dims) of "
                f"{self.__class__.__name__!r} to be positive, found {value.min().item():.3f} in\n{value}"
            )
        return value.log()


# what the exported program says: a value that is data (``x.min().item()``, a symbolic size, a tensor)
# by its source, anything else formatted as eager formats it; never the message's template
MESSAGES = {
    ElseRaises: "negative input",
    ItemMessage: r"^ValueError: negative input, min <x.min\(\).item\(\)>$",
    ShapeMessage: r"^AssertionError: non-positive input of shape <x.shape>$",
    CountedMessage: r"^ValueError: <self.describe\(x\)>$",  # (never called while exporting)
    # (the rank is 2 under non-strict export; dynamo shows every int so, symbolic or not)
    NamedMessage: r"^ValueError: Expected parameter loc \(Tensor of (2|<value.dim\(\)>) dims\) of 'NamedMessage' to be "
    r"positive, found <value.min\(\).item\(\)> in\n<value>$",
}


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize("model", list(MESSAGES), ids=[m.__name__ for m in MESSAGES])
def test_check_exports_and_fails_with_the_message(model, strict):
    m = model()
    ep = check_export(m, (pos(3, 4),), [(pos(4, 3),), (pos(7, 2),)], strict, conds=0)
    assert getattr(m, "built", 0) == 0  # the message was never built while exporting
    with pytest.raises(RuntimeError, match=MESSAGES[model]):
        ep.module()(neg(5, 2))


@pytest.mark.parametrize("model", list(MESSAGES), ids=[m.__name__ for m in MESSAGES])
def test_eager_raises_exactly_the_original(model):
    m = model()
    bad = neg(3, 3)
    with pytest.raises((ValueError, AssertionError)) as original:
        m(bad)
    built = getattr(m, "built", 0)
    good = pos(3, 3)
    expected = m(good)  # (inside the context, model.forward is the rewritten code)
    with unbranch.torch_export_rewrite(rewrite=[model.forward]) as report:
        assert "_ub.raise_if(" in report.rewritten[0].code and "else:" not in report.rewritten[0].code
        torch.testing.assert_close(m(good), expected)
        if built:
            assert m.built == built  # only the failing call built a message
        with pytest.raises(type(original.value)) as rewritten:
            m(bad)
    # (pytest adds its introspection after the first line of an assert's message in this file)
    assert str(rewritten.value).splitlines()[0] == str(original.value).splitlines()[0]


class ColumnsChecked(torch.nn.Module):
    def forward(self, x):
        if x.shape[1] != 3:
            raise ValueError(f"need 3 columns, got {x.shape[1]}")
        return x * 2


@pytest.mark.parametrize("strict", MODES)
def test_example_failing_a_shape_check_says_so(strict):
    # the example has 4 columns: export must fail with the user's text, not dynamo's
    # "Expected cond to be True" (strict) nor a symbol in place of the value: the example's size
    # (non-strict), or the value's source where dynamo cannot tell a size from a number (strict)
    with pytest.raises(Exception, match=r"need 3 columns, got <x.shape\[1\]>" if strict else "got 4$") as info:
        export_rewritten(ColumnsChecked(), (pos(3, 4),), strict)
    if strict:
        assert isinstance(info.value, unbranch.UnbranchError)
        assert "test_checks.py:" in str(info.value)
    batch = ({0: torch.export.Dim.DYNAMIC},)  # (the check fixes the columns: a dynamic dim 1 would be violated)
    ep = export_rewritten(ColumnsChecked(), (pos(3, 3),), strict, dynamic_shapes=batch)
    x = pos(5, 3)
    torch.testing.assert_close(ep.module()(x), x * 2)


class Limited(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def forward(self, x):
        if self.n > 2:  # not plainly Python (self.n may be a tensor): a check
            raise ValueError(f"n is {self.n}")
        return x + self.n


@pytest.mark.parametrize("strict", MODES)
def test_python_condition_true_while_exporting(strict):
    assert "_ub.raise_if(" in unbranch.transform_method(Limited.forward).code
    expected = unbranch.UnbranchError if strict else ValueError  # (strict: dynamo lets no user exception out)
    with pytest.raises(expected, match=r"n is (3|<self.n>)"):
        export_rewritten(Limited(3), (pos(3, 3),), strict)
    check_export(Limited(1), (pos(3, 3),), [(pos(5, 2),)], strict, conds=0)


class DataCheck(torch.nn.Module):
    def forward(self, x):
        if x.sum().item() > 1000:
            raise ValueError("too big")
        return x * 2


@pytest.mark.parametrize("strict", MODES)
def test_check_on_a_data_dependent_float_stays_in_the_graph(strict):
    # torch._check drops a check on an unbacked float (measured): it must still fail at run time
    ep = check_export(DataCheck(), (pos(3, 4),), [(pos(4, 3),)], strict, conds=0)
    with pytest.raises(RuntimeError, match="too big"):
        ep.module()(pos(4, 3) * 1000)


def test_no_cond_for_a_check():
    ep = export_rewritten(ElseRaises(), (pos(3, 4),), False)
    assert count_branches(ep) == 0


class Unchecked(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        return y + 1


def _assert_positive(fn):
    """A hook writing an assert the source does not hold: no screen of the source sees it."""
    import libcst as cst

    check = cst.parse_statement('assert (x > 0).all(), "positive input only"\n')
    return fn.with_changes(body=fn.body.with_changes(body=[check, *fn.body.body]))


@pytest.mark.parametrize("strict", MODES)
def test_an_assert_a_hook_writes_becomes_a_check(strict):
    m = Unchecked()
    target = {"function": Unchecked.forward, "pre_rewriter": _assert_positive}
    ep = export_rewritten(m, (pos(3, 4),), strict, rewrite=[target])
    assert count_branches(ep) == 0
    for good in (pos(4, 3), pos(7, 2)):
        torch.testing.assert_close(ep.module()(good), m(good))
    with pytest.raises(RuntimeError, match="positive input only"):
        ep.module()(neg(5, 2))


class RefusesLargeInputs(torch.nn.Module):
    def forward(self, x):
        if x.max() > 100:
            raise ValueError("too large")
        return x * 2


@pytest.mark.parametrize("checks", ["auto", "async", "sync"])
@pytest.mark.parametrize("strict", MODES)
def test_a_failed_check_raises_a_catchable_error_and_the_next_call_works(strict, checks):
    """Every ``checks=`` mode keeps the check in the program (under strict export too) with the user's
    message; "sync" asserts a copy of the condition on the CPU, which on CUDA is what keeps a failure
    from becoming a device-side assert (the CPU run here checks it fails like Python and recovers)."""
    dims = ({0: torch.export.Dim.DYNAMIC},)
    ep = unbranch.export(RefusesLargeInputs(), (torch.randn(3, 4),), dynamic_shapes=dims, strict=strict, checks=checks)
    program = ep.module()
    with pytest.raises(RuntimeError, match="too large"):
        program(torch.full((5, 4), 500.0))
    torch.testing.assert_close(program(torch.ones(6, 4)), torch.full((6, 4), 2.0))
    assert unbranch.runtime.settings.current().checks == "auto"  # (the mode is the export's, not left behind)


def test_an_unknown_checks_mode_is_refused_naming_the_modes():
    with pytest.raises(unbranch.UnbranchError, match="'auto', 'async', 'sync'"):
        unbranch.export(RefusesLargeInputs(), (torch.randn(3, 4),), checks="eager")
