"""Issue 56: a program made from rewritten code is run before it is returned, on the example and on
other sizes, with eager beside it; one that fails or differs where eager works is refused by name,
one whose guards on input sizes refuse sizes eager takes is returned with a warning naming them.

The state the runs change (buffers, parameters, plain attributes) is as it was after the export.
"""

import warnings

import pytest
import torch
from helpers import MODES, assert_same, line_of
from torch.export import Dim

import unbranch
from unbranch import UnbranchError


class Trim(torch.nn.Module):
    """A side's negative slice: torch guards ``size >= 6`` on the example, eager clamps below it."""

    def forward(self, kv):
        if kv.sum() > 0:
            kv = kv[:, -6:]
        return kv * 2


class VmapSide(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            y = torch.vmap(lambda r: r * 2)(x)
        else:
            y = x - 1
        return y


class Counting(torch.nn.Module):
    """State every run changes: a buffer in a branch, a Python counter."""

    def __init__(self):
        super().__init__()
        self.register_buffer("seen", torch.zeros(3))
        self.w = torch.nn.Parameter(torch.ones(3))
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if x.sum() > 0:
            self.seen.add_(x.sum(0))
            y = x * self.w
        else:
            y = x - self.seen
        return y


class Checked(torch.nn.Module):
    """Needs 6 columns on the side that slices, and says so: eager raises below it too."""

    def forward(self, kv):
        torch._check(kv.shape[1] >= 6)
        if kv.sum() > 0:
            kv = kv[:, -6:]
        return kv * 2


@pytest.mark.parametrize("strict", MODES)
def test_a_program_refusing_sizes_eager_takes_is_named(strict):
    """torch guards ``size >= 6`` for the slice: the program states it, the check names a size below it."""
    example = (torch.randn(2, 10).abs(),)
    with pytest.warns(UserWarning, match="refuses sizes eager takes") as caught:
        ep = unbranch.export(Trim(), example, dynamic_shapes=({1: Dim.DYNAMIC},), strict=strict)
    text = " ".join(str(w.message) for w in caught)
    assert "size 5 in dimension 1 of input 0" in text and "kv.size()[1] >= 6" in text and "Trim.forward" in text
    for x in (torch.randn(2, 12).abs(), -torch.rand(2, 7)):  # both sides, other sizes inside its range
        assert_same(ep.module()(x), Trim()(x))
    with pytest.raises(AssertionError, match="Guard failed"):
        ep.module()(torch.randn(2, 5))


@pytest.mark.parametrize("strict", MODES)
def test_check_warn_and_off(strict):
    example = (sign_example := torch.rand(4, 3),)
    with pytest.warns(UserWarning, match="torch.vmap"):
        ep = unbranch.export(VmapSide(), example, dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict, check="warn")
    assert_same(ep.module()(-sign_example), VmapSide()(-sign_example))  # (the side without vmap runs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing checked, nothing said
        unbranch.export(VmapSide(), example, dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict, check=False)
    with pytest.raises(TypeError, match="check must be"):
        unbranch.export(Trim(), example, check="yes")


@pytest.mark.parametrize("strict", MODES)
def test_a_named_dim_bounds_what_is_asked(strict):
    """The user's own Dim(min=7) is no narrowing: the program is returned and works on both sides."""
    n = Dim("n", min=7)
    ep = unbranch.export(Trim(), (torch.randn(2, 10).abs(),), dynamic_shapes=({1: n},), strict=strict)
    for x in (torch.randn(2, 7).abs(), -torch.rand(2, 9)):
        assert_same(ep.module()(x), Trim()(x))


@pytest.mark.parametrize("strict", MODES)
def test_where_eager_fails_too_nothing_is_asked(strict):
    ep = unbranch.export(Checked(), (torch.randn(2, 10).abs(),), dynamic_shapes=({1: Dim.DYNAMIC},), strict=strict)
    for x in (torch.randn(2, 7).abs(), -torch.rand(2, 11)):
        assert_same(ep.module()(x), Checked()(x))


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize("sign", [1, -1], ids=["vmap-side", "other-side"])
def test_vmap_in_a_branch_is_refused_whichever_side_the_example_takes(strict, sign):
    example = (sign * torch.rand(4, 3),)
    with pytest.raises(UnbranchError, match="torch.vmap") as caught:
        unbranch.export(VmapSide(), example, dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict)
    assert f"test_checked.py:{line_of(VmapSide, 'if x.sum() > 0')}" in str(caught.value)


@pytest.mark.parametrize("strict", MODES)
def test_state_is_as_it_was_after_the_check(strict):
    model = Counting()
    model.seen.fill_(0.5)
    seen, w, buffers = model.seen, model.w, dict(model._buffers)
    ep = unbranch.export(model, (torch.randn(4, 3).abs(),), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict)
    assert model.calls == 0 and model.seen is seen and model.w is w and model._buffers == buffers
    assert torch.equal(model.seen, torch.full((3,), 0.5)) and torch.equal(model.w, torch.ones(3))
    assert torch.equal(ep.state_dict["seen"], torch.full((3,), 0.5))
    program, eager = ep.module(), Counting()
    eager.seen.fill_(0.5)
    for x in (torch.randn(5, 3).abs(), -torch.rand(2, 3), torch.rand(6, 3)):  # input after input, both sides
        assert_same(program(x), eager(x))
        assert_same(program.seen, eager.seen)
