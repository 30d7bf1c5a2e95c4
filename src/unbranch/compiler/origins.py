"""Where each statement of the rewritten code comes from, read from the parser once.

At parse time every libcst statement of the function is paired with the ``ast`` statement
CPython's parser made of the same text (the two trees have the same statement structure),
which gives its line. Passes build new nodes; whatever a pass returns for a node inherits
that node's origin (``Pass.on_leave`` does it), so a branch function stands for its ``if``
and a moved statement keeps its own line. Lines are relative to the function's text (1 is
its first line): the same source compiles to the same result wherever it lives.

The generated-line -> original-line table is built from positions on the *output* tree,
only when something (a traceback, an error) asks for it.
"""

from __future__ import annotations

import ast
import difflib

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from .analysis.walk import Dispatching


class Origins:
    def __init__(self) -> None:
        # id -> (node kept alive, line, the ast statement of the same text or None, made by the parser)
        self._line: dict[int, tuple[cst.CSTNode, int, ast.AST | None, bool]] = {}

    @classmethod
    def parse(cls, fn: cst.FunctionDef, tree: ast.FunctionDef) -> Origins:
        origins = cls()
        origins._pair(fn, tree)
        return origins

    def line(self, node) -> int | None:
        """Line (in the function's text) of the code ``node`` stands for, if known."""
        found = self._line.get(id(node))
        return found[1] if found is not None and found[0] is node else None

    def twin(self, node) -> ast.AST | None:
        """The parser's ``ast`` statement for ``node`` (same kind of statement), if it has one.

        Conditions are classified on it: no rendering of libcst nodes back to text.
        """
        found = self._line.get(id(node))
        return found[2] if found is not None and found[0] is node else None

    def as_parsed(self, node) -> ast.AST | None:
        """``twin(node)`` where ``node`` is the very statement the parser made (no pass rebuilt
        it): then the ``ast`` statement's text is all of ``node``'s."""
        found = self._line.get(id(node))
        return found[2] if found is not None and found[0] is node and found[3] else None

    def inherit(self, new, old) -> None:
        """``new`` (a node or a FlattenSentinel of nodes) stands for ``old``, unless it has an origin of its own."""
        if new is old:
            return
        line = self.line(old)
        if line is None:
            return
        twin = self.twin(old)
        for node in new.nodes if isinstance(new, cst.FlattenSentinel) else (new,):
            if isinstance(node, cst.CSTNode) and self.line(node) is None:
                self._line[id(node)] = (node, line, twin if type(node) is type(old) else None, False)

    def placed_at(self, new, line: int) -> None:
        """``new``, which unbranch wrote, stands for the code at ``line`` (no statement of the parser's)."""
        self._line[id(new)] = (new, line, None, False)

    def retested(self, new, old) -> None:
        """``new`` stands for ``old`` on its line with a test of unbranch's own: classified as written
        (no parser's statement to read the condition from)."""
        line = self.line(old)
        if line is not None:
            self._line[id(new)] = (new, line, None, False)

    def relaid(self, new, old) -> None:
        """``new`` is ``old``'s own text laid out anew (a line of its own, a block of its own
        lines): it keeps all of ``old``'s origin, the parser's statement included."""
        found = self._line.get(id(old))
        if found is not None and found[0] is old:
            self._line[id(new)] = (new, *found[1:])

    def adopt(self, fn: cst.FunctionDef, text: str, original_text: str) -> None:
        """Origins for ``fn``, whose text is ``text``, a tree a user hook built from the original.

        A hook's transformer rebuilds the nodes it passes through, so they lose their origins:
        ``fn`` is paired with the parser's tree of its own text, whose lines are matched back to
        the original text line for line (a line the hook wrote takes the one before it).
        """
        fresh = Origins.parse(fn, ast.parse(text).body[0])
        old = [ln.strip() for ln in original_text.splitlines()]
        new = [ln.strip() for ln in text.splitlines()]
        matched: dict[int, int] = {}
        for a, b, size in difflib.SequenceMatcher(None, old, new, autojunk=False).get_matching_blocks():
            matched.update({b + k + 1: a + k + 1 for k in range(size)})
        back, last = {}, 1
        for line in range(1, len(new) + 1):
            last = back[line] = matched.get(line, last)
        for key, (node, line, twin, _) in fresh._line.items():
            if self.line(node) is None:
                self._line[key] = (node, back.get(line, line), twin, False)  # (a twin of the hook's text)

    def cloned(self, node: cst.CSTNode) -> cst.CSTNode:
        """``node.deep_clone()`` whose statements keep the origins of the statements they copy."""
        copy = node.deep_clone()
        self._copy(node, copy)
        return copy

    def _copy(self, old, new) -> None:
        line = self.line(old)
        if line is not None:
            self._line[id(new)] = (new, line, self.twin(old), False)
        if isinstance(old, cst.BaseSmallStatement):
            return  # origins stop at statements
        for a, b in zip(old.children, new.children):
            self._copy(a, b)

    def _set(self, node: cst.CSTNode, stmt: ast.AST) -> None:
        self._line[id(node)] = (node, stmt.lineno, stmt, True)

    def _pair(self, node, stmt) -> None:
        """Record ``node``'s line and recurse into the statement blocks both trees hold."""
        self._set(node, stmt)
        for block, stmts in _blocks(node, stmt):
            self._pair_block(block, stmts)

    def _pair_block(self, block, stmts: list) -> None:
        pending = list(stmts)
        for s in _statements(block):
            if isinstance(s, cst.SimpleStatementLine):
                self._set(s, pending[0])
                for small in s.body:
                    self._set(small, pending.pop(0))
            elif isinstance(s, cst.BaseSmallStatement):  # `if c: return x` on one line
                self._set(s, pending.pop(0))
            else:
                self._pair(s, pending.pop(0))


class Inheriting(Dispatching):
    """A transformer whose every result stands for the node it replaces (origins inherited)."""

    def __init__(self, origins: Origins) -> None:
        super().__init__()
        self.origins = origins

    def on_leave(self, original, updated):
        result = super().on_leave(original, updated)
        self.origins.inherit(result, original)
        return result


def _statements(block) -> list:
    if isinstance(block, cst.SimpleStatementSuite):
        return list(block.body)
    return list(block.body)


def _blocks(node, stmt) -> list:
    """(libcst block, matching ast statement list) pairs directly inside a compound statement."""
    if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.With)):
        return [(node.body, stmt.body)]
    if isinstance(node, cst.If):
        pairs = [(node.body, stmt.body)]
        if isinstance(node.orelse, cst.If):
            pairs.append((cst.IndentedBlock([node.orelse]), stmt.orelse))
        elif node.orelse is not None:
            pairs.append((node.orelse.body, stmt.orelse))
        return pairs
    if isinstance(node, (cst.For, cst.While)):
        return [(node.body, stmt.body)] + ([(node.orelse.body, stmt.orelse)] if node.orelse else [])
    if isinstance(node, (cst.Try, cst.TryStar)):
        pairs = [(node.body, stmt.body)]
        pairs += [(h.body, a.body) for h, a in zip(node.handlers, stmt.handlers)]
        if node.orelse is not None:
            pairs.append((node.orelse.body, stmt.orelse))
        if node.finalbody is not None:
            pairs.append((node.finalbody.body, stmt.finalbody))
        return pairs
    if isinstance(node, cst.Match):
        return [(c.body, a.body) for c, a in zip(node.cases, stmt.cases)]
    return []


def line_table(module: cst.Module, origins: Origins) -> dict[int, int]:
    """Generated line -> line in the function's text, from positions on the output tree.

    Each node with an origin claims the lines it spans (a statement moved unchanged maps
    line for line); nodes nested deeper claim theirs after, so the innermost origin wins.
    Lines of code unbranch wrote without an origin take the enclosing node's.
    """
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    table: dict[int, int] = {}

    def walk(node):
        line = origins.line(node)
        if line is not None and node in positions:
            span = positions[node]
            for k, generated in enumerate(range(span.start.line, span.end.line + 1)):
                table[generated] = line + k if k < _height(node) else line
        for child in node.children:
            walk(child)

    walk(module)
    return table


def _height(node) -> int:
    """How many lines of its own code a node has before its nested block (all of a simple one)."""
    if isinstance(node, (cst.SimpleStatementLine, cst.BaseSmallStatement)):
        return 1 + cst.Module([]).code_for_node(node).strip("\n").count("\n")
    return 1
