"""``torch._assert(cond, msg)`` -> ``assert cond, msg``, which RaiseToCheck then makes a check.

    torch._assert((x >= 0).all(), "negative")   ->   assert (x >= 0).all(), "negative"

``torch._assert`` is torch's traceable ``assert``: eagerly it is ``assert cond, msg``, and
torch.export still needs a Python bool from its condition, which stops it on a tensor. As an
``assert`` it becomes ``_ub.raise_if`` like any other. Only a condition that may be a tensor
is rewritten; the message is then built when the check fails, as ``assert`` builds it (the
call evaluated it first).
"""

from __future__ import annotations

import ast

import libcst as cst

from ..analysis.classify import STATIC, as_ast
from ..passes import ASSERT, Kind, Pass, Rewrite, Unchanged


def _torch_assert(node, classifier) -> bool:
    """A ``torch._assert(cond[, msg])`` call (positional arguments) whose condition is not plainly Python."""
    f = node.func
    return (
        isinstance(f, ast.Attribute)
        and f.attr == "_assert"
        and isinstance(f.value, ast.Name)
        and f.value.id == "torch"
        and 1 <= len(node.args) <= 2
        and not node.keywords
        and not any(isinstance(a, ast.Starred) for a in node.args)
        and classifier.kind(node.args[0]) != STATIC
    )


TORCH_ASSERT = Kind("torch_assert", r"\b_assert\(", (ast.Call,), _torch_assert)


class TorchAssert(Pass):
    HANDLES = frozenset({TORCH_ASSERT})
    PRODUCES = frozenset({ASSERT})
    EXAMPLES = [
        Rewrite(
            """
            def forward(self, x):
                torch._assert((x > -100).all(), "input out of range")  # the traceable assert
                return x * 2
            """,
            """
            def forward(self, x):
                assert (x > -100).all(), "input out of range"  # the traceable assert
                return x * 2
            """,
        ),
        Unchanged(  # a size condition is plainly Python: torch.export evaluates it itself
            """
            def forward(self, x):
                torch._assert(x.dim() == 2, "expected a matrix")
                return x * 2
            """
        ),
    ]

    def leave_SimpleStatementLine(self, original, updated):
        body = [self._assert(small) for small in updated.body]
        if all(new is old for new, old in zip(body, updated.body)):
            return updated
        return updated.with_changes(body=body)

    def _assert(self, small):
        call = small.value if isinstance(small, cst.Expr) else None
        if not (isinstance(call, cst.Call) and self._is_candidate(call)):
            return small
        test, *message = (a.value for a in call.args)
        new = cst.Assert(test, message[0] if message else None, semicolon=small.semicolon)
        self.ctx.origins.inherit(new, small)
        return new

    def _is_candidate(self, call: cst.Call) -> bool:
        parsed = as_ast(call)
        return isinstance(parsed, ast.Call) and _torch_assert(parsed, self.ctx.classifier)
