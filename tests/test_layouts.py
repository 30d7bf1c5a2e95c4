"""Every layout Python accepts converts exactly as its one-statement-a-line, indented spelling.

One-line suites (``if c: x = 1``), several statements on a line, conditions in parentheses or
continued with a backslash, comments between clauses, tabs: each program below is exported
through ``unbranch.export`` in both modes and run on inputs taking each side, at another size;
its rewrite makes the same conversions as its twin spelled one statement a line. The layout
fuzzer renders generated programs in these layouts and runs the same differential checks.
"""

import re
import textwrap

import pytest
import sample_layouts
import torch
from fuzzing import PYTHON_ARGS, branches_on_tensors, check_eager, check_export, load, programs
from helpers import MODES, assert_same, line_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from layouts import LAYOUTS, render
from sample_layouts import CASES, if_suite_twin
from torch.export import Dim

import unbranch
from unbranch import UnbranchError

IDS = [f.__name__ for f, _ in CASES]


class Call(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def _inputs():
    """Each side of every test above (positive, negative, past the check), at sizes other than the example's."""
    return [torch.rand(5, 3) + 0.2, -torch.rand(6, 3) - 0.2, torch.rand(2, 3) * 0.01, torch.full((3, 3), 20.0)]


def _outcome(fn, x):
    try:
        return fn(x.clone())
    except Exception as e:
        return type(e).__name__


def _conversions(fn) -> list:
    return sorted((n.kind, n.condition) for n in unbranch.transform_method(fn).notes)


@pytest.mark.parametrize("fn, twin", CASES, ids=IDS)
def test_layout_converts_as_its_twin(fn, twin):
    rm = unbranch.transform_method(fn)
    assert rm.changed and _conversions(fn) == _conversions(twin)
    compile(rm.code, "<rewritten>", "exec")  # (the output of a one-line loop compiled to nothing before)
    for x in _inputs():
        expected = _outcome(fn, x)
        actual = _outcome(rm.func, x)
        if isinstance(expected, str):
            assert actual == expected
        else:
            assert_same(actual, expected)


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize("fn, twin", CASES, ids=IDS)
def test_layout_exports(fn, twin, strict):
    ep = unbranch.export(Call(fn), (torch.randn(4, 3),), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict)
    for x in _inputs():
        expected = _outcome(fn, x)
        actual = _outcome(ep.module(), x)
        if isinstance(expected, str):
            assert isinstance(actual, str)  # a failing check raises (its class is torch's)
        else:
            assert_same(actual, expected)


def test_layout_not_rewritten_stays_as_written():
    source = textwrap.dedent(
        """\
        def f(x, mode=None):
            if mode is None: x = x + 1; x = x * 2  # python
            b = 1; c = 2
            if x.sum() > 0: a = x * b; x = a + c  # tensor
            for k in range(3): print(k)
            try: q = 1
            except Exception: q = 2
            return x
        """
    )
    out = unbranch.rewrite_source(source, is_method=False)
    kept = [line for line in source.splitlines() if "tensor" not in line]
    for line in kept:
        assert line in out.splitlines(), line
    assert "        a = x * b; x = a + c\n" in out  # the user's line, moved into the branch function


def test_crlf_and_tabs_source_converts():
    source = "def f(x):\r\n\tif x.sum() > 0: x = x * 2\r\n\telse:\r\n\t\tx = -x\r\n\treturn x\r\n"
    scope = {"torch": torch, "_ub": unbranch.runtime}
    exec(unbranch.rewrite_source(source, is_method=False), scope)
    for x in _inputs()[:2]:
        assert_same(scope["f"](x), x * 2 if x.sum() > 0 else -x)


def test_a_bug_of_the_compiler_is_an_unbranch_error_at_the_line(monkeypatch):
    from unbranch.compiler.rules.if_to_cond import IfToCond
    from unbranch.load import cache

    def broken(self, node, body, orelse):
        raise AttributeError("'Nope' object has no attribute 'header'")

    monkeypatch.setattr(IfToCond, "_plan", broken)
    cache.clear()  # (compiled by the tests before: taken from the cache, no pass would run)
    with pytest.raises(UnbranchError, match="bug of unbranch's") as info:
        unbranch.transform_method(if_suite_twin)
    assert info.value.line == line_of(if_suite_twin, "if x.sum() > 0:")
    assert info.value.path == sample_layouts.__file__ and isinstance(info.value.__cause__, AttributeError)


# --- the layout fuzzer, bounded (benchmarks/fuzz.py --layouts runs thousands) ---

BOUNDED = settings(deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
DRAWN = st.sampled_from(["plain", "effects", "loops", "jumps", "realcode"])
LAYOUT_SETS = st.lists(st.sampled_from(LAYOUTS), min_size=1, max_size=4, unique=True)


def _program(kind):
    return programs(**({} if kind == "plain" else {kind: True}))


@settings(BOUNDED, max_examples=60)
@given(st.data())
def test_layout_fuzz_rewritten_matches_original(data):
    source = data.draw(DRAWN.flatmap(_program))
    rendered = render(source, data.draw(LAYOUT_SETS))
    result = check_eager(rendered)
    assert result.divergence is None, str(result.divergence)
    assert _conversions(load(rendered)) == _conversions(load(source)), rendered


@settings(BOUNDED, max_examples=4)
@given(programs(max_statements=12).filter(branches_on_tensors), LAYOUT_SETS, st.sampled_from(PYTHON_ARGS))
def test_layout_fuzz_exported_matches_original(source, layouts, python_args):
    divergence = check_export(render(source, layouts), python_args, strict=False)
    assert divergence is None or divergence.kind == "refusal", str(divergence)


def test_renderings_keep_the_program():
    for layout in LAYOUTS:
        rendered = render(_SAMPLE, [layout])
        assert rendered != _SAMPLE, layout
        compile(rendered, "<rendered>", "exec")
    assert re.search(r"if [^\n]*: y = ", render(_SAMPLE, ["suites"]))


_SAMPLE = textwrap.dedent(
    """\
    import torch


    def f(x, y, flag, n, mask):
        if x.sum() > 0 and flag:
            y = y * 2
            x = x + 1
        else:
            y = -y
        return x, y
    """
)
