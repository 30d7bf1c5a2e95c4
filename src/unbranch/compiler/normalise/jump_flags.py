"""``break``/``continue``/``return`` that a branch function would have to hold -> flags and guards.

    for layer in self.layers:                  for layer in self.layers:
        if self.training:                          cont = False
            p = torch.rand([])                     if self.training:
            if p < self.layerdrop:      ->             p = torch.rand([])
                continue                               cont = p < self.layerdrop
        x = layer(x)                               if not cont:
                                                       x = layer(x)

A jump that ends the body of a dispatched ``if`` becomes the flag set to the condition
itself (a tensor when the condition is one, so a ``cond`` can carry it), and the code the
jump skips is guarded by ``if not flag:``. ``break`` sets a flag initialised before the
loop: a ``while`` tests it first (``while not brk and t``), a ``for`` over ``range`` or a
tensor guards the whole body (the remaining steps do nothing). A ``return`` in a loop
works like a ``break`` with its own flag, followed after the loop by ``if ret: return
value`` (nothing runs between the return point and there, so the value is the same); in
``with torch.no_grad():`` (a grad or autocast mode) the body is a loop of one step and
the value is computed in the mode entered again. Flags are plain bools until a dispatched
condition sets them; ``_ub.flag`` tensors where a cond or a converted loop must carry them
on every path. Done only where it helps:
in a loop the rules convert, or for a jump under a dispatched ``if``. A ``break`` in a
``for`` over any other iterable (a generator must not be advanced further) or inside
``try``/``match`` stays Python. A ``for`` whose variables are read after a ``break`` (or by a
``return``'s value) records them at each step that runs (``row_at = row``): after the loop they are
the stopped step's, carried by a loop op (zeros of the item's kind until a step runs). A loop's
``else`` runs after it under ``if not brk:``.
"""

from __future__ import annotations

import libcst as cst

from ..analysis.classify import SHAPE, TENSOR
from ..analysis.liveness import orelse_body
from ..analysis.names import OwnScope, block_writes, expr_reads, target_list, target_names
from ..analysis.walk import read
from ..lower.build import keyword
from ..lower.predicates import runtime_predicate
from ..passes import IF, LOOP, Pass, Rewrite, Unchanged

BREAK, CONTINUE, RETURN = "break", "continue", "return"
STOPS = (BREAK, RETURN)  # end the loop: the rest of every step is guarded


class _Abort(Exception):
    """A jump where a flag cannot replace it: the loop stays as written."""


class _Jumps(OwnScope, cst.CSTVisitor):
    """The loop's own ``break``/``continue`` (not those of nested loops); is one under a dispatched if?"""

    def __init__(self, ctx):
        self.ctx = ctx
        self.kinds: set[str] = set()
        self.dispatched = 0  # depth of dispatched ifs around the visit
        self.under_dispatched = False

    def visit_For(self, node) -> bool:
        return False  # a nested loop's jumps are its own

    visit_While = visit_For

    def visit_If(self, node):
        self.dispatched += self.ctx.is_candidate(node)

    def leave_If(self, node):
        self.dispatched -= self.ctx.is_candidate(node)

    def _jump(self, node):
        self.kinds.add(_kind(node))
        self.under_dispatched |= self.dispatched > 0

    visit_Break = visit_Continue = visit_Return = _jump


def _jumps(stmts, ctx) -> _Jumps:
    v = _Jumps(ctx)
    for s in stmts:
        read(s, v)
    return v


def _assign(name: str, value: cst.BaseExpression) -> cst.SimpleStatementLine:
    return cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], value)])


def _kind(small) -> str | None:
    return {cst.Break: BREAK, cst.Continue: CONTINUE, cst.Return: RETURN}.get(type(small))


def _ends_in_jump(stmts) -> str | None:
    last = stmts[-1] if stmts else None
    return _kind(last.body[-1]) if isinstance(last, cst.SimpleStatementLine) else None


class _NeedsTensors(Exception):
    """A flag set inside a dispatched branch without a tensor to set it to: start again with tensor flags."""


class _Lowering:
    """Rewrites one loop body; ``flags`` maps break/continue to the flag names.

    ``tensors``: flags are 0-d bool tensors (``_ub.flag``) on every path, as a converted loop
    must carry them and a ``cond`` must return them from both branches. Otherwise they stay
    Python bools until a dispatched condition sets them (then they are that condition).
    """

    def __init__(self, ctx, flags: dict, tensors: bool, guarded: bool = False):
        self.ctx, self.flags, self.tensors = ctx, flags, tensors
        self.dispatched = int(guarded)  # dispatched ifs around the statement being lowered (and guards)
        self.in_with = 0
        self.returned: list[tuple[str, cst.BaseExpression]] = []  # (flag, value) of each return

    def jumped(self, small) -> str:
        """The flag a jump sets. A ``return`` gets its own: ``if ret: return value`` after the loop.

        The value is read there: every statement after the return point is guarded, so
        nothing changes what it reads in between, except the loop's own variable (checked by
        the caller). Inside a ``with`` it would be read outside the context: left as written.
        """
        kind = _kind(small)
        if kind != RETURN:
            return self.flags[kind]
        if self.in_with:
            raise _Abort
        name = self.flags[RETURN] if not self.returned else self.ctx.namer.new("ret")
        self.returned.append((name, small.value if small.value is not None else cst.Name("None")))
        return name

    def block(self, stmts) -> tuple[list, set]:
        """The lowered statements and the flags they may set."""
        out: list = []
        for i, s in enumerate(stmts):
            new, flags = self.stmt(s)
            out.extend(new)
            if flags:
                self.dispatched += 1  # the rest runs under `if not flag:`, a cond once the flag is a tensor
                try:
                    rest, more = self.block(stmts[i + 1 :])
                finally:
                    self.dispatched -= 1
                if rest:
                    out.append(self.guard(flags, rest))
                return out, flags | more
        return out, set()

    def order(self, flags) -> list[str]:
        known = [self.flags.get(BREAK), *(name for name, _ in self.returned), self.flags.get(CONTINUE)]
        return [n for n in known if n is not None and n in flags]

    def guard(self, flags, body) -> cst.If:
        """``if not flag: body`` (``not (brk or cont)`` when either may be set)."""
        names = [cst.Name(n) for n in self.order(flags)]
        test = names[0]
        for n in names[1:]:
            test = cst.BooleanOperation(test, cst.Or(), n, lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return cst.If(cst.UnaryOperation(cst.Not(), test), cst.IndentedBlock(body))

    def stmt(self, s) -> tuple[list, set]:
        if isinstance(s, cst.SimpleStatementLine):
            for k, small in enumerate(s.body):
                if _kind(small) is not None:
                    flag = self.jumped(small)
                    kept = [*s.body[:k], *self.set_flag(flag, cst.Name("True"))]
                    return [s.with_changes(body=kept)], {flag}
            return [s], set()
        if isinstance(s, cst.If):
            return self.if_(s)
        if isinstance(s, (cst.With,)):
            self.in_with += 1
            try:
                body, kinds = self.block(list(s.body.body))
            finally:
                self.in_with -= 1
            return [s.with_changes(body=s.body.with_changes(body=body))], kinds
        if isinstance(s, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef)):
            return [s], set()  # their jumps are their own
        if _jumps([s], self.ctx).kinds:
            raise _Abort  # try, match: Python's exits through them stay as written
        return [s], set()

    def set_flag(self, flag, value) -> list:
        """``cont = value``; a ``break`` also ends the iteration: ``brk = value`` stops the guards."""
        if self.dispatched and not self.tensors:
            raise _NeedsTensors
        if self.tensors:
            value = self.ctx.runtime_call("flag", value)
        return [cst.Assign([cst.AssignTarget(cst.Name(flag))], value)]

    def if_(self, s: cst.If) -> tuple[list, set]:
        body, orelse = list(s.body.body), orelse_body(s)
        kind = _ends_in_jump(body)
        ctx = self.ctx
        if (
            kind is not None
            and ctx.is_candidate(s)
            and not _jumps(body[:-1], ctx).kinds
            and (kind == RETURN or kind not in _jumps(orelse, ctx).kinds)
        ):
            # the flag is the condition itself: a tensor exactly when the condition is one
            last = body[-1]
            flag = self.jumped(last.body[-1])
            body = body[:-1] + ([last.with_changes(body=last.body[:-1])] if len(last.body) > 1 else [])
            if self.dispatched and not self.tensors:
                raise _NeedsTensors  # the other side of the outer cond must return a tensor flag too
            value = runtime_predicate(s.test, ctx)
            hoisted = cst.SimpleStatementLine(self.set_flag(flag, value), leading_lines=s.leading_lines)
            self.dispatched += 1
            try:
                new_orelse, more = self.block(orelse)
            finally:
                self.dispatched -= 1
            if not body and not new_orelse:
                return [hoisted], {flag} | more
            test = cst.Name(flag)
            if not body:  # nothing to do before the jump: only the else side is left
                body, new_orelse, test = new_orelse, [], cst.UnaryOperation(cst.Not(), cst.Name(flag))
            new = s.with_changes(test=test, body=s.body.with_changes(body=body), leading_lines=[])
            new = _with_orelse(new, new_orelse)
            return [hoisted, new], {flag} | more
        step = int(ctx.is_candidate(s))
        self.dispatched += step
        try:
            new_body, kinds = self.block(body)
            new_orelse, more = self.block(orelse)
        finally:
            self.dispatched -= step
        if not kinds and not more:
            return [s], set()
        new = s.with_changes(body=s.body.with_changes(body=new_body or [cst.SimpleStatementLine([cst.Pass()])]))
        return [_with_orelse(new, new_orelse)], kinds | more


def _unset(name: str, loop: cst.For, ctx) -> cst.Call:
    """``_ub.unbound('i'[, start])``: a loop variable no step has bound yet; over a ``range``, its start
    while torch traces (an int, as every step's value is); over anything else, ``like`` the item's
    own (``lambda i, row: row``), which a loop op carries in as zeros of its kind."""
    args = [cst.SimpleString(repr(name))]
    iterable = loop.iter
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "range":
        plain = [a for a in iterable.args if a.keyword is None and not a.star]
        if len(plain) == len(iterable.args):
            args.append(plain[0].value if len(plain) > 1 else cst.Integer("0"))
        return ctx.runtime_call("unbound", *args)
    params = cst.Parameters([cst.Param(cst.Name(n)) for n in target_list(loop.target)])
    call = ctx.runtime_call("unbound", *args)
    return call.with_changes(args=[*call.args, keyword("like", cst.Lambda(params, cst.Name(name)))])


class _ReturnReads(OwnScope, cst.CSTVisitor):
    """The names the values of the loop body's ``return`` statements read (nested loops' too)."""

    def __init__(self):
        self.names: set[str] = set()

    def visit_Return(self, node) -> None:
        if node.value is not None:
            self.names |= expr_reads(node.value)


def _with_orelse(node: cst.If, orelse) -> cst.If:
    if not orelse:
        return node.with_changes(orelse=None)
    if isinstance(node.orelse, cst.Else):
        return node.with_changes(orelse=node.orelse.with_changes(body=node.orelse.body.with_changes(body=orelse)))
    return node.with_changes(orelse=cst.Else(cst.IndentedBlock(orelse)))


_MODES = {
    "torch.no_grad",
    "torch.enable_grad",
    "torch.inference_mode",
    "torch.set_grad_enabled",
    "torch.autocast",
    "torch.amp.autocast",
}


def _always(test) -> bool:
    """``True`` or ``1`` written out: a loop only a jump ends."""
    return (isinstance(test, cst.Name) and test.value == "True") or (
        isinstance(test, cst.Integer) and test.value == "1"
    )


def _reenterable(node: cst.With, body) -> bool:
    """``with`` torch grad/autocast modes only, whose arguments the body does not rebind."""
    code = cst.Module([]).code_for_node
    for item in node.items:
        call = item.item
        if item.asname is not None or not isinstance(call, cst.Call) or code(call.func) not in _MODES:
            return False
        if expr_reads(call) & block_writes(body):
            return False
    return True


def _guardable_for(node: cst.For, ctx) -> bool:
    """A ``for`` that may run its remaining steps as no-ops: over ``range``, a tensor, a list or
    tuple display, or an attribute of ``self`` (a ModuleList, a list of sizes: a container, read
    again by every call), or ``enumerate``/``zip``/``reversed`` of those.

    Not over an argument merely assumed to be a tensor, which may be a generator, unless torch
    named the function and the loop is one a rule converts: the runtime's eager loop then stops
    at the flag (``stops``), so a generator is advanced exactly as far as the break.
    """
    return _container(node.iter, ctx) or (ctx.named and ctx.is_candidate_loop(node))


def _container(it, ctx) -> bool:
    if isinstance(it, cst.Subscript):  # self.layers[:n]
        it = it.value
    if isinstance(it, (cst.List, cst.Tuple)):
        return True
    if isinstance(it, cst.Attribute) and isinstance(it.value, cst.Name) and it.value.value == ctx.self_name:
        return True
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Name):
        if it.func.value == "range":
            return True
        if it.func.value in ("enumerate", "zip", "reversed") and it.args:
            return all(_container(a.value, ctx) for a in it.args if a.keyword is None)
    return ctx.classifier.kind(it) in (SHAPE, TENSOR)


class JumpFlags(Pass):
    HANDLES = frozenset({IF, LOOP})
    NEEDS = ("liveness",)
    EXAMPLES = [
        Rewrite(
            """
            def forward(self, x):
                for i in range(3):
                    x = x + 1
                    if x.sum() > 5:
                        continue
                    x = x * 2
                return x
            """,
            """
            def forward(self, x):
                for i in range(3):
                    cont = False
                    x = x + 1
                    cont = x.sum() > 5
                    if not cont:
                        x = x * 2
                return x
            """,
        ),
        Rewrite(
            """
            def forward(self, x):
                while x.sum() < 100:
                    x = x * 2
                    if x.max() > 50:
                        break
                    x = x + 1
                return x
            """,
            """
            def forward(self, x):
                brk = _ub.flag(False)
                while _ub.and_(_ub.not_(brk), lambda: x.sum() < 100):
                    x = x * 2
                    brk = _ub.flag(x.max() > 50)
                    if not brk:
                        x = x + 1
                return x
            """,
        ),
        Rewrite(
            """
            def forward(self, x):
                for i in range(3):
                    x = x + 1
                    if x.sum() > 5:
                        return x * 2
                return x
            """,
            """
            def forward(self, x):
                ret = _ub.flag(False)
                for i in range(3):
                    if not ret:
                        x = x + 1
                        ret = _ub.flag(x.sum() > 5)
                if ret:
                    return x * 2
                return x
            """,
        ),
        Rewrite(  # the return reads the loop variable: each step records it, the return reads the stopped one
            """
            def forward(self, x):
                for i in range(4):
                    if x[i].sum() > 0:
                        return x[i] * i
                return x[0]
            """,
            """
            def forward(self, x):
                ret = _ub.flag(False)
                i_at = _ub.unbound('i', 0)
                for i in range(4):
                    if not ret:
                        i_at = i
                        ret = _ub.flag(x[i].sum() > 0)
                i = i_at
                if ret:
                    return x[i] * i
                return x[0]
            """,
        ),
        Rewrite(
            """
            def forward(self, x):
                with torch.no_grad():
                    y = x * 2
                    if y.sum() > 0:
                        return y
                    y = y - 1
                return y * 3
            """,
            """
            def forward(self, x):
                ret = False
                with torch.no_grad():
                    y = x * 2
                    ret = y.sum() > 0
                    if not ret:
                        y = y - 1
                if ret:
                    with torch.no_grad():
                        return y
                return y * 3
            """,
        ),
        Unchanged(
            """
            def forward(self, x, items):
                for item in items:
                    if x.sum() > item:
                        break
                    x = x + item
                return x
            """
        ),
        Unchanged(
            """
            def forward(self, x):
                for i in range(3):
                    if self.training:
                        continue
                    x = x + 1
                return x
            """
        ),
    ]

    def leave_With(self, original, updated):
        """A return under a dispatched if in ``with torch.no_grad():`` (a mode, safe to enter again).

        The with body runs like a loop of one step that a return stops; after it,
        ``if ret: with torch.no_grad(): return value`` computes the value in the same mode.
        """
        ctx = self.ctx
        body = list(updated.body.body)
        found = _jumps(body, ctx)
        if found.kinds != {RETURN} or not found.under_dispatched or not _reenterable(updated, body):
            return updated
        flag = ctx.namer.new("ret")
        try:
            try:
                tensors = False
                lowering = _Lowering(ctx, {RETURN: flag}, tensors)
                new_body, _ = lowering.block(body)
            except _NeedsTensors:
                tensors = True
                lowering = _Lowering(ctx, {RETURN: flag}, tensors)
                new_body, _ = lowering.block(body)
        except _Abort:
            return updated
        false = ctx.runtime_call("flag", cst.Name("False")) if tensors else cst.Name("False")
        before, after = [], []
        for name, value in lowering.returned:
            before.append(_assign(name, false.deep_clone()))
            again = updated.deep_clone().with_changes(
                leading_lines=[], body=updated.body.with_changes(body=[cst.SimpleStatementLine([cst.Return(value)])])
            )
            after.append(cst.If(cst.Name(name), cst.IndentedBlock([again])))
        before[0] = before[0].with_changes(leading_lines=updated.leading_lines)
        new = updated.with_changes(leading_lines=[], body=updated.body.with_changes(body=new_body))
        return cst.FlattenSentinel([*before, new, *after])

    def leave_For(self, original, updated):
        return self._loop(original, updated)

    def leave_While(self, original, updated):
        return self._loop(original, updated)

    def _loop(self, original, updated):
        ctx = self.ctx
        body = list(updated.body.body)
        found = _jumps(body, ctx)
        if not found.kinds or not (found.under_dispatched or ctx.is_candidate_loop(original)):
            return updated
        stops = found.kinds & set(STOPS)
        kept = []  # (a loop variable, the name holding it at the step a break or return stopped at)
        if stops:
            if isinstance(updated, cst.For):
                if not _guardable_for(updated, ctx):
                    return updated  # a generator must not be advanced after the break
                returned = _ReturnReads()
                for s in body:
                    read(s, returned)
                # read after the loop, or by a return's value (computed after the loop, from these)
                needed = target_names(updated.target) & (self.facts.live_out.get(original, set()) | returned.names)
                if needed:
                    targets = target_list(updated.target)
                    # recorded after the body's last rebinding of them (RowEffects' ``row = x[i]``), where
                    # no jump comes before it: from there to the jump the step leaves them as they are
                    start = max((k + 1 for k, st in enumerate(body) if needed & block_writes([st])), default=0)
                    if targets is None or _jumps(body[:start], ctx).kinds or needed & block_writes(body[start:]):
                        return updated  # after a break the variables hold the step it stopped at
                    kept = [(n, ctx.namer.new(f"{n}_at")) for n in targets if n in needed]
                    body[start:start] = [_assign(at, cst.Name(name)) for name, at in kept]
        names = {BREAK: "brk", CONTINUE: "cont", RETURN: "ret"}
        flags = {k: ctx.namer.new(names[k]) for k in sorted(found.kinds)}
        # ``while True:`` that a jump under a dispatched if stops: a loop on that flag (a while_loop)
        endless = isinstance(updated, cst.While) and _always(updated.test) and bool(stops) and found.under_dispatched
        tensors = ctx.is_candidate_loop(original) or endless
        guarded = bool(stops) and isinstance(updated, cst.For)  # the whole body goes under `if not brk:`
        try:
            try:
                lowering = _Lowering(ctx, flags, tensors, guarded)
                new_body, _ = lowering.block(body)
            except _NeedsTensors:
                tensors = True
                lowering = _Lowering(ctx, flags, tensors, guarded)
                new_body, _ = lowering.block(body)
        except _Abort:
            return updated
        after = []
        for name, value in lowering.returned:
            if isinstance(updated, cst.For) and target_names(updated.target) & expr_reads(value) - {n for n, _ in kept}:
                return updated  # the loop variable moves on after the return: read too late
            returns = cst.SimpleStatementLine([cst.Return(value)])
            after.append(cst.If(cst.Name(name), cst.IndentedBlock([returns])))
        if stops and updated.orelse is not None:  # the else runs when no break (nor return) ended the loop
            orelse = list(updated.orelse.body.body)
            if BREAK in flags:
                orelse = [cst.If(cst.UnaryOperation(cst.Not(), cst.Name(flags[BREAK])), cst.IndentedBlock(orelse))]
            after += orelse
            updated = updated.with_changes(orelse=None)
        false = ctx.runtime_call("flag", cst.Name("False")) if tensors else cst.Name("False")
        if tensors:
            ctx.run.jump_flags.update(flags.values(), (name for name, _ in lowering.returned))
        if CONTINUE in flags:
            new_body = [_assign(flags[CONTINUE], false), *new_body]
        before = []
        new = updated
        if stops:
            names = lowering.order({flags.get(BREAK), *(name for name, _ in lowering.returned)})
            before = [_assign(n, false.deep_clone()) for n in names]
            before[0] = before[0].with_changes(leading_lines=updated.leading_lines)
            new = new.with_changes(leading_lines=[])
            stopped = lowering.guard(set(names), [cst.SimpleStatementLine([cst.Pass()])]).test.expression
            if endless:
                new = new.with_changes(test=runtime_predicate(cst.UnaryOperation(cst.Not(), stopped), ctx))
                ctx.run.kinds.add(LOOP)  # a loop the screen saw none in: WhileToLoop's work now
            elif isinstance(updated, cst.While):
                test = cst.BooleanOperation(cst.UnaryOperation(cst.Not(), stopped), cst.And(), updated.test)
                new = new.with_changes(test=runtime_predicate(test, ctx))
            else:
                # each step that runs records where it is; after the loop the variables are that step's
                for k, (name, at) in enumerate(kept):
                    bound = name in self.facts.before(original)  # (else Python leaves it unbound: a marker)
                    before.append(_assign(at, cst.Name(name) if bound else _unset(name, updated, ctx)))
                    after.insert(k, _assign(name, cst.Name(at)))
                guard = cst.If(cst.UnaryOperation(cst.Not(), stopped), cst.IndentedBlock(new_body))
                new_body = [guard]
                ctx.run.stop_flags.update(names)
                ctx.run.kinds.add(LOOP)  # (ForToScan's: a static range a flag from data stops is one loop op)
        new = new.with_changes(body=new.body.with_changes(body=new_body))
        if endless:
            ctx.origins.retested(new, original)  # (the loop's test is the flag now, no longer True)
        return cst.FlattenSentinel([*before, new, *after]) if before or after else new
