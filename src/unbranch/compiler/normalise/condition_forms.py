"""Python's truth tests on tensors, in the test of a dispatched ``if``/``while`` -> runtime helpers.

    if bool(t):                   ->  if _ub.bool_(t):
    if int(n) == 3:               ->  if _ub.int_(n) == 3:
    if any(t.any() for t in xs):  ->  if _ub.any_(t.any() for t in xs):
    if pad_id in ids[:, -1]:      ->  if _ub.in_(pad_id, ids[:, -1]):
    if torch.equal(a, b):         ->  if _ub.equal(a, b):
    if 0.4 < m.mean() < 0.6:      ->  if 0.4 < (_ub_value := m.mean()) and _ub_value < 0.6:

The forms themselves are ``lower.truth.TruthForms``, which the rules also apply to the
conditions they lower (a conditional expression's, a check's, a while's flags).
"""

from __future__ import annotations

import functools
import re

import libcst as cst

from ..context import Run
from ..lower.truth import TruthForms
from ..passes import IF, LOOP, Pass, Rewrite, Unchanged

# the cheap screen: a call of a form, or `in` on a line starting an if/elif/while
_FORMS = re.compile(
    r"\b(bool|int|float|any|all|equal|allclose|is_nonzero|isclose|isfinite|isnan|isinf)\("
    r"|^\s*(?:(?:el)?if|while)\b.*(\bin\b|[<>=!]=?.*[<>=!]=)"
    r"|^\s*(?:(?:el)?if|while)\b.*[<>].*[<>]",
    re.MULTILINE,
)


class ConditionForms(Pass):
    HANDLES = frozenset({IF, LOOP})
    EXAMPLES = [
        Rewrite(
            """
            def forward(self, x, xs):
                if any(t.any() for t in xs):
                    x = x + 1
                return x
            """,
            """
            def forward(self, x, xs):
                if _ub.any_(t.any() for t in xs):
                    x = x + 1
                return x
            """,
        ),
        Rewrite(
            """
            def forward(self, ids, pad_id, n):
                if pad_id in ids[:, -1] and int(n) == 3:
                    ids = ids[:, :-1]
                return ids
            """,
            """
            def forward(self, ids, pad_id, n):
                if _ub.in_(pad_id, ids[:, -1]) and _ub.int_(n) == 3:
                    ids = ids[:, :-1]
                return ids
            """,  # noqa: E501
        ),
        Rewrite(
            """
            def forward(self, a, b):
                if not torch.equal(a, b):
                    a = b.clone()
                return a
            """,
            """
            def forward(self, a, b):
                if not _ub.equal(a, b):
                    a = b.clone()
                return a
            """,
        ),
        Unchanged(  # plainly Python: not dispatched, so not rewritten
            """
            def forward(self, x, mask=None):
                if bool(3) and mask is None:
                    x = x + 1
                return x
            """
        ),
    ]

    @functools.cached_property
    def forms(self) -> TruthForms:
        return TruthForms(self.fn, self.ctx)

    def leave_If(self, original: cst.If, updated: cst.If):
        if not self.ctx.is_candidate(original):
            return updated
        return updated.with_changes(test=self.forms.truth(updated.test))

    def leave_While(self, original: cst.While, updated: cst.While):
        if not self.ctx.is_candidate_loop(original):
            return updated
        return updated.with_changes(test=self.forms.truth(updated.test))

    @classmethod
    def apply(cls, fn: cst.FunctionDef, ctx):
        if not _FORMS.search(ctx.source.text):
            return fn, Run()  # the cheap screen: none of the forms is written anywhere
        return super().apply(fn, ctx)
