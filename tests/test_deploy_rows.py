"""Loops that write one row of a buffer per step: per-step outputs, not a carried buffer.

The buffer is no longer carried (cloned and written with ``index_put_`` at every step): the
rows are copied into the buffer once after the loop. Where the steps carry nothing else, under
non-strict export the loop is one batched computation (``torch.vmap`` over the steps), no loop
left; under strict export, or where vmap cannot run the step, a scan with the rows as per-step
outputs. Each exported program matches the original eager module at other lengths, in both
export modes, including the state of a buffer passed in by the caller and a view of it.
"""

import pytest
import torch
from helpers import MODES, count_vmaps, export_rewritten
from torch.export import Dim

import unbranch

SCAN = torch.ops.higher_order.scan


def scan_nodes(ep):
    return [
        n
        for gm in ep.graph_module.modules()
        if isinstance(gm, torch.fx.GraphModule)
        for n in gm.graph.nodes
        if n.target is SCAN
    ]


def carried(ep) -> list:
    """The shapes of what each scan carries (its init)."""
    return [tuple(x.meta["val"].shape) for node in scan_nodes(ep) for x in node.args[1]]


def assert_rows_lowered(ep, strict):
    if strict:  # dynamo: a scan, which carries only its 0-d placeholder, not the buffer
        assert carried(ep) == [()] and count_vmaps(ep) == 0
    else:  # nothing carried from step to step: one batched computation, no loop left
        assert scan_nodes(ep) == [] and count_vmaps(ep) == 1


class IntoInput(torch.nn.Module):
    """Rows written into a buffer the caller passes, seen through a view taken before the loop."""

    def forward(self, x, out):
        first = out[:, 0]
        for i in range(x.shape[0]):
            out[i] = torch.tanh(x[i]) * (i + 1)
        return first * 2


@pytest.mark.parametrize("strict", MODES)
def test_rows_into_a_caller_buffer(strict):
    model = IntoInput()
    ep = export_rewritten(model, (torch.randn(5, 3), torch.zeros(5, 3)), strict, dynamic_shapes=({0: Dim.DYNAMIC},) * 2)
    assert_rows_lowered(ep, strict)
    for n in (1, 2, 7):
        x = torch.randn(n, 3)
        mine, theirs = torch.full((n, 3), -1.0), torch.full((n, 3), -1.0)
        torch.testing.assert_close(ep.module()(x, mine), model(x, theirs))
        torch.testing.assert_close(mine, theirs)  # the caller's buffer holds the rows


class AfterABranch(torch.nn.Module):
    """The row is computed by an if on the row's data (a cond inside the scan step), cast to the buffer's dtype."""

    def forward(self, x):
        out = torch.zeros(x.shape[0], x.shape[1], dtype=torch.float64)
        for i in range(x.shape[0]):
            if x[i].sum() > 0:
                v = x[i] * 2
            else:
                v = -x[i]
            out[i, :] = v
        return out


@pytest.mark.parametrize("strict", MODES)
def test_rows_after_a_branch(strict):
    model = AfterABranch()
    ep = export_rewritten(model, (torch.randn(6, 4),), strict, dynamic_shapes=({0: Dim.DYNAMIC},))
    assert carried(ep) == [()] and count_vmaps(ep) == 0  # a cond in the step: vmap cannot run it, a scan does
    for n in (1, 3, 8):
        x = torch.randn(n, 4)
        x[0] = x[0].abs()  # both sides taken
        if n > 1:
            x[1] = -x[1].abs()
        torch.testing.assert_close(ep.module()(x), model(x))


class Broadcast(torch.nn.Module):
    """A row value broadcast to the row (a scalar per row), into a buffer longer than the loop."""

    def forward(self, x):
        out = torch.ones(x.shape[0] + 1, 3)
        for i in range(x.shape[0]):
            out[i] = x[i].sum()
        return out


@pytest.mark.parametrize("strict", MODES)
def test_rows_broadcast_into_a_longer_buffer(strict):
    model = Broadcast()
    ep = export_rewritten(model, (torch.randn(5, 2),), strict, dynamic_shapes=({0: Dim.DYNAMIC},))
    for n in (1, 4):
        x = torch.randn(n, 2)
        torch.testing.assert_close(ep.module()(x), model(x))


class Checked(torch.nn.Module):
    """A row loop whose step checks its row: vmap cannot batch the check (``_assert_async``)."""

    def forward(self, x):
        out = torch.zeros(x.shape[0], x.shape[1])
        for i in range(x.shape[0]):
            if x[i].abs().sum() > 100:
                raise ValueError("row too large")
            out[i] = x[i] + 1
        return out


@pytest.mark.parametrize("strict", MODES)
def test_a_step_vmap_cannot_batch_is_a_scan_and_leaves_nothing_of_the_try(strict):
    model = Checked()
    ep = export_rewritten(model, (torch.randn(5, 3),), strict, dynamic_shapes=({0: Dim.DYNAMIC},))
    assert carried(ep) == [()] and count_vmaps(ep) == 0  # the first try recorded nothing
    for n in (1, 4):
        x = torch.randn(n, 3)
        torch.testing.assert_close(ep.module()(x), model(x))
    with pytest.raises(RuntimeError):
        ep.module()(torch.full((3, 3), 50.0))
    with pytest.raises(ValueError, match="row too large"):
        model(torch.full((3, 3), 50.0))


def test_batch_loops_false_keeps_the_scan_and_is_undone_on_exit():
    """For a loop whose batched steps would not fit in memory at once: one step at a time."""
    from unbranch.runtime import settings

    model = IntoInput()
    dims = ({0: Dim.DYNAMIC},) * 2
    ep = export_rewritten(model, (torch.randn(5, 3), torch.zeros(5, 3)), False, dynamic_shapes=dims, batch_loops=False)
    assert carried(ep) == [()] and count_vmaps(ep) == 0 and settings.current().batch is True
    for n in (1, 6):
        x = torch.randn(n, 3)
        mine, theirs = torch.zeros(n, 3), torch.zeros(n, 3)
        torch.testing.assert_close(ep.module()(x, mine), model(x, theirs))
        torch.testing.assert_close(mine, theirs)
    with pytest.raises(unbranch.UnbranchError, match="batch_loops"):
        unbranch.torch_export_rewrite(rewrite=[IntoInput.forward], batch_loops="no")


def test_what_is_not_a_row_write_stays_carried():
    class ReadsBack(torch.nn.Module):
        def forward(self, x):
            out = torch.zeros_like(x)
            for i in range(x.shape[0]):
                out[i] = x[i] + out[i - 1]
            return out

    class Shifted(torch.nn.Module):
        def forward(self, x):
            out = torch.zeros(x.shape[0] + 1, x.shape[1])
            for i in range(x.shape[0]):
                out[i + 1] = x[i]
            return out

    for cls in (ReadsBack, Shifted):
        code = unbranch.transform_method(cls.forward).code
        assert "for_range" in code and "rows=" not in code and "write_row" not in code
        model = cls()
        ep = export_rewritten(model, (torch.randn(5, 3),), False, dynamic_shapes=({0: Dim.DYNAMIC},))
        x = torch.randn(3, 3)
        torch.testing.assert_close(ep.module()(x), model(x))


def test_eager_inside_the_context_writes_the_rows_itself():
    model = IntoInput()
    x = torch.randn(4, 3)
    mine, theirs = torch.zeros(4, 3), torch.zeros(4, 3)
    with unbranch.torch_export_rewrite(rewrite=[IntoInput.forward]):
        got = model(x, mine)
    torch.testing.assert_close(got, IntoInput.forward(model, x, theirs))
    torch.testing.assert_close(mine, theirs)
