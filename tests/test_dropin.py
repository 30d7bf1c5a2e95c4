"""Drop-in for onnx-diagnostic: its call shapes, its keywords and its class names work unchanged.

The names are those onnx-diagnostic's ``code_needing_rewriting`` answers for (every version
of its list); each catalogue entry they lead to is exported here on a tiny layer built
locally, both sides of its branch, dynamic batch and sequence, non-strict and strict.
"""

import importlib

import pytest
import sample_user
import torch
import transformers
from helpers import MODES, assert_same, count_branches
from torch.export import Dim

import unbranch
from unbranch import UnbranchError

PEER_NAMES = [
    *("AutoformerEncoder", "AutoformerEncoderLayer", "AutoformerForPrediction", "AutoformerModel"),
    *("BartEncoderLayer", "BartForConditionalGeneration", "BartModel"),
    *("BigBirdPegasusEncoderLayer", "BigBirdPegasusForConditionalGeneration"),
    *("BigBirdPegasusForQuestionAnswering", "BigBirdPegasusForCausalLM"),
    *("BlenderbotSmallEncoderLayer", "BlenderbotSmallForConditionalGeneration", "BlenderbotSmallForCausalLM"),
    *("InformerEncoderLayer", "InformerForPrediction"),
    *("LEDEncoderLayer", "LEDClassificationHead", "LEDForConditionalGeneration"),
    *("MarianEncoderLayer", "MarianEncoder", "MarianModel", "MarianMTModel"),
    *("MvpEncoderLayer", "MvpPrompt", "MvpForConditionalGeneration", "MvpForSequenceClassification"),
    *("MvpForQuestionAnswering", "MvpForCausalLM"),
    *("NllbMoeEncoderLayer", "NllbMoeForConditionalGeneration"),
    *("PLBartEncoderLayer", "PLBartForConditionalGeneration"),
    *("TimeSeriesTransformerEncoderLayer", "TimeSeriesTransformerForPrediction"),
]
CLAMP = "if hidden_states.dtype == torch.float16 and not torch.isfinite(hidden_states).all():"


@pytest.mark.parametrize("name", PEER_NAMES)
def test_every_peer_name_gets_the_encoder_layer_clamp(name):
    specs = unbranch.code_needing_rewriting(name)
    layers = [s["function"] for s in specs if s["function"].__qualname__.endswith("EncoderLayer.forward")]
    assert len(layers) == 1, specs
    assert CLAMP in unbranch.transform_method(layers[0]).original_code


def test_vit_is_known_with_nothing_to_rewrite():
    from unbranch.hf.zoo import MODELS

    assert unbranch.code_needing_rewriting("ViTModel") == [] and unbranch.code_needing_rewriting("Nope") is None
    tiny = MODELS["ViTModel"]
    model, kwargs = tiny.build("ViTModel"), tiny.inputs(2, 0)
    plain = torch.export.export(model, (), kwargs=kwargs, dynamic_shapes=tiny.dynamic_shapes(kwargs))
    with unbranch.torch_export_rewrite(rewrite=[*unbranch.code_needing_rewriting("ViTModel"), model]) as report:
        ep = torch.export.export(model, (), kwargs=kwargs, dynamic_shapes=tiny.dynamic_shapes(kwargs))
    # (discovery reaches transformers' mask helpers, which ViT does not run: nothing of ViT's own)
    assert not [rm for rm in report if "ViT" in rm.qualname] and str(ep.graph) == str(plain.graph)
    other = tiny.inputs(3, 0)
    assert_same(ep.module()(**other).last_hidden_state, model(**other).last_hidden_state)


class Layer(torch.nn.Module):
    """One encoder layer, called as its encoder calls it (no attention mask)."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, hidden_states):
        out = self.layer(hidden_states, attention_mask=None)
        return out[0] if isinstance(out, tuple) else out


def _layer(prefix: str, module: str, dtype, **extra) -> Layer:
    config = getattr(transformers, prefix + "Config")(
        prediction_length=4, d_model=16, encoder_attention_heads=2, encoder_ffn_dim=32, dropout=0.0, **extra
    )
    torch.manual_seed(0)
    cls = getattr(importlib.import_module(f"transformers.models.{module}.modeling_{module}"), prefix + "EncoderLayer")
    return Layer(cls(config)).eval().to(dtype)


def _inputs(dtype):
    return [torch.randn(b, s, 16, generator=torch.Generator().manual_seed(s)).to(dtype) for b, s in ((2, 7), (3, 5))]


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize(
    "prefix, module, extra",
    [
        ("Informer", "informer", {"attention_type": "full"}),
        ("TimeSeriesTransformer", "time_series_transformer", {}),
    ],
)
def test_new_catalogue_layers_export_both_sides_in_float16(prefix, module, extra, strict):
    model, (example, other) = _layer(prefix, module, torch.float16, **extra), _inputs(torch.float16)
    dynamic = ({0: Dim.DYNAMIC, 1: Dim.DYNAMIC},)
    with pytest.raises(Exception, match="data-dependent|Data-dependent"):
        torch.export.export(model, (example,), dynamic_shapes=dynamic, strict=strict)
    with unbranch.torch_export_rewrite(rewrite=unbranch.code_needing_rewriting(prefix + "ForPrediction")):
        ep = torch.export.export(model, (example,), dynamic_shapes=dynamic, strict=strict)
    assert count_branches(ep) == 1
    for x in (example, other):
        assert_same(ep.module()(x), model(x))
    with torch.no_grad():  # overflow before the clamp: the other side of the branch
        model.layer.final_layer_norm.weight.fill_(60000.0)
    assert not torch.isfinite(model.layer.final_layer_norm(example)).all()
    for x in (example, other):
        assert_same(ep.module()(x), model(x))
        assert torch.isfinite(model(x)).all()


def test_autoformer_layer_is_rewritten_without_changing_its_float32_graph():
    # its autocorrelation runs an FFT, which CPU torch has no float16 kernel for: the float16
    # side of the clamp cannot run here; in float32 the rewrite must leave the graph as it was
    # (dynamic batch: the autocorrelation's top-k specialises the sequence length, plain or not)
    model, (example, _) = _layer("Autoformer", "autoformer", torch.float32), _inputs(torch.float32)
    other = torch.randn(5, 7, 16)
    dynamic = ({0: Dim.DYNAMIC},)
    plain = torch.export.export(model, (example,), dynamic_shapes=dynamic)
    with unbranch.torch_export_rewrite(rewrite=unbranch.code_needing_rewriting("AutoformerModel")) as report:
        ep = torch.export.export(model, (example,), dynamic_shapes=dynamic)
    assert len(report) == 1 and str(ep.graph) == str(plain.graph)
    assert_same(ep.module()(other), model(other))


class Mixed(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            x = x * 2
        return sample_user.squash(x) + Plain.twice(x)


class Plain:
    @staticmethod
    def twice(x):
        if x.mean() < 0:
            return -x
        return x


@pytest.mark.parametrize("strict", MODES)
def test_model_as_rewrite_keyword_positional_and_in_a_list(strict, tmp_path, capsys):
    model = sample_user.Recurrent()
    names = []
    for call in (
        lambda: unbranch.torch_export_rewrite(model),
        lambda: unbranch.torch_export_rewrite(rewrite=model),
        lambda: unbranch.torch_export_rewrite(rewrite=[model]),
    ):
        with call() as report:
            names.append(sorted(rm.qualname for rm in report))
            ep = torch.export.export(
                model, (sample_user.inputs(4)[0],), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict
            )
        for x in sample_user.inputs(6):
            assert_same(ep.module()(x), model(x))
    assert names == [["Recurrent.forward", "squash"]] * 3


def test_mixed_rewrite_list_dump_and_verbose(tmp_path, capsys):
    chosen = []

    def keep(node):
        chosen.append(node)
        return True

    m = Mixed()
    rewrite = [
        sample_user.Recurrent(),
        (Mixed, "forward"),
        Plain.twice,
        {"function": sample_user.squash, "filter_node": keep},
    ]
    with unbranch.torch_export_rewrite(rewrite=rewrite, dump_rewriting=str(tmp_path), verbose=1) as report:
        ep = torch.export.export(m, (torch.randn(3, 4),), dynamic_shapes=({0: Dim.DYNAMIC},))
    assert sorted(rm.qualname for rm in report) == ["Mixed.forward", "Plain.twice", "Recurrent.forward", "squash"]
    assert chosen, "the dict's filter_node was not used"
    assert count_branches(ep) == 3
    for x in (torch.ones(2, 4) * 3, -torch.ones(5, 4), torch.full((3, 4), 0.1)):
        assert_same(ep.module()(x), m(x))
    out = capsys.readouterr().out
    assert all(f"[unbranch] rewrote {name}" in out for name in ("Mixed.forward", "Plain.twice", "squash"))
    assert {p.name for p in tmp_path.iterdir()} >= {"squash.rewritten.py", "squash.original.py", "squash.diff"}


def test_peer_positional_order(tmp_path, capsys):
    with unbranch.torch_export_rewrite([Plain.twice], str(tmp_path), 1) as report:  # rewrite, dump_rewriting, verbose
        assert [rm.qualname for rm in report] == ["Plain.twice"]
    assert (tmp_path / "Plain.twice.diff").exists() and "rewrote Plain.twice" in capsys.readouterr().out


def test_transform_method_with_every_peer_keyword(capsys):
    seen = []

    def pre(fn):
        seen.append("pre")
        return fn

    def post(fn):
        seen.append("post")
        return fn

    rm = unbranch.transform_method(
        Plain.twice, prefix="cut", verbose=2, filter_node=lambda node: True, pre_rewriter=pre, post_rewriter=post
    )
    assert seen == ["pre", "post"] and "def cut_then_1(" in rm.code
    out = capsys.readouterr().out
    assert "rewrote Plain.twice" in out and "(unbranch)" in out  # verbose=2 prints the diff
    positional = unbranch.transform_method(Plain.twice, "cut", 0)
    assert positional.code == rm.code
    for x in (torch.ones(3), -torch.ones(3)):
        assert_same(rm.func(x), Plain.twice(x))


@pytest.mark.parametrize(
    "call, given, accepted",
    [
        (lambda: unbranch.transform_method(Plain.twice, verbos=1), "verbos", "verbose"),
        (lambda: unbranch.transform_method(Plain.twice, "p", 0, None, None, None, "extra"), "'extra'", "post_rewriter"),
        (lambda: unbranch.transform_method(Plain.twice, prefix=3), "3", "str"),
        (lambda: unbranch.transform_method(Plain.twice, filter_node="x > 0"), "'x > 0'", "callable"),
        (lambda: unbranch.torch_export_rewrite(rewrite=[Plain.twice], dump="d"), "dump", "dump_rewriting"),
        (lambda: unbranch.torch_export_rewrite(rewrite=[42]), "42", "nn.Module"),
        (lambda: unbranch.torch_export_rewrite(rewrite=[(Plain, "nope")]), "'nope'", "Plain"),
        (
            lambda: unbranch.torch_export_rewrite(rewrite=[{"function": Plain.twice, "filter": 1}]),
            "filter",
            "filter_node",
        ),
        (lambda: unbranch.torch_export_rewrite(rewrite=[Plain.twice], verbose="yes"), "'yes'", "int"),
        (lambda: unbranch.torch_export_rewrite(model=[Plain.twice]), "Plain.twice", "nn.Module"),
    ],
)
def test_wrong_arguments_raise_unbranch_error_naming_both_sides(call, given, accepted):
    code = Plain.twice.__code__
    with pytest.raises(UnbranchError) as info:
        with call():
            pass
    assert given in str(info.value) and accepted in str(info.value)
    assert Plain.twice.__code__ is code
