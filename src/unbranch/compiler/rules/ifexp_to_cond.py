"""``a if c else b`` on a condition that may be a tensor -> ``_ub.if_exp(c, lambda: a, lambda: b)``.

    y = x * 2 if x.sum() > 0 else -x    ->    y = _ub.if_exp(x.sum() > 0, lambda: x * 2, lambda: -x)

Each side becomes a function of no argument, so only the side taken runs, exactly as Python
evaluates a conditional expression (the other side's effects and exceptions never happen).
The runtime calls one of them for a Python condition, and makes a ``torch.cond`` of them
while torch.export traces on a tensor or symbolic condition; the lambdas close over what
they read (the comprehension's own variables too), and torch lifts those tensors into the
cond's inputs in both export modes. Wherever the expression is (an argument, a return, a
comprehension's result, another conditional expression, a branch of an ``if`` that
IfToCond turns into functions next, a lambda's body), it stays where it was.

Where the sides are only numbers written out and reads (``t = 0 if t < 0 else t``,
``self.eps if n < eps else n``), a Python number may meet a tensor, which torch.cond cannot
merge: ``_ub.pick`` instead, whose ``torch.where`` under export evaluates both (nothing to run
twice in a literal or a read) and promotes the number as torch's operators do.

A conditional expression whose sides are both plainly Python values
(``() if output_attentions else None``) is a Python one whatever its condition: untouched,
unless they are numbers on a condition plainly on data (``0.5 if x.sum() > 0 else 0.0``: a
0-d tensor under export, through ``_ub.pick``).
Stays Python, wrapped in ``_ub.unconverted`` (which names the reason should the condition
turn out to be a tensor while exporting): a side that is plainly a Python value (``None``,
a number, a string, a flag, a size), which torch.cond cannot return; a side binding a
name with ``:=``, which would bind it inside the lambda instead of the function; and
``a = x if c else y`` where ``a``, ``x`` or ``y`` is changed in place later (Python's ``a``
is ``x`` or ``y`` itself; a cond's output is a new tensor, the change would reach one only).
Where only the sides themselves change in place what they give back
(``z = y.add_(1) if c else y.mul_(2)``), the line becomes an ``if`` statement instead, whose
cond writes the change back into ``y``.
"""

from __future__ import annotations

import ast
import functools

import libcst as cst

from ..analysis.classify import SHAPE, STATIC, TENSOR, own_nodes
from ..analysis.effects import alias_roots, block_effects
from ..analysis.names import block_writes, param_names, target_names
from ..analysis.walk import read, transform
from ..lower.build import explicit_super
from ..lower.predicates import bare, runtime_predicate
from ..lower.truth import TruthForms
from ..passes import IFEXP, Pass, Refused, Rewrite, Unchanged
from ._loops import indexed_by_test

_LITERALS = (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)
_DISPLAYS = (cst.Tuple, cst.List, cst.Set, cst.Dict)
_SIZE_METHODS = {"size", "numel", "dim", "nelement"}
_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.Power)
_SINGULAR = (cst.Divide, cst.FloorDivide, cst.Modulo, cst.Power)
_INTEGRAL = (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Modulo)
# functions of numbers that compute and change nothing (the runtime's forms of some: conversions.py)
_PURE_BUILTINS = frozenset({"min", "max", "abs", "round", "float", "int", "len"})
_PURE_FORMS = frozenset({"min_", "max_", "int_", "float_", "len_"})
# a tensor's methods that give a new value, finite wherever the tensor is (and change nothing on the
# arrays and numbers that share their names)
_TENSOR_METHODS = frozenset({"item", "abs", "max", "min", "amax", "amin", "sum", "mean", "clamp", "clamp_min"})
_TENSOR_METHODS |= {"clamp_max", "float", "double", "half", "size", "dim", "numel", "nelement"}


class IfExpToCond(Pass):
    HANDLES = frozenset({IFEXP})
    EXPRESSIONS = True
    EXAMPLES = [
        Rewrite(
            """
            def forward(self, x):
                y = x * 2 if x.sum() > 0 else -x
                return y
            """,
            """
            def forward(self, x):
                y = _ub.if_exp(x.sum() > 0, lambda: x * 2, lambda: -x)
                return y
            """,
        ),
        Rewrite(  # nested, inside a call's arguments and a comprehension (the lambda sees `t`)
            """
            def forward(self, x):
                parts = [t.relu() if t.mean() > 0 else t.abs() for t in x.split(1)]
                return torch.cat(parts) if x.max() > 1 else (x if not (x < 0).any() else x.cos())
            """,
            """
            def forward(self, x):
                parts = [_ub.if_exp(t.mean() > 0, lambda: t.relu(), lambda: t.abs()) for t in x.split(1)]
                return _ub.if_exp(x.max() > 1, lambda: torch.cat(parts), lambda: _ub.if_exp(_ub.not_((x < 0).any()), lambda: x, lambda: x.cos()))
            """,  # noqa: E501
        ),
        Rewrite(  # a table read at the tested index (diffusers' DDIM step): a 0-d tensor dynamo must not .item()
            """
            def forward(self, x, t):
                alpha = self.alphas[t] if t >= 0 else self.final
                return x * alpha
            """,
            """
            def forward(self, x, t):
                alpha = _ub.if_exp(t >= 0, lambda: _ub.at(self.alphas)[t], lambda: self.final)
                return x * alpha
            """,
        ),
        Rewrite(  # ints chosen on data: torch.cond returns them as symbolic ints (diffusers' index_for_timestep)
            """
            def forward(self, x, t):
                indices = (x == t).nonzero()
                pos = 1 if len(indices) > 1 else 0
                return indices[pos]
            """,
            """
            def forward(self, x, t):
                indices = (x == t).nonzero()
                pos = _ub.if_exp(len(indices) > 1, lambda: 1, lambda: 0)
                return indices[pos]
            """,
        ),
        Rewrite(  # a number against a read: torch.cond cannot merge a number with a tensor, torch.where can
            """
            def forward(self, x):
                t = x.mean()
                t = 0 if t < 0 else t
                n = self.eps if t < 1e-3 else t
                return x * t / n
            """,
            """
            def forward(self, x):
                t = x.mean()
                t = _ub.pick(t < 0, lambda: 0, lambda: t)
                n = _ub.pick(t < 1e-3, lambda: self.eps, lambda: t)
                return x * t / n
            """,
        ),
        Unchanged(
            """
            def forward(self, x, mask=None, scale=None, keep=False):
                y = x if mask is None else x * mask
                states = () if keep else None  # Python values on both sides, whatever `keep` is
                return y * (1.0 if scale is None else scale) if self.training else y
            """
        ),
        Rewrite(  # `z` is `y` itself, changed in place: as an if statement, the if rule writes the change back
            """
            def forward(self, x):
                y = x.clone()
                z = y.add_(1) if x.sum() > 0 else y.mul_(2)
                return z + y
            """,
            """
            def forward(self, x):
                y = x.clone()
                if x.sum() > 0:
                    z = y.add_(1)
                else:
                    z = y.mul_(2)
                return z + y
            """,
        ),
        Rewrite(  # computations of numbers, tensors' reductions: evaluated on both sides under export
            """
            def forward(self, x, sigma):
                gamma = min(self.churn / (len(self.sigmas) - 1), 0.4) if self.lo <= sigma else 0.0
                return x.mean() * gamma if x.sum() > 0 else 0.0
            """,
            """
            def forward(self, x, sigma):
                gamma = _ub.pick(self.lo <= sigma, lambda: min(self.churn / (len(self.sigmas) - 1), 0.4), lambda: 0.0)
                return _ub.pick(x.sum() > 0, lambda: x.mean() * gamma, lambda: 0.0)
            """,  # noqa: E501
        ),
        Refused(
            """
            def forward(self, x):
                return x.mean() if x.sum() > 0 else None
            """,
            "a side of the conditional expression is a Python value or a size (None), which torch.cond cannot return",
        ),
    ]

    def __init__(self, fn, ctx):
        super().__init__(fn, ctx)
        self.bound: dict[int, set] = {}  # id of a conditional expression assigned as is -> the names it binds
        self.statements: set[int] = set()  # ids of those to become if statements (sides changing in place)
        self.line: cst.SimpleStatementLine | None = None  # the statement line being visited

    @functools.cached_property
    def mutated(self) -> frozenset:
        """Names whose object the function changes in place somewhere (asked only about aliases)."""
        return block_effects(self.fn.body.body, self.ctx.mutating_helpers).mutated

    def visit_Assign(self, node) -> None:
        values = node.value.elements if isinstance(node.value, cst.Tuple) else [node]
        for v in values:
            if isinstance(v.value, cst.IfExp):
                self.bound[id(v.value)] = set().union(*(target_names(t.target) for t in node.targets))

    @functools.cached_property
    def forms(self) -> TruthForms:
        return TruthForms(self.fn, self.ctx)  # bool(t), x in t... in the condition

    def visit_Lambda(self, node) -> bool:
        return True  # a lambda's conditional expression runs wherever the lambda is called, as the original

    # what is evaluated elsewhere or only to raise stays as written
    def visit_Parameters(self, node) -> bool:
        return False  # defaults are evaluated when the def runs, not by the rewritten body

    def visit_Decorator(self, node) -> bool:
        return False

    def visit_Annotation(self, node) -> bool:
        return False

    def visit_Raise(self, node) -> bool:
        return False  # the exception being raised (its message) is Python's business

    def visit_Assert(self, node) -> bool:
        return False  # an assert left as Python by RaiseToCheck tests a Python value

    def leave_IfExp(self, original: cst.IfExp, updated: cst.IfExp):
        ctx = self.ctx
        if self._made_by_unbranch(original) or not ctx.is_candidate(original):
            return updated
        ints = all(_int_literal(side) for side in (updated.body, updated.orelse))
        picked = _picked(updated, self._pure)
        if not ints and all(self._plainly_python(side) for side in (updated.body, updated.orelse)):
            if not (picked and ctx.condition_kind(original) == TENSOR):
                return updated  # `() if output_attentions else None`: no tensor can come out of it
            # `0.5 if x.sum() > 0 else 0.0`: a tensor whatever it is, on a condition on data
        why = self._why_not(updated, original, picked)
        changed = self._aliased(original)
        if changed and self._alone(original) and not changed & self._changed_elsewhere():
            # the sides change in place what they give back (`y.add_(1) if c else y.mul_(2)`): as an if
            # statement (leave_SimpleStatementLine), the if rule writes the change back
            self.statements.add(id(updated))
            return updated
        if why:
            return self.leave_as_python(original, updated, why, "conditional expression")
        test = runtime_predicate(self.forms.truth(updated.test), ctx)
        sides = indexed_by_test(explicit_super([updated.body, updated.orelse], ctx), updated.test, ctx)
        then, orelse = (_unwrapped(side) for side in sides)
        op = "pick" if picked else "if_exp"
        call = ctx.runtime_call(
            op, bare(test), cst.Lambda(cst.Parameters(), then), cst.Lambda(cst.Parameters(), orelse)
        )
        ctx.note(original, "cond", f"conditional expression -> _ub.{op}")
        return call  # (a call needs no parentheses of its own)

    def visit_SimpleStatementLine(self, node) -> bool:
        self.line = node
        return self._may_hold(node)

    def _may_hold(self, line: cst.SimpleStatementLine) -> bool:
        """Could ``line`` hold a conditional expression? Not a line as the parser made it whose
        text has none (nor a lambda): most lines, whose every expression node the pass skips."""
        first, last = (self.ctx.origins.as_parsed(node) for node in (line, line.body[-1]))
        if first is None or last is None or self._ifexp_lines is None:
            return True
        return any(start <= last.end_lineno and end >= first.lineno for start, end in self._ifexp_lines)

    @functools.cached_property
    def _ifexp_lines(self) -> list[tuple[int, int]] | None:
        """(first, last) line of each conditional expression and lambda of the source's ``ast``."""
        tree = self.ctx.tree
        if tree is None:
            return None  # (a pre_rewriter made the tree: its lines are not the source's)
        return [(n.lineno, n.end_lineno) for n in own_nodes(tree) if isinstance(n, (ast.IfExp, ast.Lambda))]

    def _alone(self, node: cst.IfExp) -> bool:
        """Is ``node`` the whole value of the one assignment of its line (``a = x if c else y``)?"""
        only = self.line.body[0] if self.line is not None and len(self.line.body) == 1 else None
        return isinstance(only, cst.Assign) and only.value is node

    def leave_SimpleStatementLine(self, original, updated):
        """``a = x if c else y`` whose sides change in place -> ``if c: a = x`` / ``else: a = y``, which
        the if rule converts: it writes the changed tensors back, as Python's ``a`` is ``x`` or ``y``."""
        only = updated.body[0] if len(updated.body) == 1 else None
        if not isinstance(only, cst.Assign) or id(only.value) not in self.statements:
            return updated
        choice = only.value

        def side(value):
            return cst.IndentedBlock([cst.SimpleStatementLine([only.with_changes(value=value)])])

        test = self.forms.truth(choice.test).with_changes(lpar=[], rpar=[])
        self.ctx.note(original, "normalised", "conditional expression changing in place -> if statement")
        return cst.If(
            test, side(choice.body), orelse=cst.Else(side(choice.orelse)), leading_lines=updated.leading_lines
        )

    def _made_by_unbranch(self, node: cst.IfExp) -> bool:
        """``_ub.given(b) if _ub.right_needed(t, "and") else None`` (boolean_ops): a Python test."""
        test = node.test
        return (
            isinstance(test, cst.Call)
            and isinstance(test.func, cst.Attribute)
            and isinstance(test.func.value, cst.Name)
            and test.func.value.value == self.ctx.runtime
        )

    def _why_not(self, node: cst.IfExp, original: cst.IfExp, picked: bool) -> str | None:
        for side in (node.body, node.orelse):
            found = _Unmovable.find(side)
            if found:
                return f"{found} in a side of the conditional expression"
        changed = sorted(self._aliased(original))
        if changed:
            return (
                f"'{changed[0]}' is changed in place and the conditional expression gives back "
                f"'{sorted(alias_roots(original))[0]}' itself (a cond returns a new tensor: the change would not "
                "reach the other name)"
            )
        for side in () if picked else (node.body, node.orelse):
            value = None if _int_literal(side) else self._python_value(side)
            if value is not None:
                text = cst.Module([]).code_for_node(value)
                return (
                    f"a side of the conditional expression is a Python value or a size ({text}), "
                    "which torch.cond cannot return"
                )
        return None

    def _aliased(self, original: cst.IfExp) -> set:
        """``a = x if c else y``: the names among ``a``, ``x``, ``y`` changed in place somewhere
        (``a`` is ``x`` or ``y`` itself, a cond output never is)."""
        roots = alias_roots(original)
        if not roots or id(original) not in self.bound:
            return set()
        return (roots | self.bound[id(original)]) & self.mutated

    def _changed_elsewhere(self) -> frozenset:
        """Names changed in place by the function outside the line being rewritten."""
        rest = transform(self.fn, _Without(self.line))
        return block_effects(rest.body.body, self.ctx.mutating_helpers).mutated

    @functools.cached_property
    def shadowed(self) -> set[str]:
        """A builtin or module the function rebinds (``min = ...``, a parameter ``math``) is not Python's."""
        return set(param_names(self.fn)) | block_writes(self.fn.body.body)

    def _pure(self, e: cst.BaseExpression) -> bool:
        """Does ``e`` compute its value without effect, so that evaluating it where its side is not
        taken changes nothing: numbers written out, reads (``t``, ``self.eps``), arithmetic of those, Python's and math's functions of numbers (``min``, ``abs``,
        ``math.sqrt``) and the runtime's forms of them, and a tensor's methods that make a new value
        (``x.abs().max()``). A division or power by a tensor is left out: the side not taken could
        give ``torch.where`` an infinite gradient (``analysis.cost`` keeps such sides a cond too), and so is
        a subscript: the side not taken may index out of range (``x[k] if k < n else 0.0``)."""
        if _number(e) or _read(e):
            return True
        if isinstance(e, cst.UnaryOperation):
            return isinstance(e.operator, (cst.Minus, cst.Plus)) and self._pure(e.expression)
        if isinstance(e, cst.BinaryOperation):
            if isinstance(e.operator, _SINGULAR) and not self._integral(e.right):
                if self.ctx.classifier.kind(e.right) not in (STATIC, SHAPE):
                    return _number(e.right) and not isinstance(e.operator, cst.Power)
            return isinstance(e.operator, _ARITHMETIC) and self._pure(e.left) and self._pure(e.right)
        if isinstance(e, cst.Call):
            args = all(
                a.star == "" and a.keyword is None and (isinstance(a.value, cst.SimpleString) or self._pure(a.value))
                for a in e.args
            )  # (``float("inf")``)
            return args and self._pure_function(e.func)
        return False

    def _integral(self, e: cst.BaseExpression) -> bool:
        """An int whatever the data (``len(xs) - 1``, ``_ub.len_(t)``, ``x.shape[0] // 2``): no gradient
        flows through it."""
        if isinstance(e, cst.BinaryOperation):
            return isinstance(e.operator, _INTEGRAL) and self._integral(e.left) and self._integral(e.right)
        if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and isinstance(e.func.value, cst.Name):
            return e.func.value.value == self.ctx.runtime and e.func.attr.value in ("len_", "int_")
        if isinstance(e, cst.Call) and isinstance(e.func, cst.Name):
            return e.func.value in ("len", "int", "round") and e.func.value not in self.shadowed
        return _is_size(e)

    def _pure_function(self, func: cst.BaseExpression) -> bool:
        if isinstance(func, cst.Name):
            return func.value in _PURE_BUILTINS and func.value not in self.shadowed
        if not isinstance(func, cst.Attribute):
            return False
        owner, name = func.value, func.attr.value
        if isinstance(owner, cst.Name) and owner.value == "math":
            return "math" not in self.shadowed
        if isinstance(owner, cst.Name) and owner.value == self.ctx.runtime:
            return name in _PURE_FORMS
        return name in _TENSOR_METHODS and self._pure(owner)

    def _plainly_python(self, e: cst.BaseExpression) -> bool:
        if isinstance(e, (cst.Tuple, cst.List)):
            return all(self._plainly_python(el.value) for el in e.elements)  # () too
        if isinstance(e, cst.Dict):
            return not e.elements
        return self._python_value(e) is not None

    def _python_value(self, e: cst.BaseExpression) -> cst.BaseExpression | None:
        """The part of ``e`` that is plainly not a tensor (a literal, a flag, a size), if any."""
        if isinstance(e, (cst.Tuple, cst.List)):
            for el in e.elements:
                found = self._python_value(el.value)
                if found is not None:
                    return found
            return None
        if isinstance(e, _LITERALS) or (isinstance(e, cst.Name) and e.value in ("None", "True", "False")):
            return e
        if _is_size(e):
            return e
        if not isinstance(e, _DISPLAYS) and self.ctx.classifier.kind(e) == STATIC:
            return e  # a flag, a dtype, an identity test...
        return None


class _Without(cst.CSTTransformer):
    """The tree with one statement line replaced by ``pass``."""

    def __init__(self, line):
        self.line = line

    def on_leave(self, original, updated):
        return cst.SimpleStatementLine([cst.Pass()]) if original is self.line else updated


def _int_literal(e: cst.BaseExpression) -> bool:
    """``1``, ``-1``: a side torch.cond returns (as a symbolic int: diffusers' ``1 if len(indices) > 1 else 0``)."""
    return isinstance(_unsigned(e), cst.Integer)


def _picked(node: cst.IfExp, pure) -> bool:
    """A choice between values with no effect to run, where a Python number may meet a tensor
    (``0 if t < 0 else t``, ``self.eps if n < eps else n``, ``min(c / (n - 1), 0.4) if lo <= s else 0.0``):
    ``_ub.pick``. Sides that ``pure`` says compute without effect, one at least a number or an attribute
    (a setting: ``self.eps``); two ints aside (torch.cond returns those as symbolic ints)."""
    sides = (node.body, node.orelse)
    return (
        all(pure(side) for side in sides)
        and any(_number(side) or isinstance(side, cst.Attribute) for side in sides)
        and not all(_int_literal(side) for side in sides)
    )


def _number(e: cst.BaseExpression) -> bool:
    """``0``, ``-1``, ``1e-6``: a number written out."""
    return isinstance(_unsigned(e), (cst.Integer, cst.Float))


def _unsigned(e: cst.BaseExpression) -> cst.BaseExpression:
    """``e`` without a leading minus (``-1`` -> ``1``)."""
    if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Minus):
        return e.expression
    return e


def _read(e: cst.BaseExpression) -> bool:
    """``t``, ``self.eps``: a name or an attribute of one, which reads without running anything of
    the user's (a property aside)."""
    while isinstance(e, cst.Attribute):
        e = e.value
    return isinstance(e, cst.Name) and e.value not in ("None", "True", "False")


def _unwrapped(side: cst.BaseExpression) -> cst.BaseExpression:
    """A call's parentheses are redundant as a lambda's body (a nested conditional, now a call)."""
    return side.with_changes(lpar=[], rpar=[]) if isinstance(side, cst.Call) and side.lpar else side


def _is_size(e) -> bool:
    """``x.shape[0]``, ``x.size(-1) * 2``, ``len(x)``: a size (an int, or a SymInt under export)."""
    if isinstance(e, cst.Integer):
        return True
    if isinstance(e, cst.BinaryOperation):
        return _is_size(e.left) and _is_size(e.right)
    if isinstance(e, cst.Subscript):
        return isinstance(e.value, cst.Attribute) and e.value.attr.value == "shape"
    if isinstance(e, cst.Attribute):
        return e.attr.value == "shape"
    if isinstance(e, cst.Call):
        func = e.func
        if isinstance(func, cst.Name):
            return func.value == "len"
        return isinstance(func, cst.Attribute) and func.attr.value in _SIZE_METHODS
    return False


class _Unmovable(cst.CSTVisitor):
    """What cannot move into a lambda: ``:=`` (it would bind there), ``yield``, ``await``."""

    def __init__(self) -> None:
        self.found: str | None = None

    @classmethod
    def find(cls, node) -> str | None:
        v = cls()
        read(node, v)
        return v.found

    def visit_Lambda(self, node) -> bool:
        return False  # its own scope already

    def visit_NamedExpr(self, node) -> None:
        self.found = self.found or "an assignment expression (:=)"

    def visit_Yield(self, node) -> None:
        self.found = self.found or "yield"

    def visit_Await(self, node) -> None:
        self.found = self.found or "await"
