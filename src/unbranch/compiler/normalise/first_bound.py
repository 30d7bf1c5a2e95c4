"""A name a loop first binds (read after the loop, or by a later step) -> bound before it to a
marker, and set on the other side of each dispatched ``if`` in the loop to a value of its kind.

    for i in range(4):              brk = _ub.flag(False)                    (JumpFlags' flags)
        if x[i].sum() > 0:          out = _ub.unbound('out', like=lambda i: x[i])
            out = x[i]              for i in range(4):
            break           ->          if not brk:
    else:                                   brk = _ub.flag(x[i].sum() > 0)
        out = x[0] * 0                      if brk:
    return out                                  out = x[i]
                                            else:
                                                out = _ub.placeholder(out, lambda: x[i])
                                        else:
                                            out = _ub.placeholder(out, lambda: x[i])
                                    if not brk:
                                        out = x[0] * 0
                                    return out

A loop op carries every name from step to step, and a cond gives each output on both sides;
Python leaves the name unbound until a step binds it. Eagerly ``unbound`` is a marker that
raises ``UnboundLocalError`` wherever it is used, as the unbound name would, and
``placeholder`` gives back the value it is given (the marker, or the last step's value), so
the loop runs exactly as written. While torch traces, ``placeholder`` of the marker is the
value the other side binds (free of effects, reading nothing the ``if`` rebinds): of the shape
and dtype a cond needs, and read by no path Python would let read it. ``like`` (where the value
reads only the loop's variables and names bound before the loop) gives a loop op over a symbolic
count the value of its kind to carry in (runtime.loops: zeros of it).
"""

from __future__ import annotations

import ast

import libcst as cst

from ..analysis.effects import block_effects
from ..analysis.liveness import assigned, live_in, orelse_body
from ..analysis.names import OwnScope, block_writes, expr_reads, target_list, target_names
from ..lower.build import keyword, runtime_operator
from ..passes import IF, LOOP, Pass, Rewrite, Unchanged


def _binding(name: str, side: list, ctx) -> cst.BaseExpression | None:
    """A value ``side`` binds ``name`` to (at any depth of its ifs) that is free of effects and
    reads nothing ``side`` rebinds: the same kind of value, computable on the other side."""
    written = block_writes(side)
    for s in side:
        if isinstance(s, cst.If):
            found = _binding(name, [*s.body.body, *orelse_body(s)], ctx)
            if found is not None:
                return found
            continue
        if not (isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1 and isinstance(s.body[0], cst.Assign)):
            continue
        assign = s.body[0]
        if len(assign.targets) != 1 or target_names(assign.targets[0].target) != {name}:
            continue
        if not isinstance(assign.targets[0].target, cst.Name):
            continue
        value = _unwrapped(assign.value, name, ctx.runtime)
        effects = block_effects([s], ctx.mutating_helpers)
        if effects.mutated or effects.containers or effects.state or expr_reads(value) & (written - {name}):
            continue
        return value
    return None


def _unwrapped(value, name: str, runtime: str):
    """``lambda: v`` of ``name = _ub.placeholder(name, lambda: v)`` (an inner if's), else ``value``."""
    if runtime_operator(value, runtime) == "placeholder" and isinstance(value.args[1].value, cst.Lambda):
        return value.args[1].value.body
    return value


def _bound_after(loop: ast.For | ast.While, before: set[str]) -> set[str] | None:
    """Names certainly bound when the user's ``loop`` is left (by its end, its ``else`` or a ``break``),
    counting only what one step binds after ``before``; None when it is never left that way."""
    exits = []
    end, breaks = _walk(loop.body, set(before))
    exits += breaks
    endless = isinstance(loop, ast.While) and isinstance(loop.test, ast.Constant) and bool(loop.test.value)
    if not endless:
        done, breaks_in_else = _walk(loop.orelse, set(before))
        exits += breaks_in_else  # (a break in the else is the enclosing loop's: never reached here)
        if done is not None:
            exits.append(done)
    if not exits:
        return None
    return set.intersection(*exits)


def _walk(stmts, bound: set[str]) -> tuple[set[str] | None, list[set[str]]]:
    """(names bound where ``stmts`` fall through, or None; names bound at each of their own breaks)."""
    breaks: list[set[str]] = []
    for s in stmts:
        if isinstance(s, ast.Break):
            return None, [*breaks, set(bound)]
        if isinstance(s, (ast.Return, ast.Raise, ast.Continue)):
            return None, breaks
        if isinstance(s, ast.If):
            then, k1 = _walk(s.body, set(bound))
            other, k2 = _walk(s.orelse, set(bound))
            breaks += k1 + k2
            if then is None and other is None:
                return None, breaks
            bound = then & other if then is not None and other is not None else then if then is not None else other
        elif isinstance(s, ast.With):
            inner, k = _walk(s.body, set(bound))
            breaks += k
            if inner is None:
                return None, breaks
            bound = inner
        elif isinstance(s, (ast.Try, ast.Match)) or (hasattr(ast, "TryStar") and isinstance(s, ast.TryStar)):
            return None, [*breaks, set(bound)]  # (exits anywhere: nothing certain)
        elif not isinstance(s, (ast.For, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound |= {n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return bound, breaks


def _target_params(loop: cst.For) -> list[cst.Param] | None:
    """The loop's variables as a lambda's parameters (``row``; ``i, row``), None for other targets."""
    names = target_list(loop.target)
    return None if names is None else [cst.Param(cst.Name(n)) for n in names]


class _OtherSides(OwnScope, cst.CSTTransformer):
    """In the dispatched ifs of a loop body (not in nested loops or functions): the side that leaves
    a name of ``names`` as it was sets it to ``_ub.placeholder(name, lambda: <the other side's value>)``."""

    def __init__(self, names: list[str], ctx):
        self.names, self.ctx = names, ctx
        self.placed: set[str] = set()  # the names given a placeholder somewhere

    def visit_For(self, node) -> bool:
        return False

    visit_While = visit_For

    def leave_If(self, original, updated):
        if not self.ctx.is_candidate(original):
            return updated
        body, orelse = list(updated.body.body), orelse_body(updated)
        if isinstance(updated.orelse, cst.If):
            return updated  # (an elif: ElifChain made each one an if of its own before)
        sides = (assigned(body), assigned(orelse))
        if any(side is None for side in sides):
            return updated  # (a side that returns or jumps)
        added: dict[int, list] = {0: [], 1: []}
        for name in self.names:
            if (name in sides[0]) == (name in sides[1]):
                continue
            k = 0 if name in sides[0] else 1
            value = _binding(name, (body, orelse)[k], self.ctx)
            if value is None:
                continue
            made = self.ctx.runtime_call("placeholder", cst.Name(name), cst.Lambda(cst.Parameters(), value))
            self.placed.add(name)
            added[1 - k].append(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], made)]))
        if not added[0] and not added[1]:
            return updated
        new = updated.with_changes(body=updated.body.with_changes(body=[*body, *added[0]]))
        if added[1]:
            block = cst.IndentedBlock([*orelse, *added[1]])
            other = updated.orelse.with_changes(body=block) if updated.orelse is not None else cst.Else(block)
            new = new.with_changes(orelse=other)
        return new


class _Dispatched(OwnScope, cst.CSTVisitor):
    """Is there a dispatched ``if`` among the loop body's own statements?"""

    def __init__(self, ctx):
        self.ctx, self.found = ctx, False

    def visit_If(self, node) -> None:
        self.found = self.found or self.ctx.is_candidate(node)


class FirstBound(Pass):
    HANDLES = frozenset({IF, LOOP})
    NEEDS = ("liveness",)
    EXAMPLES = [
        Rewrite(  # (JumpFlags made flags of the break; the else runs after the loop unless it was taken)
            """
            def forward(self, x):
                for i in range(4):
                    if x[i].sum() > 0:
                        first = x[i] * 2
                        break
                else:
                    first = x[0] * 0
                return first
            """,
            """
            def forward(self, x):
                brk = _ub.flag(False)
                first = _ub.unbound('first', like=lambda i: x[i] * 2)
                for i in range(4):
                    if not brk:
                        brk = _ub.flag(x[i].sum() > 0)
                        if brk:
                            first = x[i] * 2
                        else:
                            first = _ub.placeholder(first, lambda: x[i] * 2)
                    else:
                        first = _ub.placeholder(first, lambda: x[i] * 2)
                if not brk:
                    first = x[0] * 0
                return first
            """,
        ),
        Unchanged(  # 'last' may be read unbound after the loop (no row matched): Python's error stays
            """
            def forward(self, x):
                for i in range(4):
                    if x[i].sum() > 0:
                        last = x[i]
                return last
            """
        ),
        Unchanged(  # bound before the loop: nothing to mark
            """
            def forward(self, x):
                out = x[0]
                for i in range(4):
                    if x[i].sum() > 0:
                        out = x[i]
                return out
            """
        ),
        Unchanged(  # bound only for the step that reads it: no step carries it
            """
            def forward(self, x):
                for i in range(4):
                    y = x[i] * 2
                    if y.sum() > 0:
                        x = x + y
                return x
            """
        ),
    ]

    def _mark(self, name: str, original, updated, before: set) -> cst.SimpleStatementLine:
        """``name = _ub.unbound('name'[, like=lambda <targets>: <a value a step binds>])``: ``like`` where
        the value reads only the loop's variables and names bound before the loop (their values then
        are of the kind the steps give: a loop op carries nothing else)."""
        call = self.ctx.runtime_call("unbound", cst.SimpleString(repr(name)))
        params = _target_params(updated) if isinstance(updated, cst.For) else []
        body = list(updated.body.body)
        value = _binding(name, body, self.ctx) if params is not None else None
        local = block_writes(body) - before - {p.name.value for p in params or []}
        if value is not None and not expr_reads(value) & local:
            like = cst.Lambda(cst.Parameters(params), value)
            call = call.with_changes(args=[*call.args, keyword("like", like)])
        return cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], call)])

    def leave_For(self, original, updated):
        return self._loop(original, updated, target_names(original.target))

    def leave_While(self, original, updated):
        return self._loop(original, updated, set())

    def _loop(self, original, updated, targets: set):
        ctx = self.ctx
        body = list(original.body.body)
        dispatched = _Dispatched(ctx)
        for s in body:
            s.visit(dispatched)
        if not (dispatched.found or ctx.is_candidate_loop(original)):
            return updated
        before, after = self.facts.before(original), self.facts.after(original)
        carried = (live_in(body, set()) | after) & block_writes(body) & self.facts.locals
        twin = ctx.origins.twin(original)
        if not isinstance(twin, (ast.For, ast.While)):
            return updated  # (a loop unbranch wrote: its names are its own)
        left = _bound_after(twin, before)
        # a name read after the loop only where the loop certainly binds it wherever it is left: the marker
        # is never read there eagerly, and the value a cond or loop op carries for it never when traced; a
        # step reading it before any step bound it meets the marker, which raises as the unbound name does
        names = sorted(n for n in carried - before - targets if left is None or n not in after or n in left)
        if not names:
            return updated
        other_sides = _OtherSides(names, ctx)
        new_body = [s.visit(other_sides) for s in updated.body.body]
        marks = [self._mark(n, original, updated, before) for n in names]
        marks[0] = marks[0].with_changes(leading_lines=updated.leading_lines)
        new = updated.with_changes(leading_lines=[], body=updated.body.with_changes(body=new_body))
        return cst.FlattenSentinel([*marks, new])
