"""Liveness and definite assignment over structured statements.

Facts are keyed by node identity in the tree that was analysed:
``live_out[stmt]`` is the set of names read after ``stmt`` before being rebound;
``defined[stmt]`` is the set of local names certainly bound when ``stmt`` starts.
Loops iterate to a fixpoint; ``try`` is approximated conservatively (an exception may
leave its body anywhere: more names live, fewer defined), which can only make a rule
refuse, never miscompile. ``match`` reads its subject, binds each case's captures and reads
its guard; without a final ``case _:`` no case may run. Names declared ``global`` or
``nonlocal`` are not locals.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from .names import (
    block_declared,
    block_reads,
    block_writes,
    def_free_reads,
    expr_effects,
    expr_reads,
    irrefutable,
    param_names,
    pattern_effects,
    small_effects,
    target_names,
    target_reads,
)

ALL = None  # "every name": the state after return/raise/break, where nothing is reachable


@dataclass
class Facts:
    live_out: dict = field(default_factory=dict)
    defined: dict = field(default_factory=dict)
    locals: set = field(default_factory=set)
    declared_nonlocal: set = field(default_factory=set)

    def before(self, stmt) -> set[str]:
        """Local names certainly bound when ``stmt`` starts."""
        return _lookup(self.defined, stmt)

    def after(self, stmt) -> set[str]:
        """Names read after ``stmt`` before being rebound."""
        return _lookup(self.live_out, stmt)


def _lookup(table: dict, stmt):
    """Facts describe one tree: a node from another version of it is a bug, said loudly."""
    try:
        return table[stmt]
    except KeyError:
        raise LookupError(f"no facts for this {type(stmt).__name__}: it is not in the analysed tree") from None


def orelse_body(node) -> list:
    """Statements of an ``else``/``elif`` part as a list (an ``elif`` is one nested ``if``)."""
    if node.orelse is None:
        return []
    if isinstance(node.orelse, cst.If):
        return [node.orelse]
    return list(node.orelse.body.body)


def surroundings(fn: cst.FunctionDef, node) -> tuple[list, list]:
    """(simple statements that always run before ``node``, statements that may run after it).

    After: what follows it in each enclosing block, and each enclosing loop whole (its next
    iteration). Before: the simple statements preceding it in each enclosing block.
    """
    before: list = []
    after: list = []

    def search(stmts) -> bool:
        for i, s in enumerate(stmts):
            found = s is node or any(search(block) for block in _blocks(s))
            if found:
                before.extend(p for p in stmts[:i] if isinstance(p, cst.SimpleStatementLine))
                after.extend(stmts[i + 1 :])
                if s is not node and isinstance(s, (cst.For, cst.While)):
                    after.append(s)
                return True
        return False

    search(list(fn.body.body))
    return before, after


def _blocks(s) -> list:
    """The statement lists nested directly in a compound statement."""
    if isinstance(s, cst.If):
        return [list(s.body.body), orelse_body(s)]
    if isinstance(s, (cst.For, cst.While)):
        return [list(s.body.body)] + ([list(s.orelse.body.body)] if s.orelse else [])
    if isinstance(s, cst.With):
        return [list(s.body.body)]
    if isinstance(s, (cst.Try, cst.TryStar)):
        parts = [s.body, *(h.body for h in s.handlers), *(p.body for p in (s.orelse, s.finalbody) if p)]
        return [list(p.body) for p in parts]
    if isinstance(s, cst.Match):
        return [list(c.body.body) for c in s.cases]
    return []


def analyse_function(fn: cst.FunctionDef, live_at_end: set[str] = frozenset()) -> Facts:
    """Liveness and definedness facts for every statement of ``fn``'s body."""
    facts = Facts()
    body = list(fn.body.body)
    params = set(param_names(fn))
    facts.declared_nonlocal = block_declared(body)
    facts.locals = (params | block_writes(body)) - facts.declared_nonlocal
    _Liveness(facts).block(body, set(live_at_end), set(), set())
    _Defined(facts).block(body, params)
    return facts


def live_in(stmts, live_out) -> set[str]:
    """Names read by ``stmts`` before being bound, given what is live after them."""
    return _Liveness(Facts()).block(stmts, set(live_out), set(), set())


def assigned(stmts):
    """Names certainly bound by running ``stmts`` (``ALL`` when they always return or raise)."""
    return _Defined(Facts()).block(stmts, set())


def meet(a, b):
    """Names bound on both paths (``ALL`` is the identity)."""
    return b if a is ALL else (a if b is ALL else a & b)


class _Liveness:
    def __init__(self, facts: Facts):
        self.facts = facts

    def block(self, stmts, out, brk, cont):
        live = set(out)
        for s in reversed(stmts):
            live = self.stmt(s, live, brk, cont)
        return live

    def stmt(self, s, out, brk, cont):
        self.facts.live_out[s] = out
        if isinstance(s, cst.SimpleStatementLine):
            live = set(out)
            for small in reversed(s.body):
                live = self.small(small, live, brk, cont)
            return live
        if isinstance(s, cst.If):
            reads, walrus = expr_effects(s.test)
            branches = self.block(s.body.body, out, brk, cont) | self.block(orelse_body(s), out, brk, cont)
            return reads | (branches - walrus)
        if isinstance(s, (cst.For, cst.While)):
            return self.loop(s, out, brk, cont)
        if isinstance(s, cst.Match):
            return self.match(s, out, brk, cont)
        if isinstance(s, cst.With):
            inner = self.block(s.body.body, out, brk, cont)
            for item in reversed(s.items):
                if item.asname is not None:
                    inner = (inner - target_names(item.asname.name)) | target_reads(item.asname.name)
                inner |= expr_reads(item.item)
            return inner
        if isinstance(s, (cst.FunctionDef, cst.ClassDef)):
            return (out - {s.name.value}) | def_free_reads(s)
        if isinstance(s, (cst.Try, cst.TryStar)):
            final = self.block(s.finalbody.body.body, out, brk, cont) if s.finalbody else set()
            after = out | final
            handlers = set()
            for h in s.handlers:
                name = target_names(h.name.name) if h.name else set()
                handlers |= expr_reads(h.type) | (self.block(h.body.body, after, brk, cont) - name)
            orelse = self.block(s.orelse.body.body, after, brk, cont) if s.orelse else after
            return self.block(s.body.body, after | orelse | handlers, brk, cont) | handlers | final
        # match and anything newer: everything it reads is live, nothing is killed
        return out | block_reads([s])

    def match(self, s: cst.Match, out, brk, cont):
        # no case matching falls through to what follows, unless the last case takes everything
        live = set() if s.cases and irrefutable(s.cases[-1]) else set(out)
        for case in s.cases:
            binds, pattern_reads = pattern_effects(case.pattern)
            guard_reads, guard_writes = expr_effects(case.guard)
            body = self.block(case.body.body, out, brk, cont)
            live |= pattern_reads | ((guard_reads | (body - guard_writes)) - binds)
        reads, walrus = expr_effects(s.subject)
        return reads | (live - walrus)

    def loop(self, s, out, brk, cont):
        if isinstance(s, cst.For):
            head_reads, bound = target_reads(s.target), target_names(s.target)
            entry = expr_reads(s.iter)
        else:
            head_reads, bound = expr_effects(s.test)
            entry = set()
        orelse = self.block(s.orelse.body.body, out, brk, cont) if s.orelse else set(out)
        head = set(orelse)
        while True:
            body_in = self.block(s.body.body, head, out, head)
            new_head = orelse | head_reads | (body_in - bound)
            if new_head <= head:
                break
            head |= new_head
        return entry | head

    def small(self, s, out, brk, cont):
        if isinstance(s, cst.Return):
            return expr_reads(s.value)
        if isinstance(s, cst.Raise):
            return expr_reads(s.exc) | expr_reads(s.cause)
        if isinstance(s, cst.Break):
            return set(brk)
        if isinstance(s, cst.Continue):
            return set(cont)
        reads, writes = small_effects(s)
        if isinstance(s, cst.AugAssign):
            return out | reads
        return (out - writes) | reads


class _Defined:
    def __init__(self, facts: Facts):
        self.facts = facts

    def block(self, stmts, d):
        for s in stmts:
            if d is not ALL:
                self.facts.defined[s] = d
                d = self.stmt(s, d)
            else:  # unreachable code: record it as defining nothing it would need
                self.facts.defined[s] = set()
                self.stmt(s, set())
        return d

    def stmt(self, s, d):
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, (cst.Return, cst.Raise, cst.Break, cst.Continue)):
                    return ALL
                _, writes = small_effects(small)
                if isinstance(small, cst.Del):
                    d = d - writes
                elif not isinstance(small, cst.AnnAssign) or small.value is not None:
                    d = d | writes
            return d
        if isinstance(s, cst.If):
            _, walrus = expr_effects(s.test)
            d = d | walrus
            return meet(self.block(s.body.body, set(d)), self.block(orelse_body(s), set(d)))
        if isinstance(s, (cst.For, cst.While)):
            bound = target_names(s.target) if isinstance(s, cst.For) else set()
            d = d | expr_effects(s.iter if isinstance(s, cst.For) else s.test)[1]  # evaluated at least once
            self.block(s.body.body, d | bound)
            if s.orelse:  # skipped on break: what it binds is not certain afterwards
                self.block(s.orelse.body.body, set(d))
            return d
        if isinstance(s, cst.With):
            bound = set()
            for item in s.items:
                if item.asname is not None:
                    bound |= target_names(item.asname.name)
            return self.block(s.body.body, d | bound)
        if isinstance(s, (cst.FunctionDef, cst.ClassDef)):
            return d | {s.name.value}
        if isinstance(s, (cst.Try, cst.TryStar)):
            return self.try_(s, d)
        if isinstance(s, cst.Match):
            d = d | expr_effects(s.subject)[1]
            # no case matching leaves d as it was, unless the last case takes everything
            after = ALL if s.cases and irrefutable(s.cases[-1]) else set(d)
            for case in s.cases:
                binds, _ = pattern_effects(case.pattern)
                after = meet(after, self.block(case.body.body, d | binds | expr_effects(case.guard)[1]))
            return after
        return d

    def try_(self, s, d):
        """Normal completion: the body then ``else``, or a handler started anywhere in the body."""
        done = self.block(s.body.body, set(d))
        if s.orelse:
            done = self.block(s.orelse.body.body, done if done is ALL else set(done))
        for h in s.handlers:
            name = target_names(h.name.name) if h.name else set()
            end = self.block(h.body.body, set(d) | name)
            done = meet(done, end if end is ALL else end - name)  # ``except E as e`` deletes e at its end
        if not s.finalbody:
            return done
        # the finally block also runs after an exception or a return: its facts assume only d
        self.block(s.finalbody.body.body, set(d))
        final = assigned(s.finalbody.body.body)
        return ALL if final is ALL or done is ALL else done | final
