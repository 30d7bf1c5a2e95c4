"""Every pass's EXAMPLES: the rewrite is exact, and before/after compute the same thing."""

import re
import textwrap
import types

import pytest
import torch

import unbranch
from unbranch import UnbranchError, runtime
from unbranch.compiler import pipeline
from unbranch.compiler.passes import Refused, Rewrite, Unchanged
from unbranch.compiler.pipeline import PASSES


def _examples():
    for step in PASSES:
        for i, ex in enumerate(step.EXAMPLES):
            yield pytest.param(step, ex, id=f"{step.__name__}_{type(ex).__name__.lower()}_{i}")


@pytest.fixture
def upto(monkeypatch):
    """A pass's examples show the code once that pass has run: the pipeline up to it."""

    def cut(step):
        monkeypatch.setattr(pipeline, "PASSES", PASSES[: PASSES.index(step) + 1])

    return cut


def test_every_pass_has_examples_of_what_it_rewrites_and_leaves():
    for step in PASSES:
        kinds = {type(ex) for ex in step.EXAMPLES}
        assert Rewrite in kinds and (Unchanged in kinds or Refused in kinds), step.__name__


def _text(code):
    return textwrap.dedent(code).lstrip("\n")


@pytest.mark.parametrize("step, example", list(_examples()))
def test_example_text(step, example, upto):
    upto(step)
    options = step.OPTIONS
    if isinstance(example, Rewrite):
        assert unbranch.rewrite_source(example.before, **options) == _text(example.after)
    elif isinstance(example, Unchanged):
        assert unbranch.rewrite_source(example.code, **options) == _text(example.code)
    else:
        assert isinstance(example, Refused)
        with pytest.raises(UnbranchError, match=re.escape(example.message)):
            unbranch.rewrite_source(example.code, strict=True, **options)
        left = unbranch.rewrite_source(example.code, strict=False, **options)  # the default: stays Python, says why
        assert "_ub.unconverted(" in left and repr(example.message) in left


def _run(code, x, hook=False):
    """(what the function gives, its first parameter's attributes after), or the exception's type and
    message. The first parameter (``self``, a hook's ``module``) holds a tensor for each attribute the
    code names (``self.n``), fresh for each run; the others are copies of ``x``; an object the code
    makes (``Output(...)``) is a namespace. ``hook``: the result as ``Module.__call__`` reads a
    forward hook's (None keeps the output, its last argument)."""
    scope = {"torch": torch, "_ub": runtime, "Output": types.SimpleNamespace}
    exec(_text(code), scope)
    forward = next(v for k, v in scope.items() if isinstance(v, types.FunctionType) and k != "Output")
    owner = forward.__code__.co_varnames[0]
    state = types.SimpleNamespace(**{name: torch.zeros(4) for name in re.findall(rf"\b{owner}\.(\w+)", code)})
    # a callee's variant (ReturnsToRest) hands its result to a caller's rest: here one giving it back
    rest = {"_ub_rest": lambda value: value} if "_ub_rest" in code else {}
    args = [x.clone() for _ in range(forward.__code__.co_argcount - 1)]
    try:
        result = forward(state, *args, **rest)
    except Exception as e:  # the same exception type and message on both sides
        return type(e), str(e)
    if hook and result is None:
        result = args[-1]
    return (vars(result) if isinstance(result, types.SimpleNamespace) else result), vars(state)


@pytest.mark.parametrize("step, example", [p for p in _examples() if isinstance(p.values[1], Rewrite)])
def test_example_behaviour(step, example):
    for x in (
        torch.randn(4, 3).abs() + 0.1,
        -torch.randn(4, 3).abs() - 0.1,
        torch.randn(5, 2),
        torch.full((3,), float("inf")).half(),
        torch.randn(1, 3).half(),
    ):
        hook = step.OPTIONS.get("hook_output", False)
        before, after = _run(example.before, x, hook), _run(example.after, x, hook)
        if isinstance(before, tuple) and isinstance(before[0], type):
            assert after == before  # both raised the same
        else:
            torch.testing.assert_close(after, before, equal_nan=True)
