"""A function whose result is a Python value decided by data: its caller's rest runs inside it.

``pick`` below returns a function chosen by a tensor test. No ``torch.cond`` can give a
function, and moving the rest of ``pick`` into its branches does not help: the value is its
result itself. The rest that reads it is in the caller. Torch's export names both places
(the ``if`` in ``pick``, and the caller's frame), and the two halves of this lowering meet
there (continuation passing):

- the caller (``Options.continue_calls``, the line of the call): the rest of its function
  after the call becomes one function taking the call's value, and the call becomes
  ``_ub.continued(rest, (its other inputs), callee, args...)``. Eagerly that is
  ``rest(callee(args...), ...)``, exactly the code as written;
- the callee (``Options.continuation``, compiled as a second function beside the one swapped
  in): every ``return v`` becomes ``return _ub_rest(v)``, falling off its end
  ``return _ub_rest(None)``. Under export, ``_ub.continued`` calls this variant with the
  caller's rest as ``_ub_rest``: each branch of the cond then ends in the caller's result, where
  the Python value is a constant of that side.

A call is continued where it is a whole statement (``v = f(...)``, ``f(...)``) at the top of
the caller's body (its rest: the rest of the function), or in an ``if``/``with`` block whose rest
ends in ``return``; and only where that rest changes nothing outside itself (under export it runs
inside the callee's branches): no attribute set, no object of the caller's changed in place. A
caller that returns the call's value itself (``return f(...)``) has no rest: in its own variant
that return hands the call its caller's rest in turn.
"""

from __future__ import annotations

import ast

import libcst as cst

from ..analysis.effects import block_effects
from ..analysis.flow import ends_in_return
from ..analysis.liveness import ALL, assigned, live_in
from ..analysis.names import block_writes, param_names
from ..lower.build import branch_def, explicit_super, in_order
from ..passes import Kind, Pass, Rewrite, Unchanged
from .early_return import shareable

# why a caller has no rest to move: what it returns is the call's value, whose structure differs by
# data (the guided export then continues in that caller's own caller, with a variant of it)
RETURNS_CALL = (
    "this function returns the call's result itself, so its own result differs in structure between paths "
    "(a Python value such as None on one, tensors on another)"
)
REST = "_ub_rest"  # the callee variant's parameter taking its caller's rest (runtime.continued passes it)


def _call_statement(node, classifier) -> bool:
    return isinstance(getattr(node, "value", None), ast.Call)


def _return(node, classifier) -> bool:
    return True


CALL = Kind("call", r"\(", (ast.Assign, ast.AnnAssign, ast.Expr, ast.Return), _call_statement)
RETURN = Kind("return", r"\breturn\b", (ast.Return,), _return)


def _call_of(s) -> tuple[cst.Call, str | None] | None:
    """(the call, the name it binds or None) of ``name = f(...)``, ``name: T = f(...)``, ``f(...)``."""
    if not isinstance(s, cst.SimpleStatementLine) or len(s.body) != 1:
        return None
    small = s.body[0]
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        return small.value, None
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target, value = small.targets[0].target, small.value
    elif isinstance(small, cst.AnnAssign) and small.value is not None:
        target, value = small.target, small.value
    else:
        return None
    if isinstance(target, cst.Name) and isinstance(value, cst.Call):
        return value, target.value
    return None


def _returns_call(s) -> bool:
    return (
        isinstance(s, cst.SimpleStatementLine)
        and isinstance(s.body[0], cst.Return)
        and isinstance(s.body[0].value, cst.Call)
    )


class RestAfterCall(Pass):
    """The caller's half: the rest of the function after the call torch named moves into a function."""

    HANDLES = frozenset({CALL})
    OPTIONS = {"continue_calls": frozenset({2})}  # (the examples' line; any line runs it: ``runs_under``)
    EXAMPLES = [
        Rewrite(
            """
            def forward(self, x):
                f = self.pick(x)
                y = f(x) * 3
                return y + x
            """,
            """
            def forward(self, x):
                def branch_cond_rest_1(f, x):
                    y = f(x) * 3
                    return y + x
                return _ub.continued(branch_cond_rest_1, (x,), self.pick, x)
            """,
        ),
        Unchanged(
            """
            def forward(self, x):
                f = self.pick(x)
                self.last = f
                return f(x)
            """
        ),
    ]

    @classmethod
    def runs_under(cls, options) -> bool:
        return bool(options.continue_calls)

    def visit_FunctionDef(self, node) -> bool:
        return False  # the work is on the function's own block, in leave_FunctionDef

    def leave_FunctionDef(self, original, updated):
        if original is not self.fn:
            return updated
        params = set(param_names(updated))
        self.local = params | block_writes(updated.body.body)
        body = self._block(list(updated.body.body), params, True)
        return updated.with_changes(body=updated.body.with_changes(body=body))

    def _block(self, stmts, bound: set, whole: bool) -> list:
        """``stmts`` with the call on a line torch named continued; ``bound``: names surely bound where
        they start; ``whole``: they run to the function's end (else only a rest ending in return moves)."""
        for i, s in enumerate(stmts):
            done = assigned(stmts[:i])
            at = bound | (set() if done is ALL else done)
            if self.ctx.origins.line(s) in self.ctx.continue_calls:
                tail = stmts[i + 1 :]
                if not whole and not ends_in_return(tail):
                    self._left(s, "its block's rest does not end in return (the function's rest would move too)")
                    continue
                new = self._continued(s, at, tail)
                if isinstance(new, str):
                    self._left(s, new)
                    continue
                return [*stmts[:i], *new]
            inner = self._inner(s, at)
            if inner is not s:
                return [*stmts[:i], inner, *stmts[i + 1 :]]
        return stmts

    def _inner(self, s, bound: set):
        """``s`` (an ``if``, ``elif``, ``with``) with a call in one of its blocks continued, or ``s``."""
        if isinstance(s, cst.With):
            body = self._block(list(s.body.body), bound, False)
            return s if body == list(s.body.body) else s.with_changes(body=s.body.with_changes(body=body))
        if not isinstance(s, cst.If):
            return s
        body = self._block(list(s.body.body), bound, False)
        if body != list(s.body.body):
            return s.with_changes(body=s.body.with_changes(body=body))
        if isinstance(s.orelse, cst.If):
            inner = self._inner(s.orelse, bound)
            return s if inner is s.orelse else s.with_changes(orelse=inner)
        if isinstance(s.orelse, cst.Else):
            orelse = self._block(list(s.orelse.body.body), bound, False)
            if orelse != list(s.orelse.body.body):
                return s.with_changes(orelse=s.orelse.with_changes(body=s.orelse.body.with_changes(body=orelse)))
        return s

    def _left(self, s, why: str) -> None:
        self.ctx.note(s, "left", f"the rest after this call cannot run inside the callee: {why}")

    def _continued(self, s, bound: set, tail) -> list | str:
        """The rest function and the ``return _ub.continued(...)`` standing for ``s`` and ``tail``, or why not."""
        found = _call_of(s)
        if _returns_call(s) or (found is not None and not tail):
            return RETURNS_CALL
        if found is None:
            return "only a call that is a whole statement (name = f(...), or f(...)) has a rest to move"
        if not shareable(tail, self.ctx):
            return (
                "the rest cannot become a nested function (it declares a name global or nonlocal, holds yield, "
                "await or locals(), or rebinds a name a nested function of the user's reads)"
            )
        call, name = found
        ctx = self.ctx
        inputs = (live_in(tail, set()) & self.local) - {name}
        if inputs - bound:
            return f"the rest reads {', '.join(sorted(inputs - bound))}, which may be unbound there"
        why = _changes_outside(tail, inputs, ctx)
        if why:
            return why
        value = name or ctx.namer.new("result")
        inputs = in_order(inputs, tail)
        (rest,) = ctx.namer.numbered(ctx.prefix, ("rest",))
        stmts = explicit_super(tail, ctx)
        if not ends_in_return(stmts):
            stmts = [*stmts, cst.SimpleStatementLine([cst.Return(cst.Name("None"))])]  # falling off the end
        rest_def = branch_def(rest, [value, *inputs], stmts, []).with_changes(leading_lines=s.leading_lines)
        ctx.run.generated.add(rest)  # the passes after this one rewrite it as a function of their own
        handed = cst.Tuple([cst.Element(cst.Name(p)) for p in inputs])
        made = ctx.runtime_call("continued", cst.Name(rest), handed, call.func)
        made = made.with_changes(args=[*made.args, *call.args])
        line = cst.SimpleStatementLine([cst.Return(made)], trailing_whitespace=s.trailing_whitespace)
        ctx.origins.inherit(line, s)
        ctx.note(s, "converted", "the rest of the function runs inside the callee, whose result is decided by data")
        return [rest_def, line]


def _changes_outside(tail, inputs, ctx) -> str:
    """What running ``tail`` changes besides names of its own ("" if nothing): under export it runs
    in the callee's branches, whose functions keep no other effect."""
    effects = block_effects(tail, ctx.mutating_helpers)
    if effects.state:
        return f"the rest changes state that outlives it ({effects.state[0][1]})"
    changed = (effects.mutated | effects.containers) & (set(inputs) | {ctx.self_name} - {None})
    if changed:
        return f"the rest changes in place what it did not make ({', '.join(sorted(changed))})"
    return ""


class ReturnsToRest(Pass):
    """The callee's half: a variant of it that hands what it returns to its caller's rest."""

    HANDLES = frozenset({RETURN})
    OPTIONS = {"continuation": True}
    EXAMPLES = [
        Rewrite(
            """
            def forward(self, x):
                if x.mean() > 0:
                    return None
                return x * 2
            """,
            """
            def forward(self, x, *, _ub_rest):
                if x.mean() > 0:
                    return _ub_rest(None)
                return _ub_rest(x * 2)
            """,
        ),
        Unchanged(
            """
            def forward(self, x, _ub_rest):
                return x
            """
        ),
    ]

    def visit_FunctionDef(self, node) -> bool:
        return node is self.fn and REST not in self.ctx.source_names  # (the user's name: no variant)

    def leave_FunctionDef(self, original, updated):
        if original is not self.fn or REST in self.ctx.source_names:
            return updated
        body = list(updated.body.body)
        if not ends_in_return(body):
            body.append(cst.SimpleStatementLine([cst.Return(self._rest(None))]))
        params = updated.params
        star = params.star_arg if params.star_arg is not cst.MaybeSentinel.DEFAULT else cst.ParamStar()
        params = params.with_changes(star_arg=star, kwonly_params=[*params.kwonly_params, cst.Param(cst.Name(REST))])
        self.ctx.note(original, "converted", "a variant handing its result to the caller's rest (continuation)")
        return updated.with_changes(params=params, body=updated.body.with_changes(body=body))

    def leave_SimpleStatementLine(self, original, updated):
        if not any(isinstance(s, cst.Return) for s in updated.body):
            return updated
        passed = self.ctx.origins.line(original) in self.ctx.continue_calls
        return updated.with_changes(
            body=[self._returned(s, passed) if isinstance(s, cst.Return) else s for s in updated.body]
        )

    def _returned(self, s: cst.Return, passed: bool) -> cst.Return:
        """``return _ub_rest(v)``; ``passed``: a call torch named whose result is decided by data too,
        which gets the caller's rest in turn (``return _ub.continued(_ub_rest, (), f, args)``)."""
        if passed and isinstance(s.value, cst.Call):
            made = self.ctx.runtime_call("continued", cst.Name(REST), cst.Tuple([]), s.value.func)
            return s.with_changes(value=made.with_changes(args=[*made.args, *s.value.args]))
        return s.with_changes(value=self._rest(s.value))

    def _rest(self, value) -> cst.Call:
        return cst.Call(cst.Name(REST), [cst.Arg(value if value is not None else cst.Name("None"))])
