"""``if cond: raise E(msg)`` -> ``_ub.raise_if(cond, lambda: E(msg))``; ``assert`` likewise.

    if (x < 0).any():                         _ub.raise_if((x < 0).any(), lambda: ValueError("negative"))
        raise ValueError("negative")   ->

Eager runs raise exactly ``E(msg)``; under export the check becomes a runtime assertion in
the graph instead of a data-dependent branch. An ``else`` part follows the check unchanged.
``assert cond, msg`` on a condition that may be a tensor becomes
``_ub.raise_if(_ub.not_(cond), lambda: AssertionError(msg))``.
"""

from __future__ import annotations

import libcst as cst

from ..analysis.classify import STATIC, TENSOR
from ..analysis.liveness import orelse_body
from ..context import Note
from ..normalise.boolean_ops import runtime_predicate
from ..passes import Pass, Rewrite, Unchanged


class RaiseToCheck(Pass):
    HANDLES = frozenset({"if", "assert"})
    EXAMPLES = [
        Rewrite(
            """
            def forward(self, x):
                if (x < 0).any():
                    raise ValueError("negative input")
                return x.sqrt()
            """,
            """
            def forward(self, x):
                _ub.raise_if((x < 0).any(), lambda: ValueError("negative input"))
                return x.sqrt()
            """,
        ),
        Rewrite(
            """
            def forward(self, x):
                if x.shape[0] < 2 or not torch.isfinite(x).all():
                    raise ValueError(f"bad input {x.shape}")
                else:
                    y = x + 1
                return y
            """,
            """
            def forward(self, x):
                _ub.raise_if(_ub.or_(x.shape[0] < 2, lambda: _ub.not_(torch.isfinite(x).all())), lambda: ValueError(f"bad input {x.shape}"))
                y = x + 1
                return y
            """,
        ),
        Rewrite(
            """
            def forward(self, x):
                assert (x >= 0).all(), "x must be non-negative"
                return x.sqrt()
            """,
            """
            def forward(self, x):
                _ub.raise_if(_ub.not_((x >= 0).all()), lambda: AssertionError("x must be non-negative"))
                return x.sqrt()
            """,
        ),
        Rewrite(
            """
            def forward(self, a, b):
                if a is None:
                    y = b
                elif a.shape[0] != b.shape[0]:
                    raise ValueError("mismatch")
                else:
                    y = a + b
                return y
            """,
            """
            def forward(self, a, b):
                if a is None:
                    y = b
                else:
                    _ub.raise_if(a.shape[0] != b.shape[0], lambda: ValueError("mismatch"))
                    y = a + b
                return y
            """,
        ),
        Unchanged(
            """
            def forward(self, x, mask=None):
                if mask is None:
                    raise ValueError("mask is required")
                assert x.dim() == 2
                return x * mask
            """
        ),
    ]

    def __init__(self, fn, ctx):
        super().__init__(fn, ctx)
        self.elifs: set = set()  # an `elif` can only be replaced by an `else:` block, not statements

    def visit_If(self, node):
        if isinstance(node.orelse, cst.If):
            self.elifs.add(node.orelse)

    def visit_SimpleStatementLine(self, node):
        return any(isinstance(s, cst.Assert) for s in node.body)  # only asserts need a look inside

    def visit_Assert(self, node):
        return False

    def leave_If(self, original, updated):
        body = updated.body.body
        if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or len(body[0].body) != 1:
            return updated
        exc = body[0].body[0]
        if not isinstance(exc, cst.Raise) or exc.exc is None or exc.cause is not None:
            return updated
        if not self.ctx.is_candidate(original):
            return updated
        call = self.ctx.runtime_call(
            "raise_if", runtime_predicate(updated.test, self.ctx), cst.Lambda(cst.Parameters(), exc.exc)
        )
        check = cst.SimpleStatementLine(
            [cst.Expr(call)], leading_lines=updated.leading_lines, trailing_whitespace=body[0].trailing_whitespace
        )
        self.ctx.note(original, "check", "if ...: raise -> _ub.raise_if")
        rest = orelse_body(updated)
        if rest and isinstance(updated.orelse, cst.If):
            rest = [rest[0].with_changes(leading_lines=[])]
        if original in self.elifs:
            return cst.Else(
                cst.IndentedBlock([check.with_changes(leading_lines=[]), *rest]), leading_lines=updated.leading_lines
            )
        return cst.FlattenSentinel([check, *rest])

    def leave_Assert(self, original, updated):
        if self.ctx.classifier.kind(original.test) == STATIC:
            return updated
        failed = runtime_predicate(cst.UnaryOperation(cst.Not(), updated.test), self.ctx)
        message = [cst.Arg(updated.msg)] if updated.msg is not None else []
        exc = cst.Call(cst.Name("AssertionError"), message)
        self.ctx.notes.append(Note(self.ctx.line_of(original), "check", "assert -> _ub.raise_if", TENSOR))
        return cst.Expr(self.ctx.runtime_call("raise_if", failed, cst.Lambda(cst.Parameters(), exc)))
