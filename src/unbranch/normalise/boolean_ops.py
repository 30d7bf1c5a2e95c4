"""``and``/``or``/``not`` in a condition -> runtime helpers that become ``&``/``|``/``~`` on tensors.

    x.dtype == torch.float16 and not torch.isfinite(x).all()
->  x.dtype == torch.float16 and _ub.not_(torch.isfinite(x).all())

A plainly-Python left operand keeps Python's own ``and``/``or`` (its short circuit is exact
and reads naturally); otherwise ``_ub.and_(a, lambda: b)`` keeps the short circuit for Python
values and becomes a logical and for tensors.
"""

from __future__ import annotations

import libcst as cst

from ..analysis.classify import STATIC


def runtime_predicate(expr: cst.BaseExpression, ctx) -> cst.BaseExpression:
    kind = ctx.classifier.kind
    if isinstance(expr, cst.BooleanOperation):
        right = runtime_predicate(expr.right, ctx)
        if kind(expr.left) == STATIC:
            return expr.with_changes(right=right)
        helper = "and_" if isinstance(expr.operator, cst.And) else "or_"
        left = _bare(runtime_predicate(expr.left, ctx))
        call = ctx.runtime_call(helper, left, cst.Lambda(cst.Parameters(), _bare(right)))
        return call.with_changes(lpar=expr.lpar, rpar=expr.rpar) if expr.lpar else call
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        if kind(expr.expression) == STATIC:
            return expr
        return ctx.runtime_call("not_", _bare(runtime_predicate(expr.expression, ctx)))
    return expr


def _bare(e):
    """Drop redundant parentheses: the value becomes a call argument."""
    if isinstance(e, (cst.BooleanOperation, cst.UnaryOperation, cst.Comparison, cst.BinaryOperation)) and e.lpar:
        return e.with_changes(lpar=[], rpar=[])
    return e
