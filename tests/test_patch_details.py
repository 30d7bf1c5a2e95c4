"""onnx-diagnostic's fourth parameter of torch_export_rewrite, patch_details: filled with what was rewritten."""

import inspect

import pytest
import torch

import unbranch
from unbranch import UnbranchError


class PatchDetails:
    """The interface of onnx-diagnostic's PatchDetails that its torch_export_rewrite calls."""

    def __init__(self):
        self.patched = []

    def append(self, family, function_to_patch, patch):
        self.patched.append((family, function_to_patch, patch))


class Flip(torch.nn.Module):
    def forward(self, x):
        if x.mean() < 0:
            return -x
        return x


flip = Flip.forward


def test_patch_details_positional_receives_each_rewritten_function():
    details = PatchDetails()
    x = torch.randn(4, 3)
    with unbranch.torch_export_rewrite([flip], None, 0, details) as report:  # the peer's positional order
        assert details.patched == []  # filled on exit, with what the exports rewrote too
        ep = torch.export.export(Flip(), (x,), dynamic_shapes=({0: torch.export.Dim.DYNAMIC},))
    ((family, original, patch),) = details.patched
    assert family == "unbranch" and original is flip and patch is not flip
    # what the peer's PatchInfo.make_diff reads: the source of both
    assert "if x.mean() < 0:" in inspect.getsource(original)
    assert "_ub.if_stmt(x.mean() < 0, branch_cond_then_1" in inspect.getsource(patch)
    assert report.conds(ep) == {"Flip.forward": 1}  # which graph nodes it produced
    for sample in (x, -x.abs()):
        torch.testing.assert_close(patch(Flip(), sample), flip(Flip(), sample))


def test_patch_details_filled_when_the_export_fails():
    details = PatchDetails()
    with pytest.raises(RuntimeError, match="boom"):
        with unbranch.torch_export_rewrite(rewrite=[flip], patch_details=details):
            raise RuntimeError("boom")
    assert [p[1] for p in details.patched] == [flip]


@pytest.mark.parametrize("given", [[], "details", 3])
def test_patch_details_of_another_kind_is_refused(given):
    with pytest.raises(UnbranchError, match="expects patch_details to be onnx-diagnostic's PatchDetails"):
        unbranch.torch_export_rewrite([flip], patch_details=given)
