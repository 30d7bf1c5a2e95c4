"""Loading rewritten code that behaves like the original in every respect but control flow."""

import importlib.util
import inspect
import re
import traceback

import pytest
import sample_alias
import torch
from helpers import MODES, count_branches, export_rewritten
from torch.export import Dim

import unbranch
from unbranch import UnbranchError
from unbranch.load import cache


def make_closure(offset):
    bias = torch.tensor(offset)

    def shifted(x, *args, factor=3, **kwargs):
        if x.sum() > 0:
            x = x + bias * factor
        else:
            x = x - bias
        return x, args, kwargs

    return shifted


def test_closure_defaults_kwdefaults_varargs():
    fn = make_closure(5.0)
    rm = unbranch.transform_method(fn)
    # the original's cells, shared, plus a cell of its own for the runtime (no module global)
    assert fn.__code__.co_freevars == ("bias",) and rm.func.__code__.co_freevars == ("_ub", "bias")
    assert rm.func.__closure__[1] is fn.__closure__[0] and "_ub" not in fn.__globals__
    x = torch.ones(2)
    for args in [(x,), (-x,), (x, 1, 2)]:
        out, extra, kw = rm.func(*args, flag=True)
        ref, ref_extra, ref_kw = fn(*args, flag=True)
        torch.testing.assert_close(out, ref)
        assert extra == ref_extra and kw == ref_kw
    torch.testing.assert_close(rm.func(x, factor=10)[0], fn(x, factor=10)[0])


class Base(torch.nn.Module):
    def forward(self, x):
        if x.mean() > 0:
            x = x * 2
        return x


class Child(Base):
    pass


class GrandChild(Child):
    def forward(self, x):
        return super().forward(x) + 1


class Static(torch.nn.Module):
    @staticmethod
    def twice(x):
        if x.sum() > 0:
            return x * 2
        return x

    @classmethod
    def make(cls, x):
        if x.sum() > 0:
            return cls.twice(x)
        return -x

    def forward(self, x):
        return self.make(x) + self.twice(x)


@pytest.mark.parametrize("strict", MODES)
def test_inherited_method_rewritten_where_defined(strict):
    code = Base.forward.__code__
    m = GrandChild()
    with unbranch.torch_export_rewrite(rewrite=[(Child, "forward"), (Base, "forward")]) as report:
        assert len(report) == 1 and report.rewritten[0].function is Base.forward
        ep = torch.export.export(m, (torch.randn(3, 4),), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict)
    assert count_branches(ep) == 1 and Base.forward.__code__ is code
    for x in (torch.ones(2, 4), -torch.ones(5, 4)):
        torch.testing.assert_close(ep.module()(x), m(x))


@pytest.mark.parametrize("strict", MODES)
def test_staticmethod_and_classmethod(strict):
    m = Static()
    rewrite = [Static.__dict__["twice"], Static.make]
    ep = export_rewritten(m, (torch.randn(3, 4),), strict, rewrite=rewrite)
    assert count_branches(ep) == 3
    for x in (torch.ones(2, 4), -torch.ones(5, 4)):
        torch.testing.assert_close(ep.module()(x), m(x))


@pytest.mark.parametrize("strict", MODES)
def test_decorated_forward_alias_and_module_function(strict):
    wrapper = sample_alias.Aliased.forward
    inner, helper_code = inspect.unwrap(wrapper), sample_alias.helper.__code__
    decorations = list(sample_alias.DECORATIONS)
    m = sample_alias.Aliased()
    ep = export_rewritten(m, (torch.randn(3, 4),), strict, rewrite=[wrapper, sample_alias.helper])
    assert count_branches(ep) == 2
    for x in (torch.full((2, 4), 3.0), -torch.ones(5, 4), torch.rand(4, 2) * 0.5):
        torch.testing.assert_close(ep.module()(x), m(x))
    assert sample_alias.DECORATIONS == decorations  # the decorator did not run again
    assert sample_alias.Aliased.forward is wrapper and inspect.unwrap(wrapper) is inner
    assert sample_alias.helper.__code__ is helper_code


def _tagged(tag):
    def decorate(fn):
        fn.tag = tag
        return fn

    return decorate


@_tagged([k for k in range(2)])
def code_in_defaults(x, scale=lambda t: t * 2, offsets=tuple(i + 1 for i in range(3))):
    if x.sum() > 0:
        x = scale(x) + offsets[2]
    else:
        x = x - offsets[1]
    return x


class CallsCodeInDefaults(torch.nn.Module):
    def forward(self, x):
        return code_in_defaults(x) * 3


@pytest.mark.parametrize("strict", MODES)
def test_lambdas_and_comprehensions_beside_the_def_are_not_taken_for_it(strict):
    """A function without free variables compiles from its text: the code swapped in is the def's,
    not that of a lambda or generator in its defaults or decorator (constants of the same module)."""
    m = CallsCodeInDefaults()
    inputs = [torch.ones(3, 2), -torch.ones(5, 2), torch.full((1, 2), 0.5)]
    expected = [m(x) for x in inputs]
    with unbranch.torch_export_rewrite(rewrite=[code_in_defaults]):
        assert code_in_defaults.__code__.co_name == "code_in_defaults"
        assert code_in_defaults.__code__.co_filename.startswith("unbranch:")
        for x, want in zip(inputs, expected):
            torch.testing.assert_close(m(x), want)
        ep = torch.export.export(m, (inputs[0],), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict)
    assert count_branches(ep) == 1 and code_in_defaults.tag == [0, 1]
    for x, want in zip(inputs, expected):
        torch.testing.assert_close(ep.module()(x), want)


def test_import_inside_function():
    rm = unbranch.transform_method(sample_alias.late_import)
    assert rm.changed
    for x in (torch.ones(3), -torch.ones(3)):
        torch.testing.assert_close(rm.func(x), sample_alias.late_import(x))


def test_wrapper_keeps_working_during_the_swap():
    wrapper = sample_alias.Aliased.forward
    m = sample_alias.Aliased()
    with unbranch.torch_export_rewrite(rewrite=[wrapper]):
        assert type(m).forward is wrapper
        assert inspect.unwrap(wrapper).__code__.co_filename.startswith("unbranch:")
        torch.testing.assert_close(m(torch.full((2,), 3.0)), torch.full((2,), 2.0))
    assert inspect.unwrap(wrapper).__code__.co_filename == sample_alias.__file__


class Fails(torch.nn.Module):
    """Fails in a branch (a view of 2 elements as 3 x 5): the traceback goes through the branch function."""

    def forward(self, x):
        if x.sum() > 0:
            x = x / 2
            x = x.view(3, 5)
        return x


def test_traceback_names_rewritten_and_original_lines():
    m = Fails()
    with unbranch.torch_export_rewrite(rewrite=[Fails.forward]):
        with pytest.raises(RuntimeError) as info:
            m(torch.ones(2))
    text = "".join(traceback.format_exception(info.value))
    lines, start = inspect.getsourcelines(Fails.forward)
    raise_line = start + next(i for i, ln in enumerate(lines) if "x.view(3, 5)" in ln)
    assert "x = x.view(3, 5)" in text
    assert f"# {__file__}:{raise_line}" in text  # the original file and line of the failing statement
    assert 'File "unbranch:Fails.forward:' in text


def test_getsource_of_rewritten_function():
    rm = unbranch.transform_method(Fails.forward)
    lines = inspect.getsource(rm.func).splitlines()
    assert [ln.split("  # ")[0] for ln in lines] == rm.code.splitlines()
    original = inspect.getsourcelines(Fails.forward)
    where = original[1] + next(i for i, ln in enumerate(original[0]) if "x = x / 2" in ln)
    assert next(ln for ln in lines if "x = x / 2" in ln).endswith(f"# {__file__}:{where}")  # origin named


def test_stack_trace_of_exported_nodes_shows_rewritten_lines():
    ep = export_rewritten(Base(), (torch.randn(3, 4),), strict=True)
    traces = [n.meta.get("stack_trace", "") for n in ep.graph_module.graph.nodes]
    assert any("unbranch:Base.forward:" in t and "_ub.if_stmt(x.mean() > 0" in t for t in traces)


def test_cache_hit_skips_parsing(monkeypatch):
    cache.clear()
    calls = []
    real = unbranch.load.rewriting.compile_source
    monkeypatch.setattr(unbranch.load.rewriting, "compile_source", lambda *a: calls.append(a) or real(*a))
    first = unbranch.transform_method(Base.forward)
    second = unbranch.transform_method(Base.forward)
    assert len(calls) == 1 and second.code_object is first.code_object
    cache._BY_CODE.clear()  # the same source again, through the source-keyed layer
    third = unbranch.transform_method(Base.forward)
    assert len(calls) == 1 and third.code == first.code
    unbranch.transform_method(Base.forward, prefix="other")  # other options: compiled again
    assert len(calls) == 2


# one function, written to two files (the second one line lower): the compiled text is shared,
# the code objects are not (each names its own file and lines)
_TWIN = """import torch


def pick(x, d):
    if x.sum() > 0:
        return x * 2 + 1 / d
    return -x


def kept(x):
    if x.sum() > 0:
        try:
            x = x * 2
        except ValueError:
            pass
    return x
"""


def _twins(tmp_path):
    modules = []
    for name, text in (("twin_a", _TWIN), ("twin_b", "# one line more: everything sits a line lower\n" + _TWIN)):
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        modules.append(module)
    return modules


def _counting_compiles(monkeypatch) -> list:
    calls = []
    real = unbranch.load.rewriting.compile_source
    monkeypatch.setattr(unbranch.load.rewriting, "compile_source", lambda *a: calls.append(a) or real(*a))
    return calls


def test_same_source_in_two_files_compiles_once(tmp_path, monkeypatch):
    cache.clear()
    calls = _counting_compiles(monkeypatch)
    a, b = _twins(tmp_path)
    ra, rb = unbranch.transform_method(a.pick), unbranch.transform_method(b.pick)
    assert len(calls) == 1 and ra.changed and ra.code == rb.code
    assert (ra.source.path, rb.source.path) == (a.__file__, b.__file__) and rb.source.line == ra.source.line + 1
    assert [n.line for n in rb.notes] == [n.line + 1 for n in ra.notes]  # lines of its own file
    assert ra.code_object.co_filename != rb.code_object.co_filename
    where = _TWIN.splitlines().index("        return x * 2 + 1 / d") + 1
    for module, rm, line in ((a, ra, where), (b, rb, where + 1)):
        with unbranch.torch_export_rewrite(rewrite=[module.pick]):
            with pytest.raises(ZeroDivisionError) as info:
                module.pick(torch.ones(2), 0)
        text = "".join(traceback.format_exception(info.value))
        assert f"# {module.__file__}:{line}" in text  # the rewritten frame names the original line
        assert (b if module is a else a).__file__ not in text
        with pytest.raises(ZeroDivisionError) as info:
            rm.func(torch.ones(2), 0)
        assert f"# {module.__file__}:{line}" in "".join(traceback.format_exception(info.value))


class Call(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def test_an_if_left_as_python_names_no_file_in_its_text_and_its_own_file_when_it_fails(tmp_path, monkeypatch):
    cache.clear()
    calls = _counting_compiles(monkeypatch)
    a, b = _twins(tmp_path)
    ra, rb = (unbranch.transform_method(m.kept) for m in (a, b))
    assert len(calls) == 1 and ra.code == rb.code  # shared: the text is the same for both places
    assert ra.changed and [n.kind for n in ra.notes] == ["left"]  # kept as Python, explained at run time
    assert a.__file__ not in ra.code and b.__file__ not in ra.code
    where = _TWIN.splitlines().index("def kept(x):") + 2
    for module, line in ((a, where), (b, where + 1)):
        with unbranch.torch_export_rewrite(rewrite=[module.kept]):
            with pytest.raises(UnbranchError, match=rf"{re.escape(module.__file__)}:{line}: this if"):
                torch.export.export(Call(module.kept), (torch.ones(2),), strict=False)


def test_nested_contexts_and_duplicates_restore_exactly():
    fn, code = Base.forward, Base.forward.__code__
    with unbranch.torch_export_rewrite(rewrite=[Base.forward, (Base, "forward"), Base.forward]) as outer:
        assert len(outer) == 1
        swapped = fn.__code__
        with unbranch.torch_export_rewrite(rewrite=[Base.forward]) as inner:
            assert inner.rewritten[0].code == outer.rewritten[0].code  # rewritten from the original source
            assert fn.__code__ is swapped
        assert fn.__code__ is swapped
    assert Base.forward is fn and fn.__code__ is code


def test_no_change_returns_the_original_code_object():
    def plain(x):
        return x * 2

    rm = unbranch.transform_method(plain)
    assert not rm.changed and rm.code_object is plain.__code__ and rm.func is plain


@pytest.mark.slow
@pytest.mark.parametrize("strict", MODES)
def test_bart_float16_encoder_layer(strict):
    from transformers.models.bart.modeling_bart import BartEncoderLayer

    from unbranch.hf.zoo import MODELS

    tiny = MODELS["BartModel"]
    model, kwargs = tiny.build("BartModel", torch.float16), tiny.inputs(2, 7)
    batch, seq, dseq = Dim("batch"), Dim("seq"), Dim("dseq")
    ds = dict(input_ids={0: batch, 1: seq}, decoder_input_ids={0: batch, 1: dseq}, use_cache=None)
    with pytest.raises(Exception, match="data-dependent|Data-dependent"):
        torch.export.export(model, (), kwargs=kwargs, dynamic_shapes=ds, strict=strict)
    forward, inner_code = BartEncoderLayer.forward, inspect.unwrap(BartEncoderLayer.forward).__code__
    with unbranch.torch_export_rewrite(rewrite=[BartEncoderLayer.forward]):
        ep = torch.export.export(model, (), kwargs=kwargs, dynamic_shapes=ds, strict=strict)
    assert BartEncoderLayer.forward is forward and inspect.unwrap(forward).__code__ is inner_code
    assert count_branches(ep) == 1  # one encoder layer
    other = tiny.inputs(3, 9)
    with torch.no_grad():
        for kw in (kwargs, other):
            torch.testing.assert_close(ep.module()(**kw)[0], model(**kw)[0])
        # the other branch: overflow float16 right before the check, so the clamp runs
        model.encoder.layers[0].final_layer_norm.weight.data.fill_(60000.0)
        model.encoder.layers[0].final_layer_norm.bias.data.fill_(60000.0)
        seen = []
        model.encoder.layers[0].register_forward_hook(lambda mod, args, out: seen.append(out))
        for kw in (kwargs, other):
            torch.testing.assert_close(ep.module()(**kw)[0], model(**kw)[0], equal_nan=True)
        clamp = torch.tensor(65504 - 1000, dtype=torch.float16)
        assert seen and all(out.abs().max() == clamp for out in seen)  # the clamp branch ran
