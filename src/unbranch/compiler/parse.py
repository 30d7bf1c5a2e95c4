"""libcst's parse of a function's text, without checking each node the parser builds.

The native parser builds every node through its dataclass constructor, whose
``__post_init__`` validates it: parentheses balanced, the whitespace a keyword needs. A
tree the parser made from valid Python passes by construction, and over transformers'
forwards the checks were an eighth of the parse, itself two fifths of a rewritten method's
cold time (libcst's own comment there says as much). Nodes the passes build are still checked.

The check is skipped by replacing ``CSTNode.__post_init__`` while this thread parses: one
parse at a time (a lock), the original back in place afterwards whatever happens, and a node
another thread builds meanwhile is checked as always.
"""

from __future__ import annotations

import threading

import libcst as cst
from libcst._nodes.base import CSTNode

_CHECK = CSTNode.__post_init__
_ONE_AT_A_TIME = threading.Lock()


def parse_module(text: str) -> cst.Module:
    """``libcst.parse_module(text)``: the same tree, its nodes not validated one by one."""
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
