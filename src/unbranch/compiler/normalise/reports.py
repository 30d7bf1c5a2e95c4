"""A statement that only reports (a print, a warning, a log record) in a dispatched ``if`` -> the same
statement, run when torch does not trace.

    if torch.isnan(x).any():                        if torch.isnan(x).any():
        warnings.warn("NaN in x", RuntimeWarning)  ->     if not _ub.tracing():
        x = torch.nan_to_num(x)                               warnings.warn("NaN in x", RuntimeWarning)
                                                          x = torch.nan_to_num(x)

An exported program cannot call Python. Inside a cond torch refuses a report that formats a
tensor ("can't actually be reordered"), a warning with a category, a helper keeping the keys it
warned about ("Unsafe side effect"); those it takes run once, at export time, whatever the input.
Eager runs of the rewritten code report exactly as the original; the exported program reports
nothing there, which the report's notes say. An ``if`` whose every side only reports runs
whole when torch does not trace: under export it does nothing, and costs no cond. A report line
after a statement holding a dispatched ``if`` is guarded too: the rest of the function may move
into that ``if``'s branches (a Python value or a list it changes is read there).
"""

from __future__ import annotations

import re

import libcst as cst
from libcst.helpers import get_full_name_for_node

from ..analysis.liveness import orelse_body
from ..passes import IF, Pass, Rewrite, Unchanged

# what a logger writes a record with (``logger.warning``, transformers' ``logger.warning_once``)
_LEVELS = frozenset("debug info warning warn error exception critical fatal log warning_once info_once".split())
# a function named for warning: warn, warn_once, rank_zero_warn, warnings.warn, _warning
_WARNING = re.compile(r"(?:^|_)warn(?:ing)?s?(?:_|$)")


def _reporting(func: cst.BaseExpression) -> bool:
    full = get_full_name_for_node(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
    if full is None:
        return False
    names = full.split(".")
    last = names[-1]
    if names == ["print"] or names[0] == "warnings":
        return True
    if len(names) >= 2 and last in _LEVELS and "log" in names[-2].lower():
        return True
    return bool(_WARNING.search(last))


def reports(stmt) -> bool:
    """A line whose every statement is a call that reports, or an ``if`` whose sides only hold such lines."""
    if isinstance(stmt, cst.SimpleStatementLine):
        return all(
            isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and _reporting(small.value.func)
            for small in stmt.body
        )
    if isinstance(stmt, cst.If):
        return all(reports(s) for s in (*stmt.body.body, *orelse_body(stmt)))
    return False


class Reports(Pass):
    HANDLES = frozenset({IF})
    EXAMPLES = [
        Rewrite(
            """
            def forward(self, x):
                if torch.isnan(x).any():
                    warnings.warn("NaN in x", RuntimeWarning)
                    x = torch.nan_to_num(x)
                return x * 2
            """,
            """
            def forward(self, x):
                if torch.isnan(x).any():
                    if not _ub.tracing():
                        warnings.warn("NaN in x", RuntimeWarning)
                    x = torch.nan_to_num(x)
                return x * 2
            """,
        ),
        Rewrite(
            """
            def forward(self, x):
                if x.abs().max() > 50:
                    logger.warning("large activations: %s", x.abs().max())
                return torch.relu(x)
            """,
            """
            def forward(self, x):
                if not _ub.tracing():
                    if x.abs().max() > 50:
                        logger.warning("large activations: %s", x.abs().max())
                return torch.relu(x)
            """,
        ),
        Rewrite(  # after a branch on data: the rest may move into its sides
            """
            def forward(self, x):
                outs = [x]
                if x.sum() > 0:
                    outs.append(x * 2)
                warnings.warn("combined", RuntimeWarning)
                return torch.stack(outs).sum(0)
            """,
            """
            def forward(self, x):
                outs = [x]
                if x.sum() > 0:
                    outs.append(x * 2)
                if not _ub.tracing():
                    warnings.warn("combined", RuntimeWarning)
                return torch.stack(outs).sum(0)
            """,
        ),
        Unchanged(  # a Python test: torch never sees the report
            """
            def forward(self, x, verbose: bool):
                if verbose:
                    print("forward")
                return x * 2
            """
        ),
    ]

    def __init__(self, fn, ctx):
        super().__init__(fn, ctx)
        self._elifs: set[int] = set()  # ids of ifs that are an elif of another (no statement of their own)

    def visit_If(self, node) -> None:
        if isinstance(node.orelse, cst.If):
            self._elifs.add(id(node.orelse))

    def leave_If(self, original: cst.If, updated: cst.If):
        ctx = self.ctx
        if not ctx.is_candidate(original):
            return updated
        if reports(original) and id(original) not in self._elifs:
            ctx.note(original, "report", "reports only: runs when torch does not trace")
            return self._guarded(updated.with_changes(leading_lines=[]), updated.leading_lines, original)
        body = [self._guarded(s, [], s) if reports(s) else s for s in updated.body.body]
        new = updated.with_changes(body=updated.body.with_changes(body=body))
        if isinstance(updated.orelse, cst.Else):
            orelse = [self._guarded(s, [], s) if reports(s) else s for s in updated.orelse.body.body]
            new = new.with_changes(
                orelse=updated.orelse.with_changes(body=updated.orelse.body.with_changes(body=orelse))
            )
        if new.deep_equals(updated):
            return updated
        ctx.note(original, "report", "its reports run when torch does not trace")
        ctx.origins.inherit(new, original)
        return new

    def leave_IndentedBlock(self, original, updated):
        body = self._after_dispatched(original.body, updated.body)
        if all(a is b for a, b in zip(body, updated.body)):
            return updated  # (a block rebuilt for nothing would lose the user's layout)
        return updated.with_changes(body=body)

    def _after_dispatched(self, originals, stmts) -> list:
        """``stmts`` with each report line after a statement holding a dispatched ``if`` guarded too:
        that rest may move into the ``if``'s branches (normalise.early_return), where torch traces it."""
        out, seen = [], False
        for original, stmt in zip(originals, stmts):
            if seen and isinstance(stmt, cst.SimpleStatementLine) and reports(stmt):
                self.ctx.note(original, "report", "after a branch on data: runs when torch does not trace")
                stmt = self._guarded(stmt.with_changes(leading_lines=[]), stmt.leading_lines, original)
            seen = seen or self._holds_dispatched(original)
            out.append(stmt)
        return out

    def _holds_dispatched(self, stmt) -> bool:
        if isinstance(stmt, cst.If) and self.ctx.is_candidate(stmt):
            return True
        blocks = [stmt.body.body] if isinstance(stmt, (cst.If, cst.With, cst.For, cst.While)) else []
        if isinstance(stmt, cst.If):
            blocks.append(orelse_body(stmt))
        return any(self._holds_dispatched(s) for block in blocks for s in block)

    def _guarded(self, stmt, leading, original) -> cst.If:
        guard = cst.UnaryOperation(cst.Not(), self.ctx.runtime_call("tracing"))
        new = cst.If(guard, cst.IndentedBlock([stmt]), leading_lines=leading)
        self.ctx.origins.retested(new, original)  # (on the user's line, a test of unbranch's: plainly Python)
        return new


def untraced(node: cst.If, runtime: str) -> bool:
    """Is ``node`` the guard this pass writes (``if not _ub.tracing():``), whose body torch never traces?"""
    test = node.test
    if not (isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)):
        return False
    call = test.expression
    return isinstance(call, cst.Call) and get_full_name_for_node(call.func) == f"{runtime}.tracing"
