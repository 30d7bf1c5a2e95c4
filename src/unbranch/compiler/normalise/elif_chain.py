"""``elif`` on a dispatched condition -> ``else:`` holding a nested ``if``.

    if a: A            if a: A
    elif t.any(): B -> else:
                           if t.any(): B

so that every dispatched ``if`` is a statement the rules can replace by statements.
"""

from __future__ import annotations

import libcst as cst

from ..passes import IF, Pass, Rewrite, Unchanged


class ElifChain(Pass):
    HANDLES = frozenset({IF})
    EXAMPLES = [
        Rewrite(
            """
            def forward(self, x, mode):
                y = x
                if mode == "a":
                    y = 2 * x
                elif x.sum() > 0:
                    y = -x
                return y
            """,
            """
            def forward(self, x, mode):
                y = x
                if mode == "a":
                    y = 2 * x
                else:
                    if x.sum() > 0:
                        y = -x
                return y
            """,
        ),
        Unchanged(
            """
            def forward(self, x, mode):
                if mode == "a":
                    y = x
                elif mode == "b":
                    y = -x
                return y
            """
        ),
    ]

    def leave_If(self, original, updated):
        inner = updated.orelse
        if isinstance(inner, cst.If) and self.ctx.is_candidate(inner):
            nested = inner.with_changes(leading_lines=[])
            self.ctx.origins.inherit(nested, inner)  # still the user's if, on the elif's line
            return updated.with_changes(orelse=cst.Else(cst.IndentedBlock([nested]), leading_lines=inner.leading_lines))
        return updated
