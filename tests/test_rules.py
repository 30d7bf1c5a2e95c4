"""Every rule's EXAMPLES: the rewrite is exact, and before/after compute the same thing."""

import importlib
import pkgutil
import textwrap

import pytest
import torch

import unbranch
import unbranch.rules
from unbranch import UnbranchError, runtime
from unbranch.rules._util import Refused, Rewrite, Unchanged


def _examples():
    for info in pkgutil.iter_modules(unbranch.rules.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"unbranch.rules.{info.name}")
        assert getattr(module, "EXAMPLES", None), f"rule {info.name} has no EXAMPLES"
        for i, ex in enumerate(module.EXAMPLES):
            yield pytest.param(ex, id=f"{info.name}_{type(ex).__name__.lower()}_{i}")


def _text(code):
    return textwrap.dedent(code).lstrip("\n")


@pytest.mark.parametrize("example", list(_examples()))
def test_example_text(example):
    if isinstance(example, Rewrite):
        assert unbranch.rewrite_source(example.before) == _text(example.after)
    elif isinstance(example, Unchanged):
        assert unbranch.rewrite_source(example.code) == _text(example.code)
    else:
        assert isinstance(example, Refused)
        with pytest.raises(UnbranchError, match=example.message.replace("(", r"\(").replace(")", r"\)")):
            unbranch.rewrite_source(example.code)


def _run(code, x):
    scope = {"torch": torch, "_ub": runtime}
    exec(_text(code), scope)
    forward = scope["forward"]
    try:
        return forward(None, *[x.clone() for _ in range(forward.__code__.co_argcount - 1)])
    except Exception as e:  # the same exception type and message on both sides
        return type(e), str(e)


@pytest.mark.parametrize("example", [p for p in _examples() if isinstance(p.values[0], Rewrite)])
def test_example_behaviour(example):
    for x in (
        torch.randn(4, 3).abs() + 0.1,
        -torch.randn(4, 3).abs() - 0.1,
        torch.randn(5, 2),
        torch.full((3,), float("inf")).half(),
        torch.randn(1, 3).half(),
    ):
        before, after = _run(example.before, x), _run(example.after, x)
        if isinstance(before, tuple) and isinstance(before[0], type):
            assert after == before  # both raised the same
        else:
            torch.testing.assert_close(after, before, equal_nan=True)
