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

import functools

import libcst as cst

from ..analysis.names import expr_reads, target_names
from ..normalise.boolean_ops import runtime_predicate
from ..normalise.condition_forms import ConditionForms
from ..passes import Refused, Rewrite, Unchanged
from ._loops import AtSubscripts, Function, LoopPlan, LoopRule, Refusal
from ._util import tuple_node


def _counters(body, names) -> set[str]:
    """Carried names the body steps by an integer (``i += 1``, ``i = i - 2``): int counters."""

    def step(value, name) -> bool:
        return (
            isinstance(value, cst.BinaryOperation)
            and isinstance(value.left, cst.Name)
            and value.left.value == name
            and isinstance(value.right, cst.Integer)
        )

    found = set()
    for stmt in body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name):
                if isinstance(small.value, cst.Integer):
                    found.add(small.target.value)
            elif isinstance(small, cst.Assign) and len(small.targets) == 1:
                target = small.targets[0].target
                if isinstance(target, cst.Name) and step(small.value, target.value):
                    found.add(target.value)
    return found & set(names)


class WhileToLoop(LoopRule):
    ROLES = ("cond", "body")
    CONSTRUCT = "while"
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
        Refused(
            """
            def forward(self, x):
                while x.sum() > 0:
                    x = x - 1
                else:
                    x = x * 2
                return x
            """,
            "a while loop with an else clause",
        ),
    ]

    def leave_While(self, original: cst.While, updated: cst.While):
        return self.rewrite(original, updated)

    @functools.cached_property
    def forms(self) -> ConditionForms:
        return ConditionForms(self.fn, self.ctx)

    def plan(self, original: cst.While, updated: cst.While) -> LoopPlan | Refusal:
        if original.orelse is not None:
            return Refusal("a while loop with an else clause")
        body, test = list(updated.body.body), updated.test
        state = self.carried(original, body, test)
        if isinstance(state, Refusal):
            return state
        if not state.names:
            return Refusal("nothing the loop condition reads changes in the loop")
        names = state.names
        counters = _counters(body, names)
        # a flag the test reads, set from data in the body (``changed = bool((y != x).any())``): a
        # tensor under export, as the test itself is
        tested = expr_reads(test)
        body = [s.visit(_TruthOf(tested, self.forms)) for s in body]
        if counters:  # the counter, a tensor in a while_loop, indexes the test as well as the body
            at = AtSubscripts(counters, self.ctx.runtime, self.ctx.origins)
            body, test = [s.visit(at) for s in body], test.visit(at)
        functions = [
            Function("cond", names, [cst.SimpleStatementLine([cst.Return(runtime_predicate(test, self.ctx))])], []),
            Function("body", names, body, names),
        ]
        positional = ["cond", "body", tuple_node(names)]
        return LoopPlan("while_stmt", functions, positional, state.keywords(), names, kind="while_loop")


class _TruthOf(cst.CSTTransformer):
    """``flag = bool(t)`` (any truth form) for a name the loop test reads -> ``flag = _ub.bool_(t)``."""

    def __init__(self, names, forms: ConditionForms):
        self.names, self.forms = names, forms

    def visit_FunctionDef(self, node):
        return False

    visit_ClassDef = visit_Lambda = visit_FunctionDef

    def leave_Assign(self, original, updated):
        if len(updated.targets) == 1 and target_names(updated.targets[0].target) <= self.names:
            return updated.with_changes(value=self.forms.truth(updated.value))
        return updated
