"""``while c:`` starting with ``if stop: break`` -> ``while c and not stop:``.

Done before the ``if`` rule sees the ``break`` (which no branch function can hold); the
``while`` rule then finds a loop without ``break``. Not for a loop with an ``else``, which the
break skips (JumpFlags guards it with the break's flag).
"""

from __future__ import annotations

import libcst as cst

from ..passes import LOOP, Pass, Rewrite, Unchanged


def _leading_break(body):
    first = body[0] if body else None
    if isinstance(first, cst.If) and first.orelse is None and len(first.body.body) == 1:
        only = first.body.body[0]
        if isinstance(only, cst.SimpleStatementLine) and len(only.body) == 1 and isinstance(only.body[0], cst.Break):
            return first.test
    return None


class LeadingBreak(Pass):
    HANDLES = frozenset({LOOP})
    EXAMPLES = [
        Rewrite(
            """
            def forward(self, x):
                while x.sum() < 100:
                    if x.max() > 50:
                        break
                    x = x.abs() * 2 + 1
                return x
            """,
            """
            def forward(self, x):
                while x.sum() < 100 and not x.max() > 50:
                    x = x.abs() * 2 + 1
                return x
            """,
        ),
        Unchanged(
            """
            def forward(self, x):
                done = False
                while not done:
                    if x.sum() > 0:
                        break
                    x = x - 1
                    done = True
                return x
            """
        ),
        Unchanged(  # the break skips the else: a test folded into the while's would run it
            """
            def forward(self, x):
                while x.sum() < 100:
                    if x.max() > 50:
                        break
                    x = x.abs() * 2 + 1
                else:
                    x = -x
                return x
            """
        ),
    ]

    def leave_While(self, original, updated):
        body = list(updated.body.body)
        stop = _leading_break(body)
        if stop is None or len(body) < 2 or updated.orelse is not None or not self.ctx.is_candidate_loop(original):
            return updated
        test = cst.BooleanOperation(updated.test, cst.And(), cst.UnaryOperation(cst.Not(), stop))
        return updated.with_changes(test=test, body=updated.body.with_changes(body=body[1:]))
