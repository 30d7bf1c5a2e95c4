"""The catalogue's hooks edit transformers code they find by its text: over the installed transformers,
every catalogued hook and recipe must still find it; one that does not says so, never silently."""

import warnings

import pytest

import unbranch
from unbranch.errors import UnbranchError
from unbranch.hf import catalog, hooks
from unbranch.load.rewriting import MODEL_OPTIONS

ENTRIES = [(m, q, h) for m, entries in sorted(catalog.CATALOGUE.items()) for q, h in sorted(entries.items())]


@pytest.mark.parametrize(
    "module, qualname, entry_hooks", ENTRIES, ids=[f"{m.split('.')[-1]}:{q}" for m, q, _ in ENTRIES]
)
def test_every_catalogue_entry_applies_to_the_installed_transformers(module, qualname, entry_hooks):
    fn = catalog.resolve(module, qualname)  # the code is still there
    rm = unbranch.transform_method(fn, **MODEL_OPTIONS, **entry_hooks)  # HookDidNotApply when a hook finds nothing
    assert rm.changed, f"{module}:{qualname} no longer needs its rewrite: drop the entry"


@pytest.mark.parametrize("recipe", catalog.RECIPES, ids=lambda r: r.name)
def test_every_recipe_picks_classes_and_applies_to_each(recipe):
    import importlib

    picked = []
    for module in catalog.recipe_modules():
        importlib.import_module(module)
        picked += [(module, q) for q, h in catalog.recipe_entries(module).items() if h is recipe.hooks]
    assert picked, f"recipe {recipe.name} picks nothing in this transformers: its trigger no longer matches"
    for module, qualname in picked:
        rm = unbranch.transform_method(catalog.resolve(module, qualname), **MODEL_OPTIONS, **recipe.hooks)
        assert rm.changed and "torch.compiler.is_compiling()" in rm.code, qualname


def test_block_diagonal_recipe_covers_what_was_listed_class_by_class():
    # the 28 entries it replaces (transformers 5.23), found again by their source alone
    import importlib

    for family, cls in [
        ("qwen2_vl", "VisionAttention"),
        ("glm4v", "Glm4vVisionAttention"),
        ("qwen3_asr", "Qwen3ASRAudioAttention"),
    ]:
        module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
        (spec,) = unbranch.code_needing_rewriting(getattr(module, cls))
        assert spec["function"] is getattr(module, cls).__dict__["forward"]
        assert spec["pre_rewriter"] is hooks.block_diagonal_attention
    # the loop-and-append form is another shape of code: the recipe leaves it alone
    from transformers.models.paddleocr_vl import modeling_paddleocr_vl

    assert unbranch.code_needing_rewriting(modeling_paddleocr_vl.PaddleOCRVisionAttention) is None


def gated(x, mask):
    if mask is not None and not mask.any():
        mask = None
    return x


def test_a_hook_that_finds_nothing_raises_where_it_was_applied():
    line = gated.__code__.co_firstlineno
    with pytest.raises(hooks.HookDidNotApply, match=rf"test_catalogue_hooks.py:{line}: hook drop_if\('token_idx"):
        unbranch.transform_method(gated, pre_rewriter=hooks.drop_if("token_idx.numel() == 0"))
    with pytest.raises(UnbranchError, match=r"replace_value\('expert_hit'.*no assignment `expert_hit = \.\.\.`"):
        unbranch.transform_method(gated, pre_rewriter=hooks.replace_loop_iterable("expert_hit", "range(4)"))
    # each hook of a chain must find its own code
    chained = hooks.chain(hooks.drop_none_fallback, hooks.guard_assignment("is_global_attn", "False"))
    with pytest.raises(hooks.HookDidNotApply, match="guard_assignment"):
        unbranch.transform_method(gated, pre_rewriter=chained)
    assert "mask = None" not in unbranch.transform_method(gated, pre_rewriter=hooks.drop_none_fallback).code


@pytest.fixture
def stale_bart(monkeypatch):
    """BART's catalogue entry given a hook that finds nothing in BartEncoderLayer.forward (a changed release)."""
    from transformers.models.bart import modeling_bart

    module = modeling_bart.__name__
    monkeypatch.setitem(
        catalog.CATALOGUE, module, {"BartEncoderLayer.forward": {"pre_rewriter": hooks.drop_if("x.numel() == 0")}}
    )
    monkeypatch.setattr(catalog, "STALE", {})
    return modeling_bart


def test_stale_entry_is_left_out_with_a_warning(stale_bart):
    with pytest.warns(catalog.StaleCatalogueWarning, match=r"BartEncoderLayer.forward does not apply to transformers"):
        assert unbranch.code_needing_rewriting(stale_bart.BartEncoderLayer) == []


def test_validate_names_a_stale_entry(stale_bart, capsys):
    from unbranch.cli import _details, _table
    from unbranch.hf.validate import Result

    config = stale_bart.BartConfig(d_model=8, encoder_attention_heads=2, encoder_ffn_dim=8)
    layer = stale_bart.BartEncoderLayer(config)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # asking which entries are stale does not warn
        (entry,) = catalog.stale_entries(layer)
    assert entry.startswith(f"{stale_bart.__name__}:BartEncoderLayer.forward: ") and "drop_if" in entry
    res = Result("BartModel", "float16", plain="ok", rewritten="ok", stale=[entry])
    _table([res])
    assert f"BartModel: catalogue entry no longer applies, left out: {entry}" in capsys.readouterr().out
    assert f"catalogue entry no longer applies, left out: {entry}" in _details(res)


def test_emit_refuses_a_stale_catalogue(stale_bart, tmp_path):
    from unbranch.cli import emit

    with pytest.raises(UnbranchError, match=r"1 catalogue entries do not apply .*BartEncoderLayer.forward"):
        emit(str(tmp_path))
    assert not any(tmp_path.iterdir())  # nothing written


def test_stale_model_entry_does_not_block_the_export(stale_bart):
    # the model still goes through discovery: a stale hook is left out, not an error
    config = stale_bart.BartConfig(d_model=8, encoder_attention_heads=2, encoder_ffn_dim=8)
    layer = stale_bart.BartEncoderLayer(config).eval()
    with pytest.warns(catalog.StaleCatalogueWarning), unbranch.torch_export_rewrite(layer) as report:
        pass
    assert [rm.qualname for rm in report] == ["BartEncoderLayer.forward"]  # found by discovery itself
    assert "x.numel()" not in report.rewritten[0].code and "_ub.if_stmt(" in report.rewritten[0].code
