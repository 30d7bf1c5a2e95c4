"""Where control leaves a block: facts the return-handling passes and the if rule share."""

from __future__ import annotations

import libcst as cst

from .liveness import orelse_body


def ends_in_return(stmts) -> bool:
    """Does every path through ``stmts`` end in ``return`` or ``raise``?"""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, cst.SimpleStatementLine):
        return isinstance(last.body[-1], (cst.Return, cst.Raise))
    if isinstance(last, cst.If):
        return last.orelse is not None and ends_in_return(last.body.body) and ends_in_return(orelse_body(last))
    if isinstance(last, cst.With):
        return ends_in_return(last.body.body)  # a context manager may swallow a raise, never a return
    return False


def returns_through_ifs(stmts) -> bool:
    for s in stmts:
        if isinstance(s, cst.SimpleStatementLine) and any(isinstance(x, cst.Return) for x in s.body):
            return True
        if isinstance(s, cst.If) and (returns_through_ifs(s.body.body) or returns_through_ifs(orelse_body(s))):
            return True
        if isinstance(s, cst.With) and returns_through_ifs(s.body.body):
            return True
    return False
