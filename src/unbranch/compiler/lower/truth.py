"""Python's truth tests on tensors in a condition -> runtime helpers (``_ub.bool_(t)``, ``_ub.in_``...).

Python evaluates ``bool(t)``, ``x in t``, ``any(...)``, ``torch.equal``/``allclose``/``is_nonzero``,
``math.isclose``/``isfinite``/``isnan``/``isinf`` of a number from a tensor and chained
comparisons with ``__bool__``/``__contains__``/``.item()``, which torch.export cannot trace
on a tensor; each helper (runtime/conditions.py) returns exactly Python's value eagerly and a
tensor or SymBool only while torch.export traces. Only places where a tensor may stand for
the Python value are rewritten: the condition itself, operands of ``and``/``or``/``not``,
comparisons and arithmetic, and the items of ``any``/``all``; an argument of another call
keeps its Python value (``f(bool(t))``). A chained comparison is the ``and`` of its links
(each middle operand evaluated once, as Python does).
"""

from __future__ import annotations

import functools

import libcst as cst

from ..analysis.names import block_writes, param_names

_CONVERSIONS = {"bool": "bool_", "int": "int_", "float": "float_"}
_REDUCTIONS = {"any": "any_", "all": "all_"}
# module functions whose Python result is data: the helper of the same meaning (arguments kept as given)
MODULE_FORMS = {
    "torch": {"equal": "equal", "allclose": "allclose", "is_nonzero": "bool_"},
    "math": {"isclose": "isclose", "isfinite": "isfinite", "isnan": "isnan", "isinf": "isinf"},
}


class TruthForms:
    """The forms of one function: ``truth(condition)`` gives the condition with them rewritten."""

    def __init__(self, fn: cst.FunctionDef, ctx) -> None:
        self.fn, self.ctx = fn, ctx

    @functools.cached_property
    def shadowed(self) -> set[str]:
        """A builtin the function rebinds (``any = ...``, a parameter ``all``) is not Python's."""
        return set(param_names(self.fn)) | block_writes(self.fn.body.body)

    def helper(self, name: str, args, like: cst.BaseExpression) -> cst.Call:
        call = self.ctx.runtime_call(name, *args)
        return call.with_changes(lpar=like.lpar, rpar=like.rpar)

    def truth(self, e: cst.BaseExpression) -> cst.BaseExpression:
        """``e`` where a tensor may stand for its Python value, with the forms rewritten."""
        if isinstance(e, cst.BooleanOperation):
            return e.with_changes(left=self.truth(e.left), right=self.truth(e.right))
        if isinstance(e, cst.UnaryOperation):
            inner = self.truth(e.expression)
            if isinstance(inner, cst.BooleanOperation) and not inner.lpar:  # `not a < b < c`: a chain now
                inner = inner.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            return e.with_changes(expression=inner)
        if isinstance(e, cst.BinaryOperation):
            return e.with_changes(left=self.truth(e.left), right=self.truth(e.right))
        if isinstance(e, cst.IfExp):
            return e.with_changes(test=self.truth(e.test), body=self.truth(e.body), orelse=self.truth(e.orelse))
        if isinstance(e, cst.Comparison):
            return self.comparison(e)
        if isinstance(e, cst.Call):
            return self.call(e)
        return e

    def comparison(self, e: cst.Comparison) -> cst.BaseExpression:
        left = self.truth(e.left)
        targets = [t.with_changes(comparator=self.truth(t.comparator)) for t in e.comparisons]
        if len(targets) > 1:
            return self.chain(left, targets, e)
        if isinstance(targets[0].operator, (cst.In, cst.NotIn)):
            name = "in_" if isinstance(targets[0].operator, cst.In) else "not_in"
            return self.helper(name, [_bare(left), _bare(targets[0].comparator)], e)
        return e.with_changes(left=left, comparisons=targets)

    def chain(self, left, targets, like: cst.Comparison) -> cst.BaseExpression:
        """``a < b < c`` -> ``a < (t := b) and t < c``: each link a comparison, each middle operand read once."""
        links = []
        for k, target in enumerate(targets):
            right = target.comparator
            following = right
            if k < len(targets) - 1 and not isinstance(right, _READ_TWICE):
                temp = cst.Name(self.ctx.namer.new(f"{self.ctx.runtime}_value"))
                right = cst.NamedExpr(temp, _bare(right), lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
                following = temp
            link = cst.Comparison(left, [target.with_changes(comparator=right)])
            links.append(self.comparison(link))
            left = following
        joined = links[0]
        for link in links[1:]:
            joined = cst.BooleanOperation(joined, cst.And(), link)
        return joined.with_changes(lpar=like.lpar, rpar=like.rpar)

    def call(self, e: cst.Call) -> cst.BaseExpression:
        func, args = e.func, e.args
        positional = all(a.keyword is None and not a.star for a in args)
        forms = (*_CONVERSIONS, *_REDUCTIONS)
        if isinstance(func, cst.Name) and func.value in forms and positional and len(args) == 1:
            if func.value in self.shadowed:
                return e
            arg = args[0].value
            if func.value in _CONVERSIONS:
                return self.helper(_CONVERSIONS[func.value], [_bare(self.truth(arg))], e)
            if func.value in _REDUCTIONS:
                return self.helper(_REDUCTIONS[func.value], [self.items(arg)], e)
        module = func.value.value if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) else None
        if module in MODULE_FORMS and module not in self.shadowed:
            form = MODULE_FORMS[module].get(func.attr.value)
            if form is not None and not any(a.star for a in args):
                if form == "bool_":  # torch.is_nonzero(t) is bool(t) of a one-element tensor
                    args = [a.with_changes(value=_bare(self.truth(a.value))) for a in args]
                return self.helper(form, [], e).with_changes(args=args)
        return e

    def items(self, arg: cst.BaseExpression) -> cst.BaseExpression:
        """The argument of any()/all(): its items are truth tests too."""
        if isinstance(arg, (cst.GeneratorExp, cst.ListComp)):
            return arg.with_changes(elt=self.truth(arg.elt))
        if isinstance(arg, (cst.List, cst.Tuple)):
            elements = [self.truth(el.value) if isinstance(el, cst.Element) else None for el in arg.elements]
            return arg.with_changes(
                elements=[el if v is None else el.with_changes(value=v) for el, v in zip(arg.elements, elements)]
            )
        return arg


# a middle operand of a chained comparison that may be read twice: reading it again gives the same value
_READ_TWICE = (cst.Name, cst.Integer, cst.Float, cst.SimpleString)


def _bare(e):
    """Drop parentheses made redundant by becoming a call argument."""
    if e.lpar and not isinstance(e, (cst.Tuple, cst.GeneratorExp)):
        return e.with_changes(lpar=[], rpar=[])
    return e
