"""A read-only walk over a libcst tree, for the analyses.

libcst's ``node.visit(visitor)`` rebuilds every node it passes through, also for a
``CSTVisitor`` that changes nothing; over transformers' forwards the analyses spent most of
their time there. ``read`` calls the same ``on_visit``/``visit_<Node>``/``leave_<Node>``
hooks in the same order (libcst's own order of each node's children) and rebuilds nothing.
"""

from __future__ import annotations

import functools
import inspect
import re

import libcst as cst

_CHILD = re.compile(r'visit_\w+\(\s*self,\s*"(\w+)"')


@functools.cache
def _fields(node_type: type) -> tuple[str, ...]:
    """The fields of ``node_type`` holding children, in the order libcst visits them (read once
    from its ``_visit_and_replace_children``, which names each field as it visits it)."""
    return tuple(dict.fromkeys(_CHILD.findall(inspect.getsource(node_type._visit_and_replace_children))))


def read(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """``node.visit(visitor)`` for a visitor that only reads, without rebuilding the tree."""
    if visitor.on_visit(node):
        for field in _fields(type(node)):
            value = getattr(node, field)
            if isinstance(value, cst.CSTNode):
                read(value, visitor)
            elif isinstance(value, (tuple, list)):
                for child in value:
                    if isinstance(child, cst.CSTNode):
                        read(child, visitor)
    visitor.on_leave(node)
