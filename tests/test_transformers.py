"""Tiny transformers models: export fails without unbranch, succeeds inside torch_export_rewrite(model).

Each model is built from a tiny local config (no download), in float16, with dynamic batch
and sequence; the exported program must match eager on the example inputs, on another
batch/sequence size, and on inputs or weights that take the other side of every rewritten
tensor ``if`` (checked by observing the rewritten code run eagerly).
"""

import pytest
import torch

import unbranch
from unbranch.hf.validate import validate

NEEDS_REWRITE = [
    "BartModel",
    "PLBartModel",
    "MarianMTModel",
    "MvpModel",
    "BlenderbotSmallModel",
    "LEDModel",
    "NllbMoeModel",
    "LongT5Model",
    "FSMTModel",
]


@pytest.mark.slow
@pytest.mark.parametrize("name", NEEDS_REWRITE)
def test_model_exports_only_with_unbranch(name):
    res = validate(name, torch.float16)
    assert res.plain != "ok", "plain export succeeded: the rewrite is not needed"
    assert res.rewritten == "ok", res.rewritten
    assert set(res.max_diff) >= {"example", "other shape"} and len(res.max_diff) == 3
    assert res.ok, res.max_diff
    if name == "FSMTModel":  # its catalogue hook removes the branch; the padded inputs cover it
        assert "flipped inputs" in res.max_diff and res.conds == 0
    else:
        assert res.conds >= 1 and res.both_sides, res.sides


@pytest.mark.slow
def test_strict_mode_on_a_real_model():
    res = validate("BartModel", torch.float16, strict=True)
    assert res.plain != "ok" and res.ok and res.both_sides


@pytest.mark.slow
def test_report_attributes_conds_to_methods():
    from unbranch.hf.zoo import MODELS

    tiny = MODELS["LongT5Model"]
    model, kwargs = tiny.build("LongT5Model", torch.float16), tiny.inputs(2, 7)
    with unbranch.torch_export_rewrite(model) as report:
        ep = torch.export.export(model, (), kwargs=kwargs, strict=False)
    assert report.conds(ep) == {"LongT5Block.forward": 5}


def test_code_needing_rewriting():
    from transformers.models.bart.modeling_bart import BartEncoderLayer

    specs = unbranch.code_needing_rewriting("BartForConditionalGeneration")
    assert [s["function"] for s in specs] == [BartEncoderLayer.__dict__["forward"]]
    assert unbranch.code_needing_rewriting(BartEncoderLayer) == specs
    assert unbranch.code_needing_rewriting("GPT2Model") is None
    led = unbranch.code_needing_rewriting("LEDForConditionalGeneration")
    assert {s["function"].__qualname__ for s in led} == {"LEDEncoderLayer.forward", "LEDEncoder.forward"}
    assert all(callable(s.get("pre_rewriter", len)) for s in led)


class Gate(torch.nn.Module):
    """A user's own layer, in no catalogue."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        if y.abs().max() > 1:  # renormalise large activations
            y = y / y.abs().max()
        return y


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.Sequential(Gate(), torch.nn.ReLU(), Gate())

    def forward(self, x, scale: float = 1.0):
        if scale != 1.0:
            x = x * scale
        return self.blocks(x)


@pytest.mark.parametrize("strict", [False, True])
def test_discovery_finds_an_uncatalogued_tensor_if(strict):
    from helpers import count_conds

    net = Net()
    x = torch.randn(3, 4)
    with pytest.raises(Exception, match="data-dependent|Data-dependent"):
        torch.export.export(net, (x,), dynamic_shapes=({0: torch.export.Dim.DYNAMIC},), strict=strict)
    with unbranch.torch_export_rewrite(net) as report:
        ep = torch.export.export(net, (x,), dynamic_shapes=({0: torch.export.Dim.DYNAMIC},), strict=strict)
    assert [rm.qualname for rm in report] == ["Gate.forward"]  # Net.forward's `scale` test is Python
    assert count_conds(ep) == 2 and report.conds(ep) == {"Gate.forward": 2}
    for inp in (torch.randn(5, 4) * 10, torch.randn(2, 4) * 0.01):
        torch.testing.assert_close(ep.module()(inp), net(inp))
    assert Gate.forward.__code__.co_filename == __file__
