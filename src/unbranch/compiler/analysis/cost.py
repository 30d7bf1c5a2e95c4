"""How much the sides of an ``if`` compute, when it is little: elementwise arithmetic that
``torch.where`` can evaluate on both sides for less than a ``torch.cond`` costs to run
(``benchmarks/cheap_branches.py`` measures both; the runtime decides, ``control_flow.if_stmt``).

    if x.sum() > 0:            elementwise_ops -> 2 (one product, one difference)
        y = x * 2
    else:
        y = x - 1

Only operations with no effect and no singularity count: evaluating the side not taken must
neither change anything nor give an infinite or NaN gradient through ``where`` in training
(``x / y``, ``log``, ``sqrt`` and ``exp`` can: such sides stay a cond).
"""

from __future__ import annotations

import libcst as cst

_OPERATORS = (cst.Add, cst.Subtract, cst.Multiply)
# torch's (and torch.nn.functional's) elementwise functions, finite wherever their inputs are
_FUNCTIONS = frozenset(
    {"abs", "neg", "clamp", "clip", "clamp_min", "clamp_max", "relu", "sigmoid", "tanh", "sign"}
    | {"maximum", "minimum", "where", "zeros_like", "ones_like", "full_like", "square"}
)
_METHODS = _FUNCTIONS | {"float", "half", "double", "bfloat16", "detach", "type_as"}
_MODULES = (["torch"], ["F"], ["torch", "nn", "functional"])


def elementwise_ops(statements) -> int | None:
    """How many elementwise operations ``statements`` (a side's body) make, or None where one
    of them is anything else (a call of a module or helper, a loop, an in-place change)."""
    total = 0
    for statement in statements:
        if not isinstance(statement, cst.SimpleStatementLine):
            return None
        for small in statement.body:
            ops = _small(small)
            if ops is None:
                return None
            total += ops
    return total


def _small(small) -> int | None:
    if isinstance(small, cst.Pass):
        return 0
    if isinstance(small, cst.Return):
        return _ops(small.value) if small.value is not None else None
    if isinstance(small, cst.Assign) and all(_names(t.target) for t in small.targets):
        return _ops(small.value)
    return None  # (``x += 1`` changes a tensor in place; a bare call may have effects)


def _names(target) -> bool:
    if isinstance(target, cst.Name):
        return True
    return isinstance(target, cst.Tuple) and all(isinstance(e.value, cst.Name) for e in target.elements)


def _number(e) -> bool:
    if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Minus):
        e = e.expression
    return isinstance(e, (cst.Integer, cst.Float))


def _ops(e) -> int | None:
    if isinstance(e, (cst.Name, cst.Integer, cst.Float)):
        return 0
    if isinstance(e, cst.Attribute):
        return 0 if _dotted(e) else None  # (a read: self.scale, torch.float16)
    if isinstance(e, cst.Tuple):
        return _sum(el.value for el in e.elements)
    if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, (cst.Minus, cst.Plus)):
        return _plus_one(_ops(e.expression))
    if isinstance(e, cst.BinaryOperation):
        finite = isinstance(e.operator, _OPERATORS)
        finite |= isinstance(e.operator, cst.Divide) and _number(e.right) and _value(e.right) != 0
        finite |= isinstance(e.operator, cst.Power) and isinstance(e.right, cst.Integer) and _value(e.right) >= 0
        return _plus_one(_sum((e.left, e.right))) if finite else None
    if isinstance(e, cst.Comparison) and len(e.comparisons) == 1:
        return _plus_one(_sum((e.left, e.comparisons[0].comparator)))
    if isinstance(e, cst.Call) and _elementwise_call(e.func):
        receiver = [e.func.value] if e.func.attr.value in _METHODS and not _module(e.func.value) else []
        return _plus_one(_sum([*receiver, *(a.value for a in e.args if not a.star)]))
    return None


def _elementwise_call(func) -> bool:
    if not isinstance(func, cst.Attribute):
        return False
    if _module(func.value):
        return func.attr.value in _FUNCTIONS
    # a tensor's method: x.clamp(min=0) (not the module's own: self.sign(x) is the user's code)
    return func.attr.value in _METHODS and not (isinstance(func.value, cst.Name) and func.value.value == "self")


def _module(e) -> bool:
    return _dotted(e) in _MODULES


def _dotted(e) -> list[str]:
    """``a.b.c`` -> ``["a", "b", "c"]``, [] for anything else."""
    parts = []
    while isinstance(e, cst.Attribute):
        parts.append(e.attr.value)
        e = e.value
    return [e.value, *reversed(parts)] if isinstance(e, cst.Name) else []


def _value(e) -> float:
    if isinstance(e, cst.UnaryOperation):
        return -_value(e.expression)
    return float(e.evaluated_value)


def _sum(parts) -> int | None:
    total = 0
    for part in parts:
        ops = _ops(part)
        if ops is None:
            return None
        total += ops
    return total


def _plus_one(ops: int | None) -> int | None:
    return None if ops is None else ops + 1
