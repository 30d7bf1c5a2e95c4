"""On a line torch named for a value from data, ``table[t]`` -> ``_ub.at(table)[t]``: an index that
may be a 0-d integer tensor.

    alpha = self.alphas[t]    ->    alpha = _ub.at(self.alphas)[t]

Strict export (dynamo) reads a tensor used as an index as a Python int (``.item()``: "Could not
extract specialized integer from data-dependent expression"), where non-strict export indexes
with the tensor itself (diffusers' ``self.alphas_cumprod[timestep]``). ``_ub.at`` indexes with it
under export (``index_select``, no Python int) and is the tensor itself eagerly. Only lines torch
named (``Options.index_at``, set by guided export), and there only subscripts whose index may be
data: an index that is a size, a constant or a flag indexes as written.
"""

from __future__ import annotations

import ast

import libcst as cst

from ..analysis.classify import SHAPE, STATIC
from ..analysis.names import expr_reads
from ..analysis.walk import read, transform
from ..passes import Kind, Pass, Rewrite, Unchanged
from ._loops import AtSubscripts


def _data_index(node, classifier) -> bool:
    return classifier.kind(node.slice) not in (STATIC, SHAPE)


INDEX = Kind("index", r"\[", (ast.Subscript,), _data_index)


class IndexAt(Pass):
    HANDLES = frozenset({INDEX})
    EXPRESSIONS = True
    OPTIONS = {"index_at": frozenset({2})}  # (the examples' line; any line runs it: ``runs_under``)
    EXAMPLES = [
        Rewrite(
            """
            def forward(self, x, t):
                alpha, prev = self.alphas[t], self.alphas[t - 1]
                return x * alpha / prev
            """,
            """
            def forward(self, x, t):
                alpha, prev = _ub.at(self.alphas)[t], _ub.at(self.alphas)[t - 1]
                return x * alpha / prev
            """,
        ),
        Unchanged(  # an index that is a size or a constant
            """
            def forward(self, x):
                first, last = x[0], x[x.shape[0] - 1]
                return first + last
            """
        ),
    ]

    @classmethod
    def runs_under(cls, options) -> bool:
        return bool(options.index_at)

    def leave_SimpleStatementLine(self, original, updated):
        if self.ctx.origins.line(original) not in self.ctx.index_at:
            return updated
        c = self.ctx.classifier
        indices = _IndexReads.of(updated) - c.static_names - c.shape_names - {self.ctx.self_name}
        if not indices:
            return updated
        new = transform(updated, AtSubscripts(indices, self.ctx.runtime, self.ctx.origins, slices=False))
        if new is not updated:
            self.ctx.note(original, "normalised", "an index that may be a tensor -> _ub.at")
        return new


class _IndexReads(cst.CSTVisitor):
    """The names the subscripts' indices read (not their slices' bounds)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    @classmethod
    def of(cls, node) -> set[str]:
        v = cls()
        read(node, v)
        return v.names

    def visit_SubscriptElement(self, node) -> None:
        if isinstance(node.slice, cst.Index):
            self.names |= expr_reads(node.slice.value)
