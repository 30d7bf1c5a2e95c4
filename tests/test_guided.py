"""Issue 19: torch says where. ``unbranch.export`` runs the plain export first and rewrites exactly
the functions torch's failures name (any module, any class, nested functions); the model mode
of the context guides the user's own export the same way.

Each model is exported three ways (``unbranch.export``, ``torch_export_rewrite(model)`` and
``torch_export_rewrite(rewrite=model)`` around the user's ``torch.export.export``), in both
export modes, and ``ep.module()`` must match eager on inputs taking each side of every branch
and on another size.
"""

import inspect
import math

import pytest
import torch
from helpers import MODES, TORCH, assert_same, count_branches, line_of
from otherlib import boxes, schedulers
from torch.export import Dim

import unbranch
from unbranch import UnbranchError
from unbranch.load import rewriting


class WhileOnLocal(torch.nn.Module):
    def forward(self, x):
        n = x.abs().sum().floor()
        while n > 0:
            x = x * 0.5
            n = n - 4
        return x


class IfOnBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.tensor(2.0))

    def forward(self, x):
        if self.scale > x.mean():
            return x * self.scale
        return x


class IfOnFlagArgument(torch.nn.Module):
    def forward(self, x, is_pad):
        if is_pad:
            return x + 1
        return x - 1


class HelperInOtherPackage(torch.nn.Module):
    def forward(self, x):
        return boxes.clip_boxes(x, 2.0) * 3


class NestedHelper(torch.nn.Module):
    def forward(self, x):
        return boxes.normalise(x) - 1


class NonModuleObject(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scheduler = schedulers.Scheduler()

    def forward(self, sample, timestep):
        return self.scheduler.step(sample, timestep) + 1


class AnnotatedInt(NonModuleObject):
    def forward(self, sample, timestep):
        return self.scheduler.blend(sample, timestep - 5) + 1


class IndexForTimestep(NonModuleObject):
    def forward(self, sample, timestep):
        return self.scheduler.step_at(sample, timestep)


class AnnotatedIntAfterATensorIf(NonModuleObject):
    def forward(self, sample, timestep):
        return self.scheduler.blend_scaled(sample, timestep - 5) + 1


class SelectionSize(torch.nn.Module):
    def forward(self, corners, scores):
        keep = torch.where(scores > 0.5)[0]
        return boxes.best_first(corners[keep], scores[keep]) * 2


class SelectionLength(torch.nn.Module):
    def forward(self, ratio):
        return boxes.matched(ratio, 0.5) * 2


def _rows(n, sign=1.0):
    return sign * (torch.arange(n * 4, dtype=torch.float32).reshape(n, 4) / (n * 4) + 0.5)


# model, example, dynamic shapes, inputs that take each side (and another size)
CASES = {
    "while on a tensor local": (
        WhileOnLocal,
        (_rows(6),),
        ({0: Dim.DYNAMIC},),
        [(_rows(9),), (torch.zeros(5, 4),), (_rows(2),)],
    ),
    "if on a buffer": (
        IfOnBuffer,
        (_rows(6),),
        ({0: Dim.DYNAMIC},),
        [(_rows(9),), (_rows(3) + 5,)],
    ),
    "if on a tensor argument": (
        IfOnFlagArgument,
        (_rows(6), torch.tensor(True)),
        ({0: Dim.DYNAMIC}, None),
        [(_rows(9), torch.tensor(True)), (_rows(3), torch.tensor(False))],
    ),
    "module function of another package": (
        HelperInOtherPackage,
        (_rows(6, -1),),
        ({0: Dim.DYNAMIC},),
        [(_rows(9, -1),), (_rows(3),), (_rows(4) * 3,)],
    ),
    "nested function": (
        NestedHelper,
        (_rows(6) * 3,),
        ({0: Dim.DYNAMIC},),
        [(_rows(9) * 3,), (_rows(3) * 0.1,)],
    ),
    "method of an object that is no module": (
        NonModuleObject,
        (_rows(6), torch.tensor(3)),
        ({0: Dim.DYNAMIC}, None),
        [(_rows(9), torch.tensor(5)), (_rows(3), torch.tensor(0))],
    ),
    "tensor given for a parameter annotated int": (
        AnnotatedInt,
        (_rows(6), torch.tensor(8)),
        ({0: Dim.DYNAMIC}, None),
        [(_rows(9), torch.tensor(2)), (_rows(3), torch.tensor(5))],
    ),
    "length of a selection tested in another package": (
        SelectionLength,
        (torch.linspace(0, 1, 6),),
        ({0: Dim.DYNAMIC},),
        [(torch.linspace(0.2, 0.9, 9),), (torch.ones(3),), (torch.zeros(4),)],
    ),
    "int chosen by a test of a size that is data": (
        IndexForTimestep,
        (_rows(6), torch.tensor(1)),
        ({0: Dim.DYNAMIC}, None),
        [(_rows(9), torch.tensor(5)), (_rows(3), torch.tensor(9)), (_rows(4), torch.tensor(1))],
    ),
    "tensor for an int parameter, after a tensor if": (
        AnnotatedIntAfterATensorIf,
        (_rows(6), torch.tensor(8)),
        ({0: Dim.DYNAMIC}, None),
        [(_rows(9, -1), torch.tensor(2)), (_rows(3), torch.tensor(5)), (_rows(4, -1), torch.tensor(9))],
    ),
    "size of a selection tested in another package": (
        SelectionSize,
        (_rows(6), torch.linspace(0, 1, 6)),
        ({0: Dim.DYNAMIC}, {0: Dim.DYNAMIC}),
        [(_rows(9), torch.linspace(1, 0.6, 9)), (_rows(3), torch.zeros(3)), (_rows(4), torch.ones(4))],
    ),
}


def _line(module, text: str) -> int:
    """The line of ``module``'s file holding ``text``."""
    lines, _ = inspect.getsourcelines(module)
    return next(n for n, line in enumerate(lines, 1) if text in line)


def _export_with(how, model, example, shapes, strict):
    if how == "unbranch.export":
        return unbranch.export(model, example, dynamic_shapes=shapes, strict=strict)
    context = unbranch.torch_export_rewrite(model) if how == "context" else unbranch.torch_export_rewrite(rewrite=model)
    with context:
        return torch.export.export(model, example, dynamic_shapes=shapes, strict=strict)


@pytest.mark.parametrize("how", ["unbranch.export", "context", "rewrite=model"])
@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize("case", list(CASES))
def test_torch_names_the_function(case, strict, how):
    make, example, shapes, inputs = CASES[case]
    model = make()
    with pytest.raises(Exception, match="data-dependent|Data-dependent"):
        torch.export.export(model, example, dynamic_shapes=shapes, strict=strict)
    ep = _export_with(how, model, example, shapes, strict)
    assert count_branches(ep) + _loops(ep) >= 1
    for args in [example, *inputs]:
        assert_same(ep.module()(*args), model(*args))


def _loops(ep) -> int:
    return sum(
        node.target is torch.ops.higher_order.while_loop
        for gm in ep.graph_module.modules()
        if isinstance(gm, torch.fx.GraphModule)
        for node in gm.graph.nodes
    )


def test_plain_export_first_and_untouched_when_it_works(monkeypatch):
    """A model torch exports is exported once, as torch makes it: nothing is even compiled."""
    compiled = []
    monkeypatch.setattr(rewriting, "compile_source", lambda *a, **k: compiled.append(a) or None)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    x = torch.randn(3, 4)
    shapes = ({0: Dim.DYNAMIC},)
    plain = torch.export.export(model, (x,), dynamic_shapes=shapes)
    ep = unbranch.export(model, (x,), dynamic_shapes=shapes)
    assert str(ep.graph) == str(plain.graph)
    assert ep.range_constraints.keys() == plain.range_constraints.keys()
    assert not compiled
    report = unbranch.report_of(ep)
    assert len(report.attempts) == 1 and not report.attempts[0].error and not report.rewritten


@pytest.mark.parametrize("strict", MODES)
def test_rewritten_only_during_the_export(strict):
    """After unbranch.export every function runs its own code again, the nested one's parent too."""
    model = NestedHelper()
    codes = {f: f.__code__ for f in (boxes.normalise, boxes.clip_boxes, NestedHelper.forward)}
    ep = unbranch.export(model, (_rows(5) * 3,), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict)
    assert all(f.__code__ is code for f, code in codes.items())
    report = unbranch.report_of(ep)
    assert [rm.qualname for rm in report.rewritten] == ["normalise.<locals>.rescale"]
    assert [bool(a.error) for a in report.attempts] == [True, False]
    assert report.attempts[0].sites[0].where == f"{boxes.__file__}:{_line(boxes, 'if s.max() > 1:')}"


class IndexedTable(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scheduler = schedulers.Scheduler()

    def forward(self, sample, timestep):
        return self.scheduler.step_indexed(sample, timestep)


def test_operand_viewed_at_an_offset_that_is_data():
    """``alphas[t]`` read before the branch: non-strict export takes it (a copy goes into the cond);
    strict export cannot index with a tensor at all: once torch names that line it reads through
    ``_ub.at`` (an ``index_select``), and the program matches too."""
    model = IndexedTable()
    example = (_rows(4), torch.tensor(3))
    if TORCH < (2, 13):  # before 2.13 non-strict export cannot index with a tensor either (nor without unbranch)
        with pytest.raises(unbranch.UnbranchError, match="alpha = self.alphas"):
            unbranch.export(model, example, dynamic_shapes=({0: Dim.DYNAMIC}, None))
        return
    for strict in (False, True):
        ep = unbranch.export(model, example, dynamic_shapes=({0: Dim.DYNAMIC}, None), strict=strict)
        for args in [example, (_rows(7), torch.tensor(0)), (_rows(2), torch.tensor(9))]:
            assert_same(ep.module()(*args), model(*args))
    names = [rm.qualname for rm in unbranch.report_of(ep).rewritten]
    assert names == ["Scheduler.step_indexed"]


class SizeBranch(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 4:
            return x.sum(0)
        return x.mean(0)


class SizeEquality(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        if x.shape[0] == 3:
            return y + 1
        return y - 1


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize(
    "make, example, dim",
    [(SizeBranch, torch.randn(6, 4), Dim("n")), (SizeEquality, torch.randn(3, 4), Dim.DYNAMIC)],
    ids=["narrowed", "specialised"],
)
def test_branch_on_a_declared_dynamic_size(make, example, dim, strict):
    """Torch reports a dimension a branch fixed or narrowed only at the end; its guard's place is found."""
    model = make()
    with pytest.raises(Exception, match="Constraints violated"):
        torch.export.export(model, (example,), dynamic_shapes=({0: dim},), strict=strict)
    ep = unbranch.export(model, (example,), dynamic_shapes=({0: dim},), strict=strict)
    assert count_branches(ep) == 1
    for n in (2, 3, 4, 5, 9):
        x = torch.randn(n, 4)
        assert_same(ep.module()(x), model(x))


class SizeFromData(torch.nn.Module):
    def forward(self, x):
        n = int(x.abs().sum().item()) % 5
        return x * math.factorial(n)  # (a Python int from data: only Python's math computes it)


def test_what_cannot_be_converted_is_one_clear_error():
    """A value of data torch needs as a Python int is no branch: the error names the line and why."""
    model = SizeFromData()
    with pytest.raises(unbranch.UnbranchError) as info:
        unbranch.export(model, (torch.randn(3, 4),), dynamic_shapes=({0: Dim.DYNAMIC},))
    e = info.value
    assert e.path == __file__ and e.line == _line(inspect.getmodule(SizeFromData), "math.factorial(n)")
    assert "math.factorial(n)" in str(e) and "no control-flow conversion" in str(e)
    assert "GuardOnDataDependentSymNode" in type(e.__cause__).__name__
    # (the int() stays a number of data, rewritten after the first export; factorial needs its value)
    assert "int(" in e.report.attempts[0].sites[0].text and len(e.report.attempts) > 1


def test_context_naming_other_functions_says_what_to_do():
    """Explicit rewrite lists stay explicit: the branch they miss is named, with the way out."""
    model = HelperInOtherPackage()

    def unrelated(x):
        return x

    with pytest.raises(unbranch.UnbranchError, match=r"clip_boxes\(\).*unbranch.export") as info:
        with unbranch.torch_export_rewrite(rewrite=[unrelated]):
            torch.export.export(model, (_rows(3, -1),), dynamic_shapes=({0: Dim.DYNAMIC},))
    assert info.value.path == boxes.__file__ and info.value.line == _line(boxes, "if (boxes < 0).any():")


@pytest.mark.parametrize("strict", MODES)
def test_context_eager_and_second_export_after_a_guided_one(strict):
    """Inside the context, what a guided export rewrote is swapped in for that export only.

    ``if is_pad:`` on an argument is no tensor to a static reading: discovery leaves it, torch names it.
    """
    model = IfOnFlagArgument()
    forward = IfOnFlagArgument.forward.__code__
    args = (_rows(4), torch.tensor(True))
    shapes = ({0: Dim.DYNAMIC}, None)
    with unbranch.torch_export_rewrite(model) as report:
        assert not report.rewritten
        ep = torch.export.export(model, args, dynamic_shapes=shapes, strict=strict)
        assert IfOnFlagArgument.forward.__code__ is forward
        assert_same(model(*args), args[0] + 1)
        again = torch.export.export(model, args, dynamic_shapes=shapes, strict=strict)
    assert [rm.qualname for rm in report.rewritten] == ["IfOnFlagArgument.forward"]
    assert len(report.attempts) == 3  # the first export: stopped, then exported; the second starts rewritten
    for call in [args, (_rows(7), torch.tensor(False))]:
        assert_same(ep.module()(*call), model(*call))
        assert_same(again.module()(*call), model(*call))


def test_discovery_reaches_other_packages_and_objects():
    """Static discovery follows calls into other modules and into objects that are no modules."""
    from unbranch.exporting.discovery import discover

    assert {fn.__qualname__ for fn, _ in discover(HelperInOtherPackage())} == {"clip_boxes"}
    assert {fn.__qualname__ for fn, _ in discover(HoldsAnObject())} == {"Clipper.apply"}
    assert {fn.__qualname__ for fn, _ in discover(IfOnBuffer())} == {"IfOnBuffer.forward"}
    # reached, but a test of an argument against 0 could be a Python int: torch will say
    assert not discover(NonModuleObject()) and not discover(IfOnFlagArgument())


class Clipper:
    def apply(self, x):
        if x.abs().max() > 1:
            return x / x.abs().max()
        return x


class HoldsAnObject(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.clipper = Clipper()

    def forward(self, x):
        return self.clipper.apply(x) * 2


@pytest.mark.parametrize("strict", MODES)
def test_context_rewrites_what_discovery_finds_in_an_object(strict):
    model = HoldsAnObject()
    with unbranch.torch_export_rewrite(model) as report:
        ep = torch.export.export(model, (_rows(4) * 3,), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict)
    assert [rm.qualname for rm in report.rewritten] == ["Clipper.apply"] and len(report.attempts) == 1
    for x in [_rows(4) * 3, _rows(7) * 0.1, _rows(2) * 2]:
        assert_same(ep.module()(x), model(x))


@pytest.mark.parametrize("strict", MODES)
def test_report_credits_helpers_with_their_conds(strict):
    """Non-strict export keeps only ``forward`` frames in stack traces: rewritten helpers' are kept too."""
    from torch.fx.proxy import _STACK_TRACE_ANCHORS

    anchors = set(_STACK_TRACE_ANCHORS)
    for model in (HelperInOtherPackage(), NestedHelper()):
        with unbranch.torch_export_rewrite(model) as report:
            ep = torch.export.export(model, (_rows(4, -1),), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict)
        assert list(report.conds(ep).values()) == [1]
        guided = unbranch.export(model, (_rows(4, -1),), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict)
        assert list(unbranch.report_of(guided).conds(guided).values()) == [1]
    assert _STACK_TRACE_ANCHORS == anchors  # nothing of unbranch left in torch's state


def _pool(rois):
    """torchvision's poolers: the length of what NMS kept is data."""
    num_rois = len(rois)
    return torch.zeros(num_rois, 3) + rois[:, :1]


class KeptBoxes(torch.nn.Module):
    def forward(self, boxes, scores):
        keep = torch.where(scores > 0.5)[0]
        return _pool(boxes[keep])


@pytest.mark.parametrize("how", ["unbranch.export", "context"])
@pytest.mark.parametrize("strict", MODES)
def test_length_that_is_data(how, strict):
    model = KeptBoxes()
    boxes, scores = _rows(6), torch.linspace(0, 1, 6)
    shapes = ({0: Dim.DYNAMIC}, {0: Dim.DYNAMIC})
    if not strict:  # (dynamo takes len() of a tensor whose length is data; non-strict export does not)
        with pytest.raises(Exception, match="data-dependent"):
            torch.export.export(model, (boxes, scores), dynamic_shapes=shapes, strict=strict)
    ep = _export_with(how, model, (boxes, scores), shapes, strict)
    for args in [(boxes, scores), (_rows(9), torch.linspace(1, 0, 9)), (_rows(3), torch.zeros(3))]:
        assert_same(ep.module()(*args), model(*args))


class KeepsHits(torch.nn.Module):
    def forward(self, x):
        hits = []
        for i in range(4):
            if x[i].sum() > 0:
                hits.append(x[i])
        return torch.stack(hits) if hits else x[:0]


@pytest.mark.parametrize("strict", MODES)
def test_a_refusal_reaches_the_user_whole_at_its_line(strict):
    """The compiler's own reason, file and line, in both modes: never wrapped in "the export stops ... still after"."""
    example = (torch.randn(5, 3),)
    with pytest.raises(UnbranchError) as info:
        unbranch.export(KeepsHits(), example, dynamic_shapes=({0: Dim.DYNAMIC, 1: Dim.DYNAMIC},), strict=strict)
    assert info.value.path == __file__ and info.value.line == line_of(KeepsHits.forward, "if x[i].sum() > 0")
    assert "the container 'hits' is changed in a branch" in str(info.value)
    assert "still after" not in str(info.value) and "the export stops" not in str(info.value)
