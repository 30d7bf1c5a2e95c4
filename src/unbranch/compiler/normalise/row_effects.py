"""A loop over the rows of a tensor that changes its row in place -> the same change written into the tensor.

    for i, row in enumerate(x.unbind(0)):        for i, row in enumerate(x.unbind(0)):
        row.mul_(i + 1)                    ->         x[i] = x[i].mul(i + 1)
        y = y + row                                   row = x[i]
                                                      y = y + row

Eagerly a row is a view: changing it in place changes the tensor. A loop op hands each step a
slice of its own, so the change would be lost; as a store at the loop index (``x[i] = v``)
it is a change of a carried tensor, which the loop rules write back once after the loop. The
row is read again after the store, so the rest of the step sees the changed values, as the
view did. A loop without an index gets one (``enumerate``). Only ``row.<op>_(...)`` statements
(``copy_``, ``fill_``, ``zero_`` and ops with an out-of-place twin) and ``row += v``; a row
rebound in the body, or a tensor the body rebinds, stays as written.
"""

from __future__ import annotations

import libcst as cst
import torch

from ..analysis.classify import unbound_rows
from ..analysis.names import OwnScope, block_writes, target_names
from ..passes import LOOP, Pass, Rewrite, Unchanged

# in-place methods without an out-of-place twin of the same arguments: the value the row gets
_STORED = {"copy_": lambda args: args[0], "fill_": lambda args: args[0], "zero_": lambda args: cst.Integer("0")}
_AUGMENTED = {cst.AddAssign, cst.SubtractAssign, cst.MultiplyAssign, cst.DivideAssign}


def _rows_of(it: cst.BaseExpression) -> cst.Name | None:
    """``x`` for ``x``, ``x.unbind(0)``, ``torch.unbind(x)`` (a plain name)."""
    rows = it if isinstance(it, cst.Name) else unbound_rows(it)
    return rows if isinstance(rows, cst.Name) else None


def _in_place(stmt, row: str):
    """(method, args) of ``row.<method>_(args)``, ("+=", value) of ``row += value``; else None."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1):
        return None
    small = stmt.body[0]
    if isinstance(small, cst.AugAssign) and type(small.operator) in _AUGMENTED:
        if isinstance(small.target, cst.Name) and small.target.value == row:
            return small.operator, small.value
        return None
    call = small.value if isinstance(small, cst.Expr) else None
    f = call.func if isinstance(call, cst.Call) else None
    if not (isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == row):
        return None
    name = f.attr.value
    if not name.endswith("_") or name.endswith("__") or any(a.star for a in call.args):
        return None
    if name in _STORED or (hasattr(torch.Tensor, name[:-1]) and hasattr(torch.Tensor, name)):
        return name, call.args
    return None


class _Rows(OwnScope, cst.CSTTransformer):
    """The body's own statements (not nested loops or functions) that change ``row`` in place."""

    def __init__(self, rows: str, row: str, index: str):
        self.rows, self.row, self.index = rows, row, index
        self.changed = 0

    def visit_For(self, node) -> bool:
        return False

    visit_While = visit_For

    def _at(self) -> cst.Subscript:
        return cst.Subscript(cst.Name(self.rows), [cst.SubscriptElement(cst.Index(cst.Name(self.index)))])

    def leave_SimpleStatementLine(self, original, updated):
        found = _in_place(updated, self.row)
        if found is None:
            return updated
        how, args = found
        if isinstance(how, str) and how in _STORED:
            store = cst.Assign([cst.AssignTarget(self._at())], _STORED[how]([a.value for a in args] or [None]))
        elif isinstance(how, str):
            method = cst.Attribute(self._at(), cst.Name(how[:-1]))
            value = cst.Call(method, [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args])
            store = cst.Assign([cst.AssignTarget(self._at())], value)
        else:
            store = cst.AugAssign(self._at(), how, args)
        self.changed += 1
        return updated.with_changes(body=[store])


def _changed_body(body: list, change: _Rows) -> list:
    """``body`` with each change stored, and the row read again after each statement holding one
    (at the body's own level: a read under an if would make the row one side's new tensor)."""
    out = []
    for stmt in body:
        before = change.changed
        out.append(stmt.visit(change))
        if change.changed > before:
            again = cst.Assign([cst.AssignTarget(cst.Name(change.row))], change._at())
            out.append(cst.SimpleStatementLine([again]))
    return out


class RowEffects(Pass):
    HANDLES = frozenset({LOOP})
    EXAMPLES = [
        Rewrite(
            """
            def forward(self, x):
                x = x.clone()
                for i, row in enumerate(x.unbind(0)):
                    row.mul_(i + 1)
                return x
            """,
            """
            def forward(self, x):
                x = x.clone()
                for i, row in enumerate(x.unbind(0)):
                    x[i] = x[i].mul(i + 1)
                    row = x[i]
                return x
            """,
        ),
        Rewrite(
            """
            def forward(self, x):
                total = x.new_zeros(x.shape[1:])
                for row in x:
                    row += 1
                    total = total + row
                return x, total
            """,
            """
            def forward(self, x):
                total = x.new_zeros(x.shape[1:])
                for i, row in enumerate(x):
                    x[i] += 1
                    row = x[i]
                    total = total + row
                return x, total
            """,
        ),
        Unchanged(  # the row is rebound first: the change is to a new tensor
            """
            def forward(self, x):
                for row in x:
                    row = row * 2
                    row.add_(1)
                return x
            """
        ),
    ]

    def leave_For(self, original, updated):
        ctx = self.ctx
        if not ctx.is_candidate_loop(original):  # (an ``else`` runs after the loop: the steps are the same)
            return updated
        target, it = updated.target, updated.iter
        index = None
        enumerated = isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "enumerate"
        enum = it if enumerated else None
        if enum is not None:
            if len(enum.args) != 1 or enum.args[0].keyword is not None:
                return updated  # (a start: the index is no row number)
            if not (isinstance(target, cst.Tuple) and len(target.elements) == 2):
                return updated
            first, second = (e.value for e in target.elements)
            if not (isinstance(first, cst.Name) and isinstance(second, cst.Name)):
                return updated
            index, row, it = first.value, second.value, enum.args[0].value
        elif isinstance(target, cst.Name):
            row = target.value
        else:
            return updated
        rows = _rows_of(it)
        if rows is None:
            return updated
        body = list(updated.body.body)
        rebound = block_writes(body)
        if rows.value in rebound or (index is not None and index in rebound):
            return updated
        if _rebound(body, row):
            return updated  # the row is rebound before a change: the change is to that new value
        fresh = index or ctx.namer.new("i")
        change = _Rows(rows.value, row, fresh)
        new_body = _changed_body(body, change)
        if not change.changed:
            return updated
        new = updated.with_changes(body=updated.body.with_changes(body=new_body))
        if index is None:
            enumerated = cst.Call(cst.Name("enumerate"), [cst.Arg(updated.iter)])
            pair = cst.Tuple([cst.Element(cst.Name(fresh)), cst.Element(cst.Name(row))], lpar=[], rpar=[])
            new = new.with_changes(target=pair, iter=enumerated)
        ctx.origins.inherit(new, original)
        return new


def _rebound(body, row: str) -> bool:
    """Does a statement of ``body`` other than an in-place change rebind ``row``?"""
    for stmt in body:
        if _in_place(stmt, row) is not None:
            continue
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if any(row in target_names(t.target) for t in getattr(small, "targets", None) or []):
                    return True
        elif row in block_writes([stmt]):
            return True
    return False
