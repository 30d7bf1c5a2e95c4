"""The output's text, with every statement of the user's that a pass kept as it was copied
from the source instead of generated again.

libcst's codegen walks every node of the output, also the statements no pass touched,
which are most of a rewritten function: it was a tenth of a rewritten method's cold time
over transformers' forwards. A statement the output holds as the very node the parser made
is its own text in the source when it stands at its original indentation (what libcst
would write for it there). The lines each statement spans come from the ``ast`` statement of
the same code and the comment lines libcst attached to it; where they fail to tile a block
exactly, the function is generated whole as before.
"""

from __future__ import annotations

import ast
import contextlib
import itertools
from dataclasses import dataclass

import libcst as cst

from .analysis.walk import STRUCTURE, is_a, transform
from .libcst_internals import CodegenState, write


@dataclass(frozen=True)
class _Verbatim(cst.BaseStatement):
    """Stands for ``node`` in a tree made only to be written: its source ``text`` where the
    indentation is ``indent``, else what libcst writes for ``node``."""

    node: cst.BaseStatement
    text: str
    indent: str

    def _visit_and_replace_children(self, visitor):
        return self

    def _codegen_impl(self, state) -> None:
        if "".join(state.indent_tokens) == self.indent:
            state.add_token(self.text)
        else:
            write(self.node, state)


def code(out: cst.Module, original: cst.Module, fn_ast: ast.FunctionDef, text: str) -> str:
    """``out.code``, with the statements of ``original`` that ``out`` still holds copied from ``text``."""
    spans = _Spans.of(original, fn_ast, text)
    return _written(out if spans is None else transform(out, _Copied(spans)))


def _written(module: cst.Module) -> str:
    """``module.code``, recording no positions on the way."""
    state = _Writing(default_indent=module.default_indent, default_newline=module.default_newline)
    write(module, state)
    return "".join(state.tokens)


class _Writing(CodegenState):
    """libcst's codegen state, whose hook for recording positions (a generator-based context
    manager entered around every expression, which records nothing in the plain state) is one
    shared no-op: a measurable share of a rewritten method's cold time (benchmarks/corpus.py)."""

    def record_syntactic_position(self, node, *, start_node=None, end_node=None):
        return _NOTHING


_NOTHING = contextlib.nullcontext()


class _Copied(cst.CSTTransformer):
    """The output tree with each statement of the source it holds replaced by its text."""

    def __init__(self, spans: _Spans) -> None:
        super().__init__()
        self.spans = spans

    def enters(self, node_type: type) -> bool:
        return is_a(node_type, STRUCTURE)  # (statements are found in statements and blocks only)

    def on_visit(self, node) -> bool:
        return self._found(node) is None

    def on_leave(self, original, updated):
        found = self._found(original)
        if found is None:
            return updated
        _, first, last, indent = found
        spans = self.spans
        return _Verbatim(original, spans.text[spans.offsets[first - 1] : spans.offsets[last]], indent)

    def _found(self, node):
        found = self.spans.found.get(id(node))
        return found if found is not None and found[0] is node else None


class _Mismatch(Exception):
    """The lines computed for a statement disagree with the parser's: keep libcst's codegen."""


class _Spans:
    """The lines of the statements in the blocks of a function: each starts at its first
    token's line less the comment lines libcst attached before it, and ends where the next one
    starts (the last one of a block, where the block ends less its trailing comment lines)."""

    def __init__(self, module: cst.Module, text: str) -> None:
        self.module, self.text = module, text
        self.lines = text.split("\n")[:-1]
        self.offsets = [0, *itertools.accumulate(len(line) + 1 for line in self.lines)]  # where each line starts
        self.found: dict[int, tuple] = {}  # id -> (statement, first line, last line, indentation)

    @classmethod
    def of(cls, module: cst.Module, fn_ast: ast.FunctionDef, text: str) -> _Spans | None:
        if not module.has_trailing_newline or "\r" in text or len(module.body) != 1:
            return None  # (libcst drops the last newline of such a text; \r also ends lines)
        spans = cls(module, text)
        try:
            spans._clauses(module.body[0], fn_ast, "", len(spans.lines) - len(module.footer))
        except _Mismatch:
            return None
        return spans

    def _indent(self, outer: str, block) -> str:
        return outer + (self.module.default_indent if block.indent is None else block.indent)

    def _block(self, block: cst.IndentedBlock, stmts: list, indent: str, end: int) -> None:
        """The statements of ``block`` (at ``indent``), paired with the ``ast`` statements
        ``stmts``; ``end``: the block's last line (1-based)."""
        pending = list(stmts)
        pairs = []
        for s in block.body:
            taken = len(s.body) if isinstance(s, cst.SimpleStatementLine) else 1
            pairs.append((s, pending[:taken]))
            del pending[:taken]
        if pending or any(not a for _, a in pairs):
            raise _Mismatch
        starts = [_start(s, a[0]) for s, a in pairs] + [end - len(block.footer) + 1]
        for (s, a), first, after in zip(pairs, starts, starts[1:]):
            last, token = after - 1, self.lines[a[0].lineno - 1]
            if not token.startswith(indent) or token[len(indent) : len(indent) + 1].isspace():
                raise _Mismatch  # (its first token's line is not at the block's indentation)
            if isinstance(s, cst.SimpleStatementLine):
                if last != a[-1].end_lineno:
                    raise _Mismatch
            else:
                self._clauses(s, a[0], indent, last)
            self.found[id(s)] = (s, first, last, indent)

    def _clauses(self, node, stmt: ast.AST, indent: str, end: int) -> None:
        """The blocks of the compound statement ``node`` (at ``indent``, ending at line ``end``),
        each ending where the next clause starts."""
        parts = _parts(node, stmt)
        if isinstance(node, cst.Match):
            end -= len(node.footer)
        for k, (holder, block, stmts, _) in enumerate(parts):
            block_end = parts[k + 1][3] - 1 if k + 1 < len(parts) else end
            if block is None:  # `elif`: an If of its own clauses
                self._clauses(holder, stmts, indent, block_end)
            elif isinstance(block, cst.IndentedBlock):
                outer = self._indent(indent, node) if isinstance(holder, cst.MatchCase) else indent
                self._block(block, stmts, self._indent(outer, block), block_end)
            elif block_end != stmts[-1].end_lineno:  # a one-line suite ends on its line
                raise _Mismatch


def _parts(node, stmt) -> list[tuple]:
    """(node holding the clause's keyword, its block, the ``ast`` statements of the block, the
    clause's first line) for the clauses of a compound statement in order; an ``elif`` is
    (its If, None, its ``ast`` If, its first line)."""
    if isinstance(node, cst.Match):
        return [(case, case.body, a.body, _after(case, case.body, a.body)) for case, a in zip(node.cases, stmt.cases)]
    parts = [(node, node.body, stmt.body, None)]
    for h, a in zip(getattr(node, "handlers", ()), getattr(stmt, "handlers", ())):
        parts.append((h, h.body, a.body, a.lineno - len(h.leading_lines)))  # `except` may span lines
    orelse = getattr(node, "orelse", None)
    if isinstance(orelse, cst.If):
        parts.append((orelse, None, stmt.orelse[0], _start(orelse, stmt.orelse[0])))
    elif orelse is not None:
        parts.append((orelse, orelse.body, stmt.orelse, _after(orelse, orelse.body, stmt.orelse)))
    if getattr(node, "finalbody", None) is not None:
        final = node.finalbody
        parts.append((final, final.body, stmt.finalbody, _after(final, final.body, stmt.finalbody)))
    return parts


def _after(holder, block, stmts) -> int:
    """The first line of a clause whose keyword line ends where its block starts."""
    if isinstance(block, cst.IndentedBlock):  # the keyword's line ends with the block's header
        return _start(block.body[0], stmts[0]) - 1 - len(holder.leading_lines)
    return stmts[0].lineno - len(holder.leading_lines)  # `else: x` on one line


def _start(s: cst.BaseStatement, stmt: ast.AST) -> int:
    """The first line of ``s``'s text: its first token's, less the comment lines before it."""
    line = stmt.lineno
    leading = len(s.leading_lines)
    decorators = getattr(s, "decorators", ())
    if decorators:
        line = stmt.decorator_list[0].lineno
        leading += len(decorators[0].leading_lines)
    return line - leading
