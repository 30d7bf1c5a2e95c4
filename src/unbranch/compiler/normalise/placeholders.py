"""A name one side of a dispatched ``if`` sets, read after it only under the same test -> set on the
other side too, to a value no path reads.

    big = x.sum() > 3                   big = x.sum() > 3
    if big:                             if big:
        scale = x.abs().max()               scale = x.abs().max()
    y = x * 2                   ->      else:
    if big:                                 scale = x.abs().max()  # (a value of its kind: never read)
        y = y / scale                   y = x * 2
                                        if big:
                                            y = y / scale

A cond gives each output on both sides; Python leaves the name unbound on one, which is fine
since only code under the same test reads it. The other side evaluates the same expression
(free of effects, reading names the ``if`` does not rebind), so the value has the kind and
shape a cond needs, and is never read.
"""

from __future__ import annotations

import libcst as cst

from ..analysis.effects import block_effects
from ..analysis.liveness import assigned, orelse_body, surroundings
from ..analysis.names import block_reads, block_writes, expr_reads
from ..passes import IF, Pass, Rewrite, Unchanged


class Placeholders(Pass):
    HANDLES = frozenset({IF})
    NEEDS = ("liveness",)
    EXAMPLES = [
        Rewrite(
            """
            def forward(self, x):
                big = x.sum() > 3
                if big:
                    scale = x.abs().max()
                y = x * 2
                if big:
                    y = y / scale
                return y
            """,
            """
            def forward(self, x):
                big = x.sum() > 3
                if big:
                    scale = x.abs().max()
                else:
                    scale = x.abs().max()
                y = x * 2
                if big:
                    y = y / scale
                return y
            """,
        ),
        Unchanged(
            """
            def forward(self, x):
                if x.sum() > 3:
                    scale = x.abs().max()
                return x / scale
            """
        ),
    ]

    def leave_If(self, original: cst.If, updated: cst.If):
        ctx = self.ctx
        if not ctx.is_candidate(original) or isinstance(original.orelse, cst.If):
            return updated
        body, orelse = list(original.body.body), orelse_body(original)
        before = self.facts.before(original)
        live = self.facts.after(original)
        sides = (assigned(body), assigned(orelse))
        if any(side is None for side in sides):
            return updated  # (a side that returns: EarlyReturn's work)
        copies = {0: [], 1: []}
        for name in sorted(live - before):
            if (name in sides[0]) == (name in sides[1]) or name not in block_writes(body + orelse):
                continue
            k = 0 if name in sides[0] else 1
            made = self._made(name, (body, orelse)[k], body + orelse, original)
            if made is None:
                return updated
            copies[1 - k].append(made)
        if not copies[0] and not copies[1]:
            return updated
        new_body = [*updated.body.body, *copies[0]]
        new_orelse = [*orelse_body(updated), *copies[1]]
        new = updated.with_changes(body=updated.body.with_changes(body=new_body))
        if new_orelse:
            block = cst.IndentedBlock(new_orelse)
            new = new.with_changes(
                orelse=updated.orelse.with_changes(body=block) if updated.orelse is not None else cst.Else(block)
            )
        ctx.origins.inherit(new, original)
        return new

    def _made(self, name: str, side, both, node) -> cst.SimpleStatementLine | None:
        """A copy of the one line of ``side`` binding ``name`` to a value free of effects, when every read
        of ``name`` after the ``if`` is under an ``if`` on the same test; None otherwise."""
        lines = [
            s
            for s in side
            if isinstance(s, cst.SimpleStatementLine)
            and len(s.body) == 1
            and isinstance(s.body[0], cst.Assign)
            and len(s.body[0].targets) == 1
            and isinstance(s.body[0].targets[0].target, cst.Name)
            and s.body[0].targets[0].target.value == name
        ]
        if len(lines) != 1 or name in block_writes([s for s in side if s is not lines[0]]):
            return None
        value = lines[0].body[0].value
        effects = block_effects(lines, self.ctx.mutating_helpers)
        if effects.mutated or effects.containers or effects.state or expr_reads(value) & block_writes(both):
            return None
        if not self._read_only_under(name, node):
            return None
        return lines[0].deep_clone()

    def _read_only_under(self, name: str, node: cst.If) -> bool:
        """Is ``name`` read after ``node`` only in the body of ifs testing what ``node`` tests, with the
        names of that test not rebound in between?"""
        _, after = surroundings(self.fn, node)
        tested, same = expr_reads(node.test), True  # (same: the test still means what it meant)
        for s in after:
            if same and isinstance(s, cst.If) and s.test.deep_equals(node.test):
                if name in block_reads(orelse_body(s)) or name in expr_reads(s.test):
                    return False
            elif name in block_reads([s]):
                return False
            if isinstance(s, cst.SimpleStatementLine) and name in block_writes([s]):
                return True  # (bound anew: later reads read that)
            same = same and not tested & block_writes([s])
        return True
