"""``while c:`` starting with ``if stop: break`` -> ``while c and not stop:``.

Done before the ``if`` rule sees the ``break`` (which no branch function can hold); the
``while`` rule then finds a loop without ``break``.
"""

from __future__ import annotations

import libcst as cst


def _leading_break(body):
    first = body[0] if body else None
    if isinstance(first, cst.If) and first.orelse is None and len(first.body.body) == 1:
        only = first.body.body[0]
        if isinstance(only, cst.SimpleStatementLine) and len(only.body) == 1 and isinstance(only.body[0], cst.Break):
            return first.test
    return None


class _Fold(cst.CSTTransformer):
    def __init__(self, ctx, fn):
        self.ctx, self.fn = ctx, fn

    def visit_FunctionDef(self, node):
        return node is self.fn

    def visit_SimpleStatementLine(self, node):
        return False  # statements only: skipping expressions keeps the pass cheap

    def leave_While(self, original, updated):
        body = list(updated.body.body)
        stop = _leading_break(body)
        if stop is None or len(body) < 2 or not self.ctx.is_candidate_loop(original):
            return updated
        test = cst.BooleanOperation(updated.test, cst.And(), cst.UnaryOperation(cst.Not(), stop))
        return updated.with_changes(test=test, body=updated.body.with_changes(body=body[1:]))


def apply(fn: cst.FunctionDef, ctx) -> cst.FunctionDef:
    return fn.visit(_Fold(ctx, fn))
