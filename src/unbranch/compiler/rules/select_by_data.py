"""An item chosen by an index that is data -> ``_ub.select``: one cond per item under export.

    return self.heads[int(task)](h)   ->   return _ub.select(self.heads, _ub.int_(task), lambda item: item(h))
    s = scales[t.item()]              ->   s = _ub.select(scales, t.item())

Indexing a list, tuple, dict or module list asks Python for the index's value, which a
tensor under export has not (``Could not extract specialized integer``). ``_ub.select`` is
``container[index]`` eagerly, and a chain of conds over the items under export (see
runtime/selection.py); a call of the item moves into a lambda run on the item chosen, so
modules and functions are chosen too. Only an index that is plainly data (``int(t)``,
``t.item()``, a call giving a tensor such as ``t.argmax()``, a name only ever bound to such
values, arithmetic of one with sizes and numbers: ``int(t) % 3``) into a container that is not plainly a tensor; stores (``heads[i] = m``), slices and
other names (a loop's index, which the loop rules index by) stay as written.
"""

from __future__ import annotations

import ast

import libcst as cst

from ..analysis.classify import SHAPE, STATIC, TENSOR, as_ast, dotted_name
from ..passes import Kind, Pass, Rewrite, Unchanged

_CONVERSIONS = {"int": "int_", "float": "float_"}
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Mod, ast.FloorDiv)


def _data_index(index: ast.expr, classifier) -> bool:
    """``int(t)``, ``float(t)``, ``t.item()`` of something that may be data, a call giving a tensor, or a
    name every assignment of which is one (``idx = int(scores.argmax())``; never a loop's target)."""
    if isinstance(index, ast.Name):
        return classifier.kind(index) == TENSOR
    if isinstance(index, ast.BinOp) and isinstance(index.op, _ARITHMETIC):  # ``int(t) % 3``, ``n - 1 - int(t)``
        sides = (index.left, index.right)
        data = [_data_index(side, classifier) for side in sides]
        return any(data) and all(d or classifier.kind(side) in (STATIC, SHAPE) for d, side in zip(data, sides))
    if isinstance(index, ast.Call):
        f = index.func
        if _conversion(f, classifier) and len(index.args) == 1 and not index.keywords:
            return classifier.kind(index.args[0]) != STATIC
        if isinstance(f, ast.Attribute) and f.attr == "item" and not index.args:
            return classifier.kind(f.value) != STATIC
    # a tensor expression computed there (``t.argmax()``); not a name, which a loop's index may be
    return isinstance(index, ast.Call) and classifier.kind(index) == TENSOR


def _conversion(f: ast.expr, classifier) -> bool:
    """``int``/``float``, or the runtime's form of one an earlier pass wrote (``_ub.int_``)."""
    if isinstance(f, ast.Name):
        return f.id in _CONVERSIONS
    return (
        isinstance(f, ast.Attribute) and f.attr in _CONVERSIONS.values() and dotted_name(f)[:1] == [classifier.runtime]
    )


def _chosen(node, classifier) -> bool:
    """A subscript read ``container[index]`` with a data index into what is not plainly a tensor."""
    if not isinstance(node.ctx, ast.Load) or isinstance(node.slice, (ast.Slice, ast.Tuple)):
        return False
    return _data_index(node.slice, classifier) and classifier.kind(node.value) not in (TENSOR, SHAPE)


SELECT = Kind("select", r"\[", (ast.Subscript,), _chosen)


class SelectByData(Pass):
    HANDLES = frozenset({SELECT})
    EXPRESSIONS = True
    EXAMPLES = [
        Rewrite(
            """
            def forward(self, h, task):
                return self.heads[int(task)](h)
            """,
            """
            def forward(self, h, task):
                return _ub.select(self.heads, _ub.int_(task), lambda item: item(h))
            """,
        ),
        Rewrite(
            """
            def forward(self, x, t):
                scale = self.scales[t.item()]
                return x * scale
            """,
            """
            def forward(self, x, t):
                scale = _ub.select(self.scales, t.item())
                return x * scale
            """,
        ),
        Unchanged(
            """
            def forward(self, x, i: int):
                self.cache[int(x.sum())] = x
                return self.layers[i](x)
            """
        ),
    ]

    def __init__(self, fn, ctx):
        super().__init__(fn, ctx)
        self._made: set[int] = set()  # ids of the select calls this pass wrote (a call of one takes a use)

    def visit_AssignTarget(self, node) -> bool:
        return False  # (a store into a container is no choice)

    def visit_AugAssign(self, node) -> bool:
        return False

    def visit_Del(self, node) -> bool:
        return False

    def visit_Lambda(self, node) -> bool:
        return True  # (an index in a lambda's body is evaluated where the lambda runs: the same code)

    def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript):
        if len(original.slice) != 1 or not isinstance(original.slice[0].slice, cst.Index):
            return updated
        try:
            chosen = _chosen(
                ast.Subscript(as_ast(original.value), as_ast(original.slice[0].slice.value), ast.Load()),
                self.ctx.classifier,
            )
        except SyntaxError:
            return updated
        if not chosen:
            return updated
        call = self.ctx.runtime_call("select", updated.value, self._index(updated.slice[0].slice.value))
        self._made.add(id(call))
        return call

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if id(updated.func) not in self._made:
            return updated
        item = self.ctx.namer.new("item")
        use = cst.Lambda(cst.Parameters([cst.Param(cst.Name(item))]), updated.with_changes(func=cst.Name(item)))
        return updated.func.with_changes(args=[*updated.func.args, cst.Arg(use)])

    def _index(self, index: cst.BaseExpression) -> cst.BaseExpression:
        """``int(t)`` as ``_ub.int_(t)`` (also in arithmetic): the index stays a tensor under export."""
        if isinstance(index, cst.BinaryOperation):
            return index.with_changes(left=self._index(index.left), right=self._index(index.right))
        f = index.func if isinstance(index, cst.Call) else None
        if isinstance(f, cst.Name) and f.value in _CONVERSIONS and len(index.args) == 1:
            return self.ctx.runtime_call(_CONVERSIONS[f.value], index.args[0].value)
        return index
