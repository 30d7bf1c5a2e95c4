"""The nodes every lowering builds: branch functions, the calls to them, names in a stable order."""

from __future__ import annotations

import libcst as cst

from ..analysis.names import names_in_order, reads_of
from ..analysis.walk import transform
from ..origins import Inheriting


class _ExplicitSuper(Inheriting):
    """Zero-argument ``super()`` fails in a nested function: name the class and instance."""

    def __init__(self, self_name: str, origins):
        super().__init__(origins)
        self.self_name = self_name

    def visit_FunctionDef(self, node):
        return False

    visit_ClassDef = visit_FunctionDef

    def leave_Call(self, original, updated):
        if isinstance(updated.func, cst.Name) and updated.func.value == "super" and not updated.args:
            return updated.with_changes(args=[cst.Arg(cst.Name("__class__")), cst.Arg(cst.Name(self.self_name))])
        return updated


def explicit_super(stmts, ctx) -> list:
    if ctx.self_name is None or "super" not in reads_of(stmts):
        return list(stmts)
    t = _ExplicitSuper(ctx.self_name, ctx.origins)
    return [transform(s, t) for s in stmts]


def in_order(names, stmts) -> list[str]:
    """``names`` sorted by first appearance in ``stmts`` (then alphabetically)."""
    order: dict[str, int] = {}
    for s in stmts:
        for name in names_in_order(s):
            order.setdefault(name, len(order))
    return sorted(names, key=lambda n: (order.get(n, len(order)), n))


def names_node(names) -> cst.BaseExpression:
    """``a`` or ``a, b`` (no parentheses): an assignment target or a returned value."""
    if len(names) == 1:
        return cst.Name(names[0])
    return cst.Tuple([cst.Element(cst.Name(n)) for n in names], lpar=[], rpar=[])


def tuple_node(items) -> cst.Tuple:
    """``(a,)``, ``(a, b)``, ``()`` of names (str) or expressions."""
    return cst.Tuple([cst.Element(cst.Name(i) if isinstance(i, str) else i) for i in items])


def keyword(name: str, value: cst.BaseExpression) -> cst.Arg:
    """``name=value`` as a call argument."""
    tight = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
    return cst.Arg(value, keyword=cst.Name(name), equal=tight)


def call_statement(outputs, call: cst.Call, returns: bool = False) -> cst.SimpleStatementLine:
    """``outputs = call``, ``call`` alone, or ``return call``."""
    if returns:
        return cst.SimpleStatementLine([cst.Return(call)])
    if outputs:
        return cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(names_node(outputs))], call)])
    return cst.SimpleStatementLine([cst.Expr(call)])


def branch_def(name: str, params, body, outputs, header=None) -> cst.FunctionDef:
    """``def name(params): body; return outputs`` (no ``return`` when ``outputs`` is empty)."""
    stmts = list(body)
    if outputs:
        stmts.append(cst.SimpleStatementLine([cst.Return(names_node(outputs))]))
    if not stmts:
        stmts = [cst.SimpleStatementLine([cst.Pass()])]
    block = cst.IndentedBlock(stmts) if header is None else cst.IndentedBlock(stmts, header=header)
    return cst.FunctionDef(cst.Name(name), cst.Parameters([cst.Param(cst.Name(p)) for p in params]), block)


def runtime_operator(node, runtime: str) -> str | None:
    """``name`` for a call ``_ub.name(...)`` of the runtime (as rewritten code calls it), else None."""
    f = node.func if isinstance(node, cst.Call) else None
    if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == runtime:
        return f.attr.value
    return None
