"""Programs exported with unbranch convert to ONNX and run in onnxruntime like eager.

cond -> If, scan -> Scan/Loop, while_loop -> Loop; every comparison uses inputs that take
each side of the branch (or each loop exit) and a shape other than the export example's.
"""

import warnings

import pytest
import torch
from helpers import ONE_CLAMP_FLIPPED, export_rewritten
from torch.export import Dim

for _module in ("onnx", "onnxscript", "onnx_ir", "onnxruntime"):
    pytest.importorskip(_module, reason="the onnx extra is not installed (pip install 'unbranch[onnx]')")

import onnx_ir  # noqa: E402
import onnxruntime  # noqa: E402

import unbranch.onnx  # noqa: E402

DYN0 = ({0: Dim.DYNAMIC},)


def convert(model, example, dynamic_shapes=DYN0, **options):
    """Export inside the rewrite, convert; (ONNX op types, a function running onnxruntime)."""
    ep = export_rewritten(model, example, strict=False, dynamic_shapes=dynamic_shapes)
    program = unbranch.onnx.export(ep, **options)
    session = onnxruntime.InferenceSession(program.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]

    def run(*args):
        outputs = session.run(None, {n: a.numpy() for n, a in zip(names, args)})
        return tuple(torch.from_numpy(o) for o in outputs)

    ops = [n.op_type for n in onnx_ir.traversal.RecursiveGraphIterator(program.model.graph)]
    return ops, run


def assert_like_eager(run, model, *args):
    expected = model(*args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    torch.testing.assert_close(run(*args), expected)


class Renormalise(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        if y.abs().max() > 1:
            y = y / y.abs().max()
        return y


def test_if_becomes_onnx_if_and_takes_both_sides():
    model = Renormalise()
    ops, run = convert(model, (torch.randn(3, 4),))
    assert ops.count("If") == 1
    big, small = torch.randn(5, 4) * 10, torch.randn(2, 4) * 0.01
    assert bool((big * 2).abs().max() > 1) and not bool((small * 2).abs().max() > 1)
    for x in (big, small):
        assert_like_eager(run, model, x)


def test_a_failed_conversion_names_the_control_flow(monkeypatch):
    ep = export_rewritten(Renormalise(), (torch.randn(3, 4),), strict=False, dynamic_shapes=DYN0)

    def fails(*args, **kwargs):
        raise RuntimeError("## Exception summary\n\nPendingUnbackedSymbolNotFound: u12")

    monkeypatch.setattr(torch.onnx, "export", fails)
    with pytest.raises(unbranch.UnbranchError, match=r"with cond \(cond\): PendingUnbackedSymbolNotFound: u12"):
        unbranch.onnx.export(ep)


class Guarded(torch.nn.Module):
    def forward(self, x):
        if (x > 100).any():
            raise ValueError("input out of range")
        return x.cumsum(0)


def test_a_check_onnx_cannot_keep_is_reported():
    model = Guarded()
    with pytest.warns(unbranch.onnx.DroppedChecksWarning, match="input out of range"):
        ops, run = convert(model, (torch.randn(3, 4),))
    assert_like_eager(run, model, torch.randn(6, 4))
    bad = torch.full((2, 4), 500.0)
    with pytest.raises(ValueError, match="input out of range"):
        model(bad)
    assert torch.equal(run(bad)[0], bad.cumsum(0))  # what the warning says: ONNX returns values instead


class CheckedCount(torch.nn.Module):
    def forward(self, x):
        n = (x > 0).sum().item()
        torch._check(n <= x.shape[0] * x.shape[1])  # a check on data: an _assert_scalar ONNX cannot keep
        return x * n


def test_data_dependent_assertions_onnx_cannot_keep_are_counted():
    model = CheckedCount()
    ep = export_rewritten(model, (torch.randn(3, 4),), strict=False, dynamic_shapes=DYN0)
    count = len(unbranch.onnx.dropped_checks(ep)[1])
    assert count >= 1
    with pytest.warns(unbranch.onnx.DroppedChecksWarning, match=f"Checks: none; data-dependent assertions: {count}$"):
        program = unbranch.onnx.export(ep)
    x = torch.randn(5, 4)
    session = onnxruntime.InferenceSession(program.model_proto.SerializeToString())
    got = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
    torch.testing.assert_close(torch.from_numpy(got), model(x))  # another size than the example's


def test_no_warning_without_checks():
    with warnings.catch_warnings():
        warnings.simplefilter("error", unbranch.onnx.DroppedChecksWarning)
        convert(Renormalise(), (torch.randn(3, 4),))


class RunningSum(torch.nn.Module):
    def forward(self, x):
        acc = torch.zeros(x.shape[1])
        for i in range(x.shape[0]):
            acc += torch.tanh(x[i]) * 2
        return acc


def test_for_becomes_scan_or_loop():
    model = RunningSum()
    ops, run = convert(model, (torch.randn(5, 4),))
    assert {"Scan", "Loop"} & set(ops)
    for n in (1, 2, 9):  # a single step, and lengths other than the example's
        assert_like_eager(run, model, torch.randn(n, 4))


class DoubleUntil(torch.nn.Module):
    def forward(self, x):
        while x.abs().sum() < 100:
            x = x * 2 + 1
        return x


def test_while_becomes_loop_for_each_exit():
    model = DoubleUntil()
    ops, run = convert(model, (torch.rand(3, 2),))
    assert "Loop" in ops
    assert_like_eager(run, model, torch.rand(5, 2))  # several iterations, another shape
    assert_like_eager(run, model, torch.full((2, 2), 40.0))  # none: the condition is false at once


class Overflow(torch.nn.Module):
    """The float16 clamp of transformers' encoder layers, after a residual add that may overflow."""

    def forward(self, x, y):
        h = x + y
        if torch.isinf(h).any():
            h = torch.clamp(h, min=-64504.0, max=64504.0)
        return h


@pytest.mark.parametrize("fix", [True, False])
def test_float16_overflow_in_onnxruntime(fix):
    model = Overflow()
    x = torch.tensor([[60000.0, 1.0], [-2.0, 3.0]], dtype=torch.float16)
    ops, run = convert(model, (x, x), dynamic_shapes=(DYN0[0], DYN0[0]), onnxruntime_float16=fix)
    finite = torch.tensor([[1.0, 2.0]], dtype=torch.float16)
    assert_like_eager(run, model, finite, finite)
    if fix:
        assert_like_eager(run, model, x, x)  # 120000 overflows float16: clamped to 64504
    else:  # onnxruntime's CPU provider skips the float16 rounding before IsInf: no clamp, inf
        assert torch.isinf(run(x, x)[0]).any() and not torch.isinf(model(x, x)).any()


def if_conditions(program_model, session_inputs: dict) -> list[bool]:
    """The condition of every top-level ONNX If, when onnxruntime runs ``session_inputs``."""
    model = onnx_ir.from_proto(onnx_ir.to_proto(program_model))  # a copy to add outputs to
    conditions = unbranch.onnx.if_conditions_as_outputs(model)
    session = onnxruntime.InferenceSession(onnx_ir.to_proto(model).SerializeToString())
    return [bool(o) for o in session.run(conditions, session_inputs)]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["BartModel", "LEDModel", "LongT5Model"])
def test_float16_model_in_onnxruntime(name, validated):
    res = validated(name, torch.float16, onnx=True)
    assert res.onnx == "ok" and res.onnx_ops.get("If", 0) == res.conds >= 1
    assert set(res.onnx_diff) == {"example", "other shape", "flipped weights"}
    assert res.ok and (res.both_sides or (name in ONE_CLAMP_FLIPPED and res.flipped)), (res.onnx_diff, res.sides)


@pytest.mark.slow
def test_nllb_moe_float16_in_onnxruntime(validated):
    """NllbMoe's flipped weights saturate every activation: the values then diverge in float32 too,
    without any cond (0.023). What onnxruntime must get right there is the side of each If."""
    from unbranch.hf.zoo import MODELS

    res = validated("NllbMoeModel", torch.float16, onnx=True)
    assert res.onnx == "ok" and res.onnx_ops.get("If", 0) == res.conds >= 1 and res.both_sides
    assert res.onnx_diff["example"] <= 2e-2 and res.onnx_diff["other shape"] <= 2e-2
    assert res.dropped_assertions == 4  # the router's .item() range assertions
    # the clamp runs exactly when the weights overflow float16 (the flipped model converted on its own),
    # and onnxruntime's outputs stay finite there (an inf or NaN eager has not is an infinite difference)
    assert res.onnx_then["example"] == res.onnx_then["other shape"] == 0 < res.onnx_then["flipped weights"]
    assert res.onnx_diff["flipped weights"] < float("inf")
    tiny = MODELS["NllbMoeModel"]
    flipped = tiny.build("NllbMoeModel", torch.float16)
    assert tiny.flip_model(flipped)
    with torch.no_grad():
        expected = flipped(**tiny.inputs(2, 11))  # the inputs of validate's "flipped weights"
    assert all(torch.isfinite(t).all() for t in (expected.last_hidden_state, expected.encoder_last_hidden_state))


# NllbMoe configs beyond the zoo's (issue 44): expert counts, capacities, sparse steps, the mask given
# or left out; its conds follow the router's .item()s, whose unbacked symbols must not leak into them
NLLB_CONFIGS = [
    pytest.param(dict(num_experts=4, expert_capacity=8, encoder_sparse_step=2, decoder_sparse_step=2), True, id="4x8"),
    pytest.param(dict(num_experts=2, expert_capacity=4, encoder_sparse_step=1, decoder_sparse_step=1), False, id="2x4"),
    pytest.param(
        dict(num_experts=8, expert_capacity=16, encoder_sparse_step=2, decoder_sparse_step=1), True, id="8x16"
    ),
]


def _nllb_inputs(batch, seq, dec, mask, seed):
    g = torch.Generator().manual_seed(seed)
    kwargs = {"input_ids": torch.randint(3, 99, (batch, seq), generator=g)}
    if mask:
        kwargs["attention_mask"] = torch.ones(batch, seq, dtype=torch.long)
    kwargs["decoder_input_ids"] = torch.randint(3, 99, (batch, dec), generator=g)
    return kwargs


@pytest.mark.slow
@pytest.mark.parametrize("routing, mask", NLLB_CONFIGS)
def test_nllb_moe_configs_convert_and_match_eager_in_onnxruntime(routing, mask):
    import transformers

    config = transformers.NllbMoeConfig(
        vocab_size=99, d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64,
        use_cache=False, **routing,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.NllbMoeModel(config).eval().to(torch.float16)
    program = _nllb_onnx(model, mask)
    assert sum(n.op_type == "If" for n in program.model.graph) >= 1
    session = onnxruntime.InferenceSession(program.model_proto.SerializeToString())
    for batch, seq, dec in ((2, 7, 5), (3, 11, 4)):  # the example's sizes and others
        kwargs = _nllb_inputs(batch, seq, dec, mask, seed=batch)
        with torch.no_grad():
            expected = model(**kwargs).last_hidden_state.float()
        got = torch.from_numpy(session.run(None, {k: v.numpy() for k, v in kwargs.items()})[0]).float()
        assert (got - expected).abs().max() <= 2e-2
        assert not any(if_conditions(program.model, {k: v.numpy() for k, v in kwargs.items()}))
    if routing["num_experts"] == 4:  # the config: weights that overflow float16 take the clamp side
        from unbranch.hf.zoo import MODELS

        assert MODELS["NllbMoeModel"].flip_model(model)
        flipped = _nllb_onnx(model, mask)
        feeds = {k: v.numpy() for k, v in _nllb_inputs(2, 9, 5, mask, seed=5).items()}
        assert any(if_conditions(flipped.model, feeds))
        outputs = onnxruntime.InferenceSession(flipped.model_proto.SerializeToString()).run(None, feeds)
        assert all(torch.isfinite(torch.from_numpy(o)).all() for o in outputs)


def _nllb_onnx(model, mask):
    example = _nllb_inputs(2, 7, 5, mask, seed=0)
    shapes = {name: {0: Dim.DYNAMIC, 1: Dim.DYNAMIC} for name in example}
    with unbranch.torch_export_rewrite(model):
        ep = torch.export.export(model, (), kwargs=example, dynamic_shapes=shapes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", unbranch.onnx.DroppedChecksWarning)  # the router's .item() ranges
        return unbranch.onnx.export(ep)
