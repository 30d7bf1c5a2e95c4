"""``max``/``min``/``sorted`` with a ``key`` -> ``_ub.max_by``/``min_by``/``sorted_by``.

    best = max(xs, key=lambda t: t.sum())   ->   best = _ub.max_by(lambda t: t.sum(), xs)
    ranked = sorted(xs, key=score)          ->   ranked = _ub.sorted_by(score, xs)

Python compares the keys, which needs their values: a key computed from a tensor is data
under export. The runtime compares them as Python does eagerly (and for keys that are Python
values); keys that are data are stacked and the items taken by their argmax, argmin or stable
argsort (runtime/selection.py). A call with ``default=``, or the builtin rebound, stays as written.
"""

from __future__ import annotations

import ast
import functools

import libcst as cst

from ..analysis.names import block_writes, param_names
from ..passes import Kind, Pass, Rewrite, Unchanged

_FORMS = {"max": "max_by", "min": "min_by", "sorted": "sorted_by"}


def _keyed(node, classifier) -> bool:
    names = {k.arg for k in node.keywords}
    return isinstance(node.func, ast.Name) and node.func.id in _FORMS and "key" in names and "default" not in names


KEYED = Kind("keyed", r"\b(?:max|min|sorted)\(", (ast.Call,), _keyed)


class KeyedChoice(Pass):
    HANDLES = frozenset({KEYED})
    EXPRESSIONS = True
    EXAMPLES = [
        Rewrite(
            """
            def forward(self, a, b, c):
                best = max([a, b, c], key=lambda t: t.sum())
                return best * 2
            """,
            """
            def forward(self, a, b, c):
                best = _ub.max_by(lambda t: t.sum(), [a, b, c])
                return best * 2
            """,
        ),
        Rewrite(
            """
            def forward(self, xs):
                return sorted(xs, key=self.score, reverse=True)
            """,
            """
            def forward(self, xs):
                return _ub.sorted_by(self.score, xs, reverse=True)
            """,
        ),
        Unchanged(
            """
            def forward(self, xs, sizes):
                n = max(sizes)
                return max(xs, key=len, default=None), n
            """
        ),
    ]

    @functools.cached_property
    def shadowed(self) -> set[str]:
        return set(param_names(self.fn)) | block_writes(self.fn.body.body)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        func = updated.func
        if not isinstance(func, cst.Name) or func.value not in _FORMS or func.value in self.shadowed:
            return updated
        keys = [a for a in updated.args if a.keyword is not None]
        names = {a.keyword.value for a in keys}
        positional = [a for a in updated.args if a.keyword is None]
        if "key" not in names or "default" in names or any(a.star for a in positional):
            return updated
        if func.value == "sorted" and len(positional) != 1:
            return updated
        key = next(a for a in keys if a.keyword.value == "key")
        rest = [a for a in keys if a is not key]
        args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in (cst.Arg(key.value), *positional, *rest)]
        call = self.ctx.runtime_call(_FORMS[func.value])
        return call.with_changes(args=args, lpar=updated.lpar, rpar=updated.rpar)
