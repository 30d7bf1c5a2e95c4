"""The statements both sides of a dispatched ``if`` end with -> after the ``if``, once.

    if x.sum() > 2:                 if x.sum() > 2:
        y = x * 2                       y = x * 2
        outs.append(y)      ->      else:
    else:                               y = -x
        y = -x                      outs.append(y)
        outs.append(y)

The same statements run after either side, so they may as well run after the ``if``. Done
only for what a branch function could not carry (a list or dict changed by its methods,
an attribute set): out of the branches, the ``if`` converts, and they run as written. Each
side keeps at least one statement of its own.
"""

from __future__ import annotations

import libcst as cst

from ..analysis.effects import block_effects
from ..passes import IF, Pass, Rewrite, Unchanged


class SharedTail(Pass):
    HANDLES = frozenset({IF})
    EXAMPLES = [
        Rewrite(
            """
            def forward(self, x, outs):
                if x.sum() > 2:
                    y = x * 2
                    outs.append(y)
                else:
                    y = -x
                    outs.append(y)
                return torch.cat(outs)
            """,
            """
            def forward(self, x, outs):
                if x.sum() > 2:
                    y = x * 2
                else:
                    y = -x
                outs.append(y)
                return torch.cat(outs)
            """,
        ),
        Unchanged(
            """
            def forward(self, x):
                if x.sum() > 2:
                    y = x * 2
                    z = y + 1
                else:
                    y = -x
                    z = y + 1
                return z
            """
        ),
    ]

    def leave_If(self, original: cst.If, updated: cst.If):
        if not isinstance(updated.orelse, cst.Else) or not self.ctx.is_candidate(original):
            return updated
        body, orelse = list(updated.body.body), list(updated.orelse.body.body)
        n = 0
        while n < min(len(body), len(orelse)) - 1 and _same(body[-1 - n], orelse[-1 - n]):
            n += 1
        if not n:
            return updated
        shared = body[len(body) - n :]
        effects = block_effects(shared, self.ctx.mutating_helpers)
        if not (effects.containers or effects.state):
            return updated  # (what a branch function carries is as well inside it)
        new = updated.with_changes(
            body=updated.body.with_changes(body=body[: len(body) - n]),
            orelse=updated.orelse.with_changes(body=updated.orelse.body.with_changes(body=orelse[: len(orelse) - n])),
        )
        self.ctx.origins.inherit(new, original)
        return cst.FlattenSentinel([new, *shared])


def _same(a, b) -> bool:
    """Two simple statements of the same code, neither a jump (a jump ends the side there)."""
    if not (isinstance(a, cst.SimpleStatementLine) and isinstance(b, cst.SimpleStatementLine)):
        return False
    jumps = (cst.Return, cst.Raise, cst.Break, cst.Continue)
    return not any(isinstance(s, jumps) for s in a.body) and _code(a).deep_equals(_code(b))


def _code(line: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
    """The line without its comments and blank lines (``outs.append(z)  # note`` is ``outs.append(z)``)."""
    return line.with_changes(leading_lines=(), trailing_whitespace=cst.TrailingWhitespace())
