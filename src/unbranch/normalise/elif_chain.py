"""``elif`` on a dispatched condition -> ``else:`` holding a nested ``if``.

    if a: A            if a: A
    elif t.any(): B -> else:
                           if t.any(): B

so that every dispatched ``if`` is a statement the rules can replace by statements.
"""

from __future__ import annotations

import libcst as cst


class _Split(cst.CSTTransformer):
    def __init__(self, ctx, fn):
        self.ctx, self.fn = ctx, fn

    def visit_FunctionDef(self, node):
        return node is self.fn

    def visit_SimpleStatementLine(self, node):
        return False  # statements only: skipping expressions keeps the pass cheap

    def leave_If(self, original, updated):
        inner = updated.orelse
        if isinstance(inner, cst.If) and self.ctx.is_candidate(inner):
            block = cst.IndentedBlock([inner.with_changes(leading_lines=[])])
            return updated.with_changes(orelse=cst.Else(block, leading_lines=inner.leading_lines))
        return updated


def apply(fn: cst.FunctionDef, ctx) -> cst.FunctionDef:
    return fn.visit(_Split(ctx, fn))
