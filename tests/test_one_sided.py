"""Issue 45: where one side of a converted ``if`` cannot be traced and the other can, the program holds
the other side behind a check that the condition takes it.

For a condition on sizes by default (torchvision's ``batched_nms``: a loop per class above a box
count, whose length is data), for one on values with ``one_sided=True``; never where both sides
trace. The program matches eager on inputs taking the kept side and raises, naming the ``if``'s
file and line, on an input that would take the other; export warns, and the report says it.
"""

import pytest
import torch
from helpers import MODES, assert_same, count_branches, line_of
from otherlib import boxes
from torch.export import Dim

import unbranch
from unbranch import UnbranchError

DYNAMIC3 = ({0: Dim.DYNAMIC},) * 3


class Detections(torch.nn.Module):
    def forward(self, x, scores, idxs):
        keep = scores > 0.5
        return boxes.batched_pick(x[keep], scores[keep], idxs[keep])


def _boxes(n):
    g = torch.Generator().manual_seed(n)
    return torch.rand(n, 4, generator=g), torch.rand(n, generator=g), torch.randint(0, 3, (n,), generator=g)


class ValueSwitch(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 1000:  # a rare input: per class
            return boxes._per_class(x, x.sum(1), (x[:, 0] * 3).long())
        return x.sum(1).argsort()[:1]


class BothSidesTrace(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 4:
            return x.sum(0)
        return x.mean(0)


@pytest.mark.parametrize("strict", MODES)
def test_size_switch_keeps_the_side_that_traces(strict):
    model = Detections()
    with pytest.warns(UserWarning, match="one side of this if cannot be traced"):
        ep = unbranch.export(model, _boxes(20), dynamic_shapes=DYNAMIC3, strict=strict)
    for n in (20, 30, 9):
        assert_same(ep.module()(*_boxes(n)), model(*_boxes(n)))
    line = line_of(boxes.batched_pick, "if boxes.numel() > 400")
    with pytest.raises(RuntimeError, match=f"boxes.py:{line}: this input takes the then side"):
        ep.module()(*_boxes(400))  # (some 200 boxes kept: 800 numbers, the per-class side)
    notes = [n for rm in unbranch.report_of(ep) for n in rm.notes if n.kind == "one-sided"]
    assert len(notes) == 1 and "only the else side" in notes[0].detail and "at " in notes[0].detail


@pytest.mark.parametrize("strict", MODES)
def test_value_switch_needs_the_option(strict):
    x = torch.rand(5, 3)
    with pytest.raises(UnbranchError, match="one_sided=True"):
        unbranch.export(ValueSwitch(), (x,), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict)
    with pytest.warns(UserWarning, match="only the else side"):
        ep = unbranch.export(ValueSwitch(), (x,), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict, one_sided=True)
    for y in (torch.rand(7, 3), torch.rand(2, 3)):
        assert_same(ep.module()(y), ValueSwitch()(y))
    with pytest.raises(RuntimeError, match="takes the then side"):
        ep.module()(torch.full((4, 3), 500.0))


@pytest.mark.parametrize("strict", MODES)
def test_both_sides_trace_is_a_cond(strict):
    ep = unbranch.export(BothSidesTrace(), (torch.rand(6, 3),), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict)
    assert count_branches(ep) == 1
    assert not [n for rm in unbranch.report_of(ep) for n in rm.notes if n.kind == "one-sided"]
    for n in (2, 6):
        x = torch.rand(n, 3)
        assert_same(ep.module()(x), BothSidesTrace()(x))
