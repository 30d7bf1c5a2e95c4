"""``x += y`` inside a dispatched ``if`` or loop -> ``x = x + y``.

An in-place update of a branch operand or loop carry is an input mutation, which
``torch.cond``, ``scan`` and ``while_loop`` forbid;
rebinding gives the same value without it. Subscript and attribute targets stay in place
(the rule hands such mutated operands to the branch as clones).
"""

from __future__ import annotations

import libcst as cst

_BINARY = {
    cst.AddAssign: cst.Add,
    cst.SubtractAssign: cst.Subtract,
    cst.MultiplyAssign: cst.Multiply,
    cst.DivideAssign: cst.Divide,
    cst.FloorDivideAssign: cst.FloorDivide,
    cst.ModuloAssign: cst.Modulo,
    cst.PowerAssign: cst.Power,
    cst.MatrixMultiplyAssign: cst.MatrixMultiply,
    cst.LeftShiftAssign: cst.LeftShift,
    cst.RightShiftAssign: cst.RightShift,
    cst.BitAndAssign: cst.BitAnd,
    cst.BitOrAssign: cst.BitOr,
    cst.BitXorAssign: cst.BitXor,
}
_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float, cst.SimpleString)


class _Rebind(cst.CSTTransformer):
    def __init__(self, ctx, fn):
        self.ctx, self.fn = ctx, fn
        self.depth = 0

    def visit_FunctionDef(self, node):
        return node is self.fn

    def visit_SimpleStatementLine(self, node):
        return self.depth > 0 and any(isinstance(s, cst.AugAssign) for s in node.body)

    def visit_AugAssign(self, node):
        return False

    def _dispatched(self, node) -> bool:
        return self.ctx.is_candidate(node) if isinstance(node, cst.If) else self.ctx.is_candidate_loop(node)

    def visit_If(self, node):
        self.depth += self._dispatched(node)

    visit_For = visit_While = visit_If

    def leave_If(self, original, updated):
        self.depth -= self._dispatched(original)
        return updated

    leave_For = leave_While = leave_If

    def leave_AugAssign(self, original, updated):
        if not self.depth or not isinstance(updated.target, cst.Name):
            return updated
        value = updated.value
        if not isinstance(value, _ATOMS) and not value.lpar:
            value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        op = _BINARY[type(updated.operator)]()
        return cst.Assign(
            [cst.AssignTarget(updated.target)],
            cst.BinaryOperation(updated.target, op, value),
            semicolon=updated.semicolon,
        )


def apply(fn: cst.FunctionDef, ctx) -> cst.FunctionDef:
    return fn.visit(_Rebind(ctx, fn))
