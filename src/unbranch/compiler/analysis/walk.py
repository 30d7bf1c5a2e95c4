"""Walks over a libcst tree that rebuild only what changed.

libcst's ``node.visit(visitor)`` rebuilds (and validates) every node it passes through, also
where nothing under it changed, and for a ``CSTVisitor`` that changes nothing; over
transformers' forwards the analyses and the passes spent most of their time there. ``read``
and ``transform`` call the same ``on_visit``/``visit_<Node>``/``leave_<Node>`` hooks in the
same order (libcst's own order of each node's children): ``read`` rebuilds nothing,
``transform`` only the nodes with a changed child, so an unchanged subtree stays the same
objects. (The ``visit_<Node>_<field>`` attribute hooks are not called: no pass has one.)
"""

from __future__ import annotations

import functools
import re
import typing

import libcst as cst

from ..libcst_internals import visit_order_source

_CHILD = re.compile(r'visit_(\w+)\(\s*self,\s*"(\w+)"')


@functools.cache
def _children(node_type: type) -> tuple[tuple[str, str], ...]:
    """(field, how libcst visits it) for the fields of ``node_type`` holding children, in the
    order libcst visits them (read once from its ``_visit_and_replace_children``, which names
    each field as it visits it: required, optional, sentinel, sequence or body_sequence)."""
    found = _CHILD.findall(visit_order_source(node_type))
    return tuple({field: how for how, field in found}.items())


@functools.cache
def child_fields(node_type: type) -> tuple[tuple[str, bool], ...]:
    """(field, does it hold a sequence of children) for ``node_type``: the walks below tell a child
    from an empty optional field by this and identity, not by ``isinstance`` on libcst's abstract
    classes, which took a fifth of the read walks over transformers' forwards (profiled)."""
    return tuple((field, how in _SEQUENCES) for field, how in _children(node_type))


_SEQUENCES = ("sequence", "body_sequence")

# whitespace, comments and punctuation: more than half the nodes a read walk met over
# transformers' forwards, and no analysis has a hook for one
LAYOUT = (
    cst.BaseParenthesizableWhitespace,  # (the annotation of most whitespace fields)
    cst.SimpleWhitespace,
    cst.ParenthesizedWhitespace,
    cst.TrailingWhitespace,
    cst.Newline,
    cst.EmptyLine,
    cst.Comment,
    cst.Comma,
    cst.Dot,
    cst.LeftParen,
    cst.RightParen,
    cst.LeftSquareBracket,
    cst.RightSquareBracket,
    cst.LeftCurlyBrace,
    cst.RightCurlyBrace,
    cst.AssignEqual,
    cst.Colon,
    cst.Semicolon,
)


@functools.cache
def content_fields(node_type: type) -> tuple[tuple[str, bool], ...]:
    """``child_fields`` less those that hold layout only (by libcst's annotation of the field)."""
    hints = typing.get_type_hints(node_type)
    return tuple((field, many) for field, many in child_fields(node_type) if not _layout(hints[field]))


def _layout(hint) -> bool:
    nodes = _node_classes(hint)
    return bool(nodes) and all(issubclass(c, LAYOUT) for c in nodes)


def _node_classes(hint) -> set[type]:
    if isinstance(hint, type):
        return {hint} if issubclass(hint, cst.CSTNode) else set()
    return set().union(*(_node_classes(arg) for arg in typing.get_args(hint)))


# statements and the clauses holding their blocks: what a walk over the statements of a
# function enters (conditions, headers and whitespace are read or replaced whole)
STRUCTURE = (
    cst.BaseStatement,
    cst.BaseSmallStatement,
    cst.BaseSuite,
    cst.Else,
    cst.ExceptHandler,
    cst.ExceptStarHandler,
    cst.Finally,
    cst.MatchCase,
)


@functools.cache
def is_a(node_type: type, classes: tuple[type, ...]) -> bool:
    """``issubclass`` memoised per node type: libcst's node classes are abstract, and an
    ``isinstance`` on them in a hook called for every node is a large part of a walk."""
    return issubclass(node_type, classes)


def read(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """``node.visit(visitor)`` for a visitor that only reads, without rebuilding the tree."""
    _read(node, visitor, _TABLES[type(visitor)])


class _Table(dict):
    """node type -> (visit hook, leave hook, child fields) for one visitor class: a walk looks
    each node's up in one dict instead of by name (libcst's dispatch) or in several caches."""

    def __init__(self, visitor_type: type, by_name: bool | None = None) -> None:
        super().__init__()
        self.visitor_type = visitor_type
        # libcst's own dispatch (visit_<Node>/leave_<Node>), unless the class replaced it
        self.by_name = (
            by_name
            if by_name is not None
            else (visitor_type.on_visit is cst.CSTVisitor.on_visit and visitor_type.on_leave is cst.CSTVisitor.on_leave)
        )
        # a walk that would call no hook in layout skips it (its nodes hold layout only)
        self.fields = content_fields if self.by_name and not hooks_layout(visitor_type) else child_fields

    def __missing__(self, node_type: type) -> tuple:
        kind, name = self.visitor_type, node_type.__name__
        if self.by_name:
            hooks = _own(kind, f"visit_{name}"), _own(kind, f"leave_{name}")
        else:
            hooks = kind.on_visit, kind.on_leave
        self[node_type] = entry = (*hooks, self.fields(node_type))
        return entry


@functools.cache
def hooks_layout(kind: type) -> bool:
    """Has the visitor or transformer class ``kind`` a hook of its own for a ``LAYOUT`` node?"""
    return any(_own(kind, f"{hook}_{t.__name__}") for t in LAYOUT for hook in ("visit", "leave"))


def _own(kind: type, name: str):
    """The hook ``name`` of ``kind``, None where it is libcst's typed no-op stub (every node type
    has one on ``CSTVisitor`` and ``CSTTransformer``: calling them was a third of a read walk)."""
    hook = getattr(kind, name, None)
    return None if hook is None or hook is getattr(_STUBS[issubclass(kind, cst.CSTTransformer)], name, None) else hook


_STUBS = {False: cst.CSTVisitor, True: cst.CSTTransformer}


class _Tables(dict):
    """visitor class -> its ``_Table``, made when first asked for."""

    def __init__(self, by_name: bool | None) -> None:
        super().__init__()
        self.by_name = by_name

    def __missing__(self, kind: type) -> _Table:
        self[kind] = table = _Table(kind, self.by_name)
        return table


_TABLES = _Tables(by_name=None)  # read: libcst's dispatch unless the class replaced it
_NAMED = _Tables(by_name=True)  # Dispatching: always by name


class Dispatching(cst.CSTTransformer):
    """libcst's dispatch to ``visit_<Node>``/``leave_<Node>``, each looked up once per node
    type: libcst formats the name and looks it up at every node a transformer passes."""

    def on_visit(self, node) -> bool:
        visit = _NAMED[type(self)][type(node)][0]
        return visit is None or visit(self, node) is not False

    def on_leave(self, original, updated):
        leave = _NAMED[type(self)][type(original)][1]
        return updated if leave is None else leave(self, original, updated)


def _read(node: cst.CSTNode, visitor: cst.CSTVisitor, table: _Table) -> None:
    visit, leave, fields = table[type(node)]
    if visit is None or visit(visitor, node) is not False:
        for field, many in fields:
            value = getattr(node, field)
            if many and isinstance(value, (tuple, list)):  # (`from m import *` holds a node there)
                for child in value:
                    _read(child, visitor, table)
            elif value is not None and value is not cst.MaybeSentinel.DEFAULT:
                _read(value, visitor, table)
    if leave is not None:
        leave(visitor, node)


def transform(node: cst.CSTNode, transformer: cst.CSTTransformer):
    """``node.visit(transformer)``, rebuilding only the nodes under which something changed.

    A transformer with ``enters(node_type)`` is never shown a child for which it says False
    (neither ``on_visit`` nor ``on_leave``): a pass that would neither enter nor change it.
    """
    return _transform(node, transformer, getattr(transformer, "enters", _everything))


def _everything(node_type: type) -> bool:
    return True


def _transform(node: cst.CSTNode, transformer: cst.CSTTransformer, enters):
    if transformer.on_visit(node):
        changes = {}
        for field, how in _children(type(node)):
            value = getattr(node, field)
            if value is None or value is cst.MaybeSentinel.DEFAULT:
                continue  # an optional field with nothing to visit
            if how in _SEQUENCES and isinstance(value, (tuple, list)):
                new = _sequence(value, transformer, how == "body_sequence", enters)
            elif enters(type(value)):
                new = _single(value, transformer, how, enters)
            else:
                continue
            if new is not value:
                changes[field] = new
        updated = node.with_changes(**changes) if changes else node
    else:
        updated = node
    return transformer.on_leave(node, updated)


def _single(value, transformer, how: str, enters):
    new = _transform(value, transformer, enters)
    if new is value:
        return new
    if isinstance(new, cst.FlattenSentinel) or (
        how not in ("optional", "sentinel") and isinstance(new, cst.RemovalSentinel)
    ):
        raise TypeError(f"a {type(value).__name__} here cannot be removed or replaced by several nodes")
    if isinstance(new, cst.RemovalSentinel):
        return None if how == "optional" else cst.MaybeSentinel.DEFAULT
    return new


def _sequence(children, transformer, body: bool, enters):
    """The children visited, removed ones dropped, flattened ones spliced in; in a body, a
    statement line emptied by a removal is dropped too (as libcst does). The same sequence
    object when every child came back as itself."""
    out, changed = [], False
    for child in children:
        new = _transform(child, transformer, enters) if enters(type(child)) else child
        if new is child:
            out.append(child)
            continue
        changed = True
        if isinstance(new, cst.RemovalSentinel):
            continue
        for each in new if isinstance(new, cst.FlattenSentinel) else (new,):
            if not (body and not child._is_removable() and each._is_removable()):
                out.append(each)
    return tuple(out) if changed else children
