"""``len(t)`` -> ``_ub.len_(t)`` in a function torch's export named: a length that is data stays symbolic.

    num_rois = len(rois)    ->    num_rois = _ub.len_(rois)

``Tensor.__len__`` must return a Python int; when the length is data (``boxes[keep]`` after
NMS), export stops there. ``_ub.len_`` is Python's ``len`` eagerly and for sizes torch knows;
it gives the symbolic length only where the original cannot run under export. Done only for
the functions ``unbranch.export`` rewrites because torch stopped in them (the ``lengths``
option), not in model discovery: a harmless ``len`` there is no reason to change code.
"""

from __future__ import annotations

import ast
import functools

import libcst as cst

from ..analysis.classify import STATIC
from ..analysis.names import block_writes, param_names
from ..passes import Kind, Pass, Rewrite, Unchanged


def _len_call(node, classifier) -> bool:
    return isinstance(node.func, ast.Name) and node.func.id == "len"


LEN = Kind("len", r"\blen\(", (ast.Call,), _len_call)


class Lengths(Pass):
    HANDLES = frozenset({LEN})
    EXPRESSIONS = True
    OPTIONS = {"lengths": True}  # only for the functions torch's export named
    EXAMPLES = [
        Rewrite(
            """
            def forward(self, rois, levels):
                num_rois = len(rois)
                return torch.zeros(num_rois, len(levels))
            """,
            """
            def forward(self, rois, levels):
                num_rois = _ub.len_(rois)
                return torch.zeros(num_rois, _ub.len_(levels))
            """,
        ),
        Unchanged(  # plainly Python: a literal's length
            """
            def forward(self, rois):
                return rois[: len((1, 2))]
            """
        ),
    ]

    @functools.cached_property
    def shadowed(self) -> bool:
        return "len" in set(param_names(self.fn)) | block_writes(self.fn.body.body)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        func, args = updated.func, updated.args
        if not (isinstance(func, cst.Name) and func.value == "len" and len(args) == 1) or self.shadowed:
            return updated
        if args[0].keyword is not None or args[0].star or self.ctx.classifier.kind(original.args[0].value) == STATIC:
            return updated
        return self.ctx.runtime_call("len_", args[0].value).with_changes(lpar=updated.lpar, rpar=updated.rpar)
