"""Tiny transformers models: export fails without unbranch, succeeds inside torch_export_rewrite(model).

Each model is built from a tiny local config (no download), in float16, with dynamic batch
and sequence; the exported program must match eager on the example inputs, on another
batch/sequence size, and on inputs or weights that take the other side of every rewritten
tensor ``if`` (checked by observing the rewritten code run eagerly).
"""

import copy

import pytest
import torch
from helpers import ONE_CLAMP_FLIPPED

import unbranch
from unbranch.hf.validate import validate

ONNX_VALIDATED = {"BartModel", "LEDModel", "LongT5Model"}  # (NllbMoe: its ONNX check differs, test_onnx.py)
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
def test_model_exports_only_with_unbranch(name, validated):
    # (the models test_onnx.py also converts: their ONNX validation, whose exports and comparisons with
    # eager are these, serves both)
    res = validated(name, torch.float16, onnx=name in ONNX_VALIDATED)
    assert res.plain != "ok", "plain export succeeded: the rewrite is not needed"
    assert res.rewritten == "ok", res.rewritten
    assert set(res.max_diff) >= {"example", "other shape"} and len(res.max_diff) == 3
    assert res.ok, res.max_diff
    if name == "FSMTModel":  # its catalogue hook removes the branch; the padded inputs cover it
        assert "flipped inputs" in res.max_diff and res.conds == 0
    else:
        assert res.conds >= 1 and (res.both_sides or (name in ONE_CLAMP_FLIPPED and res.flipped)), res.sides


@pytest.mark.slow
def test_strict_mode_on_a_real_model(validated):
    res = validated("BartModel", torch.float16, strict=True)
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
    from helpers import count_branches

    net = Net()
    x = torch.randn(3, 4)
    with pytest.raises(Exception, match="data-dependent|Data-dependent"):
        torch.export.export(net, (x,), dynamic_shapes=({0: torch.export.Dim.DYNAMIC},), strict=strict)
    with unbranch.torch_export_rewrite(net) as report:
        ep = torch.export.export(net, (x,), dynamic_shapes=({0: torch.export.Dim.DYNAMIC},), strict=strict)
    assert [rm.qualname for rm in report] == ["Gate.forward"]  # Net.forward's `scale` test is Python
    assert count_branches(ep) == 2 and report.conds(ep) == {"Gate.forward": 2}
    for inp in (torch.randn(5, 4) * 10, torch.randn(2, 4) * 0.01):
        torch.testing.assert_close(ep.module()(inp), net(inp))
    assert Gate.forward.__code__.co_filename == __file__


def _experts(name):
    """A tiny MoE experts layer of ``name``'s family, random weights, and its config."""
    from unbranch.hf import factory

    config = factory.tiny_config(factory.model_class(name).config_class)
    config = getattr(config, "text_config", config)
    layer = factory.model_class(name)(config).layers[0].mlp.experts
    torch.manual_seed(0)
    for p in layer.parameters():
        torch.nn.init.normal_(p, std=0.2)
    return layer.eval()


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, experts",
    [("OpenAIPrivacyFilterModel", "num_experts"), ("LongcatFlashModel", "total_experts")],
)
def test_expert_loop_over_hit_experts_exports_with_its_catalogue_hook(name, experts):
    # `for e in <experts .nonzero() hit>` has a data-dependent trip count; the hook visits every expert
    layer = _experts(name)
    n = getattr(layer, experts)
    dyn = torch.export.Dim.DYNAMIC

    def inputs(tokens, hit):  # top-2 routing onto the experts in `hit` only
        g = torch.Generator().manual_seed(tokens)
        index = torch.stack([torch.tensor(hit)[torch.randperm(len(hit), generator=g)[:2]] for _ in range(tokens)])
        return torch.randn(tokens, layer.hidden_size, generator=g), index, torch.rand(tokens, 2, generator=g)

    example = inputs(5, list(range(n)))
    shapes = ({0: dyn}, {0: dyn}, {0: dyn})
    with pytest.raises(Exception, match="data-dependent"):
        torch.export.export(layer, example, dynamic_shapes=shapes, strict=False)
    with unbranch.torch_export_rewrite(layer):
        ep = torch.export.export(layer, example, dynamic_shapes=shapes, strict=False)
    for case in (inputs(9, list(range(n))), inputs(7, [0, 1]), inputs(3, [n - 2, n - 1])):  # some experts idle
        with torch.no_grad():
            torch.testing.assert_close(ep.module()(*case), layer(*case))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["NllbMoeModel", "SwitchTransformersModel"])
@pytest.mark.parametrize("strict", [False, True])
def test_float16_router_exports_before_any_eager_call(name, strict):
    # the router casts its classifier to float32 by re-assigning it inside forward, which export cannot trace
    from unbranch.hf import factory

    cls = factory.model_class(name)
    torch.manual_seed(0)
    model = cls(factory.tiny_config(cls.config_class)).eval().to(torch.float16)
    routers = [m for m in model.modules() if type(m).__name__.endswith("Router")]
    example, shapes = factory.make_inputs(model)
    with pytest.raises(Exception, match="swap|Parameter|data-dependent"):  # NllbMoe: its clamp first
        torch.export.export(model, (), kwargs=example, dynamic_shapes=shapes, strict=strict)
    with unbranch.torch_export_rewrite(model):
        ep = torch.export.export(model, (), kwargs=example, dynamic_shapes=shapes, strict=strict)
    assert routers and {r.classifier.weight.dtype for r in routers} == {torch.float16}  # the model is as it was
    other, _ = factory.make_inputs(model, batch=3, seq=5)
    eager = copy.deepcopy(model)  # its first call casts the classifiers' weights, which the program shares
    for case in (example, other):
        with torch.no_grad():
            torch.testing.assert_close(ep.module()(**case), eager(**case))


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, strict", [("Qwen3VLVisionModel", False), ("Qwen3VLVisionModel", True), ("Glm4vVisionModel", False)]
)
def test_attention_split_per_image_exports_as_one_masked_attention(name, strict):
    # eagerly the attention splits the patches per image at lengths read from grid_thw (data)
    from unbranch.hf import factory

    model, example, _ = factory.tiny_model(name)
    width = example["hidden_states"].shape[1]

    def images(grids):  # patches of len(grids) images of (t, h, w) patches each
        g = torch.tensor(grids)
        n = int(g.prod(-1).sum())
        return {"hidden_states": torch.randn(n, width, generator=torch.Generator().manual_seed(n)), "grid_thw": g}

    shapes = {"hidden_states": {0: torch.export.Dim.DYNAMIC}, "grid_thw": None}  # the image count is static
    example = images([[1, 4, 4], [1, 2, 4]])
    with pytest.raises(Exception, match="data-dependent"):
        torch.export.export(model, (), kwargs=example, dynamic_shapes=shapes, strict=strict)
    with unbranch.torch_export_rewrite(model):
        ep = torch.export.export(model, (), kwargs=example, dynamic_shapes=shapes, strict=strict)
    for grids in ([[1, 4, 4], [1, 2, 4]], [[1, 2, 2], [1, 4, 4]], [[1, 4, 2], [1, 2, 4]]):
        with torch.no_grad():
            got, want = ep.module()(**images(grids)), model(**images(grids))
        torch.testing.assert_close(got.last_hidden_state, want.last_hidden_state)
        torch.testing.assert_close(got.pooler_output, want.pooler_output)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        "MimiEncoderModel",  # conv padding computed from kernel/stride buffers: the hook reads the conv's ints
        "PocketTTSAudioTokenizerEncoderModel",
        "EncodecModel",  # and its `range(0, n, n)` chunk loop
        "FastSpeech2ConformerModel",  # position encodings cached up to a length, the output length being data
    ],
)
def test_sizes_kept_as_data_export_with_catalogue_hooks(name):
    res = validate(name, torch.float32)
    assert res.plain_control_flow and res.rewritten == "ok", (res.plain, res.rewritten)
    assert {"example", "other shape"} <= set(res.max_diff) and res.ok, res.max_diff  # two waveform lengths
