""" "Plain first" returns the plain program only when it covers what ``dynamic_shapes`` asked for.

A branch on a size that ``Dim.DYNAMIC`` or ``Dim.AUTO`` leaves free is taken one way by the
plain export, which quietly narrows the dimension (``if x.shape[-1] < 16`` gives a program for
widths 2 to 15). ``unbranch.export`` finds that branch from the guard's source, rewrites it and
exports again; the program narrowing least is returned, with a warning where one still narrows.
"""

import pytest
import torch
import torch.nn.functional as F
from helpers import MODES, assert_same, count_branches, line_of
from torch.export import Dim

import unbranch


class PadToWidth(torch.nn.Module):
    def forward(self, x):
        if x.shape[-1] < 16:
            x = F.pad(x, (0, 16 - x.shape[-1]))
        return x * 2


class ResampledPositions(torch.nn.Module):
    """Positions resampled to another length: the sides give sizes a cond cannot merge into ``x + pos``."""

    def __init__(self):
        super().__init__()
        self.pos = torch.nn.Parameter(torch.randn(1, 4, 8))

    def forward(self, x):
        pos = self.pos
        if x.shape[1] != 4:
            pos = F.interpolate(pos.transpose(1, 2), size=x.shape[1], mode="linear").transpose(1, 2)
        return x + pos


@pytest.mark.parametrize("dim", [Dim.DYNAMIC, Dim.AUTO], ids=["DYNAMIC", "AUTO"])
@pytest.mark.parametrize("strict", MODES)
def test_narrowing_branch_is_rewritten(strict, dim):
    model = PadToWidth()
    plain = torch.export.export(model, (torch.randn(2, 10),), dynamic_shapes=({1: dim},), strict=strict)
    with pytest.raises(AssertionError, match="Guard failed"):
        plain.module()(torch.randn(2, 20))  # (what the plain program does with a width it narrowed away)
    ep = unbranch.export(model, (torch.randn(2, 10),), dynamic_shapes=({1: dim},), strict=strict)
    assert count_branches(ep) == 1
    for width in (10, 3, 16, 20, 40):
        x = torch.randn(2, width)
        assert_same(ep.module()(x), model(x))
    report = unbranch.report_of(ep)
    assert report.attempts[0].narrowed and not report.attempts[-1].narrowed and report.attempts[-1].returned


@pytest.mark.parametrize("strict", MODES)
def test_resampled_positions_cover_every_length(strict):
    model = ResampledPositions()
    ep = unbranch.export(model, (torch.randn(2, 6, 8),), dynamic_shapes=({1: Dim.DYNAMIC},), strict=strict)
    assert not unbranch.report_of(ep).attempts[-1].narrowed
    for length in (4, 6, 9):
        y = torch.randn(2, length, 8)
        assert_same(ep.module()(y), model(y))


class FlattenWide(torch.nn.Module):
    """The sides give tensors of different ranks: no cond merges them."""

    def forward(self, x):
        if x.shape[1] > 4:
            x = x.flatten(1)
        return x * 2


@pytest.mark.parametrize("strict", MODES)
def test_no_better_program_returns_the_plain_one_with_a_warning(strict):
    model = FlattenWide()
    x = torch.randn(2, 6, 3)
    plain = torch.export.export(model, (x,), dynamic_shapes=({1: Dim.DYNAMIC},), strict=strict)
    line = line_of(FlattenWide.forward, "if x.shape")
    with pytest.warns(UserWarning, match=f"py:{line} .*narrowed it") as seen:
        ep = unbranch.export(model, (x,), dynamic_shapes=({1: Dim.DYNAMIC},), strict=strict)
    assert seen[0].filename == __file__  # (the user's call)
    assert str(ep.graph) == str(plain.graph)
    report = unbranch.report_of(ep)
    assert report.attempts[0].returned and not report.rewritten
    for length in (6, 9):
        y = torch.randn(2, length, 3)
        assert_same(ep.module()(y), model(y))


def test_a_named_dim_is_never_narrowed_silently():
    with pytest.raises(Exception, match="Constraints violated"):
        torch.export.export(PadToWidth(), (torch.randn(2, 10),), dynamic_shapes=({1: Dim("w", max=64)},))
    ep = unbranch.export(PadToWidth(), (torch.randn(2, 10),), dynamic_shapes=({1: Dim("w", max=64)},))
    assert not unbranch.report_of(ep).attempts[-1].narrowed
    for width in (5, 30):
        x = torch.randn(2, width)
        assert_same(ep.module()(x), PadToWidth()(x))


def test_static_dimensions_are_no_narrowing():
    model = PadToWidth()
    plain = torch.export.export(model, (torch.randn(2, 10),))
    ep = unbranch.export(model, (torch.randn(2, 10),))
    assert str(ep.graph) == str(plain.graph) and len(unbranch.report_of(ep).attempts) == 1


class PaddedPair(torch.nn.Module):
    def forward(self, a, b):
        if a.shape[-1] < 16:
            a = F.pad(a, (0, 16 - a.shape[-1]))
            b = F.pad(b, (0, 16 - b.shape[-1]))
        return a * b


@pytest.mark.parametrize("strict", MODES)
def test_a_dim_the_user_shares_between_inputs_is_no_narrowing(strict, recwarn):
    """One named Dim for two inputs makes torch state ``L['a'].size()[1] == L['b'].size()[1]``: what the
    user asked, not a narrowing to warn of, in the program returned and in the context."""
    width = Dim("width", min=2, max=64)
    spec = ({1: width}, {1: width})
    model, example = PaddedPair(), (torch.randn(2, 10), torch.randn(2, 10))
    ep = unbranch.export(model, example, dynamic_shapes=spec, strict=strict)
    with unbranch.torch_export_rewrite(model=model):
        in_context = torch.export.export(model, example, dynamic_shapes=spec, strict=strict)
    assert not [w for w in recwarn if "accepts less" in str(w.message)]
    assert not unbranch.report_of(ep).attempts[-1].narrowed
    for program in (ep, in_context):
        for n in (3, 16, 40):  # each side of the if
            a, b = torch.randn(2, n), torch.randn(2, n)
            assert_same(program.module()(a, b), model(a, b))


class PaddedList(torch.nn.Module):
    def forward(self, pair, c):
        a, b = pair
        if a.shape[-1] < 16:
            a, b, c = (F.pad(t, (0, 16 - t.shape[-1])) for t in (a, b, c))
        return a * b + c


@pytest.mark.parametrize("strict", MODES)
def test_a_dim_shared_inside_a_list_argument_is_no_narrowing(strict, recwarn):
    """The Dim given to tensors inside a list (``L['pair'][1].size()[1]``) is what was asked too; and an
    argument that is no tensor itself never stops the export (it crashed on one)."""
    width = Dim("width", min=2, max=64)
    spec = ([{1: width}, {1: width}], {1: width})
    model, example = PaddedList(), ([torch.randn(2, 10), torch.randn(2, 10)], torch.randn(2, 10))
    ep = unbranch.export(model, example, dynamic_shapes=spec, strict=strict)
    assert not [w for w in recwarn if "accepts less" in str(w.message)]
    for n in (3, 16, 40):  # each side of the if
        args = ([torch.randn(2, n), torch.randn(2, n)], torch.randn(2, n))
        assert_same(ep.module()(*args), model(*args))
