"""The parts of libcst that are not its public API, in one place, for the releases pyproject allows.

Three speed-ups lean on them: ``parse_module`` builds nodes unchecked (``CSTNode.__post_init__``,
below), verbatim writes through a codegen state of its own (``CodegenState``, ``_codegen``), walk
reads the order each node visits its children in (``_visit_and_replace_children``).
tests/test_layout.py checks no other module imports a private name of libcst's; a libcst release
that changes these fails the tests here, not a user's export.
"""

from __future__ import annotations

import inspect
import threading

import libcst as cst
from libcst import CSTNode
from libcst._nodes.internal import CodegenState

__all__ = ["CodegenState", "parse_module", "visit_order_source", "write"]

_CHECK = CSTNode.__post_init__
_ONE_AT_A_TIME = threading.Lock()


def parse_module(text: str) -> cst.Module:
    """``libcst.parse_module(text)``: the same tree, its nodes not validated one by one.

    The native parser builds every node through its dataclass constructor, whose
    ``__post_init__`` validates it: parentheses balanced, the whitespace a keyword needs. A tree
    the parser made from valid Python passes by construction, and over transformers' forwards the
    checks were an eighth of the parse (libcst's own comment there says as much). Nodes the passes
    build are still checked. The check is replaced while this thread parses: one parse at a time,
    the original back in place afterwards whatever happens, and a node another thread builds
    meanwhile is checked as always.
    """
    parser = threading.get_ident()

    def check_others(node) -> None:
        if threading.get_ident() != parser:
            _CHECK(node)

    with _ONE_AT_A_TIME:
        try:
            CSTNode.__post_init__ = check_others
            return cst.parse_module(text)
        finally:
            CSTNode.__post_init__ = _CHECK


def visit_order_source(node_type: type) -> str:
    """The source of ``node_type._visit_and_replace_children``, which names each child field as it visits it."""
    return inspect.getsource(node_type._visit_and_replace_children)


def write(node, state: CodegenState) -> None:
    """libcst's codegen of ``node`` into ``state``."""
    node._codegen(state)
