"""Issue 37, family 1 across a call: a function whose result is a Python value decided by data (None
or a mask, a module, a function) has its caller's rest run inside it under export
(``normalise.call_rest``). The programs of ``families.py`` cover what converts; here: the context,
eager runs inside it, nothing left behind, and the errors where no caller can take the value."""

import pytest
import torch
from families import HelperGivesNoneOrMask, MethodPicksSubmodule, _positive_mask, _rows
from helpers import MODES
from torch.export import Dim

import unbranch
from unbranch import UnbranchError
from unbranch.runtime import settings

D0 = ({0: Dim.DYNAMIC},)
INPUTS = [_rows(3), -_rows(6), _rows(7) - 0.6]  # every side of both calls, other sizes


@pytest.mark.parametrize("make", [HelperGivesNoneOrMask, MethodPicksSubmodule])
@pytest.mark.parametrize("strict", MODES)
def test_context_exports_and_eager_runs_stay_exact(make, strict):
    model = make()
    expected = [model(x) for x in INPUTS]
    with unbranch.torch_export_rewrite(model) as report:
        ep = torch.export.export(model, (_rows(5) - 0.5,), dynamic_shapes=D0, strict=strict)
        inside = [model(x) for x in INPUTS]
    assert len(report) >= 2  # the helper and its caller
    for x, want, eager in zip(INPUTS, expected, inside):
        torch.testing.assert_close(eager, want, rtol=0, atol=0)
        torch.testing.assert_close(ep.module()(x), want)
    assert not settings.current().variants  # nothing of the export's variants is left
    assert [model(x) for x in INPUTS][0].equal(expected[0])


@pytest.mark.parametrize("grad", [True, False])
def test_float16_and_grad_modes(grad):
    model = MethodPicksSubmodule().half()
    with torch.set_grad_enabled(grad):
        ep = unbranch.export(model, (_rows(5).half(),), dynamic_shapes=D0)
    for x in INPUTS:
        torch.testing.assert_close(ep.module()(x.half()), model(x.half()))


class KeepsTheMask(torch.nn.Module):
    def forward(self, x):
        mask = _positive_mask(x)
        self.last = mask  # state outliving the call: no branch of the helper can set it
        return x if mask is None else x * mask


class ReturnsTheMask(torch.nn.Module):
    def forward(self, x):
        return _positive_mask(x)


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize(
    "make, why",
    [
        (KeepsTheMask, "the rest changes state that outlives it"),
        (ReturnsTheMask, "ReturnsTheMask.forward gives it as the program's own result, whose structure would"),
    ],
)
def test_no_caller_can_take_the_value_is_a_clear_error(make, why, strict):
    with pytest.raises(UnbranchError) as info:
        unbranch.export(make(), (_rows(5),), dynamic_shapes=D0, strict=strict)
    text = str(info.value)
    assert why in text
    assert "_positive_mask's result" in text and "families.py" in text
    assert make.__name__ in text  # the caller, named with its file and line


def test_rewrite_source_continues_a_call_in_a_block_ending_in_return():
    code = """
    def forward(self, x, flag: bool = True):
        if flag:
            act = self.pick(x)  # chosen by data
            return act(x) * 3
        return x
    """
    out = unbranch.rewrite_source(code, continue_calls=frozenset({3}))
    assert "return _ub.continued(branch_cond_rest_1, (x,), self.pick, x)" in out
    assert "# chosen by data" in out  # the user's comment stays with the code


def test_a_rest_no_nested_function_can_run_stays_as_written():
    """``locals()`` in the rest would read the rest function's own names: the call is not continued."""
    code = """
    def forward(self, x):
        act = self.pick(x)
        y = act(x)
        return y * len(locals())
    """
    out = unbranch.rewrite_source(code, continue_calls=frozenset({2}))
    assert "_ub.continued" not in out and "act = self.pick(x)" in out
