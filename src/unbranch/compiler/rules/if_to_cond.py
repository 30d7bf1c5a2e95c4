"""``if`` on a condition that may be a tensor -> branch functions run by ``_ub.if_stmt``.

    if x.sum() > 0:                    def branch_cond_then_1(x, y):
        y = x * 2                          y = x * 2
    else:                         ->       return y
        y = -x                         def branch_cond_else_1(x, y):
    out = y + 1                            y = -x
                                           return y
                                       y = _ub.if_stmt(x.sum() > 0, branch_cond_then_1,
                                                       branch_cond_else_1, (x, y))
                                       out = y + 1

Branch functions take the variables they read that are defined before the ``if`` and
return the variables live after it (liveness), so temporaries stay inside. An ``if`` that
returns on both paths becomes ``return _ub.if_stmt(...)``. An ``if`` that cannot become
branch functions stays plain Python behind ``_ub.unconverted``, which explains at run time
why, should its condition turn out to be a tensor.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import libcst as cst

from ..analysis.classify import SHAPE
from ..analysis.cost import elementwise_ops
from ..analysis.effects import block_effects, built_containers, private_containers
from ..analysis.flow import ends_in_return, returns_through_ifs
from ..analysis.liveness import ALL, assigned, live_in, meet, orelse_body, surroundings
from ..analysis.names import block_reads, block_writes, param_names
from ..lower.build import branch_def, call_statement, explicit_super, in_order, keyword, tuple_node
from ..lower.predicates import runtime_predicate
from ..normalise.reports import untraced
from ..passes import IF, IFEXP, LOOP, Cannot, Pass, Refused, Rewrite, Unchanged
from ._checks import binds_python_values, blockers, entries_bound, entries_changed, holds_unconverted, lost_effect
from ._loops import indexed_by_test


@dataclass(frozen=True)
class IfPlan:
    operands: list  # names the branch functions take
    outputs: list | None  # names they return (None: both branches return from the function)
    mutated: list  # operands a branch changes in place (cloned when traced, written back after)
    kept: list  # outputs only changed in place: after the cond they are still the same objects


class IfToCond(Pass):
    # (IfExpToCond makes if statements of some conditional expressions, JumpFlags the guards of loops)
    HANDLES = frozenset({IF, IFEXP, LOOP})
    NEEDS = ("liveness",)
    EXAMPLES = [
        Rewrite(
            """
            def forward(self, x):
                if x.sum() > 0:
                    return torch.sin(x)
                return torch.cos(x)
            """,
            """
            def forward(self, x):
                def branch_cond_then_1(x):
                    return torch.sin(x)
                def branch_cond_else_1(x):
                    return torch.cos(x)
                return _ub.if_stmt(x.sum() > 0, branch_cond_then_1, branch_cond_else_1, (x,))
            """,
        ),
        Rewrite(
            """
            def forward(self, x):
                # clamp overflowing values
                if x.dtype == torch.float16 and not torch.isfinite(x).all():
                    t = torch.finfo(x.dtype).max - 1000
                    x = torch.clamp(x, min=-t, max=t)
                return x
            """,
            """
            def forward(self, x):
                # clamp overflowing values
                def branch_cond_then_1(x):
                    t = torch.finfo(x.dtype).max - 1000
                    x = torch.clamp(x, min=-t, max=t)
                    return x
                def branch_cond_else_1(x):
                    return x
                x = _ub.if_stmt(x.dtype == torch.float16 and _ub.not_(torch.isfinite(x).all()), branch_cond_then_1, branch_cond_else_1, (x,))
                return x
            """,
        ),
        Unchanged(
            """
            def forward(self, x, mask=None):
                if mask is None:
                    mask = torch.ones_like(x)
                if self.training:
                    x = x * 2
                return x * mask
            """
        ),
        Refused(
            """
            def forward(self, x):
                if x.sum() > 0:
                    y = x + 1
                return y
            """,
            "'y' is set only in the if-branch and is undefined before it",
        ),
    ]

    @functools.cached_property
    def params(self):
        return set(param_names(self.fn))

    @functools.cached_property
    def containers(self) -> frozenset:
        return built_containers(self.fn)

    @functools.cached_property
    def private(self) -> frozenset:
        return frozenset(private_containers(self.fn))

    @functools.cached_property
    def fn_effects(self):
        """The whole function's effects: asked only about a name rebound on one side of an if."""
        return block_effects(self.fn.body.body, self.ctx.mutating_helpers)

    def visit_If(self, node) -> bool:
        return not untraced(node, self.ctx.runtime)  # (an if that only reports: never traced, left as written)

    def leave_If(self, original: cst.If, updated: cst.If):
        ctx = self.ctx
        if not ctx.is_candidate(original) or untraced(original, ctx.runtime):
            return updated
        if ctx.condition_kind(original) == SHAPE and holds_unconverted(updated, ctx.runtime):
            # a cond would trace both sides, and the side the export's example does not take holds
            # code left as Python: specialise on the size as the plain if does (never worse)
            ctx.note(original, "left", "a size condition over code left as Python specialises as a plain if")
            return updated
        live = self.facts.after(original)
        dropped = _dead_dels(original.body.body, live) | _dead_dels(orelse_body(original), live)
        body = [b for b in original.body.body if id(b) not in dropped]
        orelse = [b for b in orelse_body(original) if id(b) not in dropped]
        try:
            plan = self._plan(original, body, orelse)
        except Cannot as why:
            return self.leave_as_python(original, updated, str(why), "if")
        operands, outputs, mutated, kept = plan.operands, plan.outputs, plan.mutated, plan.kept
        then_name, else_name = ctx.namer.numbered(ctx.prefix, ("then", "else"))
        returns = outputs is None
        kept_body = [b for b in updated.body.body if id(b) not in dropped]
        kept_orelse = [b for b in orelse_body(updated) if id(b) not in dropped]
        new_body = indexed_by_test(explicit_super(kept_body, ctx), updated.test, ctx)
        new_orelse = indexed_by_test(explicit_super(kept_orelse, ctx), updated.test, ctx)
        else_header = updated.orelse.body.header if isinstance(updated.orelse, cst.Else) else None
        defs = [
            branch_def(then_name, operands, new_body, outputs).with_changes(leading_lines=updated.leading_lines),
            branch_def(else_name, operands, new_orelse, outputs, header=else_header),
        ]
        args = [
            cst.Arg(runtime_predicate(updated.test, ctx)),
            cst.Arg(cst.Name(then_name)),
            cst.Arg(cst.Name(else_name)),
            cst.Arg(tuple_node(operands)),
        ]
        if mutated:
            args.append(keyword("mutated", tuple_node([cst.Integer(str(operands.index(m))) for m in mutated])))
        in_place = [m for m in mutated if m in self.containers and m not in entries_bound(body + orelse)]
        if in_place:  # (a list's or dict's entries changed in place only: copied back into the same tensors)
            args.append(keyword("in_place", tuple_node([cst.Integer(str(operands.index(m))) for m in in_place])))
        if kept:
            pairs = [
                tuple_node([cst.Integer(str(outputs.index(n))), cst.Integer(str(operands.index(n)))]) for n in kept
            ]
            args.append(keyword("kept", tuple_node(pairs)))
        one_side = ctx.one_side.get(ctx.origins.line(original))
        if one_side is not None and (ctx.one_sided or ctx.condition_kind(original) == SHAPE):
            # torch could trace one side only: under export it runs behind a check the condition takes it
            where = f"{ctx.source.path}:{ctx.line_of(original)}"
            args.append(keyword("keep", tuple_node([cst.SimpleString(repr(text)) for text in (*one_side, where)])))
            ctx.note(original, "one-sided", f"under export only the {one_side[0]} side, checked: {one_side[1]}")
        flags = [n for n in outputs or () if n in ctx.classifier.literal_flags or n in ctx.jump_flags]  # tensors
        if flags:
            args.append(keyword("literals", tuple_node([cst.Integer(str(outputs.index(n))) for n in flags])))
        if binds_python_values(body + orelse, set(outputs or ()) - set(flags)):
            # a shape condition then specialises, as a plain if would
            args.append(keyword("tensor_outputs", cst.Name("False")))
        elif not (mutated or kept or flags or one_side is not None):
            ops = elementwise_ops(body + orelse)
            if ops is not None:  # (the runtime may evaluate both sides and torch.where the results)
                args.append(keyword("elementwise", cst.Integer(str(ops))))
        call = cst.Call(cst.Attribute(cst.Name(ctx.runtime), cst.Name("if_stmt")), args)
        stmt = call_statement(outputs, call, returns=returns)
        if updated.body.header.comment is not None:
            stmt = stmt.with_changes(trailing_whitespace=updated.body.header)
        ctx.note(original, "cond", f"outputs: {', '.join(outputs or []) or '-'}")
        return cst.FlattenSentinel([*defs, stmt])

    def _plan(self, node, body, orelse):
        """How the if becomes branch functions; ``Cannot`` says why it cannot."""
        returns = ends_in_return(body) and ends_in_return(orelse)
        # both sides return (the rest of the function moved in): what they do to a container only this
        # function sees (append, del of an entry) ends with them
        private = self.private if returns else frozenset()
        if private:
            private -= entries_changed(body + orelse, private, self.ctx.mutating_helpers)
        for part in (body, orelse):
            found = blockers(part, private)
            if found:
                raise Cannot(found[0][1])
        if not returns and returns_through_ifs([node]):
            raise Cannot("a return on some paths of the if only")
        facts = self.facts
        # a name declared nonlocal/global and rebound in a branch: the cond's output, assigned where
        # the declaration holds, reaches the enclosing scope's variable (bound there, and seen there after)
        declared = block_writes(body + orelse) & facts.declared_nonlocal
        if declared and returns:
            raise Cannot(f"'{sorted(declared)[0]}' is declared global/nonlocal and assigned in a returning branch")
        why = lost_effect(node, body + orelse, facts.before(node) - private, self.ctx, "a branch")
        if why:
            raise Cannot(why)
        names = facts.locals | declared
        before = facts.before(node) | declared
        effects = block_effects(body + orelse, self.ctx.mutating_helpers)
        mutated = effects.mutated & names - private
        if returns:
            outputs = None
            live_end = set()
        else:
            # a nested function defined elsewhere reads the enclosing function's cell, whenever it is
            # called: a name it reads that a branch rebinds must come out of the cond into that cell
            live = facts.after(node) | declared | {n for c in self.ctx.closures_outside(node) for n in c.reads}
            # a name only changed in place needs no output: the runtime writes the change back
            outputs = in_order(block_writes(body + orelse) & live & names, body + orelse)
            both = meet(assigned(body), assigned(orelse))
            for name in outputs:
                if name not in before and (both is not ALL and name not in both):
                    side = "if" if name in block_writes(body) else "else"
                    raise Cannot(f"'{name}' is set only in the {side}-branch and is undefined before it")
            live_end = set(outputs)
        reads = set()
        for part in (body, orelse):
            reads |= live_in(part, live_end)
        operands = in_order((reads | (mutated & before)) & names, body + orelse)
        for name in operands:
            if name not in before:
                raise Cannot(f"'{name}' may be unbound when the if runs")
        mutated = [m for m in operands if m in mutated]
        kept = [n for n in outputs or () if n in mutated and n not in effects.rebound]
        why = self._identity_depends_on_branch(node, body, orelse, outputs or [], before)
        if why:
            raise Cannot(why)
        return IfPlan(operands, outputs, mutated, kept)

    def _identity_depends_on_branch(self, node, body, orelse, outputs, before) -> str | None:
        """Which object an output is after the if matters later, and a cond cannot say (left as Python).

        A cond output is always a new tensor. Python's is the old object on a side that does not
        rebind it, or a view of another tensor where a branch binds one: a change in place after
        the if then reaches (or comes from) the other name in Python, never in the exported program.
        """
        branch = block_effects(body + orelse, self.ctx.mutating_helpers)
        viewed = [n for n in outputs if n in branch.aliased]
        # (the user's bool/int flags hold no object anyone else sees: a number, or the tensor a cond made of it)
        one_sided = [n for n in outputs if n in before and n not in self.ctx.classifier.literal_flags]
        if one_sided:  # rebound on one side only
            then_side, else_side = block_effects(body).rebound, block_effects(orelse).rebound
            one_sided = [n for n in one_sided if (n in then_side) != (n in else_side)]
        if one_sided and self.ctx.may_change(one_sided):  # (the whole function's effects: asked only then)
            one_sided = [
                n
                for n in one_sided
                if n in self.fn_effects.mutated and (n in self.params or n in self.fn_effects.aliased)
            ]
        else:
            one_sided = []
        if not one_sided and not (viewed and self.ctx.may_change(branch.aliased)):
            return None  # (nothing the branches bind as a view of another name changes in place)
        earlier, after = surroundings(self.fn, node)
        later = block_effects(after, self.ctx.mutating_helpers).mutated
        # (a name bound anew before its change in place, as a loop's next step may, changes another object)
        changed = {n for n in later & branch.aliased if _changed_first(after, n, self.ctx)}
        if viewed and changed:
            return (
                f"'{viewed[0]}' may be a view of another tensor after the if and '{sorted(changed)[0]}' is changed "
                "in place later (a cond output is a new tensor: the change would not reach the other name)"
            )
        # a parameter rebound before the if on every path holds a fresh object: nobody else sees it
        fresh = block_effects(earlier).rebound
        for n in one_sided:
            if (n in self.fn_effects.aliased or n not in fresh) and n in later and _changed_first(after, n, self.ctx):
                return (
                    f"'{n}' is rebound in one branch only and changed in place after the if "
                    "(which object that change reaches depends on the branch: a cond cannot express it)"
                )
        return None


def _changed_first(stmts, name: str, ctx) -> bool:
    """Is the object ``name`` holds when ``stmts`` start changed in place by them, before a statement
    rebinds ``name`` (``ids = ids.clone(); ids[m] = 0`` changes the copy)? A compound statement's
    blocks are followed each on its own; only a simple statement rebinding ``name`` ends the search."""
    for s in stmts:
        blocks = _blocks(s)
        if blocks is None:  # a simple statement, or one taken whole (``match``, a ``def``)
            effects = block_effects([s], ctx.mutating_helpers)
            if name in effects.mutated:
                return True
            if name in effects.rebound and isinstance(s, cst.SimpleStatementLine):
                return False
        elif any(_changed_first(block, name, ctx) for block in blocks):
            return True
    return False


def _blocks(s) -> list[list] | None:
    """The blocks of an ``if`` (its sides), a loop (body, ``else``), a ``with`` or a ``try``; None for
    any other statement."""
    if isinstance(s, cst.If):
        return [list(s.body.body), orelse_body(s)]
    if not isinstance(s, (cst.For, cst.While, cst.With, cst.Try)):
        return None
    parts = [s.body, *getattr(s, "handlers", ()), getattr(s, "orelse", None), getattr(s, "finalbody", None)]
    return [
        list(p.body.body if isinstance(p, (cst.ExceptHandler, cst.Else, cst.Finally)) else p.body) for p in parts if p
    ]


def _dead_dels(stmts, live_after) -> set[int]:
    """Ids of the lines of ``stmts`` that only ``del`` names read nowhere after them (in the block or
    after the if): a branch function's locals end with it, so dropping them changes nothing."""
    dead = set()
    for k, s in enumerate(stmts):
        if not (isinstance(s, cst.SimpleStatementLine) and all(isinstance(small, cst.Del) for small in s.body)):
            continue
        targets = [small.target for small in s.body]
        if not all(isinstance(t, cst.Name) for t in targets):
            continue
        names = {t.value for t in targets}
        if not names & (set(live_after) | block_reads(stmts[k + 1 :]) | block_writes(stmts[k + 1 :])):
            dead.add(id(s))
    return dead
