"""The tiny-model factory, validate on any model, and the sweep's outcomes, resume and shards."""

import json
import os
import re

import pytest
import torch
import transformers

from unbranch.cli import main
from unbranch.hf import factory, sweep
from unbranch.hf.validate import Result, grown, validate


def test_tiny_config_keeps_what_the_code_divides_by():
    config = factory.tiny_config(transformers.Gemma3TextConfig)
    assert config.hidden_size == 32 and config.num_hidden_layers == 2
    assert config.head_dim * config.num_attention_heads == config.hidden_size
    assert config.num_attention_heads % config.num_key_value_heads == 0
    assert len(config.layer_types) == config.num_hidden_layers  # per-layer list follows the count
    ids = [config.pad_token_id, config.bos_token_id, config.eos_token_id]
    assert all(i is None or 0 <= i < config.vocab_size for i in ids)  # specials index the tiny table


def test_multimodal_rotary_sections_fit_the_tiny_head():
    config = factory.tiny_config(transformers.Qwen2VLConfig).text_config
    head_dim = config.hidden_size // config.num_attention_heads
    assert sum(config.rope_parameters["mrope_section"]) == head_dim // 2


def test_unnamed_sizes_equal_to_a_shrunk_width_shrink_with_it():
    values = transformers.Dots3NoteConfig().to_dict()  # adapter_in_dim == hidden_size (validated)
    d = factory._shrink(values, seen := {})
    factory._consistent(d, seen)
    assert d["vision_config"]["adapter_in_dim"] == d["vision_config"]["hidden_size"] == factory.WIDTH
    assert d["vision_config"]["adapter_out_dim"] == d["text_config"]["hidden_size"]
    mimi = factory.tiny_config(transformers.MimiConfig)  # a depthwise upsampling: one group per channel
    assert mimi.upsample_groups == mimi.hidden_size == factory.WIDTH


def test_per_layer_lists_keep_every_kind_of_layer():
    assert factory._every_kind(["window"] * 7 + ["full"], 2) == ["window", "full"]
    assert factory._every_kind(["a", "a", "a"], 2) == ["a", "a"]
    config = factory.tiny_config(transformers.NeoMMEConfig)  # needs a full-attention layer
    assert "full_attention" in str(config.to_dict())


def test_a_size_of_zero_stays_off():
    config = factory.tiny_config(transformers.Glm5NextConfig)  # its DSA layers want no rotary part
    assert config.text_config.qk_rope_head_dim == 0


def test_input_variants_until_the_model_runs():
    model, kwargs, _ = factory.tiny_model("DacModel")  # a codec: waveforms (batch, 1, time)
    assert kwargs["input_values"].dim() == 3
    model, kwargs, _ = factory.tiny_model("Qwen2_5_VisionTransformerPretrainedModel")  # flattened patches + grid
    assert kwargs["hidden_states"].shape[0] == int(kwargs["grid_thw"].prod())


def test_model_class_from_a_config_class_name():
    assert factory.model_class("GemmaConfig") is transformers.GemmaModel
    assert factory.model_class("GemmaModel") is transformers.GemmaModel
    assert factory.model_class("NoSuchModel") is None


def test_grown_changes_dynamic_dimensions_only_and_consistently():
    inputs = {"ids": torch.arange(14).reshape(2, 7), "mask": torch.ones(2, 7), "pixels": torch.zeros(2, 3, 8, 8)}
    dyn = torch.export.Dim.DYNAMIC
    out = grown(inputs, {"ids": {0: dyn, 1: dyn}, "mask": {0: dyn, 1: dyn}, "pixels": {0: dyn}})
    assert out["ids"].shape == out["mask"].shape == (6, 11) and out["pixels"].shape == (6, 3, 8, 8)
    assert out["ids"][0, 7].item() == 0 and out["ids"][2, 0].item() == 0  # values repeat cyclically


FAMILIES = [
    "GemmaModel",  # decoder-only text
    "MixtralModel",  # mixture of experts
    "DeiTModel",  # vision
    "Wav2Vec2Model",  # audio waveform
    "MarianModel",  # encoder-decoder
    "PatchTSTModel",  # time series
]


@pytest.mark.slow
@pytest.mark.parametrize("name", FAMILIES)
def test_factory_builds_a_model_that_exports(name):
    model, kwargs, shapes = factory.tiny_model(name)
    assert sum(p.numel() for p in model.parameters()) < 2_000_000
    ep = torch.export.export(model, (), kwargs=kwargs, dynamic_shapes=shapes)
    other = grown(kwargs, shapes)
    with torch.no_grad():
        expected = model(**other)
    torch.testing.assert_close(ep.module()(**other), expected, equal_nan=True)


def _result(**fields) -> Result:
    return Result("M", "float32", **fields)


OK = {"example": 0.0, "other shape": 0.0}
GUARD = dict(plain="GuardOnDataDependentSymNode: ...", plain_control_flow=True)


@pytest.mark.parametrize(
    "fields, outcome",
    [
        (dict(plain="ok", rewritten="ok", plain_diff=OK, max_diff=OK), "no-harm"),
        (dict(plain="Guard...", plain_control_flow=True, rewritten="ok", max_diff=OK), "fixed"),
        (
            dict(plain="Guard...", plain_control_flow=True, rewritten="UnbranchError: x", rewritten_where="m.py:3"),
            "not fixed",
        ),
        (dict(plain="Guard...", plain_control_flow=True, rewritten="ok", max_diff={"example": 0.5}), "not fixed"),
        (dict(plain="ok", rewritten="UnbranchError: x", plain_diff=OK), "harm"),
        (dict(plain="ok", rewritten="ok", plain_diff=OK, max_diff={"example": 0.0, "other shape": 1.0}), "harm"),
        (dict(plain="TypeError: no", rewritten="TypeError: no"), "other failure"),
        (dict(plain="TypeError: no", rewritten="ok", max_diff=OK), "other failure"),
        (
            dict(plain="ok", rewritten="ok", plain_diff={"other shape": 1.0}, max_diff={"other shape": 1.0}),
            "other failure",
        ),
        (dict(built="ImportError: timm"), "not built"),
    ],
)
def test_outcomes(fields, outcome):
    assert _result(**fields).outcome[0] == outcome


def test_other_failure_says_whether_unbranch_exports_it():
    assert _result(plain="E: x", rewritten="ok", max_diff=OK).outcome[1] == "E: x (exports with unbranch)"
    assert _result(plain="E: x", rewritten="E: x").outcome[1] == "E: x"


def test_not_fixed_names_unbranch_error_and_place():
    res = _result(**GUARD, rewritten="UnbranchError: break", rewritten_where="m.py:3")
    assert res.outcome == ("not fixed", "UnbranchError: break at m.py:3")


def test_shards_partition_the_architectures():
    everything = sweep.targets("Bert")
    shards = [sweep.targets("Bert", (i, 3)) for i in (1, 2, 3)]
    assert len(everything) > 3 and sorted(sum(shards, [])) == sorted(everything)
    assert not set(shards[0]) & set(shards[1])


@pytest.mark.slow
def test_validate_a_users_factory_fixes_its_branch():
    res = validate("sample_factories:branchy", torch.float32)
    assert res.source == "user" and res.outcome == ("fixed", ""), res.as_dict()
    assert res.plain_control_flow and res.plain_where.endswith("sample_factories.py:20")
    assert res.conds == 1 and set(res.max_diff) == {"example", "other shape"}


def test_sweep_resumes(tmp_path):
    names = ["sample_factories:positional", "sample_factories:broken"]
    seen = []
    results = sweep.sweep(names, str(tmp_path), progress=lambda d, t, r: seen.append((d, t, r.model)))
    outcomes = {r.model: r.outcome for r in results}
    assert outcomes == {names[0]: ("no-harm", ""), names[1]: ("not built", "RuntimeError: no weights here")}
    assert [t for _, t, _ in seen] == [2, 2]
    seen.clear()
    os.remove(sweep.result_path(str(tmp_path), names[1], "float32", False))
    again = sweep.sweep(names, str(tmp_path), progress=lambda d, t, r: seen.append((d, t, r.model)))
    assert seen == [(1, 1, names[1])]  # only the missing result ran again
    assert [r.outcome for r in again] == [outcomes[n] for n in names]


def test_sweep_limits_each_models_time(tmp_path):
    (res,) = sweep.sweep(["sample_factories:hangs"], str(tmp_path), timeout=1)
    assert res.outcome == ("other failure", "TimeoutError: no result within 1s")


def test_a_name_nothing_resolves_is_a_result_not_a_traceback(tmp_path, capfd):
    (res,) = sweep.sweep(["NoSuchModel"], str(tmp_path))
    assert res.outcome == ("not built", "KeyError: 'NoSuchModel'")
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.slow
def test_validate_a_local_config_file(tmp_path, capsys):
    config = transformers.LlamaConfig(hidden_size=64, num_hidden_layers=3, architectures=["LlamaModel"])
    config.save_pretrained(tmp_path)
    assert main(["validate", str(tmp_path / "config.json"), "--dtype", "float32", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["source"] == "config" and row["outcome"] == "no-harm" and row["plain"] == "ok"


@pytest.mark.slow
def test_sweep_command_writes_a_report(tmp_path, capfd):
    report = tmp_path / "report.md"
    args = ["validate", "--filter", "^sample", "--results", str(tmp_path / "r"), "--report", str(report)]
    code = main([*args[:1], "sample_factories:branchy", "sample_factories:positional", *args[3:]])
    out, err = capfd.readouterr()
    assert code == 0 and "fixed 1" in out and "no-harm 1" in out and "def forward" not in out + err
    text = report.read_text()
    assert "| sample_factories:branchy | user | fixed |" in text and "## fixed" in text
    assert "This run validated 2 of them in " in text  # its wall time, recorded


def test_select_architectures_by_their_modeling_source():
    assert sweep.targets("^(Bart|Llama)Model$") == ["BartModel", "LlamaModel"]
    assert sweep.targets("^(Bart|Llama)Model$", source=r"torch\.float16 and") == ["BartModel"]  # the clamp


def test_the_compiler_does_not_import_the_transformers_integration():
    """Only the package front (``code_needing_rewriting``) and the command line reach into unbranch.hf."""
    import pathlib
    import subprocess
    import sys

    import unbranch

    root = pathlib.Path(unbranch.__file__).parent
    importers = {
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if "hf" not in p.relative_to(root).parts and re.search(r"from \.+hf\b|import unbranch\.hf", p.read_text())
    }
    assert importers == {"__init__.py", "cli.py"}
    code = "import sys, unbranch; print('transformers' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_errors_keep_a_cause_announced_on_the_next_line():
    from unbranch.hf.validate import error_line

    error = ValueError(
        "Class validation error for validator 'validate_architecture':\n    ValueError: heads must divide"
    )
    assert error_line(error) == (
        "ValueError: Class validation error for validator 'validate_architecture': ValueError: heads must divide"
    )
    assert error_line(RuntimeError("first\nsecond")) == "RuntimeError: first"
