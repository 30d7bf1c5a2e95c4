"""A ``return`` in one branch only -> the rest of the function moves into the other branch.

    if x.sum() > 0:              if x.sum() > 0:
        return torch.sin(x)  ->      return torch.sin(x)
    return torch.cos(x)          else:
                                     return torch.cos(x)

Afterwards a dispatched ``if`` either returns on every path or on none. The rest is only
moved through ``if`` statements; a ``return`` inside a loop, ``with`` or ``try`` stays
where it is (the rule then leaves that ``if`` as plain Python).
"""

from __future__ import annotations

import libcst as cst

from ..analysis.flow import ends_in_return, returns_through_ifs
from ..analysis.liveness import orelse_body
from ..passes import Pass, Rewrite, Unchanged


def _needs_tail(s, ctx) -> bool:
    """An ``if`` that holds (through ``if``s only) a dispatched ``if`` with a ``return`` in it."""
    if not isinstance(s, cst.If):
        return False
    if ctx.is_candidate(s) and returns_through_ifs([s]):
        return True
    return any(_needs_tail(c, ctx) for c in (*s.body.body, *orelse_body(s)))


def _block(stmts, ctx) -> list:
    for i, s in enumerate(stmts):
        if _needs_tail(s, ctx) and i + 1 < len(stmts):
            return [*stmts[:i], _push(s, stmts[i + 1 :], ctx)]
        if isinstance(s, cst.If) and _needs_tail(s, ctx):
            return [*stmts[:i], _push(s, [], ctx)]
    return stmts


def _push(node: cst.If, tail, ctx) -> cst.If:
    copies = iter(range(2))

    def branch(stmts):
        if ends_in_return(stmts) or not tail:
            return _block(list(stmts), ctx)
        moved = tail if next(copies) == 0 else [ctx.origins.cloned(t) for t in tail]
        return _block([*stmts, *moved], ctx)

    body = branch(node.body.body)
    orelse = branch(orelse_body(node))
    new = node.with_changes(body=node.body.with_changes(body=body))
    if not orelse:
        return new.with_changes(orelse=None)
    if isinstance(node.orelse, cst.Else):
        return new.with_changes(orelse=node.orelse.with_changes(body=node.orelse.body.with_changes(body=orelse)))
    return new.with_changes(orelse=cst.Else(cst.IndentedBlock(orelse)))


class EarlyReturn(Pass):
    HANDLES = frozenset({"if"})
    EXAMPLES = [
        Rewrite(
            """
            def forward(self, x):
                if x.sum() > 0:
                    return torch.sin(x)
                y = x * 2
                return torch.cos(y)
            """,
            """
            def forward(self, x):
                if x.sum() > 0:
                    return torch.sin(x)
                else:
                    y = x * 2
                    return torch.cos(y)
            """,
        ),
        Unchanged(
            """
            def forward(self, x, mask=None):
                if mask is None:
                    return x
                return x * mask
            """
        ),
    ]

    def visit_FunctionDef(self, node) -> bool:
        return False  # the work is on whole blocks, in leave_FunctionDef

    def leave_FunctionDef(self, original, updated):
        if original is not self.fn:
            return updated
        return updated.with_changes(body=updated.body.with_changes(body=_block(list(updated.body.body), self.ctx)))
