"""Conditional expressions ``a if c else b``: exported in both modes, eager exactly Python's.

Each form is a small module exported inside ``torch_export_rewrite(rewrite=[M.forward])``
with every dim dynamic, then compared with the original on inputs taking each side and on
other shapes; a cond is in the graph exactly where a tensor condition was rewritten.
"""

import pytest
import torch
from helpers import MODES, assert_same, check_export, count_branches, export_rewritten

import unbranch

pos = lambda *s: torch.rand(*s) + 0.5  # noqa: E731
neg = lambda *s: -torch.rand(*s) - 0.5  # noqa: E731
INPUTS = [(pos(4, 3),), (neg(4, 3),), (pos(7, 2),), (neg(2, 5),)]


class Assigned(torch.nn.Module):
    def forward(self, x):
        y = x * 2 if x.sum() > 0 else -x
        return y + 1


class Argument(torch.nn.Module):  # a side returning an input unchanged
    def forward(self, x):
        return torch.relu(x if x.mean() > 0 else x.cos())


class Pair(torch.nn.Module):
    def forward(self, x):
        a, b = (x + 1, x * 2) if x.sum() > 0 else (x - 1, x / 2)
        return a * b


class Comprehension(torch.nn.Module):  # the lambdas read the comprehension's own variable
    def forward(self, x):
        parts = [t * 2 if t.sum() > 0 else t - 1 for t in (x, -x, x * 0.5)]
        return torch.stack(parts)


class Nested(torch.nn.Module):
    def forward(self, x, y):
        return x + y if x.sum() > 0 else (x - y if y.sum() > 0 else x * y)


class InBranch(torch.nn.Module):  # a conditional expression inside an if that becomes a cond
    def forward(self, x, y):
        if x.sum() > 0:
            z = x.sin() if y.mean() > 0 else x.cos()
        else:
            z = -x
        return z + y.sum()


class Submodule(torch.nn.Module):  # closures over parameters and a submodule
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.w = torch.nn.Parameter(torch.randn(3))

    def forward(self, x):
        return self.lin(x) if x.sum() > 0 else x * self.w


class ShapeCondition(torch.nn.Module):
    def forward(self, x):
        return x * 2 if x.shape[0] > 3 else -x


class PythonValued(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = None

    def forward(self, x, mask=None):
        y = x if mask is None else x * mask
        return y * (2.0 if self.scale is None else self.scale) if not self.training else y


class Spanning(torch.nn.Module):  # on the third line of its statement, among lines without one
    def forward(self, x):
        h = x + 1
        y = torch.cat(
            [h, h * 2 if x.sum() > 0 else -h],
        )
        return y.sum(0) + h.sum(0)


class InLambda(torch.nn.Module):  # on a line holding only a lambda
    def forward(self, x):
        f = lambda t: t * 2 if t.sum() > 0 else -t  # noqa: E731
        return f(x) + 1


class CopiedReturn(torch.nn.Module):  # in a return EarlyReturn copied to the other side of an if
    def forward(self, x):
        if not self.training:
            if x.sum() > 10:
                return x
        return x * 2 if x.mean() > 0 else -x


CASES = [
    (Spanning, 1, 1),
    (InLambda, 1, 1),
    (CopiedReturn, 1, 1),
    (Assigned, 1, 1),
    (Argument, 1, 1),
    (Pair, 1, 1),
    (Comprehension, 1, 3),
    (Nested, 2, 2),
    (InBranch, 2, 2),
    (Submodule, 1, 1),
]


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize("model, arity, conds", CASES, ids=[c[0].__name__ for c in CASES])
def test_exported_matches_eager(model, arity, conds, strict):
    m = model()
    pick = lambda t: t if arity == 1 else (t[0], (t[0] * 0.5).flip(0))  # noqa: E731
    inputs = [pick(t) for t in INPUTS] + [(pos(3, 3), neg(3, 3))[:arity], (neg(5, 3), pos(5, 3))[:arity]]
    example = pick((pos(4, 3),))
    if model is Submodule:  # Linear(3, 3) fixes the last dim: only the batch is dynamic
        ep = export_rewritten(m, example, strict, dynamic_shapes=({0: torch.export.Dim.DYNAMIC},))
        assert count_branches(ep) == conds
        for args in [i for i in inputs if i[0].shape[-1] == 3]:
            assert_same(ep.module()(*args), m(*args))
        return
    check_export(m, example, inputs, strict, conds=conds)


@pytest.mark.parametrize("strict", MODES)
def test_shape_condition_is_a_cond(strict):
    ep = check_export(ShapeCondition(), (pos(5, 3),), [(pos(2, 3),), (pos(6, 2),), (neg(4, 4),)], strict, conds=1)
    assert ep is not None


@pytest.mark.parametrize("strict", MODES)
def test_python_valued_stays_python(strict):
    m = PythonValued().eval()
    mask = torch.tensor([1.0, 0.0, 2.0])
    ep = export_rewritten(m, (pos(4, 3), mask), strict, dynamic_shapes=({0: torch.export.Dim.DYNAMIC}, None))
    assert count_branches(ep) == 0
    x = pos(6, 3)
    assert_same(ep.module()(x, mask), m(x, mask))
    rm = unbranch.transform_method(PythonValued.forward)
    assert not rm.changed  # nothing to rewrite: the text is the original


class Recorder(torch.nn.Module):
    """Which side ran, and a side that would raise: only the side taken may run."""

    def __init__(self):
        super().__init__()
        self.ran = []

    def side(self, name, value):
        self.ran.append(name)
        return value

    def forward(self, x):
        a = self.side("then", x * 2) if x.sum() > 0 else self.side("else", x.new_zeros(0)[5])
        return a if a.mean() < 0 else self.side("abs", a.abs())


def test_eager_runs_only_the_side_taken():
    m = Recorder()
    x = pos(3, 3)
    expected = m(x)
    ran = list(m.ran)
    with pytest.raises(IndexError) as original:
        m(neg(3, 3))
    m.ran.clear()
    with unbranch.torch_export_rewrite(rewrite=[Recorder.forward]) as report:
        assert report.rewritten and "_ub.if_exp(" in report.rewritten[0].code
        assert_same(m(x), expected)
        assert m.ran == ran == ["then", "abs"]
        with pytest.raises(IndexError) as rewritten:
            m(neg(3, 3))
        assert str(rewritten.value) == str(original.value)


def test_eager_inside_the_context_is_the_original():
    for model, arity, _ in CASES:
        m = model()
        for t in INPUTS + [(pos(3, 3),)]:
            args = t if arity == 1 else (t[0], -t[0])
            if model is Submodule and args[0].shape[-1] != 3:
                continue
            expected = m(*args)
            with unbranch.torch_export_rewrite(rewrite=[model.forward]):
                assert_same(m(*args), expected)


class PythonSide(torch.nn.Module):
    def forward(self, x):
        return x.mean() if x.sum() > 0 else None


@pytest.mark.parametrize("strict", MODES)
def test_python_side_stays_python_and_says_why(strict):
    rm = unbranch.transform_method(PythonSide.forward)
    assert "_ub.unconverted(" in rm.code and "torch.cond cannot return" in rm.code
    m = PythonSide()
    for x in (pos(3, 3), neg(3, 3)):
        expected = m(x)  # (inside the context, PythonSide.forward is the rewritten code)
        with unbranch.torch_export_rewrite(rewrite=[PythonSide.forward]):
            assert_same(m(x), expected)
    with pytest.raises(Exception, match=r"a side of the conditional expression is a Python value.*None"):
        export_rewritten(m, (pos(3, 3),), strict)


def test_walrus_in_a_side_stays_python():
    def f(x):
        return (y := x * 2) + y if x.sum() > 0 else x

    rm = unbranch.transform_method(f, strict=False)
    assert "_ub.if_exp(" not in rm.code and "assignment expression" in rm.code
    x = pos(2, 2)
    assert_same(rm.func(x), f(x))


def test_screen_reports_ifexp():
    import ast

    from unbranch.compiler.analysis.classify import Classifier
    from unbranch.compiler.pipeline import PASSES, Options

    # (what the default options run: a callee's variant screens for any return, say)
    every = frozenset().union(*(step.HANDLES for step in PASSES if step.runs_under(Options())))

    def kinds(src):
        fn = ast.parse(src).body[0]
        return {kind.name for kind in Classifier.for_function(fn).candidates(fn, every)}

    assert kinds("def f(self, x):\n    return x if x.sum() > 0 else -x\n") == {"ifexp"}
    assert kinds("def f(self, x, m=None):\n    return x if m is None else -x\n") == set()
    # (a comprehension over an argument is screened too: the pass decides)
    assert kinds("def f(self, x):\n    return [t if t.any() else -t for t in x]\n") == {"ifexp", "comprehension"}


def test_shape_conditions_off_leaves_size_ternaries():
    from unbranch.compiler.pipeline import Options, compile_source
    from unbranch.compiler.source import SourceInfo

    src = "def forward(self, x):\n    return x * 2 if x.shape[0] > 3 else -x\n"
    info = SourceInfo("<string>", 1, src, "<source>")
    assert "_ub.if_exp(" in compile_source(info, Options()).text
    assert compile_source(info, Options(shape_conditions=False)).text == src


def test_alias_changed_in_place_stays_python():
    src = """
def f(x, y):
    a = x if x.sum() > 0 else y
    a += 1
    return x + a
"""
    out = unbranch.rewrite_source(src, is_method=False)
    assert "_ub.if_exp(" not in out and "'a' is changed in place" in out
    fresh = unbranch.rewrite_source(src.replace("a += 1", "a = a + 1"), is_method=False)
    assert "_ub.if_exp(x.sum() > 0, lambda: x, lambda: y)" in fresh


class AliasChanged(torch.nn.Module):
    def forward(self, x, y):
        a = x if x.sum() > 0 else y
        a.add_(1)
        return x + a


@pytest.mark.parametrize("strict", MODES)
def test_alias_changed_in_place_exports_as_the_original(strict):
    # left as Python: a tensor condition then fails the export, saying why (as it would unrewritten)
    with pytest.raises(Exception, match="changed in place and the conditional expression gives back"):
        export_rewritten(AliasChanged(), (pos(3, 3), pos(3, 3)), strict)
    m, x, y = AliasChanged(), pos(3, 3), neg(3, 3)
    expected = m(x.clone(), y.clone())
    with unbranch.torch_export_rewrite(rewrite=[AliasChanged.forward]):
        assert_same(m(x.clone(), y.clone()), expected)


class NumberOrName(torch.nn.Module):
    """Numbers against names (``_ub.pick``): a Python number meets a tensor, in int and float, and two floats."""

    eps = 0.25

    def forward(self, x):
        t = x.mean()
        t = 0 if t < 0 else t  # an int against a float tensor
        n = self.eps if t < 0.5 else t  # a float attribute against a tensor
        k = (x > 0).sum()
        k = -1 if k == 0 else k  # an int against an int tensor
        g = 0.5 if x.sum() > 0 else 0.0  # two floats, on data
        return x * t / n + k * g, k


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("strict", MODES)
def test_numbers_against_names_export_as_where(strict, dtype):
    rm = unbranch.transform_method(NumberOrName.forward)
    assert rm.code.count("_ub.pick(") == 4 and "_ub.if_exp(" not in rm.code
    m = NumberOrName()
    example = (pos(5, 3).to(dtype),)
    ep = export_rewritten(m, example, strict)
    assert count_branches(ep) == 0  # torch.where, no cond
    # each side of each choice: a mean above 0.5, between 0 and 0.5, below 0 with no positive entry, and one positive
    inputs = [pos(4, 3), pos(6, 2) * 0.3, neg(3, 3), torch.cat([neg(3, 2), pos(1, 2) * 0.1])]
    for x in inputs:
        (out, k), (expected, expected_k) = ep.module()(x.to(dtype)), m(x.to(dtype))
        assert_same(out, expected)
        assert_same(k, torch.as_tensor(expected_k))  # the program's int is a tensor, Python's a number
    original = [m(x.to(dtype)) for x in inputs]
    with unbranch.torch_export_rewrite(rewrite=[NumberOrName.forward]):
        for x, (expected, expected_k) in zip(inputs, original):  # eager inside the context: Python's values
            out, k = m(x.to(dtype))
            assert_same(out, expected)
            assert type(k) is type(expected_k) and k == expected_k  # an int stays a Python int
