"""``while`` on a condition that may be a tensor -> ``_ub.while_stmt`` (``while_loop`` when traced).

    while n > 0:                       def loop_cond_1(n, acc):
        acc = acc + x[0]                   return n > 0
        n = n - 1              ->      def loop_body_1(n, acc):
                                           acc = acc + x[0]
                                           n = n - 1
                                           return n, acc
                                       n, acc = _ub.while_stmt(loop_cond_1, loop_body_1, (n, acc))

A leading ``if stop: break`` was folded into the condition by normalise.leading_break; any
other ``break`` keeps the loop plain Python.
"""

from __future__ import annotations

import libcst as cst

from ..normalise.boolean_ops import runtime_predicate
from ..passes import Pass, Rewrite, Unchanged
from ._loops import carried, changed_in_place, loop_blocker, runtime_call
from ._util import branch_def, call_statement, explicit_super, tuple_node


class WhileToLoop(Pass):
    HANDLES = frozenset({"loop"})
    NEEDS = ("liveness",)
    EXAMPLES = [
        Rewrite(
            """
            def forward(self, x):
                n = x.sum().abs().long() % 5
                acc = torch.zeros(x.shape[1])
                while n > 0:
                    acc += x[0]
                    n -= 1
                return acc
            """,
            """
            def forward(self, x):
                n = x.sum().abs().long() % 5
                acc = torch.zeros(x.shape[1])
                def loop_cond_1(n, acc):
                    return n > 0
                def loop_body_1(n, acc):
                    acc += x[0]
                    n -= 1
                    return n, acc
                n, acc = _ub.while_stmt(loop_cond_1, loop_body_1, (n, acc), mutated=(0, 1), kept=(0, 1))
                return acc
            """,
        ),
        Rewrite(
            """
            def forward(self, x):
                while x.abs().sum() < 100:
                    if x.max() > 50:
                        break
                    x = x * 2 + 1
                return x
            """,
            """
            def forward(self, x):
                def loop_cond_1(x):
                    return _ub.and_(x.abs().sum() < 100, lambda: _ub.not_(x.max() > 50))
                def loop_body_1(x):
                    x = x * 2 + 1
                    return x
                x = _ub.while_stmt(loop_cond_1, loop_body_1, (x,))
                return x
            """,
        ),
        Unchanged(
            """
            def forward(self, x):
                pending = [x]
                while pending:
                    x = pending.pop() * 2
                return x
            """
        ),
    ]

    def leave_While(self, original: cst.While, updated: cst.While):
        ctx = self.ctx
        if not ctx.is_candidate_loop(original):
            return updated
        body, test = list(updated.body.body), updated.test
        state = self._plan(original, body, test)
        if isinstance(state, str):
            return self.leave_as_python(original, updated, state, "while")
        cond_name, body_name = ctx.namer.numbered("loop", ("cond", "body"))
        pred = cst.SimpleStatementLine([cst.Return(runtime_predicate(test, ctx))])
        defs = [
            branch_def(cond_name, state, [pred], []).with_changes(leading_lines=updated.leading_lines),
            branch_def(body_name, state, explicit_super(body, ctx), state),
        ]
        inplace = changed_in_place(body, state, ctx)
        call = runtime_call(ctx, "while_stmt", [cst.Name(cond_name), cst.Name(body_name), tuple_node(state)], **inplace)
        ctx.note(original, "while_loop", f"carry: {', '.join(state)}")
        return cst.FlattenSentinel([*defs, call_statement(state, call)])

    def _plan(self, node, body, test):
        if node.orelse is not None:
            return "a while loop with an else clause"
        why = loop_blocker(body)
        if why:
            return why
        state = carried(node, body, test, self.facts, self.ctx)
        if isinstance(state, str):
            return state
        if not state:
            return "nothing the loop condition reads changes in the loop"
        return state
