"""The output's text: statements a pass kept are copied from the source (``compiler.verbatim``),
and the text is exactly what libcst writes for the output tree, whatever the layout."""

from __future__ import annotations

import ast
import textwrap
import threading

import libcst as cst
import pytest
import torch

from unbranch.compiler import libcst_internals as parse
from unbranch.compiler import verbatim
from unbranch.compiler.pipeline import Options, compile_source
from unbranch.compiler.source import SourceInfo

LAYOUT = '''
@decorator  # on the decorator
# between decorators
@other(
    1,
)
def f(self, x: torch.Tensor):
    """A docstring
       of two lines."""
    # leading comment
    y = x + 1  # trailing comment

  # a comment at an odd indentation
    if x.sum() > 0:
        # first in the branch
        y = y * 2; z = 1
        # last in the branch
    elif x.sum() < -5:
        y = y - \\
            1
    else:
        y = y - 1
# a comment at column 0
    try:
        z = y
    except (ValueError,
            TypeError) as e:  # an except clause of two lines
        raise
    else: z = z
    finally:
        pass
    for i in range(3): y = y + i
    while y is None:
        pass
    else:
        y = y
    @staticmethod
    # inside the decorators of a nested def
    def helper(a):
        return a

    with torch.no_grad():
        w = y
    return y
    # after the last statement
'''

EARLY_RETURN = """
def f(self, x: torch.Tensor):
    a = x * 2  # kept in place
    if (x > 0).all():
        return a
    b = a - 1  # moved into the else branch: one level deeper
    return b
"""

TABS = "def f(self, x: torch.Tensor):\n\ty = x\n\tif x.sum() > 0:\n\t\ty = y + 1\n\treturn y\n"

NO_NEWLINE_AT_END = "def f(self, x: torch.Tensor):\n    y = x\n    if x.sum() > 0:\n        y = y + 1\n    return y"

MATCH = """
def f(self, x: torch.Tensor, mode):
    y = x
    match mode:
        case "c":
            y = y - 1
        case (
            "a"
            | "b"
        ):
            y = y + 1
    if y.sum() > 0:
        y = y * 2
    return y
"""


def compiled(text: str):
    text = textwrap.dedent(text).lstrip("\n")
    return text, compile_source(SourceInfo("<string>", 1, text, "f"), Options())


def spans(text: str):
    return verbatim._Spans.of(cst.parse_module(text), ast.parse(text).body[0], text)


@pytest.mark.parametrize("source", [LAYOUT, EARLY_RETURN, TABS, NO_NEWLINE_AT_END, MATCH])
def test_the_text_is_what_libcst_writes_for_the_output(source):
    text, out = compiled(source)
    assert out.changed
    assert out.text == out.tree.code


def test_statements_kept_are_their_source_lines():
    text, out = compiled(LAYOUT)
    found = spans(text)
    assert found is not None
    lines = text.splitlines(True)
    kept = {"".join(lines[first - 1 : last]) for _, first, last, _ in found.found.values()}
    # every statement of the source in a block, nested ones too, with the comment lines before it
    assert "  # a comment at an odd indentation\n    if x.sum() > 0:\n" in "".join(kept)
    assert "        # first in the branch\n        y = y * 2; z = 1\n" in kept
    assert "        y = y - \\\n            1\n" in kept
    assert "# a comment at column 0\n    try:\n" in "".join(kept)
    nested = "    @staticmethod\n    # inside the decorators of a nested def\n    def helper(a):\n        return a\n"
    assert nested in kept
    assert "\n    with torch.no_grad():\n        w = y\n" in kept  # the blank line before it is its own
    assert "    return y\n" in kept  # the comment after it is the block's
    assert len(found.found) == 19
    for line in ("    # leading comment\n    y = x + 1  # trailing comment\n", "    for i in range(3): y"):
        assert line in out.text
    assert "  # a comment at an odd indentation\n" in out.text


def test_a_moved_statement_is_written_at_its_new_indentation():
    text, out = compiled(EARLY_RETURN)
    assert "    a = x * 2  # kept in place\n" in out.text
    # into the else branch's function: libcst writes it at its new depth
    assert "\n        b = a - 1  # moved into the else branch: one level deeper\n        return b\n" in out.text
    assert out.text == out.tree.code


def test_layouts_whose_lines_do_not_tile_are_written_by_libcst():
    # a `case` after the first whose pattern spans lines starts before the line its block's
    # header ends: the spans disagree with the parser's and libcst writes the whole function
    assert spans(textwrap.dedent(MATCH).lstrip("\n")) is None
    assert spans(NO_NEWLINE_AT_END) is None  # libcst drops the last newline itself


def test_the_output_runs_like_the_source():
    text, out = compiled(EARLY_RETURN)
    scope = {"torch": torch}
    exec(out.text.replace("_ub.", "__import__('unbranch').runtime."), scope)
    for x in (torch.ones(3), -torch.ones(3)):
        assert torch.equal(scope["f"](None, x), (x * 2) if (x > 0).all() else (x * 2 - 1))


@pytest.mark.parametrize("source", [LAYOUT, EARLY_RETURN, TABS, NO_NEWLINE_AT_END, MATCH])
def test_the_unchecked_parse_is_libcsts_tree(source):
    text = textwrap.dedent(source).lstrip("\n")
    tree = parse.parse_module(text)
    assert tree.deep_equals(cst.parse_module(text))
    assert tree.code == text


def test_the_parse_leaves_libcsts_checks_in_place():
    with pytest.raises(cst.ParserSyntaxError):
        parse.parse_module("def f(:\n")
    for make in (lambda: cst.Name(""), lambda: cst.Integer("x")):  # after a parse, a failed one too
        with pytest.raises(cst.CSTValidationError):
            make()


def test_nodes_other_threads_build_meanwhile_are_checked():
    text = textwrap.dedent(LAYOUT).lstrip("\n") * 20
    done = threading.Event()
    unchecked = []

    def build():
        while not done.is_set():
            try:
                cst.Name("")
            except cst.CSTValidationError:
                continue
            unchecked.append(1)

    other = threading.Thread(target=build)
    other.start()
    try:
        for _ in range(20):
            parse.parse_module(text)
    finally:
        done.set()
        other.join()
    assert not unchecked
