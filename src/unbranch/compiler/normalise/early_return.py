"""A ``return`` in one branch only -> the rest of the function moves into the other branch.

    if x.sum() > 0:              if x.sum() > 0:
        return torch.sin(x)  ->      return torch.sin(x)
    return torch.cos(x)          else:
                                     return torch.cos(x)

When the rest would be needed on both sides (neither branch ends in ``return``), it is not
copied: it becomes one function, called (and returned) where the code would reach it, so
the code grows linearly with the nesting, not exponentially:

    if a:                        def branch_cond_rest_1(x):
        if b:                        x = x - 1
            return x                 return x * 2
        x = x + 1            ->  if a:
    x = x - 1                        if b:
    return x * 2                         return x
                                     else:
                                         x = x + 1
                                         return branch_cond_rest_1(x)
                                 else:
                                     return branch_cond_rest_1(x)

Afterwards a dispatched ``if`` either returns on every path or on none, with the same
structure on both (what ``torch.cond`` needs: a "returned" flag and value set on one path
only would have nothing to carry on the other). The rest is only moved through ``if``
statements, and inside a ``try`` or ``with`` block only the rest of that block (code after the
statement runs after its ``except`` too); a ``return`` inside a loop stays where it is (JumpFlags
lowers those).
"""

from __future__ import annotations

import libcst as cst

from ..analysis.classify import STATIC
from ..analysis.effects import mutated_parameters, private_containers, structure_changed
from ..analysis.flow import ends_in_return, returns_through_ifs
from ..analysis.liveness import ALL, assigned, live_in, orelse_body
from ..analysis.names import OwnScope, block_declared, block_writes, bound_values, param_names
from ..analysis.walk import read
from ..lower.build import branch_def, call_statement, explicit_super, in_order
from ..passes import IF, IFEXP, Pass, Rewrite, Unchanged
from .attribute_state import ATTRIBUTE


def _needs_tail(s, ctx) -> bool:
    """An ``if`` that holds (through ``if``s only) a dispatched ``if`` with a ``return`` in it."""
    if not isinstance(s, cst.If):
        return False
    if ctx.is_candidate(s) and returns_through_ifs([s]):
        return True
    return any(_needs_tail(c, ctx) for c in (*s.body.body, *orelse_body(s)))


def _holds_tail(s, ctx) -> bool:
    """``_needs_tail``, or a ``try``/``with`` holding such an ``if`` in one of its blocks."""
    return _needs_tail(s, ctx) or any(_holds_tail(c, ctx) for block in _sheltering(s) for c in block)


def _sheltering(s) -> list:
    """The blocks of a ``try``/``with`` statement (none for anything else)."""
    if isinstance(s, cst.With):
        return [s.body.body]
    if isinstance(s, (cst.Try, cst.TryStar)):
        parts = [s.body, *(h.body for h in s.handlers), *(p.body for p in (s.orelse, s.finalbody) if p)]
        return [p.body for p in parts]
    return []


def _block(stmts, ctx, local, bound, whole: bool, private=frozenset()) -> list:
    """``bound``: (names surely bound, names maybe bound) where ``stmts`` start; ``whole``: they run
    to the end of the function (falling off it returns None); ``private``: the function's own
    containers (``private_containers``)."""
    out = stmts = [_chosen(s, stmts[i + 1 :], ctx) for i, s in enumerate(stmts)]
    for i, s in enumerate(stmts):
        last = i + 1 == len(stmts)
        reshaped = not last and _reshapes(s, stmts[i + 1 :], ctx, private)
        if (
            (_needs_tail(s, ctx) and (not last or isinstance(s, cst.If)))
            or reshaped
            or (not last and _leaves_python_value(s, stmts[:i], stmts[i + 1 :], ctx))
        ):
            at = _after(stmts[:i], bound)
            return [*out[:i], *_push(s, stmts[i + 1 :], ctx, local, at, whole, private, copied=reshaped)]
        if _sheltering(s) and _holds_tail(s, ctx):
            out[i] = _sheltered(s, ctx, local, _after(stmts[:i], bound), private)
    return out


def _leaves_python_value(s, before, tail, ctx) -> bool:
    """Is ``s`` a dispatched ``if`` after which the rest reads a value a branch leaves that no cond can
    give: None, a flag, a string, a lambda (or any value, where torch named this ``if`` for one)?

    The rest then moves into both branches, where that value is a constant of each side.
    """
    if not isinstance(s, cst.If) or not ctx.is_candidate(s):
        return False
    body, orelse = list(s.body.body), orelse_body(s)
    outputs = block_writes(body + orelse) & live_in(tail, set())
    if not outputs:
        return False
    if ctx.origins.line(s) in ctx.continue_at:
        return True
    earlier = bound_values(b for b in before if isinstance(b, cst.SimpleStatementLine))
    for side in (body, orelse):
        values = bound_values(side)
        for name in outputs:
            found = values.get(name) or earlier.get(name, [])[-1:]  # (unbound on this side: its value before)
            if any(_python_value(v, ctx) for v in found):
                return True
    return False


def _reshapes(s, tail, ctx, private) -> bool:
    """Is ``s`` a dispatched ``if`` whose branches change the structure of a container of the
    function's own (``outs.append(v)``, ``del cache[k]``, a new key) that the rest reads?

    No cond output can carry a list or dict whose length or keys differ by side; with the rest
    moved into both branches, each side works on its own container and returns tensors.
    """
    if not private or not isinstance(s, cst.If) or not ctx.is_candidate(s):
        return False
    sides = list(s.body.body) + orelse_body(s)
    reshaped = structure_changed(sides, private, ctx.helpers())
    return bool(reshaped & live_in(tail, set()))


def _chosen(s, tail, ctx):
    """``v = a if t else b`` choosing a value no cond can give (None, a string, a lambda; any value
    where torch named the line for one) on a dispatched test, the rest reading ``v``: an ``if``
    assigning each side, whose rest then moves into its branches (``_leaves_python_value``)."""
    choice = _choice(s)
    if choice is None:
        return s
    assign = s.body[0]
    names = {t.target.value for t in assign.targets}
    if ctx.classifier.kind(choice.test) == STATIC or not names & live_in(tail, set()):
        return s
    sides = (choice.body, choice.orelse)
    if ctx.origins.line(s) not in ctx.continue_at and not any(_python_value(v, ctx) and not _number(v) for v in sides):
        return s

    def line(value):
        made = cst.SimpleStatementLine([assign.with_changes(value=value)])
        ctx.origins.inherit(made, s)
        return made

    new = cst.If(
        choice.test.with_changes(lpar=[], rpar=[]) if _parenthesised(choice.test) else choice.test,
        cst.IndentedBlock([line(choice.body)]),
        orelse=cst.Else(cst.IndentedBlock([line(choice.orelse)])),
        leading_lines=s.leading_lines,
    )
    ctx.origins.inherit(new, s)
    return new


def _choice(s) -> cst.IfExp | None:
    """The conditional expression of a line ``v = a if t else b`` (names as targets), else None."""
    if not isinstance(s, cst.SimpleStatementLine) or len(s.body) != 1 or not isinstance(s.body[0], cst.Assign):
        return None
    assign = s.body[0]
    if isinstance(assign.value, cst.IfExp) and all(isinstance(t.target, cst.Name) for t in assign.targets):
        return assign.value
    return None


def _parenthesised(e) -> bool:
    return bool(getattr(e, "lpar", ()))


def _number(e) -> bool:
    """A number written out (``0.5``, ``-1``): ``_ub.pick`` keeps those a tensor under a tensor test."""
    if isinstance(e, cst.UnaryOperation):
        e = e.expression
    return isinstance(e, (cst.Integer, cst.Float))


def _python_value(value, ctx) -> bool:
    """A value no cond gives: None, a string, a float, a lambda... Not a bool or int written out,
    a flag a cond gives as a tensor (its ``literals``), also when it is part of the result."""
    if isinstance(value, cst.Lambda):
        return True
    if _number(value) and not isinstance(
        value.expression if isinstance(value, cst.UnaryOperation) else value, cst.Float
    ):
        return False
    if isinstance(value, cst.Name) and value.value in ("True", "False"):
        return False
    return ctx.classifier.kind(value) == STATIC


def _sheltered(s, ctx, local, bound, private):
    """A ``try``/``with`` whose blocks have the rest of each block moved through their ``if``s: a
    return under a dispatched test inside one ends its block on both sides (nothing leaves it)."""

    def block(part, at):
        return part.with_changes(
            body=part.body.with_changes(body=_block(part.body.body, ctx, local, at, False, private))
        )

    if isinstance(s, cst.With):
        new = block(s, bound)
    else:
        parts = {"body": s.body.with_changes(body=_block(s.body.body, ctx, local, bound, False, private))}
        parts["handlers"] = [block(h, bound) for h in s.handlers]
        if s.orelse is not None:
            parts["orelse"] = block(s.orelse, _after(s.body.body, bound))
        if s.finalbody is not None:
            parts["finalbody"] = block(s.finalbody, bound)
        new = s.with_changes(**parts)
    ctx.origins.inherit(new, s)
    return new


def _after(stmts, bound) -> tuple[set, set]:
    sure, maybe = bound
    done = assigned(stmts)
    return (sure | (set() if done is ALL else done)), maybe | block_writes(stmts)


class _Unmovable(OwnScope, cst.CSTVisitor):
    """Does a block hold what a nested function cannot run (yield, await, a bare locals())?"""

    def __init__(self):
        self.found = False

    def visit_Yield(self, node):
        self.found = True

    visit_Await = visit_Yield

    def visit_Call(self, node):
        self.found |= isinstance(node.func, cst.Name) and node.func.value in ("locals", "vars", "exec", "eval")


def shareable(tail, ctx) -> bool:
    """Can ``tail`` become a nested function (its writes then stay its own)?"""
    if block_declared(tail):
        return False
    v = _Unmovable()
    for s in tail:
        read(s, v)
    writes = block_writes(tail)
    # a nested function of the user's that reads a name the tail rebinds would no longer see it
    return not v.found and not any(c.reads & writes for c in ctx.closures)


def _params(node: cst.If, tail, local, bound) -> list[str] | None:
    """What the rest reads from before it, bound where each branch would call it (None: not surely)."""
    live = live_in(tail, set()) & local
    ends = [_after(b, bound) for b in (node.body.body, orelse_body(node))]
    maybe = set().union(*(m for _, m in ends))
    params = live & maybe  # a name bound on no path before stays unbound in the rest too
    if any(params - sure for sure, _ in ends):
        return None  # bound on some paths only: the call would fail where Python reads it later, or never
    return in_order(params, tail)


def _push(node: cst.If, tail, ctx, local, bound, whole: bool, private=frozenset(), copied=False) -> list:
    """The rest ``tail`` moved into both branches of ``node``; ``copied``: as copies, never one
    function both call (which a container of the function's own would be handed to)."""
    original = node
    ctx.run.kinds.add(ATTRIBUTE)  # the rest may set attributes, in a branch now: AttributeState's work
    both = tail and not ends_in_return(node.body.body) and not ends_in_return(orelse_body(node))
    rest_def = None
    params = _params(node, tail, local, bound) if both else None
    if params is not None and not copied and (len(tail) > 1 or not ends_in_return(tail)) and shareable(tail, ctx):
        # the rest is needed on both sides: one function for it, called where it would run
        (name,) = ctx.namer.numbered(ctx.prefix, ("rest",))
        body = explicit_super(tail, ctx)
        if not ends_in_return(body):
            body = [*body, cst.SimpleStatementLine([cst.Return(cst.Name("None"))])]  # falling off the end
        inside = _block(body, ctx, local | set(params), (set(params), set(params)), True)
        rest_def = branch_def(name, params, inside, [])
        rest_def = rest_def.with_changes(leading_lines=node.leading_lines)
        ctx.run.generated.add(name)  # the passes after this one rewrite it as a function of its own
        ctx.run.helpers[name] = mutated_parameters(rest_def, ctx.helpers())  # a branch calling it changes these
        node = node.with_changes(leading_lines=[])
        call = cst.Call(cst.Name(name), [cst.Arg(cst.Name(p)) for p in params])
        tail = [call_statement([], call, returns=True)]
    copies = iter(range(2))

    if whole and not ends_in_return(tail):  # (the function falls off its end there: None)
        tail = [*tail, cst.SimpleStatementLine([cst.Return(cst.Name("None"))])]

    def branch(stmts):
        if ends_in_return(stmts) or not tail:
            return _block(list(stmts), ctx, local, bound, whole, private)
        moved = tail if next(copies) == 0 else [ctx.origins.cloned(t) for t in tail]
        return _block([*stmts, *moved], ctx, local, bound, whole, private)

    body = branch(node.body.body)
    orelse = branch(orelse_body(node))
    new = node.with_changes(body=node.body.with_changes(body=body))
    if not orelse:
        new = new.with_changes(orelse=None)
    elif isinstance(node.orelse, cst.Else):
        new = new.with_changes(orelse=node.orelse.with_changes(body=node.orelse.body.with_changes(body=orelse)))
    else:
        new = new.with_changes(orelse=cst.Else(cst.IndentedBlock(orelse)))
    ctx.origins.inherit(new, original)  # the if moved code in: it is still the user's if, on its line
    return [new] if rest_def is None else [rest_def, new]


class EarlyReturn(Pass):
    HANDLES = frozenset({IF, IFEXP})
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
        Rewrite(
            """
            def forward(self, x):
                if x.sum() > 0:
                    if x.max() > 1:
                        return x
                    x = x + 1
                x = x - 1
                return x * 2
            """,
            """
            def forward(self, x):
                def branch_cond_rest_1(x):
                    x = x - 1
                    return x * 2
                if x.sum() > 0:
                    if x.max() > 1:
                        return x
                    else:
                        x = x + 1
                        return branch_cond_rest_1(x)
                else:
                    return branch_cond_rest_1(x)
            """,
        ),
        Rewrite(
            """
            def forward(self, x):
                mode = "scale"
                if x.abs().max() > 2:
                    mode = "clip"
                if mode == "clip":
                    return x.clamp(-2, 2)
                return x * 0.5
            """,
            """
            def forward(self, x):
                mode = "scale"
                def branch_cond_rest_1(mode, x):
                    if mode == "clip":
                        return x.clamp(-2, 2)
                    return x * 0.5
                if x.abs().max() > 2:
                    mode = "clip"
                    return branch_cond_rest_1(mode, x)
                else:
                    return branch_cond_rest_1(mode, x)
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
        body = list(updated.body.body)
        if not any(_holds_tail(s, self.ctx) or isinstance(s, cst.If) or _choice(s) is not None for s in body):
            return updated  # (the names the function binds are a walk of all of it: only when needed)
        local = set(param_names(updated)) | block_writes(body)
        params = set(param_names(updated))
        new = _block(body, self.ctx, local, (params, params), True, private_containers(updated))
        return updated.with_changes(body=updated.body.with_changes(body=new))
