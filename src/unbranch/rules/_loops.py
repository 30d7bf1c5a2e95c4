"""What the loop rules share: carried variables and the body-function call."""

from __future__ import annotations

import libcst as cst

from ..analysis.effects import block_effects
from ..analysis.liveness import live_in
from ..analysis.names import block_writes, expr_reads
from ._util import blockers, in_order, keyword, lost_effect, tuple_node


class _Returns(cst.CSTVisitor):
    def __init__(self):
        self.found = False

    def visit_FunctionDef(self, node):
        return False

    visit_ClassDef = visit_Lambda = visit_FunctionDef

    def visit_Return(self, node):
        self.found = True


def loop_blocker(body) -> str | None:
    """Why a loop body cannot become a function (``None`` when it can)."""
    found = blockers(body)
    if found:
        return found[0][1].replace("leaving the branch", "in the loop body").replace("in a branch", "in the loop")
    v = _Returns()
    for s in body:
        s.visit(v)
    return "a return inside the loop body" if v.found else None


def carried(node, body, test, facts, ctx, exclude=()):
    """Loop-carried variables: bound in the body and read by the next step, the test or after.

    Also refuses (with the reason) a body whose side effects a body function would lose.
    """
    why = lost_effect(node, body, facts.defined.get(node, set()), ctx, "the loop body")
    if why:
        return why
    writes = block_writes(body) - set(exclude)
    needed = live_in(body, set()) | expr_reads(test) | facts.live_out.get(node, set())
    order = [cst.SimpleStatementLine([cst.Expr(test)])] if test is not None else []
    names = in_order(writes & needed & facts.locals, [*order, *body])
    before = facts.defined.get(node, set())
    for name in names:
        if name not in before:
            return f"'{name}' is carried by the loop but not set before it"
    return names


def changed_in_place(body, names, ctx) -> dict:
    """``mutated``: positions among ``names`` of the carried values the body may change in place;
    ``kept``: those it never rebinds (``acc += v`` only), which stay the original objects."""
    effects = block_effects(body, ctx.mutating_helpers)
    mutated = [i for i, n in enumerate(names) if n in effects.mutated]
    kept = [i for i in mutated if names[i] not in effects.rebound]
    return {"mutated": [cst.Integer(str(i)) for i in mutated], "kept": [cst.Integer(str(i)) for i in kept]}


def runtime_call(ctx, func: str, positional, **keywords) -> cst.Call:
    """``_ub.func(*positional, key=(names...), ...)``, keywords with no names left out."""
    args = [cst.Arg(a) for a in positional]
    args += [keyword(k, tuple_node(v)) for k, v in keywords.items() if v]
    return cst.Call(cst.Attribute(cst.Name(ctx.runtime), cst.Name(func)), args)
