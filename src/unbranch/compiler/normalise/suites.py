"""Every block in the one shape the passes read, and the user's layout back where nothing changed.

Python lets a block be the rest of its header's line and lets one line hold several
statements::

    if x.sum() > 0: a = x * 2; x = a + 1        if x.sum() > 0:
                                           ->       a = x * 2
                                                    x = a + 1

``expand`` gives every block of the function (not of the functions nested in it, which
the passes leave as written) that shape before any pass runs: an indented block of lines
holding one statement each. The passes, the analyses and the lowerings then meet a single
shape. ``Layout.restore`` undoes it after the passes wherever the output still holds what
``expand`` made, unchanged: a compound statement no pass touched, or a run of lines split
from one line, gets its parsed node back, so the emitted text is the user's own there.
"""

from __future__ import annotations

import libcst as cst

from ..analysis.walk import STRUCTURE, is_a, transform
from ..origins import Origins


class Layout:
    """What ``expand`` changed: each node it made -> the parsed node it stands for."""

    def __init__(self) -> None:
        self.made: dict[int, tuple[cst.CSTNode, cst.CSTNode]] = {}  # id(new) -> (new, parsed)
        self.runs: dict[int, tuple[tuple, cst.SimpleStatementLine]] = {}  # id(first line) -> (lines, parsed line)

    def restore(self, fn: cst.FunctionDef) -> cst.FunctionDef:
        """``fn`` with the parsed nodes back wherever it holds what ``expand`` made, unchanged."""
        if not self.made:
            return fn
        return transform(fn, _Restoring(self))


def expand(fn: cst.FunctionDef, origins: Origins) -> tuple[cst.FunctionDef, Layout]:
    """``fn`` with every one-line suite an indented block and one statement per line."""
    layout = Layout()
    return transform(fn, _Expanding(fn, origins, layout)), layout


class _Expanding(cst.CSTTransformer):
    def __init__(self, root: cst.FunctionDef, origins: Origins, layout: Layout) -> None:
        super().__init__()
        self.root, self.origins, self.layout = root, origins, layout

    def enters(self, node_type: type) -> bool:
        return is_a(node_type, STRUCTURE)

    def on_visit(self, node) -> bool:
        # nested functions and classes stay as written (no pass enters them)
        return not isinstance(node, (cst.FunctionDef, cst.ClassDef)) or node is self.root

    def on_leave(self, original, updated):
        if isinstance(updated, cst.SimpleStatementSuite):
            lines = [self._line(small) for small in updated.body]
            if len(lines) > 1:  # moved into a block of its own (a branch function), it is one line again
                joined = cst.SimpleStatementLine(updated.body)
                self.origins.relaid(joined, updated.body[0])
                self.layout.runs[id(lines[0])] = (tuple(lines), joined)
            updated = cst.IndentedBlock(lines, header=updated.trailing_whitespace)
        elif isinstance(updated, cst.SimpleStatementLine) and len(updated.body) > 1:
            lines = [self._line(small) for small in updated.body]
            lines[0] = self._keep(lines[0], lines[0].with_changes(leading_lines=updated.leading_lines))
            lines[-1] = self._keep(lines[-1], lines[-1].with_changes(trailing_whitespace=updated.trailing_whitespace))
            self.layout.runs[id(lines[0])] = (tuple(lines), original)
            return cst.FlattenSentinel(lines)
        if updated is not original:
            self.layout.made[id(updated)] = (updated, original)
            self.origins.inherit(updated, original)
        return updated

    def _line(self, small: cst.BaseSmallStatement) -> cst.SimpleStatementLine:
        """A line of its own holding ``small``, which keeps its origin (its text is unchanged)."""
        alone = small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        self.origins.relaid(alone, small)
        line = cst.SimpleStatementLine([alone])
        self.origins.relaid(line, small)
        return line

    def _keep(self, old: cst.CSTNode, new: cst.CSTNode) -> cst.CSTNode:
        self.origins.relaid(new, old)
        return new


class _Restoring(cst.CSTTransformer):
    def __init__(self, layout: Layout) -> None:
        super().__init__()
        self.layout = layout

    def enters(self, node_type: type) -> bool:
        return is_a(node_type, STRUCTURE)

    def on_visit(self, node) -> bool:
        return self._parsed(node) is None

    def on_leave(self, original, updated):
        parsed = self._parsed(original)
        if parsed is not None:
            return parsed
        if isinstance(updated, cst.IndentedBlock):
            body = self._joined(updated.body)
            if body is not None:
                return updated.with_changes(body=body)
        return updated

    def _parsed(self, node):
        found = self.layout.made.get(id(node))
        return found[1] if found is not None and found[0] is node else None

    def _joined(self, body) -> list | None:
        """``body`` with each whole run of lines split from one line joined back, or None if none is."""
        out, k, joined = [], 0, False
        while k < len(body):
            run = self.layout.runs.get(id(body[k]))
            lines = run[0] if run is not None else ()
            if lines and len(body) - k >= len(lines) and all(a is b for a, b in zip(body[k:], lines)):
                out.append(run[1])
                k += len(lines)
                joined = True
            else:
                out.append(body[k])
                k += 1
        return out if joined else None
