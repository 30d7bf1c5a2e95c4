"""Issue 7, "do no harm": on a model that exports fine already, ``torch_export_rewrite(model)`` changes nothing.

Users wrap every export in the context, so for these tiny float32 models (dynamic batch and
sequence) the export inside it must still succeed, give the same graph (no added ``cond``)
and the same results, padded attention masks included, and leave every function it swapped
as the original object with its original code.
"""

import dataclasses
import inspect

import pytest
import torch
from helpers import assert_same, count_branches

import unbranch
from unbranch.compiler.source import innermost_function
from unbranch.exporting.discovery import discover
from unbranch.hf.zoo import EXPORT_TODAY, MODELS

# discovery rewrites a method of these (a float16-only clamp; Whisper: a spec-augment helper
# eval never calls; Blenderbot, Pegasus, M2M100: LayerDrop's `torch.rand([]) < self.layerdrop`,
# which only training runs), so rewritten code runs during their export
REWRITTEN = [
    "BartModel",
    "PLBartModel",
    "MarianMTModel",
    "MvpModel",
    "BlenderbotSmallModel",
    "BigBirdPegasusModel",
    "LongT5Model",
    "WhisperModel",
    "BlenderbotModel",
    "PegasusModel",
    "M2M100Model",
]
# nothing to rewrite: the context must be a no-op (Udop: ``torch.numel(input_ids) == 0`` in
# UdopStack.forward is a size test, no reason to rewrite)
UNTOUCHED = [name for name in EXPORT_TODAY if name not in REWRITTEN]


def _ops(ep) -> list[str]:
    """The exported computation, op by op (nested graphs included), to compare two exports."""
    return [
        str(node.target)
        for gm in ep.graph_module.modules()
        if isinstance(gm, torch.fx.GraphModule)
        for node in gm.graph.nodes
        if node.op == "call_function"
    ]


def _code(fn):
    return inspect.unwrap(fn).__code__


def _snapshot(model) -> tuple[dict, dict]:
    """The code of every function the context may swap and of every submodule class's ``forward``."""
    forwards = {type(m): type(m).forward for m in model.modules()}
    functions = [innermost_function(f) for f, _ in discover(model)] + list(forwards.values())
    return {fn: _code(fn) for fn in functions}, forwards


def _assert_restored(before: tuple[dict, dict]) -> None:
    codes, forwards = before
    changed = [fn.__qualname__ for fn, code in codes.items() if _code(fn) is not code]
    assert not changed, f"not restored: {changed}"
    replaced = [cls.__qualname__ for cls, forward in forwards.items() if cls.forward is not forward]
    assert not replaced, f"forward replaced: {replaced}"


@pytest.mark.slow
@pytest.mark.parametrize("name", REWRITTEN + UNTOUCHED)
def test_rewrite_changes_nothing(name):
    tiny = MODELS[name]
    text = tiny.inputs_kind == "text"
    if text:
        tiny = dataclasses.replace(tiny, attention_mask=True)  # so the other inputs can be padded
    model = tiny.build(name)
    example = tiny.inputs(2, 7)
    dynamic = tiny.dynamic_shapes(example)
    plain = torch.export.export(model, (), kwargs=example, dynamic_shapes=dynamic)

    before = _snapshot(model)
    with unbranch.torch_export_rewrite(model) as report:
        swapped = {rm.function: rm.code_object for rm in report}
        assert all(fn.__code__ is code for fn, code in swapped.items())
        ep = torch.export.export(model, (), kwargs=example, dynamic_shapes=dynamic)
    _assert_restored(before)
    assert set(swapped) <= set(before[0])
    assert bool(swapped) == (name in REWRITTEN), [rm.qualname for rm in report]

    assert count_branches(plain) == count_branches(ep) == 0
    assert report.conds(ep) == {rm.qualname: 0 for rm in report}
    assert _ops(ep) == _ops(plain)
    rewritten, reference = ep.module(), plain.module()
    with torch.no_grad():
        for kwargs in (example, tiny.inputs(3, 11, pad=text)):
            out = rewritten(**kwargs)
            assert_same(out, reference(**kwargs), rtol=0, atol=0)
            assert_same(out, model(**kwargs), rtol=1e-5, atol=1e-5)


def _is_empty(x) -> bool:
    return x.numel() == 0


class SizeGuarded(torch.nn.Module):
    """Size tests next to Bart's float16-only clamp, which is why discovery rewrites ``forward``."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        if _is_empty(x):  # unknown to the classifier; the export's sizes (>= 2) decide it: no guard
            x = x + 1
        if x.shape[1] > 4:  # the plain export guards on it (seq >= 5)
            x = x * 0.5
        y = self.lin(x)
        if y.dtype == torch.float16 and not torch.isfinite(y).all():
            y = y.clamp(-60000, 60000)
        return y


@pytest.mark.parametrize("strict", [False, True])
def test_shape_tests_cover_what_the_plain_export_narrowed(strict):
    # model mode dispatches data conditions only; the size test the plain export narrowed the
    # sequence by (seq >= 5) is a branch found from its guard, rewritten, and the program covers all
    model, x = SizeGuarded(), torch.randn(2, 7, 4)
    dynamic = ({0: torch.export.Dim.DYNAMIC, 1: torch.export.Dim.DYNAMIC},)
    plain = torch.export.export(model, (x,), dynamic_shapes=dynamic, strict=strict)
    assert any("size()[1] > 4" in guard for guard in plain._guards_code)
    with unbranch.torch_export_rewrite(model) as report:
        ep = torch.export.export(model, (x,), dynamic_shapes=dynamic, strict=strict)
    assert [rm.qualname for rm in report] == ["SizeGuarded.forward"]
    assert count_branches(plain) == 0 and count_branches(ep) == 1 and not ep._guards_code
    for other in (torch.randn(3, 9, 4), torch.randn(3, 3, 4)):
        assert_same(ep.module()(other), model(other))


class SizeOverLeftCode(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 3:
            return x * 2
        if x.sum() > 0:  # left as Python (a try in a branch), on the side the example does not take
            try:
                x = x + 1
            except ValueError:
                pass
        return x


@pytest.mark.parametrize("strict", [False, True])
def test_a_size_test_over_code_left_as_python_specialises_as_the_plain_export_does(strict):
    # found by the fuzzer: as a cond, the size test made torch trace the other side too
    x, dynamic = torch.randn(5, 3), ({0: torch.export.Dim.DYNAMIC},)
    plain = torch.export.export(SizeOverLeftCode(), (x,), dynamic_shapes=dynamic, strict=strict)
    with unbranch.torch_export_rewrite(rewrite=[SizeOverLeftCode.forward]) as report:
        ep = torch.export.export(SizeOverLeftCode(), (x,), dynamic_shapes=dynamic, strict=strict)
    assert count_branches(ep) == 0 and str(ep.graph) == str(plain.graph)
    assert any("size condition over code left as Python" in why for _, _, why in report.left)
    for n in (4, 9):
        assert_same(ep.module()(torch.ones(n, 3)), SizeOverLeftCode()(torch.ones(n, 3)))


class ScaleBySizeAndData(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] < 4 and x.sum() > 0:  # the example (4 rows) never evaluates the data test
            label = "positive"  # a string in the result: no cond can give it
        else:
            label = "other"
        return x * 2, label


@pytest.mark.parametrize("strict", [False, True])
def test_the_plain_program_when_only_the_rewritten_code_fails_to_export(strict):
    """An export that works without unbranch works the same inside a context that names the code."""
    x, dynamic = torch.randn(4, 3), ({0: torch.export.Dim.DYNAMIC},)
    code = ScaleBySizeAndData.forward.__code__
    plain = torch.export.export(ScaleBySizeAndData(), (x,), dynamic_shapes=dynamic, strict=strict)
    with pytest.warns(UserWarning, match="plain export works") as caught:
        with unbranch.torch_export_rewrite(rewrite=[ScaleBySizeAndData.forward]) as report:
            ep = torch.export.export(ScaleBySizeAndData(), (x,), dynamic_shapes=dynamic, strict=strict)
    assert caught[0].filename == __file__  # the warning names the user's export call
    assert "a side gives a Python float or string" in report.fallback and "plain program was returned" in str(report)
    assert str(ep.graph) == str(plain.graph)
    assert ep.range_constraints.keys() == plain.range_constraints.keys()
    for n in (4, 9):
        (got, label), (want, expected) = ep.module()(torch.ones(n, 3)), ScaleBySizeAndData()(torch.ones(n, 3))
        assert_same(got, want)
        assert label == expected
    assert ScaleBySizeAndData.forward.__code__ is code  # and the original is back
