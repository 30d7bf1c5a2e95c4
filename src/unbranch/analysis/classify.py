"""Guess, from syntax alone, what kind of value a condition is.

STATIC  plainly a Python value (``x is None``, ``self.training``, dtype tests): left untouched.
SHAPE   built from sizes (``x.shape[0] > 4``): a SymBool under dynamic shapes.
TENSOR  built from tensor data (``.any()``, ``.item()``, ``torch.*`` calls).
UNKNOWN anything else (a bare flag, a name): decided at run time by the runtime helper.

Only the readability of the output and discovery depend on this guess; correctness does
not, because every non-STATIC condition is dispatched at run time.
"""

from __future__ import annotations

import libcst as cst

from .names import param_names, target_names

STATIC, SHAPE, TENSOR, UNKNOWN = "static", "shape", "tensor", "unknown"
_RANK = {STATIC: 0, UNKNOWN: 1, SHAPE: 2, TENSOR: 3}

_STATIC_CALLS = {"isinstance", "issubclass", "hasattr", "callable", "getattr", "type", "id", "repr", "str"}
_STATIC_ATTRS = {
    "dtype",
    "device",
    "is_cuda",
    "requires_grad",
    "ndim",
    "training",
    "layout",
    "is_sparse",
    "is_quantized",
    "is_meta",
    "type",
}
_SHAPE_METHODS = {"size", "numel", "nelement"}
_TENSOR_METHODS = {
    "any",
    "all",
    "item",
    "sum",
    "max",
    "min",
    "mean",
    "prod",
    "amax",
    "amin",
    "isfinite",
    "isnan",
    "isinf",
    "eq",
    "ne",
    "gt",
    "lt",
    "ge",
    "le",
    "equal",
    "norm",
    "abs",
    "count_nonzero",
    "nonzero",
    "tolist",
    "std",
    "var",
    "logical_and",
    "logical_or",
    "logical_not",
}
_STATIC_MODULES = {
    "jit",
    "compiler",
    "_dynamo",
    "cuda",
    "backends",
    "distributed",
    "onnx",
    "_C",
    "version",
    "fx",
    "_utils",
    "mps",
    "xpu",
    "npu",
    "cpu",
}
# torch.* functions that return Python values or non-tensor objects
_STATIC_TORCH = {
    "device",
    "dtype",
    "Size",
    "finfo",
    "iinfo",
    "get_default_dtype",
    "get_default_device",
    "is_grad_enabled",
    "is_inference_mode_enabled",
    "is_autocast_enabled",
    "get_autocast_dtype",
    "are_deterministic_algorithms_enabled",
    "promote_types",
    "result_type",
    "can_cast",
}
_STATIC_ANNOTATIONS = {
    "bool",
    "int",
    "str",
    "float",
    "None",
    "Optional",
    "Union",
    "Literal",
    "list",
    "tuple",
    "dict",
    "List",
    "Tuple",
    "Dict",
}


def combine(*kinds: str) -> str:
    return max(kinds, key=_RANK.__getitem__) if kinds else STATIC


def _dotted(node) -> list[str]:
    parts = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
        return parts[::-1]
    return []


class Classifier:
    """Classifies expressions of one function, using what it knows of the function's names."""

    def __init__(self, self_name: str | None = None, static_names=(), tensor_names=(), shape_names=()):
        self.self_name = self_name
        self.static_names = set(static_names)
        self.tensor_names = set(tensor_names)
        self.shape_names = set(shape_names)
        self.params: set[str] = set()

    @classmethod
    def for_function(cls, fn: cst.FunctionDef, is_method: bool = True) -> Classifier:
        params = param_names(fn)
        self_name = params[0] if params and is_method else None
        c = cls(self_name)
        c.params = set(params) - {self_name}
        for p in [*fn.params.params, *fn.params.kwonly_params, *fn.params.posonly_params]:
            if p.annotation is not None and _static_annotation(p.annotation.annotation):
                c.static_names.add(p.name.value)
            elif p.annotation is not None and _dotted(p.annotation.annotation)[-1:] == ["Tensor"]:
                c.tensor_names.add(p.name.value)
            elif (
                p.default is not None
                and isinstance(p.default, (cst.Name, cst.Integer, cst.SimpleString))
                and (not isinstance(p.default, cst.Name) or p.default.value in ("True", "False"))
            ):
                c.static_names.add(p.name.value)
        c._infer_assigned(fn)
        return c

    def _infer_assigned(self, fn: cst.FunctionDef) -> None:
        """Names whose every assignment is TENSOR (resp. STATIC) take that kind."""
        kinds: dict[str, list[str]] = {}
        classifier = self

        class V(cst.CSTVisitor):
            def visit_Assign(self, node):
                k = classifier.kind(node.value)
                for t in node.targets:
                    if isinstance(t.target, cst.Name):
                        kinds.setdefault(t.target.value, []).append(k)
                    else:
                        for n in target_names(t.target):
                            kinds.setdefault(n, []).append(UNKNOWN)

            def visit_FunctionDef(self, node):
                return node is fn

        fn.visit(V())
        for name, ks in kinds.items():
            if name in self.static_names:
                if any(k != STATIC for k in ks):
                    self.static_names.discard(name)
            elif all(k == TENSOR for k in ks):
                self.tensor_names.add(name)
            elif all(k == SHAPE for k in ks):
                self.shape_names.add(name)
            elif all(k == STATIC for k in ks):
                self.static_names.add(name)

    def kind(self, e) -> str:
        if isinstance(
            e, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString, cst.FormattedString, cst.Ellipsis)
        ):
            return STATIC
        if isinstance(e, cst.Name):
            if e.value in ("True", "False", "None") or e.value in self.static_names:
                return STATIC
            if e.value in self.shape_names:
                return SHAPE
            return TENSOR if e.value in self.tensor_names else UNKNOWN
        if isinstance(e, cst.UnaryOperation):
            return self.kind(e.expression)
        if isinstance(e, cst.BooleanOperation):
            return combine(self.kind(e.left), self.kind(e.right))
        if isinstance(e, cst.BinaryOperation):
            return combine(self.kind(e.left), self.kind(e.right))
        if isinstance(e, cst.Comparison):
            return self._comparison(e)
        if isinstance(e, cst.Attribute):
            return self._attribute(e)
        if isinstance(e, cst.Subscript):
            return self.kind(e.value)
        if isinstance(e, cst.Call):
            return self._call(e)
        if isinstance(e, (cst.Tuple, cst.List, cst.Set, cst.Dict)):
            return STATIC  # a display's truthiness is its length
        if isinstance(e, cst.IfExp):
            return combine(self.kind(e.body), self.kind(e.orelse), self.kind(e.test))
        return UNKNOWN

    def _comparison(self, e: cst.Comparison) -> str:
        ops = [c.operator for c in e.comparisons]
        if all(isinstance(op, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for op in ops):
            return STATIC
        operands = [e.left, *(c.comparator for c in e.comparisons)]
        kinds = [self.kind(o) for o in operands]
        if any(isinstance(o, (cst.SimpleString, cst.ConcatenatedString)) or _is_none(o) for o in operands):
            return STATIC
        if any(_is_dtype_like(o) for o in operands):
            return STATIC
        return combine(*kinds)

    def _attribute(self, e: cst.Attribute) -> str:
        name = e.attr.value
        if name in _STATIC_ATTRS:
            return STATIC
        if name == "shape":
            return SHAPE
        dotted = _dotted(e)
        if dotted and dotted[0] == self.self_name and (len(dotted) == 2 or "config" in dotted):
            return STATIC
        if dotted and "config" in dotted:
            return STATIC
        if dotted and dotted[0] == "torch":
            return STATIC  # torch.float16, torch.jit...
        return self.kind(e.value) if self.kind(e.value) == TENSOR else UNKNOWN

    def _call(self, e: cst.Call) -> str:
        func = e.func
        dotted = _dotted(func)
        if isinstance(func, cst.Name):
            name = func.value
            if name in _STATIC_CALLS or name.startswith("is_"):
                return STATIC
            if name == "len":
                return SHAPE if e.args and self.kind(e.args[0].value) in (TENSOR, UNKNOWN) else STATIC
            if name in ("bool", "int", "float", "abs", "max", "min", "any", "all"):
                return combine(*(self.kind(a.value) for a in e.args)) if e.args else STATIC
            return UNKNOWN
        if not isinstance(func, cst.Attribute):
            return UNKNOWN
        name = func.attr.value  # a method, also on a call's result: torch.isfinite(x).all()
        if name.startswith("is_") or name in (
            "startswith",
            "endswith",
            "get",
            "keys",
            "items",
            "dim",
            "ndimension",
            "element_size",
            "get_device",
        ):
            return STATIC
        if dotted and dotted[0] == "torch":
            static = name in _STATIC_TORCH or (len(dotted) > 2 and dotted[1] in _STATIC_MODULES)
            return STATIC if static else TENSOR
        if name in _SHAPE_METHODS:
            return SHAPE
        if name in _TENSOR_METHODS:
            return TENSOR
        return UNKNOWN


def _is_none(e) -> bool:
    return isinstance(e, cst.Name) and e.value == "None"


def _is_dtype_like(e) -> bool:
    dotted = _dotted(e)
    if not dotted:
        return False
    if dotted[-1] in ("dtype", "device", "type", "layout"):
        return True
    if isinstance(e, cst.Call):
        return _is_dtype_like(e.func)  # torch.device("cpu"), torch.dtype(...)
    return (
        dotted[0] == "torch"
        and len(dotted) == 2
        and dotted[1]
        in (
            "float16",
            "bfloat16",
            "float32",
            "float64",
            "half",
            "float",
            "double",
            "int8",
            "int16",
            "int32",
            "int64",
            "long",
            "bool",
            "uint8",
            "complex64",
            "complex128",
            "float8_e4m3fn",
            "float8_e5m2",
        )
    )


def _static_annotation(a) -> bool:
    """``bool``, ``Optional[int]``, ``bool | None``... (a tensor annotation is not static)."""
    if isinstance(a, cst.Name):
        return a.value in _STATIC_ANNOTATIONS
    if isinstance(a, cst.Subscript):
        return _static_annotation(a.value) and all(
            isinstance(el.slice, cst.Index) and _static_annotation(el.slice.value) for el in a.slice
        )
    if isinstance(a, cst.BinaryOperation) and isinstance(a.operator, cst.BitOr):
        return _static_annotation(a.left) and _static_annotation(a.right)
    if isinstance(a, cst.SimpleString):
        try:
            return _static_annotation(cst.parse_expression(a.evaluated_value))
        except cst.ParserSyntaxError:
            return False
    return False
