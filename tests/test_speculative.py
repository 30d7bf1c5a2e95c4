"""unbranch.export at torch's first stop rewrites, besides the function torch names, every function the
model's forwards reach in which the classifier finds a branch on data, and retries once: k places cost
two exports, not k + 1. What the speculative program cannot take falls back to one place per retry."""

import pytest
import torch
from helpers import assert_same, count_branches
from torch.export import Dim

import unbranch


def halve_positive(x):
    if x.sum() > 0:
        return x * 0.5
    return x - 1


def clamp_large(x):
    if x.abs().max() > 2:
        return x.clamp(-2, 2)
    return x + 1


def flip_negative(x):
    if x.mean() < 0:
        return -x
    return x * 3


def normalise_spread(x):
    if x.std() > 1:
        return x / x.std()
    return x


class Helpers(torch.nn.Module):
    """Three helpers branching on data on the export's path, one behind ``self.training``."""

    def forward(self, x):
        x = clamp_large(halve_positive(x))
        if self.training:
            x = normalise_spread(x)
        return flip_negative(x)


# each side of each if: halve (x1 then, x2 else), clamp (x3 then, x1 else), flip (x2 then, x1 else)
INPUTS = [torch.full((5, 4), 3.0), torch.full((5, 4), -3.0), torch.full((5, 4), 5.0), torch.full((2, 4), -0.1)]
DYNAMIC = ({0: Dim.DYNAMIC},)


@pytest.mark.parametrize("strict", [False, True])
def test_one_retry_for_every_place(strict):
    model = Helpers().eval()
    ep = unbranch.export(model, (torch.randn(3, 4),), dynamic_shapes=DYNAMIC, strict=strict)
    for x in INPUTS:
        assert_same(ep.module()(x), model(x))
    report = unbranch.report_of(ep)
    first, second = report.attempts  # the plain export and one retry, where one place per retry took four
    assert first.rewritten == ["halve_positive"]  # what torch named
    assert sorted(first.speculative) == ["clamp_large", "flip_negative", "normalise_spread"]
    assert second.error == "" and second.returned and not second.dropped
    assert count_branches(ep) == 3
    # normalise_spread was swapped in, but the eval export never ran it: the program has nothing of it
    ran = sorted(rm.qualname for rm in report.rewritten)
    assert ran == ["clamp_large", "flip_negative", "halve_positive"]
    assert sorted(rm.qualname for rm in second.methods) == ran
    assert "rewritten speculatively (a branch on data, torch named none): " in str(report)


class Plain(torch.nn.Module):
    def forward(self, x):
        if self.training:
            x = halve_positive(x)
        return x.relu()


@pytest.mark.parametrize("strict", [False, True])
def test_a_model_that_exports_plainly_is_exported_once(strict):
    ep = unbranch.export(Plain().eval(), (torch.randn(3, 4),), dynamic_shapes=DYNAMIC, strict=strict)
    (only,) = unbranch.report_of(ep).attempts
    assert only.error == "" and not only.speculative and not unbranch.report_of(ep).rewritten


def scale_small_positive(x):
    if x.shape[0] < 4 and x.sum() > 0:  # the example's 4 rows never evaluate the data test
        label = "positive"  # a string in the result: no cond can give it
    else:
        label = "other"
    return x * 2.5, label


class SpeculationRefused(torch.nn.Module):
    def forward(self, x):
        y, label = scale_small_positive(halve_positive(x))
        return clamp_large(y), label


@pytest.mark.parametrize("strict", [False, True])
def test_a_refused_speculation_falls_back_to_the_named_places(strict):
    """scale_small_positive's if is a size test for the example, which torch never names; as a cond it
    is refused (a side gives a string): the speculative rewrites go, and torch names one place at a time."""
    model = SpeculationRefused()
    # (a label decided by a size the example fixes: narrowed, as the precise path; the check names the
    # size eager takes and the program refuses)
    with pytest.warns(UserWarning, match="accepts less than its dynamic dimensions"):
        with pytest.warns(UserWarning, match="refuses sizes eager takes: on inputs of size 3 in dimension 0"):
            ep = unbranch.export(model, (torch.randn(4, 4),), dynamic_shapes=DYNAMIC, strict=strict)
    for x in (torch.full((4, 4), 3.0), torch.full((6, 4), -3.0)):  # each side of halve_positive and clamp_large
        (got, label), (want, expected) = ep.module()(x), model(x)
        assert_same(got, want)
        assert label == expected
    report = unbranch.report_of(ep)
    first, refused, precise = report.attempts[:3]
    assert first.rewritten == ["halve_positive"]
    assert sorted(first.speculative) == sorted(refused.dropped) == ["clamp_large", "scale_small_positive"]
    assert "a side gives a Python float" in refused.error
    assert [rm.qualname for rm in precise.methods] == ["halve_positive"] and precise.rewritten == ["clamp_large"]
    assert not any(a.speculative for a in report.attempts[1:])
    assert sorted(rm.qualname for rm in report.rewritten) == ["clamp_large", "halve_positive"]
    assert "speculative rewrites dropped, the export with them failed: " in str(report)
