"""``and``/``or``/``not`` in a condition -> runtime helpers that become ``&``/``|``/``~`` on tensors.

    x.dtype == torch.float16 and not torch.isfinite(x).all()
->  x.dtype == torch.float16 and _ub.not_(torch.isfinite(x).all())

A plainly-Python left operand keeps Python's own ``and``/``or`` (its short circuit is exact
and reads naturally); otherwise ``_ub.and_(a, lambda: b)`` keeps the short circuit for Python
values and becomes a logical and for tensors. A right operand that binds a name with ``:=``
cannot move into a lambda (the name would be bound there, not in the function), so it stays
in place, evaluated only when Python would evaluate it:
``_ub.and_(_ub_left := a, _ub.given(b) if _ub.right_needed(_ub_left, "and") else None)``.
"""

from __future__ import annotations

import libcst as cst

from ..analysis.classify import STATIC
from ..analysis.names import expr_effects


def runtime_predicate(expr: cst.BaseExpression, ctx) -> cst.BaseExpression:
    kind = ctx.classifier.kind
    if isinstance(expr, cst.BooleanOperation):
        right = runtime_predicate(expr.right, ctx)
        if kind(expr.left) == STATIC:
            return expr.with_changes(right=right)
        helper = "and_" if isinstance(expr.operator, cst.And) else "or_"
        left = bare(runtime_predicate(expr.left, ctx))
        if expr_effects(right)[1]:
            call = _eager_right(helper, left, right, ctx)
        else:
            call = ctx.runtime_call(helper, left, cst.Lambda(cst.Parameters(), bare(right)))
        return call.with_changes(lpar=expr.lpar, rpar=expr.rpar) if expr.lpar else call
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        if kind(expr.expression) == STATIC:
            return expr
        return ctx.runtime_call("not_", bare(runtime_predicate(expr.expression, ctx)))
    return expr


def _eager_right(helper: str, left, right, ctx) -> cst.Call:
    """``helper(t := left, given(right) if right_needed(t, op) else None)``: ``right`` stays in this scope."""
    temp = cst.Name(ctx.namer.new(f"{ctx.runtime}_left"))
    op = cst.SimpleString(f'"{helper.rstrip("_")}"')
    needed = ctx.runtime_call("right_needed", temp, op)
    given = ctx.runtime_call("given", bare(right))
    lazy = cst.IfExp(test=needed, body=given, orelse=cst.Name("None"))
    return ctx.runtime_call(helper, cst.NamedExpr(temp, left), lazy)


def bare(e):
    """Drop redundant parentheses: the value becomes a call argument."""
    if isinstance(e, (cst.BooleanOperation, cst.UnaryOperation, cst.Comparison, cst.BinaryOperation)) and e.lpar:
        return e.with_changes(lpar=[], rpar=[])
    return e
