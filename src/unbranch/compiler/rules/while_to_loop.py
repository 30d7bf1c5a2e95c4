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

import ast
import functools

import libcst as cst

from ..analysis.classify import own_nodes
from ..analysis.names import OwnScope, expr_reads, target_names
from ..analysis.walk import transform
from ..lower.build import tuple_node
from ..lower.predicates import runtime_predicate
from ..lower.truth import TruthForms
from ..passes import Rewrite, Unchanged
from ._loops import AtSubscripts, Function, LoopPlan, LoopRule, Refusal


def _counters(loop: ast.While | None, names) -> set[str]:
    """Carried names the loop steps by an integer (``i += 1``, ``i = i - 2``): int counters.

    Read on the user's own loop (its parser twin), where a step guarded by a break's flag is
    still a plain statement, not inside the branch function the if rule made of it.
    """
    found = set()
    for node in own_nodes(loop) if isinstance(loop, ast.While) else ():
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            if _integer(node.value):
                found.add(node.target.id)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value, name = node.value, node.targets[0].id
            if isinstance(value, ast.BinOp) and isinstance(value.left, ast.Name) and value.left.id == name:
                if _integer(value.right):
                    found.add(name)
    return found & set(names)


def _integer(e: ast.expr) -> bool:
    return isinstance(e, ast.Constant) and type(e.value) is int


class WhileToLoop(LoopRule):
    ROLES = ("cond", "body")
    CONSTRUCT = "while"
    EXAMPLES = [
        Rewrite(  # len(x) in the test: a symbolic size (Python's len fixes it under non-strict export)
            """
            def forward(self, x):
                i = 0
                acc = torch.zeros(x.shape[1])
                while i < len(x) and x[i].sum() > 0:
                    acc = acc + x[i]
                    i += 1
                return acc
            """,
            """
            def forward(self, x):
                i = 0
                acc = torch.zeros(x.shape[1])
                def loop_cond_1(i, acc):
                    return _ub.and_(i < _ub.length(x), lambda: _ub.at(x, clamped=True)[i].sum() > 0)
                def loop_body_1(i, acc):
                    acc = acc + _ub.at(x)[i]
                    i += 1
                    return i, acc
                i, acc = _ub.while_stmt(loop_cond_1, loop_body_1, (i, acc), mutated=(0,), kept=(0,), literals=(0,))
                return acc
            """,
        ),
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
        Rewrite(  # no break is left (JumpFlags made flags of them): the else always runs, after the loop
            """
            def forward(self, x):
                while x.sum() > 0:
                    x = x - x.abs() - 1
                else:
                    x = x * 2
                return x
            """,
            """
            def forward(self, x):
                def loop_cond_1(x):
                    return x.sum() > 0
                def loop_body_1(x):
                    x = x - x.abs() - 1
                    return x
                x = _ub.while_stmt(loop_cond_1, loop_body_1, (x,))
                x = x * 2
                return x
            """,
        ),
    ]

    def leave_While(self, original: cst.While, updated: cst.While):
        return self.rewrite(original, updated)

    @functools.cached_property
    def forms(self) -> TruthForms:
        return TruthForms(self.fn, self.ctx)

    def plan(self, original: cst.While, updated: cst.While) -> LoopPlan | Refusal:
        body, test = list(updated.body.body), self.symbolic_lengths(updated.test)
        after = list(updated.orelse.body.body) if updated.orelse is not None else []  # (no break is left)
        state = self.carried(original, body, test, after=after)
        if isinstance(state, Refusal):
            return state
        if not state.names:
            return Refusal("nothing the loop condition reads changes in the loop")
        names = state.names
        counters = _counters(self.ctx.origins.twin(original), names)
        # a flag the test reads, set from data in the body (``changed = bool((y != x).any())``): a
        # tensor under export, as the test itself is
        tested = expr_reads(test)
        body = [transform(s, _TruthOf(tested, self.forms)) for s in body]
        if counters:  # the counter, a tensor in a while_loop, indexes the test as well as the body
            at = AtSubscripts(counters, self.ctx.runtime, self.ctx.origins)
            body, test = [transform(s, at) for s in body], transform(test, at)
        functions = [
            Function("cond", names, [cst.SimpleStatementLine([cst.Return(runtime_predicate(test, self.ctx))])], []),
            Function("body", names, body, names),
        ]
        positional = ["cond", "body", tuple_node(names)]
        return LoopPlan("while_stmt", functions, positional, state.keywords(), names, after, kind="while_loop")


class _TruthOf(OwnScope, cst.CSTTransformer):
    """``flag = bool(t)`` (any truth form) for a name the loop test reads -> ``flag = _ub.bool_(t)``."""

    def __init__(self, names, forms: TruthForms):
        self.names, self.forms = names, forms

    def leave_Assign(self, original, updated):
        if len(updated.targets) == 1 and target_names(updated.targets[0].target) <= self.names:
            return updated.with_changes(value=self.forms.truth(updated.value))
        return updated
