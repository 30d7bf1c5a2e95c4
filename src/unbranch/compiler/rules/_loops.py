"""What the loop rules share: one skeleton (plan -> refusal, or functions + one runtime call).

A loop rule (``for_to_scan``, ``while_to_loop``) only says what its loop becomes: a typed
``LoopPlan`` (the functions to define, the runtime helper and its arguments, the names
the call assigns, statements that follow it), or a ``Refusal`` with the reason. ``LoopRule``
does the rest the same way for every loop: candidates, refusals through the pass's policy,
names, ``super()`` in nested functions, origins, the note, and the carried variables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import libcst as cst

from ..analysis.classify import TENSOR, UNKNOWN
from ..analysis.effects import block_effects
from ..analysis.liveness import analyse_function, live_in
from ..analysis.names import OwnScope, block_writes, expr_reads, param_names, reads_of
from ..analysis.walk import read, transform
from ..context import taken_names
from ..lower.build import branch_def, call_statement, explicit_super, in_order, keyword, runtime_operator, tuple_node
from ..origins import Inheriting
from ..passes import LOOP, Pass
from ._checks import blockers, lost_effect


@dataclass(frozen=True)
class Function:
    """``def <name for role>(params): body; return returns`` emitted before the call."""

    role: str  # "cond" or "body": the rule's ROLES name the functions
    params: list[str]
    body: list
    returns: list[str]


@dataclass(frozen=True)
class LoopPlan:
    """What a loop becomes: ``outputs = _ub.<helper>(*positional, **keywords)`` after ``functions``."""

    helper: str
    functions: list[Function]
    positional: list  # expressions; a ``str`` stands for the function of that role
    keywords: dict  # name -> expression (empty tuples are left out)
    outputs: list[str]
    after: list = field(default_factory=list)  # statements that run after the loop (``for ... else``)
    kind: str = "scan"  # the note's kind


@dataclass(frozen=True)
class Refusal:
    """The loop stays Python, for this reason."""

    reason: str


@dataclass(frozen=True)
class Carried:
    """The loop's state: names carried from step to step, and those changed in place."""

    names: list[str]
    mutated: tuple  # positions in ``names`` of values the body may change in place
    kept: tuple  # among those, the ones never rebound (they stay the original objects)
    literals: tuple = ()  # positions of the user's bool/int flags (classifier.literal_flags): tensors in the loop

    def keywords(self) -> dict:
        return {
            "mutated": tuple_node([cst.Integer(str(i)) for i in self.mutated]),
            "kept": tuple_node([cst.Integer(str(i)) for i in self.kept]),
            "literals": tuple_node([cst.Integer(str(i)) for i in self.literals]),
        }


class _Returns(OwnScope, cst.CSTVisitor):
    def __init__(self):
        self.found = False

    def visit_Return(self, node):
        self.found = True


def loop_blocker(body) -> str | None:
    """Why a loop body cannot become a function (``None`` when it can)."""
    found = blockers(body)
    if found:
        return found[0][1].replace("leaving the branch", "in the loop body").replace("in a branch", "in the loop")
    v = _Returns()
    for s in body:
        read(s, v)
    return "a return inside the loop body" if v.found else None


_INDEXING_METHODS = frozenset({"select", "narrow"})  # tensor methods taking an index (``_At`` has them)


def _at(value: cst.BaseExpression, runtime: str) -> cst.Call:
    """``_ub.at(value)``."""
    return cst.Call(cst.Attribute(cst.Name(runtime), cst.Name("at")), [cst.Arg(value)])


def _is_at(node, runtime: str) -> bool:
    """Is ``node`` ``_ub.at(t)`` (as ``_at`` writes it, without ``clamped``)?"""
    return runtime_operator(node, runtime) == "at" and len(node.args) == 1


class AtSubscripts(Inheriting):
    """``t[i - 1]``, ``t[i, j]`` -> ``_ub.at(t)[...]``: indexing by a loop index (a 0-d tensor under export)."""

    def __init__(self, indices, runtime: str, origins, slices: bool = True):
        super().__init__(origins)
        self.indices, self.runtime, self.slices = set(indices), runtime, slices

    def visit_Lambda(self, node):
        # a lambda runs in the step too (a conditional expression's sides): unless it rebinds an index
        return not (self.indices & {p.name.value for p in node.params.params})

    def _runtime_call(self, value) -> bool:
        """``_ub.anything(...)``: made by unbranch, already indexing as it must."""
        return runtime_operator(value, self.runtime) is not None

    def leave_Subscript(self, original, updated):
        if self._runtime_call(updated.value):
            return updated
        if not any(
            expr_reads(el.slice) & self.indices
            for el in updated.slice
            if self.slices or not isinstance(el.slice, cst.Slice)
        ):
            return updated
        return updated.with_changes(value=_at(updated.value, self.runtime))

    def leave_BooleanOperation(self, original, updated):
        """``a and x[i]``: a traced condition reads the right operand even where Python would not."""
        return updated.with_changes(right=transform(updated.right, _Clamped(self.runtime)))

    def leave_Call(self, original, updated):
        f = updated.func
        if (
            isinstance(f, cst.Attribute)
            and f.attr.value in _INDEXING_METHODS
            and not self._runtime_call(f.value)
            and not (isinstance(f.value, cst.Name) and f.value.value == self.runtime)  # (``_ub.select``)
            and any(expr_reads(a.value) & self.indices for a in updated.args)
        ):  # ``x.select(0, i)``, ``x.narrow(0, i, 2)``: the index is a 0-d tensor there too
            return updated.with_changes(func=f.with_changes(value=_at(f.value, self.runtime)))
        # ``_ub.and_(a, lambda: x[i + 1] ...)`` (boolean_ops ran first): clamp the right operand's reads
        if not (self._runtime_call(updated) and f.attr.value in ("and_", "or_") and len(updated.args) == 2):
            return updated
        right = updated.args[1].with_changes(value=transform(updated.args[1].value, _Clamped(self.runtime)))
        return updated.with_changes(args=[updated.args[0], right])


def indexed_by_test(nodes, test, ctx) -> list:
    """``nodes`` (a branch's statements or expressions) with each subscript by a name the test reads
    made ``_ub.at(t)[...]``: such a name may be a 0-d integer tensor (``alphas[t] if t >= 0``), which
    dynamo, tracing a cond's branch, would read as ``.item()``. (Eagerly ``at(t)`` is ``t``.)"""
    c = ctx.classifier
    names = expr_reads(test) - c.static_names - c.shape_names - {ctx.self_name}
    if not names & reads_of(nodes):
        return list(nodes)
    at = AtSubscripts(names, ctx.runtime, ctx.origins, slices=False)  # (a size bounds a slice: ``x[:-pad]``)
    return [transform(n, at) for n in nodes]


class _Clamped(cst.CSTTransformer):
    """``_ub.at(t)`` -> ``_ub.at(t, clamped=True)``: a read only a short circuit keeps in range."""

    def __init__(self, runtime: str):
        self.runtime = runtime

    def leave_Call(self, original, updated):
        if _is_at(updated, self.runtime):
            return updated.with_changes(args=[*updated.args, keyword("clamped", cst.Name("True"))])
        return updated


class _Unwrapped(cst.CSTTransformer):
    """``_ub.at(t)`` -> ``t``: what the analyses must see in bodies already rewritten (nested loops)."""

    def __init__(self, runtime: str):
        self.runtime = runtime

    def leave_Call(self, original, updated):
        return updated.args[0].value if _is_at(updated, self.runtime) else updated


def as_written(body, runtime: str) -> list:
    """``body`` with the index subscripts of inner loops as the user wrote them (for analyses)."""
    v = _Unwrapped(runtime)
    return [transform(s, v) for s in body]


class _Lengths(cst.CSTTransformer):
    """``len(x)``, or ``_ub.len_(x)`` (normalise/conversions wrote it), -> ``_ub.length(x)``; ``int(t)`` and
    ``int(t.item())`` -> ``_ub.int_(t)`` (a count computed from data stays a tensor the loop counts up
    to; a number ``.item()`` took would be a symbol no loop op can count to under strict export)."""

    def __init__(self, ctx):
        super().__init__()
        self.ctx = ctx

    def leave_Call(self, original, updated):
        f, args = updated.func, updated.args
        ours = isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == self.ctx.runtime
        alone = len(args) == 1 and args[0].keyword is None and not args[0].star
        named = (isinstance(f, cst.Name) and f.value == "len") or (ours and f.attr.value == "len_")
        if named and alone:
            return self.ctx.runtime_call("length", args[0].value)
        if isinstance(f, cst.Name) and f.value == "int" and alone:
            value = args[0].value
            call = value.func if isinstance(value, cst.Call) and not value.args else None
            if isinstance(call, cst.Attribute) and call.attr.value == "item":  # int(t.item()) is int(t)
                value = call.value
            return self.ctx.runtime_call("int_", value)
        return updated


class LoopRule(Pass):
    """The skeleton of every loop rule; subclasses define ``plan`` (and ``ROLES``, ``CONSTRUCT``)."""

    HANDLES = frozenset({LOOP})
    NEEDS = ("liveness",)
    ROLES: ClassVar[tuple[str, ...]] = ("body",)
    CONSTRUCT: ClassVar[str] = "loop"

    def plan(self, original, updated) -> LoopPlan | Refusal:
        raise NotImplementedError

    def __init__(self, fn, ctx):
        super().__init__(fn, ctx)
        self._user_names = taken_names(ctx.source.text)
        self._outer_facts: list = []
        self._functions: list = [fn]  # the function each visited statement is in (innermost last)

    def _scope(self):
        return self._functions[-1]

    def symbolic_lengths(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        """``expr`` (a loop's bounds or test) with ``len(x)`` as ``_ub.length(x)``: the size stays
        symbolic, where Python's ``len`` would fix it to the example's under non-strict export."""
        if {"len", "int"} & (set(param_names(self.fn)) | block_writes(self.fn.body.body)):
            return expr  # (the user's own len or int)
        return transform(expr, _Lengths(self.ctx))

    def _generated(self, node) -> bool:
        """A function unbranch wrote (a branch function, an inner loop's body): loops in it are code too."""
        return node is not self.fn and node.name.value not in self._user_names

    def visit_FunctionDef(self, node) -> bool:
        if node is self.fn:
            return True
        if not self._generated(node):
            return False  # the user's own nested functions stay as written
        self._outer_facts.append(self.facts)
        self._functions.append(node)
        self.facts = analyse_function(node)  # facts of the function the loop is in
        return True

    def leave_FunctionDef(self, original, updated):
        if self._generated(original):
            self.facts = self._outer_facts.pop()
            self._functions.pop()
        return updated

    def is_candidate(self, original) -> bool:
        return self.ctx.is_candidate_loop(original)

    def rewrite(self, original, updated):
        ctx = self.ctx
        if not self.is_candidate(original):
            return updated
        plan = self.plan(original, updated)
        if isinstance(plan, Refusal):
            return self.refuse(original, updated, plan.reason)
        names = dict(zip(self.ROLES, ctx.namer.numbered("loop", self.ROLES)))
        defs = [branch_def(names[f.role], f.params, explicit_super(f.body, ctx), f.returns) for f in plan.functions]
        defs[0] = defs[0].with_changes(leading_lines=updated.leading_lines)
        args = [cst.Arg(cst.Name(names[a]) if isinstance(a, str) else a) for a in plan.positional]
        args += [keyword(k, v) for k, v in plan.keywords.items() if not (isinstance(v, cst.Tuple) and not v.elements)]
        call = cst.Call(cst.Attribute(cst.Name(ctx.runtime), cst.Name(plan.helper)), args)
        ctx.note(original, plan.kind, f"carry: {', '.join(plan.outputs) or '-'}")
        return cst.FlattenSentinel([*defs, call_statement(plan.outputs, call), *plan.after])

    def refuse(self, original, updated, reason: str):
        out = self.leave_as_python(original, updated, reason, self.CONSTRUCT)
        if not isinstance(out, cst.For):
            return out
        it = original.iter
        counted = isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "range"
        if not counted and self.ctx.classifier.kind(it) in (TENSOR, UNKNOWN):
            # a data-dependent length (nonzero(), unique()) fails deep in torch: fail here, saying why
            why = cst.SimpleString(repr(reason))
            return out.with_changes(iter=self.ctx.runtime_call("unconverted_loop", out.iter, why))
        return out

    def carried(self, node, body, test, exclude=(), after=()) -> Carried | Refusal:
        """Loop-carried variables: bound (or changed in place) in the body and read by the next
        step, the test or after the loop. Refuses a body whose effects a function would lose.
        """
        ctx, facts = self.ctx, self.facts
        body = as_written(body, ctx.runtime)
        why = loop_blocker(body)
        if why:
            return Refusal(why)
        before = facts.defined.get(node, set())
        why = lost_effect(node, body, before, ctx, "the loop body")
        if why:
            return Refusal(why)
        effects = block_effects(body, ctx.mutating_helpers)
        writes = block_writes(body) - set(exclude)
        live_after = facts.live_out.get(node, set())
        # (a nested function defined elsewhere reads the enclosing cell whenever it is called)
        seen_by_closures = {n for c in ctx.closures_outside(node) for n in c.reads}
        needed = live_in(body, set()) | expr_reads(test) | live_after | live_in(list(after), live_after)
        needed |= seen_by_closures
        changed = effects.mutated & live_in(body, set()) & before  # out[i] = v: each step sees the last
        order = [cst.SimpleStatementLine([cst.Expr(test)])] if test is not None else []
        names = in_order(((writes & needed) | changed) - set(exclude) & facts.locals, [*order, *body])
        for name in names:
            if name not in before:
                return Refusal(f"'{name}' is carried by the loop but not set before it")
        mutated = tuple(i for i, n in enumerate(names) if n in effects.mutated)
        kept = tuple(i for i in mutated if names[i] not in effects.rebound)
        literals = tuple(i for i, n in enumerate(names) if n in ctx.classifier.literal_flags or n in ctx.jump_flags)
        return Carried(names, mutated, kept, literals)
