"""break/continue lowered to flags, returns anywhere: exported programs match eager on every exit.

Each module is exported inside ``torch_export_rewrite`` with dynamic dims, in non-strict
and strict mode, then ``ep.module()`` is compared with the original on inputs that take
every branch and loop exit, and on another shape.
"""

import pytest
import torch
from helpers import MODES, assert_same, count_branches, count_ops
from torch.export import Dim

import unbranch


def export(model, example, strict, dims=None):
    dims = dims or tuple({0: Dim.DYNAMIC} for _ in example)
    with unbranch.torch_export_rewrite(rewrite=[type(model).forward]):
        return torch.export.export(model, example, dynamic_shapes=dims, strict=strict)


def same_everywhere(model, ep, inputs):
    for args in inputs:
        assert_same(ep.module()(*(a.clone() for a in args)), model(*(a.clone() for a in args)))


# -- continue / break under a tensor condition --------------------------------------------


class ContinueOnTensor(torch.nn.Module):
    """A Python loop whose ``continue`` sits under a tensor condition."""

    def forward(self, x):
        for _ in range(3):
            x = x + 1
            if x.sum() > 4:
                continue
            x = x * 2
        return x


@pytest.mark.parametrize("strict", MODES)
def test_continue_under_tensor_condition(strict):
    m = ContinueOnTensor()
    ep = export(m, (torch.zeros(4),), strict)
    assert count_branches(ep) == 3  # one guard per unrolled step
    # never / sometimes / always skipping, and another length
    same_everywhere(m, ep, [(torch.full((4,), -9.0),), (torch.zeros(4),), (torch.ones(4),), (torch.zeros(7),)])


class BreakInScan(torch.nn.Module):
    """``break`` in a ``for`` over a dynamic length: the remaining steps do nothing."""

    def forward(self, x):
        acc = torch.zeros(x.shape[1])
        for i in range(x.shape[0]):
            if x[i].sum() > 2:
                break
            acc = acc + x[i]
        return acc


def _rows(n, stop_at):
    x = torch.zeros(n, 3)
    if stop_at is not None:
        x[stop_at] = 1.0
    return x


@pytest.mark.parametrize("strict", MODES)
def test_break_in_for_over_dynamic_range(strict):
    m = BreakInScan()
    ep = export(m, (_rows(5, 2),), strict)
    assert count_ops(ep, torch.ops.higher_order.scan) == 1
    inputs = [(_rows(5, None),), (_rows(5, 0),), (_rows(5, 2),), (_rows(5, 4),), (_rows(8, 6),), (_rows(3, None),)]
    inputs = [(x + 0.1 * torch.arange(3.0),) for (x,) in inputs]
    same_everywhere(m, ep, inputs)


class BreakInWhile(torch.nn.Module):
    """``break`` in a ``while`` on a tensor condition."""

    def forward(self, x):
        while x.sum() < 100:
            x = x * 2
            if x.max() > 20:
                break
            x = x + 1
        return x


@pytest.mark.parametrize("strict", MODES)
def test_break_in_while_on_tensor(strict):
    m = BreakInWhile()
    ep = export(m, (torch.ones(4),), strict)
    assert count_ops(ep, torch.ops.higher_order.while_loop) == 1
    # the test ends the loop at once / the break ends it / the test ends it after some steps
    inputs = [(torch.full((4,), 50.0),), (torch.full((4,), 11.0),), (torch.ones(4),), (torch.full((6,), 0.5),)]
    inputs += [(torch.tensor([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]),)]
    same_everywhere(m, ep, inputs)


# -- LayerDrop: a continue under self.training ---------------------------------------------


class LayerDrop(torch.nn.Module):
    def __init__(self, layerdrop=0.5):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))
        self.layerdrop = layerdrop

    def forward(self, x):
        for layer in self.layers:
            if self.training:
                p = torch.rand([])
                if p < self.layerdrop:
                    continue
            x = layer(x)
        return x


@pytest.mark.parametrize("strict", MODES)
def test_layerdrop_in_eval_stays_python(strict):
    m = LayerDrop().eval()
    ep = export(m, (torch.randn(2, 4),), strict)
    assert count_branches(ep) == 0
    same_everywhere(m, ep, [(torch.randn(2, 4),), (torch.randn(5, 4),)])


@pytest.mark.parametrize("strict", MODES)
def test_layerdrop_in_training_is_a_cond(strict):
    m = LayerDrop(layerdrop=0.0).train()  # p < 0.0 never holds: every layer runs, deterministically
    ep = export(m, (torch.randn(2, 4),), strict)
    assert count_branches(ep) == 3
    same_everywhere(m, ep, [(torch.randn(2, 4),), (torch.randn(5, 4),)])
    m.layerdrop = 1.0  # every layer dropped
    ep = export(m, (torch.randn(2, 4),), strict)
    same_everywhere(m, ep, [(torch.randn(2, 4),), (torch.randn(5, 4),)])


def test_layerdrop_eager_is_exact():
    m = LayerDrop(layerdrop=0.5).train()
    x = torch.randn(3, 4)
    with unbranch.torch_export_rewrite(rewrite=[LayerDrop.forward]):
        torch.manual_seed(0)
        got = m(x)
    torch.manual_seed(0)
    assert_same(got, m(x))


def test_bart_decoder_is_not_refused():
    transformers = pytest.importorskip("transformers")
    from transformers.models.bart.modeling_bart import BartDecoder

    rm = unbranch.transform_method(BartDecoder.forward, strict=True)
    assert "continue" not in rm.code.split("def forward", 1)[1]
    del transformers


# -- returns ------------------------------------------------------------------------------


class NestedReturns(torch.nn.Module):
    """Returns 3 deep, each level with work after its inner level and an else that falls through."""

    def forward(self, x):
        x = x + 1
        if x.sum() > 0:
            x = x * 2
            if x.sum() > 10:
                x = x - 1
                if x.sum() > 40:
                    return x * 3
                x = x / 2
            else:
                x = x + 5
            x = x - 2
        else:
            x = -x
        return x * 2


@pytest.mark.parametrize("strict", MODES)
def test_returns_nested_three_deep(strict):
    m = NestedReturns()
    ep = export(m, (torch.ones(4),), strict)
    assert count_branches(ep) >= 3
    inputs = [torch.full((4,), v) for v in (-5.0, 0.1, 2.0, 10.0)] + [torch.full((7,), 3.0), torch.full((2,), 0.5)]
    same_everywhere(m, ep, [(x,) for x in inputs])


def test_returns_nested_three_deep_code_is_linear():
    rm = unbranch.transform_method(NestedReturns.forward)
    assert rm.code.count("x = x - 2") == 1  # the rest after the middle if is not copied


def test_depth_ten_output_stays_linear():
    """Ten nested or sequential early returns: the rest of the function is moved, never copied per
    return (the time this takes is benchmarks/nested_return.py's record, not a test's)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    import nested_return

    for shape in (nested_return.nested, nested_return.sequential):
        out = unbranch.rewrite_source(shape(10))
        assert out.count("\n") < 4 * shape(10).count("\n")


class ReturnInLoop(torch.nn.Module):
    """A ``return`` inside a Python loop, under a tensor condition."""

    def forward(self, x):
        for _ in range(3):
            x = x + 1
            if x.sum() > 5:
                x = x * 3
                return x - 1
            x = x * 2
        x = x - 4
        return x


@pytest.mark.parametrize("strict", MODES)
def test_return_inside_loop(strict):
    m = ReturnInLoop()
    ep = export(m, (torch.zeros(4),), strict)
    assert count_branches(ep) >= 3
    # returns at step 1, 2, 3, or never; another length
    inputs = [torch.full((4,), v) for v in (5.0, 0.0, -0.6, -10.0)] + [torch.full((9,), -0.3)]
    same_everywhere(m, ep, [(x,) for x in inputs])


class ReturnInWhile(torch.nn.Module):
    def forward(self, x):
        while x.sum() < 100:
            x = x * 2
            if x.max() > 20:
                return x
            x = x + 1
        return -x


@pytest.mark.parametrize("strict", MODES)
def test_return_inside_while_on_tensor(strict):
    m = ReturnInWhile()
    ep = export(m, (torch.ones(4),), strict)
    assert count_ops(ep, torch.ops.higher_order.while_loop) == 1
    inputs = [(torch.full((4,), 50.0),), (torch.full((4,), 11.0),), (torch.ones(4),), (torch.full((30,), 1.0),)]
    same_everywhere(m, ep, inputs)


class ReturnInNoGrad(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        with torch.no_grad():
            y = self.lin(x)
            if y.sum() > 0:
                return y + 1
            y = y - 1
        return self.lin(y) * 3


@pytest.mark.parametrize("strict", MODES)
def test_return_inside_no_grad(strict):
    m = ReturnInNoGrad()
    with torch.no_grad():
        m.lin.bias.fill_(0.0)
    ep = export(m, (torch.ones(2, 4),), strict)
    assert count_branches(ep) >= 2
    same_everywhere(m, ep, [(torch.ones(2, 4),), (-torch.ones(2, 4),), (torch.ones(5, 4),), (-torch.ones(3, 4),)])


def test_return_inside_no_grad_eager_keeps_grad_mode():
    m = ReturnInNoGrad()
    for sign in (1.0, -1.0):
        x = sign * torch.ones(2, 4) * 100
        want = m(x)
        with unbranch.torch_export_rewrite(rewrite=[ReturnInNoGrad.forward]):
            got = m(x)
        assert got.requires_grad == want.requires_grad
        assert_same(got, want)


class SequentialReturns(torch.nn.Module):
    """Ifs in a row, each with a return inside and an else falling through (the rest is shared)."""

    def forward(self, x):
        if x.sum() > 1:
            if x.max() > 2:
                return x * 1
            x = x + 1
        else:
            x = x - 1
        if x.sum() > 2:
            if x.max() > 2.5:
                return x * 2
            x = x + 2
        else:
            x = x - 2
        return x


@pytest.mark.parametrize("strict", MODES)
def test_sequential_returns(strict):
    m = SequentialReturns()
    ep = export(m, (torch.ones(4),), strict)
    assert count_branches(ep) >= 4
    values = (-3.0, 0.3, 0.45, 1.8, 2.5, 5.0)  # else/else, then/then (twice), x * 2, x * 1
    same_everywhere(m, ep, [(torch.full((4,), v),) for v in values] + [(torch.full((7,), 0.2),)])


# found by the jumps fuzzer: the lowered flags ended up tested by ifs left as Python (one-sided
# rebinding), where the plain program had guarded on sizes; the function keeps its jumps instead
FLAGS_LEFT_PYTHON = """
import torch


def f(x, y, flag, n, mask):
    for _i in range(2):
        if not (x.shape[0] > 3 or (x < 1.0).all()):
            if (y.mean() < -0.5) and (x.shape[0] > 3):
                y = (y - 0.25).relu()
                return (x * torch.tanh(x)) + y
            if y.shape[0] > 3:
                x = -torch.tanh(x)
                continue
            if x.sum().item() > 0.5 or mask is not None and y.shape[0] > 3:
                b = (x + 1.0) + y
                break
        elif (mask is None) or ((x > 0.5).any()):
            if (x.shape[0] > 3) and (y.size(0) < 4):
                y = y.relu()
                return x
        y *= torch.tanh(y)
        if x.size(0) < 4 and (x > -0.5).sum():
            x *= torch.tanh(-x)
            if mask is not None:
                x = x * mask
        else:
            pass
        return y * torch.tanh(x - x)
"""


@pytest.mark.parametrize("strict", [False, True])
def test_jumps_stay_as_written_when_their_flags_would_be_tested_by_plain_python(strict):
    from fuzzing import check_export

    assert check_export(FLAGS_LEFT_PYTHON.lstrip("\n"), (False, 1, None), strict=strict) is None
    text = unbranch.rewrite_source(FLAGS_LEFT_PYTHON.split("\n", 2)[2], is_method=False)
    assert "_ub.flag" not in text and "continue" in text and "break" in text


def test_runtime_tensors_join_data_on_another_device():
    """The flags and counters the runtime makes for a branch or a loop go where its data lives: a CPU
    flag set from GPU data is a CPU tensor on one path and a GPU one on the other, which torch.cond,
    scan and while_loop refuse. (``meta`` stands in for a GPU here; the CUDA cells of test_deploy run
    the programs.)"""
    from unbranch.runtime.jumps import accelerator, tensorised

    data = torch.zeros(3, device="meta")
    assert accelerator((torch.tensor(True), [torch.ones(2), {"x": data}])) == data.device
    assert accelerator((torch.tensor(True), torch.ones(2), 3)) is None
    made, flag, count, kept, row = tensorised(
        (True, torch.tensor(False), torch.tensor(2), data, torch.ones(2)), [0], data.device
    )
    assert made.device == flag.device == count.device == data.device
    assert made.dtype == flag.dtype == torch.bool and count.dtype == torch.long
    assert kept is data and row.device.type == "cpu"  # only 0-d CPU tensors follow the data
    assert tensorised((True, torch.tensor(2)), [0])[0].device.type == "cpu"


# -- a static range a break on data stops: one while_loop, whatever the number of steps -------------


class Converges(torch.nn.Module):
    """Newton's square root, stopped once a step changes little (a break on data in ``range(n)``)."""

    def __init__(self, steps):
        super().__init__()
        self.steps = steps

    def forward(self, a):
        y = a * 1
        for _ in range(self.steps):
            z = y - 0.5 * (y * y - a) / y
            err = (z - y).abs().max()
            y = z
            if err < 1e-6:
                break
        return y


class StopsAtRow(torch.nn.Module):
    """The index reads rows; the loop stops at the first row of negative sum (first, middle or never)."""

    def forward(self, x):
        acc = torch.zeros(4)
        for i in range(3):
            if x[i].sum() < 0:
                break
            acc = acc + x[i] * i
        else:
            acc = acc - 100
        return acc


WHILE = torch.ops.higher_order.while_loop
SCAN = torch.ops.higher_order.scan
COND = torch.ops.higher_order.cond


def _loop_ops(ep) -> int:
    """Loop ops at the top of the program: a while_loop (non-strict), or under strict export, where
    dynamo shows every bound as symbolic, a scan whose steps after the break do nothing."""
    return sum(n.target in (WHILE, SCAN) for n in ep.graph.nodes)


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize("steps", [10, 200])
def test_a_static_range_stopped_by_data_is_one_while_loop(steps, strict):
    m = Converges(steps)
    ep = export(m, (torch.rand(3, 4) + 1,), strict)
    # the step that first sets the flag runs as written, the rest is one while_loop: no cond per step
    assert _loop_ops(ep) == 1 and count_ops(ep, COND) <= 3
    inputs = [(torch.rand(5, 4) + 1,), (torch.full((2, 4), 4.0),), (torch.full((3, 4), 1.0),)]  # 1.0: the first step
    same_everywhere(m, ep, inputs)


@pytest.mark.parametrize("strict", MODES)
def test_a_static_range_stopped_by_data_reads_rows_at_its_index(strict):
    m = StopsAtRow()
    ep = export(m, (torch.rand(4, 4),), strict)
    assert _loop_ops(ep) == 1
    rows = torch.rand(5, 4)
    first, middle, never = -rows.clone(), rows.clone(), rows.clone()
    middle[1] = -1
    same_everywhere(m, ep, [(first,), (middle,), (never,), (torch.rand(3, 4),)])


def test_a_static_range_stopped_by_data_is_a_bounded_scan_for_executorch():
    m = Converges(12)
    with unbranch.torch_export_rewrite(rewrite=[Converges.forward], target="executorch"):  # (static sizes there)
        ep = torch.export.export(m, (torch.rand(3, 4) + 1,))
    assert count_ops(ep, WHILE) == 0 and count_ops(ep, SCAN) == 1  # (no max_loop_iterations asked)
    same_everywhere(m, ep, [(torch.rand(3, 4) + 1,), (torch.full((3, 4), 1.0),), (torch.full((3, 4), 9.0),)])
