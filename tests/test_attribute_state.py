"""Attributes set inside a converted if or loop (normalise/attribute_state): buffers a branch or a loop
step updates (counters, running statistics) export, and the program updates them as eager does."""

import pytest
import torch
from helpers import MODES, export_rewritten
from torch.export import Dim

import unbranch

# on a GPU the hoisted local, the branch's copy and the write-back live on the buffer's device
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA"))]


class Stats(torch.nn.Module):
    """The ways real code updates a buffer under a condition on data."""

    def __init__(self, how: str):
        super().__init__()
        self.how = how
        self.register_buffer("count", torch.zeros((), dtype=torch.long))
        self.register_buffer("avg", torch.zeros(4))

    def forward(self, x):
        if x.sum() > 0:
            if self.how == "+=":
                self.count += 1
            elif self.how == "add_":
                self.count.add_(1)
            elif self.how == "=":
                self.count = self.count + 2
            else:
                self.avg.mul_(0.9).add_(x.mean(0) * 0.1)
            x = x * 2
        return x - self.avg


class Hits(torch.nn.Module):
    """A count over the rows of a loop, under an if on each row."""

    def __init__(self):
        super().__init__()
        self.register_buffer("hits", torch.zeros(()))

    def forward(self, x):
        for i in range(x.shape[0]):
            if x[i].sum() > 0:
                self.hits += x[i].sum()
        return x * 2


class Calls(torch.nn.Module):
    """A Python int counted under a tensor condition: no exported program can keep it."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        if x.sum() > 0:
            self.calls += 1
            x = x * 2
        return x


def _states(model):
    return {k: v.clone() for k, v in model.named_buffers()}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("how", ["+=", "add_", "=", "ema"])
@pytest.mark.parametrize("strict", MODES)
def test_a_buffer_updated_in_a_branch(strict, how, device):
    model = Stats(how).to(device)
    make = lambda n: torch.randn(n, 4, device=device).abs() + 0.1  # noqa: E731
    ep = export_rewritten(Stats(how).to(device), (make(3),), strict, dynamic_shapes=({0: Dim.DYNAMIC},))
    program = ep.module()
    for n, sign in [(2, 1), (5, -1), (3, 1), (1, 1)]:  # both sides, other sizes; state carries over
        x = make(n) * sign
        torch.testing.assert_close(program(x.clone()), model(x.clone()))
        torch.testing.assert_close(_states(program), _states(model))
    assert model.count.item() > 0 or model.avg.abs().sum() > 0  # the branch was taken


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("strict", MODES)
def test_a_buffer_counted_over_a_loop(strict, device):
    model = Hits().to(device)
    ep = export_rewritten(
        Hits().to(device), (torch.randn(4, 3, device=device),), strict, dynamic_shapes=({0: Dim.DYNAMIC},)
    )
    program = ep.module()
    for n in (1, 3, 6):
        x = torch.randn(n, 3, device=device)
        x[0] = x[0].abs()  # one row each way
        if n > 1:
            x[1] = -x[1].abs()
        torch.testing.assert_close(program(x.clone()), model(x.clone()))
        torch.testing.assert_close(program.hits, model.hits)


def test_eager_inside_the_context_sets_the_attributes_as_written():
    """The local is the attribute's own object: in place stays in place, a rebinding rebinds, a
    Python int counts; and the side not taken leaves each attribute as it was."""
    for how in ("+=", "add_", "=", "ema"):
        model, twin = Stats(how), Stats(how)
        objects, twins = (model.count, model.avg), (twin.count, twin.avg)
        with unbranch.torch_export_rewrite(rewrite=[Stats.forward]):
            for x in (torch.ones(2, 4), -torch.ones(2, 4), torch.ones(3, 4)):
                torch.testing.assert_close(model(x), twin(x))
        torch.testing.assert_close(_states(model), _states(twin))
        assert [a is b for a, b in zip(objects, (model.count, model.avg))] == [
            a is b for a, b in zip(twins, (twin.count, twin.avg))
        ]
    calls = Calls()
    with unbranch.torch_export_rewrite(rewrite=[Calls.forward]):
        calls(torch.ones(2)), calls(-torch.ones(2)), calls(torch.ones(2))
    assert calls.calls == 2


@pytest.mark.parametrize("strict", MODES)
def test_a_python_attribute_under_a_tensor_condition_is_refused(strict):
    model = Calls()
    message = r"test_attribute_state\.py:\d+.*attribute 'calls'.*register_buffer"
    with pytest.raises(unbranch.UnbranchError, match=message):
        export_rewritten(model, (torch.randn(3, 2),), strict, dynamic_shapes=({0: Dim.DYNAMIC},))
    assert model.calls == 0  # nothing traced is left on the module


class Layers(torch.nn.Module):
    """A buffer counted under a tensor condition inside a Python loop over submodules."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(2))
        self.register_buffer("count", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        for layer in self.layers:
            if x.sum() > 0:
                self.count += 1
                x = layer(x)
        return x


@pytest.mark.parametrize("strict", MODES)
def test_the_local_wraps_the_converted_if_not_a_python_loop_around_it(strict):
    code = unbranch.transform_method(Layers.forward).code
    assert code.index("for layer in self.layers:") < code.index("self_count = self.count")  # the loop as written
    model = Layers()
    ep = export_rewritten(Layers(), (torch.randn(3, 4),), strict, dynamic_shapes=({0: Dim.DYNAMIC},))
    program = ep.module()
    program.load_state_dict(model.state_dict())
    for n, sign in [(2, 1), (5, -1), (3, 1)]:  # each side, other sizes
        x = torch.ones(n, 4) * sign
        torch.testing.assert_close(program(x.clone()), model(x.clone()))
        torch.testing.assert_close(program.count, model.count)
