"""``len(t)``, ``bool(t)``, ``int(t)``, ``float(t)``, ``max(a, b)`` -> runtime forms in a function torch's
export named: a Python number that is data stays symbolic until something truly needs its value.

    num_rois = len(rois)              ->    num_rois = _ub.len_(rois)
    return bool((x > 1.5).any())      ->    return _ub.bool_((x > 1.5).any())
    bound = max(abs(lo), abs(hi))     ->    bound = _ub.max_(abs(lo), abs(hi))    (lo = t.min().item())

``Tensor.__len__``/``__bool__``/``__int__``/``__float__`` must return Python values; when the
value is data (``boxes[keep]`` after NMS, a flag a helper computes from a tensor), export
stops there. Each form is Python's own eagerly and for values torch knows; under export it
gives the symbolic length, or a 0-d tensor standing for the number, which a dispatched ``if``
of the caller takes as a cond, arithmetic and comparisons as any tensor. Where a real Python
value is needed later (a ``range``, a shape), torch stops at that line instead, which names
it. ``max``/``min`` of several values compare them in Python; with one of them data, their
forms give the extreme as ``torch.sym_max`` does, without a guard. Conversions of plain tensor
expressions only (the original cannot run under export
there), and only for the functions ``unbranch.export`` rewrites because torch stopped in them
(the ``lengths`` option), not in model discovery: a harmless ``len`` there is no reason to
change code.
"""

from __future__ import annotations

import ast
import functools

import libcst as cst

from ..analysis.classify import SHAPE, STATIC, TENSOR, UNKNOWN
from ..analysis.names import block_writes, param_names
from ..lower.truth import MODULE_FORMS
from ..passes import Kind, Pass, Rewrite, Unchanged

_FORMS = {"len": "len_", "bool": "bool_", "int": "int_", "float": "float_"}
_EXTREMES = {"max": "max_", "min": "min_"}  # of several numbers, one of them data: max(abs(lo), abs(hi))


def _converts(node, classifier) -> bool:
    if isinstance(node, ast.Lambda):  # (the screen's walk does not enter lambdas; the pass does)
        return any(isinstance(n, ast.Call) and _converts(n, classifier) for n in ast.walk(node.body))
    func = node.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        forms = MODULE_FORMS.get(func.value.id, {})
        return func.attr in forms and (func.value.id == "torch" or any(classifier.kind(a) == TENSOR for a in node.args))
    if not isinstance(func, ast.Name):
        return False
    if node.func.id in _EXTREMES:
        return _extreme(node.args, node.keywords) and any(classifier.kind(a) == TENSOR for a in node.args)
    if not (node.func.id in _FORMS and len(node.args) == 1):
        return False
    kind = classifier.kind(node.args[0])
    return (
        node.func.id == "len" or _maybe_data(kind, isinstance(node.args[0], ast.Call)) or _of_sizes(node.func.id, kind)
    )


def _of_sizes(form: str, kind: str) -> bool:
    """``int(x.shape[-1] * 1.5)``: under non-strict export Python's ``int`` of a symbolic float fixes
    the dimension to the example's size (a guard ``math.trunc(1.5*s) == 12``); the runtime's form
    keeps it symbolic (``torch.sym_int``), as strict export does."""
    return form in ("int", "float") and kind == SHAPE


def _maybe_data(kind: str, call: bool) -> bool:
    """A tensor, or what a method gives of a value the classifier cannot place (``float(t.sum())`` in a
    key lambda): the runtime form is Python's own for anything that is no tensor."""
    return kind == TENSOR or (call and kind == UNKNOWN)


def _extreme(args, keywords) -> bool:
    """``max(a, b, ...)``: two values or more, no ``key=``/``default=``, no unpacking."""
    return len(args) >= 2 and not keywords and not any(isinstance(a, ast.Starred) for a in args)


CONVERSION = Kind(
    "conversion",
    r"\b(?:len|bool|int|float|max|min|equal|allclose|is_nonzero|isclose|isfinite|isnan|isinf)\(",
    (ast.Call, ast.Lambda),
    _converts,
)


class Conversions(Pass):
    HANDLES = frozenset({CONVERSION})
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
        Rewrite(
            """
            def forward(self, x):
                return bool((x > 1.5).any())
            """,
            """
            def forward(self, x):
                return _ub.bool_((x > 1.5).any())
            """,
        ),
        Rewrite(
            """
            def forward(self, x, y):
                same = torch.allclose(x, y)
                return x if same else x + y
            """,
            """
            def forward(self, x, y):
                same = _ub.allclose(x, y)
                return x if same else x + y
            """,
        ),
        Unchanged(  # plainly Python: a literal's length, an int of Python numbers
            """
            def forward(self, rois):
                return rois[: len((1, 2)) + int(self.ratio / 2)]
            """
        ),
        Rewrite(  # a size's int: Python's would fix a dynamic dimension to the example's
            """
            def forward(self, x):
                return F.interpolate(x, size=int(x.shape[-1] * 1.5))
            """,
            """
            def forward(self, x):
                return F.interpolate(x, size=_ub.int_(x.shape[-1] * 1.5))
            """,
        ),
    ]

    def visit_Lambda(self, node) -> bool:
        return True  # (its body runs where the lambda is called: ``key=lambda t: float(t.sum())``)

    @functools.cached_property
    def shadowed(self) -> set[str]:
        return set(param_names(self.fn)) | block_writes(self.fn.body.body)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        func, args = updated.func, updated.args
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            return self._module_form(original, updated)
        if isinstance(func, cst.Name) and func.value in _EXTREMES and func.value not in self.shadowed:
            return self._extreme(original, updated)
        if not (isinstance(func, cst.Name) and func.value in _FORMS and len(args) == 1) or func.value in self.shadowed:
            return updated
        if args[0].keyword is not None or args[0].star:
            return updated
        kind = self.ctx.classifier.kind(original.args[0].value)
        data = kind != STATIC and (func.value == "len" or _maybe_data(kind, isinstance(args[0].value, cst.Call)))
        if not (data or (self.ctx.shape_conditions and _of_sizes(func.value, kind))):
            return updated
        value = args[0].value
        inner = value.func if isinstance(value, cst.Call) and not value.args else None
        if func.value != "len" and isinstance(inner, cst.Attribute) and inner.attr.value == "item":
            value = inner.value  # int(t.item()) is int(t): the tensor itself, not a symbol of its value
        call = self.ctx.runtime_call(_FORMS[func.value], value)
        return call.with_changes(lpar=updated.lpar, rpar=updated.rpar)

    def _module_form(self, original: cst.Call, updated: cst.Call):
        """``torch.allclose(a, b)`` (tensors always), ``math.isclose(v, 0)`` of data: the helper of the
        same meaning."""
        module, name = updated.func.value.value, updated.func.attr.value
        form = MODULE_FORMS.get(module, {}).get(name)
        if form is None or module in self.shadowed or any(a.star for a in updated.args):
            return updated
        if module != "torch" and not any(self.ctx.classifier.kind(a.value) == TENSOR for a in original.args):
            return updated  # (math.isclose of Python numbers)
        call = self.ctx.runtime_call(form).with_changes(args=updated.args)
        return call.with_changes(lpar=updated.lpar, rpar=updated.rpar)

    def _extreme(self, original: cst.Call, updated: cst.Call):
        args = updated.args
        if len(args) < 2 or any(a.keyword is not None or a.star for a in args):
            return updated
        if not any(self.ctx.classifier.kind(a.value) == TENSOR for a in original.args):
            return updated
        call = self.ctx.runtime_call(_EXTREMES[updated.func.value], *(a.value for a in args))
        return call.with_changes(lpar=updated.lpar, rpar=updated.rpar)
