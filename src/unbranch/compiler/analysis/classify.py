"""Guess, from syntax alone, what kind of value a condition is.

STATIC  provably a Python value (``x is None``, ``self.training``, dtype tests): left untouched.
SHAPE   built from sizes (``x.shape[0] > 4``): a SymBool under dynamic shapes.
TENSOR  built from tensor data (``.any()``, ``.item()``, ``torch.*`` calls).
UNKNOWN anything else (a bare flag, ``self.scale``, ``kwargs.get(k)``): decided at run time.

Every non-STATIC condition is dispatched at run time (a Python value takes the plain branch
there), so correctness rests on STATIC alone: a condition is STATIC only when it cannot be
a tensor whatever the values (literals, identity tests, ``isinstance``, dtype and device
tests, ``self.training``, names annotated ``bool``/``int``...). A code base's own naming
conventions (transformers' ``output_attentions``, ``self.config.x``) are not proof in
general; an integration registers them as :class:`Hints` for its own files (``HINTS``).

It works on Python's ``ast`` (libcst expressions are converted through their text,
memoised): cheap enough to screen every function before the libcst pipeline runs at all.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

import libcst as cst

STATIC, SHAPE, TENSOR, UNKNOWN = "static", "shape", "tensor", "unknown"
_RANK = {STATIC: 0, UNKNOWN: 1, SHAPE: 2, TENSOR: 3}

_STATIC_CALLS = {"isinstance", "issubclass", "hasattr", "callable", "type", "id", "repr", "str"} | {
    # torch.overrides' tests of the arguments' types (torch.nn.functional opens with them)
    "has_torch_function",
    "has_torch_function_unary",
    "has_torch_function_variadic",
}
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
# methods whose result is a Python value whatever the receiver (str tests, dict views, tensor ranks);
# not ``.get`` (a dict may hold tensors)
_STATIC_METHODS = {"startswith", "endswith", "keys", "items", "dim", "ndimension", "element_size", "get_device"} | {
    "data_ptr",
    "has_names",
}
# Tensor's own ``is_*`` methods return Python bools (``x.is_contiguous()``); a method of the
# user's (``self.is_global(x)``) may return anything
_TENSOR_IS_METHODS = {
    "is_contiguous",
    "is_floating_point",
    "is_complex",
    "is_signed",
    "is_pinned",
    "is_shared",
    "is_same_size",
    "is_inference",
    "is_conj",
    "is_neg",
    "is_set_to",
}
# what unbranch.runtime's condition helpers (normalise/condition_forms) stand for: their
# value has the kind of their arguments, as the Python form they replace had
_RUNTIME_FORMS = {"bool_", "int_", "float_", "max_", "min_", "any_", "all_", "in_", "not_in", "equal", "allclose"} | {
    "isclose",
    "isfinite",
    "isnan",
    "isinf",
}  # (equal, allclose: torch's; isclose...: math's)
_SHAPE_METHODS = {"size", "numel", "nelement", "stride", "storage_offset"}
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
    "argmax",
    "argmin",
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
_DTYPES = {
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


# calls that answer True whenever torch exports (TORCH_FACTS §7): ``not torch.compiler.is_compiling() and t.any()``
# is False under export before the tensor is ever tested
_TRUE_UNDER_EXPORT = {
    ("torch", "compiler", "is_exporting"),
    ("torch", "compiler", "is_compiling"),
    ("torch", "_dynamo", "is_compiling"),
}


@dataclass(frozen=True)
class Hints:
    """Naming conventions of one code base that make a condition plainly Python there.

    Data an integration registers (``HINTS``) for the files it knows; the generic classifier
    applies none of them.
    """

    flag_prefixes: tuple = ()  # names so prefixed hold Python flags (``output_attentions``)
    flag_calls: tuple = ()  # functions so prefixed return Python flags (``is_torchdynamo_compiling()``)
    static_attribute_parts: frozenset = frozenset()  # an attribute path through one of these (``self.config.x``)
    self_attributes: bool = False  # ``self.x`` holds configuration (a size, a flag), not a tensor
    literal_defaults: bool = False  # a parameter with a literal default (``n=3``) is never given a tensor
    exporting_calls: tuple = ()  # functions of that name answer True while torch exports (``is_tracing()``)

    def merge(self, other: Hints) -> Hints:
        return Hints(
            self.flag_prefixes + other.flag_prefixes,
            self.flag_calls + other.flag_calls,
            self.static_attribute_parts | other.static_attribute_parts,
            self.self_attributes or other.self_attributes,
            self.literal_defaults or other.literal_defaults,
            self.exporting_calls + other.exporting_calls,
        )


NO_HINTS = Hints()
# lookups ``path -> Hints | None`` that integrations register (unbranch.hf registers transformers'
# conventions for transformers' own files); the compiler itself knows no code base
HINTS: list = []


def hints_for(path: str | None) -> Hints:
    """The hints every registered lookup gives for the file ``path`` (none for unknown files)."""
    found = NO_HINTS
    for lookup in HINTS if path else ():
        extra = lookup(path)
        if extra is not None:
            found = found.merge(extra)
    return found


def combine(*kinds: str) -> str:
    return max(kinds, key=_RANK.__getitem__) if kinds else STATIC


def dotted_name(node, super_call: bool = False) -> list[str]:
    """``a.b.c`` -> ``["a", "b", "c"]`` ([] for anything else); ``super_call``: ``super().f`` too."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    zero_argument = isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args
    if super_call and zero_argument and node.func.id == "super":
        return ["super()", *reversed(parts)]
    return []


def _is_none(e) -> bool:
    return isinstance(e, ast.Constant) and e.value is None


def _is_str(e) -> bool:
    return isinstance(e, ast.Constant) and isinstance(e.value, str)


def _is_str_display(e) -> bool:
    """``("a", "b")``: ``mode in ("a", "b")`` compares with strings only."""
    return isinstance(e, (ast.Tuple, ast.List, ast.Set)) and bool(e.elts) and all(_is_str(x) for x in e.elts)


def _is_dtype_like(e) -> bool:
    if isinstance(e, ast.Call):
        return _is_dtype_like(e.func)  # torch.device("cpu"), torch.dtype(...)
    dotted = dotted_name(e)
    if not dotted:
        return False
    if dotted[-1] in ("dtype", "device", "type", "layout"):
        return True
    return dotted[0] == "torch" and len(dotted) == 2 and dotted[1] in _DTYPES


def _static_annotation(a) -> bool:
    """``bool``, ``Optional[int]``, ``bool | None``... (a tensor annotation is not static)."""
    if isinstance(a, ast.Name):
        return a.id in _STATIC_ANNOTATIONS
    if isinstance(a, ast.Constant):
        if a.value is None:
            return True
        if isinstance(a.value, str):
            try:
                return _static_annotation(ast.parse(a.value, mode="eval").body)
            except SyntaxError:
                return False
        return False
    if isinstance(a, ast.Subscript):
        inner = a.slice.elts if isinstance(a.slice, ast.Tuple) else [a.slice]
        return _static_annotation(a.value) and all(_static_annotation(x) for x in inner)
    if isinstance(a, ast.BinOp) and isinstance(a.op, ast.BitOr):
        return _static_annotation(a.left) and _static_annotation(a.right)
    return False


@functools.lru_cache(maxsize=256)
def own_nodes(fn: ast.FunctionDef) -> tuple[ast.AST, ...]:
    """Every node of ``fn``'s body (a function's or a loop's) but contexts and operators (see
    ``_children``), not looking into nested functions, lambdas or classes; kept for the few
    walks the classifier makes over one function."""
    found = []
    stack = list(reversed(fn.body))
    while stack:
        node = stack.pop()
        found.append(node)
        if not isinstance(node, SCOPES):
            stack += reversed(_children(node))
    return tuple(found)


def _children(node: ast.AST) -> list[ast.AST]:
    """``ast.iter_child_nodes`` without its generators (faster over transformers' forwards),
    less the load/store contexts and the operators (``ctx``, ``op``, ``ops``): markers no walk
    here asks about, a third of the nodes."""
    children = []
    for name in _child_fields(type(node)):
        value = getattr(node, name, None)
        if isinstance(value, list):
            children += [v for v in value if isinstance(v, ast.AST)]
        elif isinstance(value, ast.AST):
            children.append(value)
    return children


SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


@functools.cache
def _child_fields(node_type: type) -> tuple[str, ...]:
    return tuple(f for f in node_type._fields if f not in ("ctx", "op", "ops"))


def _literal_kind(value: ast.expr) -> str:
    """ "bool" or "int" for a constant of that type (``-1`` too), else "other"."""
    negated = isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub)
    if negated:
        value = value.operand
    if isinstance(value, ast.Constant) and type(value.value) in (bool, int):
        kind = type(value.value).__name__
        return "other" if negated and kind == "bool" else kind
    return "other"


def _assigned_values(fn: ast.FunctionDef):
    """The values ``fn``'s own assignments give (each element of ``a, b = 1, 2``)."""
    for node in own_nodes(fn):
        if isinstance(node, ast.Assign):
            yield from node.value.elts if isinstance(node.value, ast.Tuple) else (node.value,)


def _literal_bindings(node: ast.AST, handled: set[int]) -> list[tuple[str, str]]:
    """(name, the kind of literal it takes: "bool", "int", "step" for ``+= 1``, or "other")
    for each name ``node`` binds; ``handled``: the ids of the names already counted (a name
    node an assignment counted, met again in the walk after it)."""
    if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
        pairs = [(t, _literal_kind(node.value)) for t in node.targets]
    elif isinstance(node, ast.Assign) and _pairwise(node):  # clipped, hits = False, 0
        pairs = [(t, _literal_kind(v)) for t, v in zip(node.targets[0].elts, node.value.elts)]
    elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
        step = isinstance(node.op, (ast.Add, ast.Sub)) and _literal_kind(node.value) == "int"
        pairs = [(node.target, "step" if step else "other")]
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        return [(name, "other") for name in node.names]
    elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) and id(node) not in handled:
        pairs = [(node, "other")]
    else:
        return []
    handled.update(id(t) for t, _ in pairs)
    return [(t.id, kind) for t, kind in pairs]


def _pairwise(node: ast.Assign) -> bool:
    """``a, b = 1, 2``: one target, a tuple of names as long as the tuple it is given."""
    if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Tuple) or not isinstance(node.value, ast.Tuple):
        return False
    names, values = node.targets[0].elts, node.value.elts
    return len(names) == len(values) and all(isinstance(n, ast.Name) for n in names)


def _bindings(fn: ast.FunctionDef):
    """(name, the value it is bound to, or None where that value's kind is unknown) for each binding
    of a name in ``fn``'s own scope: ``a, b = 1, t`` pairwise, other unpacking, loops, ``with``,
    ``+=`` and ``:=`` unknown."""
    for node in own_nodes(fn):
        if isinstance(node, ast.Assign):
            if _pairwise(node):  # lo, hi = t.min().item(), t.max().item()
                yield from ((n.id, v) for n, v in zip(node.targets[0].elts, node.value.elts))
                continue
            for t in node.targets:
                for n in (t,) if type(t) is ast.Name else ast.walk(t):  # (most targets: one name)
                    if isinstance(n, ast.Name):
                        yield n.id, node.value if t is n else None
        elif isinstance(node, (ast.AugAssign, ast.For, ast.With, ast.NamedExpr)):
            target = node.items[0].optional_vars if isinstance(node, ast.With) else node.target
            for n in ast.walk(target) if target is not None else ():
                if isinstance(n, ast.Name):
                    yield n.id, None


def as_ast(expr: cst.BaseExpression) -> ast.expr:
    """The ``ast`` of a libcst expression (rendered in parentheses: it may span lines)."""
    return ast.parse(f"(\n{cst.Module([]).code_for_node(expr)}\n)", mode="eval").body


def unbound(iterable: ast.AST):
    """``x`` for ``x.unbind()``, ``x.unbind(0)``, ``torch.unbind(x, dim=0)`` (the rows of ``x``), else None."""
    if not isinstance(iterable, ast.Call) or not isinstance(iterable.func, ast.Attribute):
        return None
    f, args = iterable.func, list(iterable.args)
    if f.attr != "unbind" or any(isinstance(a, ast.Starred) for a in args):
        return None
    if isinstance(f.value, ast.Name) and f.value.id == "torch":
        if not args:
            return None
        tensor, args = args[0], args[1:]
    else:
        tensor = f.value
    dims = args + [k.value for k in iterable.keywords if k.arg == "dim"]
    if len(dims) > 1 or any(k.arg != "dim" for k in iterable.keywords):
        return None
    if dims and not (isinstance(dims[0], ast.Constant) and dims[0].value == 0 and type(dims[0].value) is int):
        return None
    return tensor


def unbound_rows(it: cst.BaseExpression) -> cst.BaseExpression | None:
    """``x`` for the libcst ``x.unbind(0)``, ``torch.unbind(x)`` and the like (``unbound`` decides which)."""
    if not isinstance(it, cst.Call) or unbound(as_ast(it)) is None:
        return None
    f = it.func
    return it.args[0].value if isinstance(f.value, cst.Name) and f.value.value == "torch" else f.value


class Classifier:
    """Classifies expressions of one function, using what it knows of the function's names."""

    def __init__(self, self_name: str | None = None, hints: Hints = NO_HINTS):
        self.self_name = self_name
        self.hints = hints
        self.runtime: str | None = None  # the name rewritten code calls unbranch.runtime by, once known
        self.static_names: set[str] = set()
        self.tensor_names: set[str] = set()
        self.shape_names: set[str] = set()
        self.params: set[str] = set()
        self.tensor_attributes: frozenset = frozenset()  # ``self.<name>`` known to hold tensors (discovery)
        self.literal_flags: set[str] = set()  # bool/int flags set under a tensor condition (_literal_flags)
        # a ``range`` of values of unknown kind counts as symbolic (torch named the function: trust nothing)
        self.counted_unknown = False
        self._memo: dict[str, str] = {}
        # id -> (ast expression, its kind), once the names are known: the passes ask again and again
        # about the same conditions (is it a candidate, what to note, how to refuse)
        self._kinds: dict[int, tuple] | None = None

    @classmethod
    def for_function(
        cls,
        fn: ast.FunctionDef,
        is_method: bool = True,
        path: str | None = None,
        hints: Hints | None = None,
        annotations: bool = True,
        tensor_attributes: frozenset = frozenset(),
    ) -> Classifier:
        """The classifier of ``fn``; ``hints``, or those registered for the file ``path``.
        ``annotations``: trust ``n: int`` to hold no tensor. ``tensor_attributes``: ``self.<name>``
        known to hold tensors, for its conditions (the names are inferred without them)."""
        a = fn.args
        params = [p for p in (*a.posonlyargs, *a.args, a.vararg, *a.kwonlyargs, a.kwarg) if p is not None]
        c = cls(params[0].arg if params and is_method else None, hints if hints is not None else hints_for(path))
        c.params = {p.arg for p in params} - {c.self_name}
        defaults = dict(zip([p.arg for p in (*a.posonlyargs, *a.args)][::-1], a.defaults[::-1]))
        defaults.update({p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
        for p in params:
            annotation = p.annotation if annotations else None
            if annotation is not None and _static_annotation(annotation):
                c.static_names.add(p.arg)
            elif annotation is not None and dotted_name(annotation)[-1:] == ["Tensor"]:
                c.tensor_names.add(p.arg)
            elif c.hints.literal_defaults and isinstance(defaults.get(p.arg), ast.Constant):
                if defaults[p.arg].value is not None:
                    c.static_names.add(p.arg)  # a literal default: a flag, a size, a mode string
        c._infer_assigned(fn)
        c.tensor_attributes = tensor_attributes
        c.counted_unknown = not annotations
        c._kinds = {}  # the names are known: a kind no longer changes
        return c

    def _infer_assigned(self, fn: ast.FunctionDef) -> None:
        """Names whose every assignment is TENSOR (resp. SHAPE, STATIC) take that kind; again, for the
        assignments reading a name that just took one, while that tells more (``a = x.sum(); b = a * 2``:
        ``b`` is TENSOR once ``a`` is)."""
        bindings = list(_bindings(fn))  # (name, value or None: a value of unknown kind)
        # a parameter no annotation vouches for may hold anything the caller passes, whatever the
        # function assigns it later (``is_causal = False`` in one branch): never plainly Python
        free = self.params - self.static_names - self.tensor_names
        kinds = [UNKNOWN] * len(bindings)
        todo = range(len(bindings))
        reads: dict[int, set] = {}  # (the names a value reads, for those whose kind may still grow)
        for _ in range(8):  # (chains of names are short; each round only adds kinds)
            for k in todo:
                kinds[k] = self.kind(bindings[k][1]) if bindings[k][1] is not None else UNKNOWN
            by_name: dict[str, list[str]] = {}
            for (name, _), kind in zip(bindings, kinds):
                by_name.setdefault(name, []).append(kind)
            known = (set(self.tensor_names), set(self.shape_names), set(self.static_names))
            self._decide(by_name, free)
            changed = (self.tensor_names ^ known[0]) | (self.shape_names ^ known[1]) | (self.static_names ^ known[2])
            if not changed:
                break
            # a value's kind only grows as its names take kinds (TENSOR outranks all): those below TENSOR
            todo = []
            for k, (_, value) in enumerate(bindings):
                if value is not None and kinds[k] in (UNKNOWN, SHAPE):
                    if k not in reads:
                        reads[k] = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
                    if reads[k] & changed:
                        todo.append(k)
            if not todo:
                break
        self.literal_flags = self._literal_flags(fn)
        self.static_names -= self.literal_flags

    def _decide(self, by_name: dict[str, list[str]], free: set[str]) -> None:
        for name, ks in by_name.items():
            if name in self.static_names:
                if any(k != STATIC for k in ks):
                    self.static_names.discard(name)
            elif all(k == TENSOR for k in ks):
                self.tensor_names.add(name)
            elif all(k == SHAPE for k in ks):
                self.shape_names.add(name)
            elif all(k == STATIC for k in ks) and name not in free:
                self.static_names.add(name)

    def _literal_flags(self, fn: ast.FunctionDef) -> set[str]:
        """Names that only ever take bool constants (or int constants and ``+= 1``), one of them
        under a tensor condition: ``found = True`` before a tensor ``break``. Under export such a
        flag is set by a cond or carried by a loop, which give it as a tensor (their ``literals``);
        it is no longer plainly Python."""
        if not any(_literal_kind(v) != "other" for v in _assigned_values(fn)):
            return set()  # (the usual case: no walk classifying every test)
        taken: dict[str, set[str]] = {}
        handled: set[int] = set()
        for node in own_nodes(fn):
            for name, kind in _literal_bindings(node, handled):
                taken.setdefault(name, set()).add(kind)
        flags = {n for n, k in taken.items() if k == {"bool"} or ("int" in k and k <= {"int", "step"})} - self.params
        if not flags:
            return set()  # (no walk classifying every test either)
        decided: set[str] = set()
        handled.clear()
        for node, deciding in self._decided(fn):
            bindings = _literal_bindings(node, handled)
            if deciding and not isinstance(node, (ast.Global, ast.Nonlocal)):
                decided.update(name for name, _ in bindings)
        return flags & decided

    def _decided(self, fn: ast.FunctionDef):
        """(node, under an ``if``/``while`` on a tensor condition) for every node of ``fn``'s own scope."""
        stack = [(node, False) for node in reversed(fn.body)]
        while stack:
            node, deciding = stack.pop()
            yield node, deciding
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            inner = deciding or (isinstance(node, (ast.If, ast.While)) and self.kind(node.test) in (TENSOR, UNKNOWN))
            stack += [(child, inner) for child in reversed(_children(node))]

    def kind(self, e) -> str:
        """Kind of an ``ast`` expression, or of a libcst one (through its text)."""
        if isinstance(e, cst.CSTNode):
            text = cst.Module([]).code_for_node(e)
            if text not in self._memo:
                self._memo[text] = self.kind(ast.parse(f"(\n{text}\n)", mode="eval").body)
            return self._memo[text]
        if self._kinds is None:  # (still learning the names: a kind may change)
            return self._kind(e)
        found = self._kinds.get(id(e))
        if found is None or found[0] is not e:
            found = self._kinds[id(e)] = (e, self._kind(e))
        return found[1]

    def _kind(self, e) -> str:
        if isinstance(e, ast.Constant):
            return STATIC
        if isinstance(e, ast.Name):
            if e.id in self.static_names:
                return STATIC
            if e.id in self.shape_names:
                return SHAPE
            if e.id in self.tensor_names:
                return TENSOR
            flags = self.hints.flag_prefixes
            return STATIC if flags and e.id.startswith(flags) else UNKNOWN
        if isinstance(e, ast.UnaryOp):
            return self.kind(e.operand)
        if isinstance(e, ast.BoolOp):
            for v in e.values:  # Python evaluates them in order: a value fixed while exporting decides first
                if self._under_export(v) is isinstance(e.op, ast.Or):
                    return STATIC  # ``not is_compiling() and t.any()``: False under export, t never tested
                if self.kind(v) != STATIC:
                    break
            return combine(*(self.kind(v) for v in e.values))
        if isinstance(e, ast.BinOp):
            return combine(self.kind(e.left), self.kind(e.right))
        if isinstance(e, ast.Compare):
            return self._comparison(e)
        if isinstance(e, ast.Attribute):
            return self._attribute(e)
        if isinstance(e, ast.Subscript):
            return self.kind(e.value)
        if isinstance(e, ast.Call):
            return self._call(e)
        if isinstance(e, (ast.Tuple, ast.List, ast.Set, ast.Dict, ast.JoinedStr)):
            return STATIC  # a display's truthiness is its length
        if isinstance(e, (ast.GeneratorExp, ast.ListComp, ast.SetComp)):
            return self.kind(e.elt)  # as any()/all() see it: any(t.any() for t in xs) is TENSOR
        if isinstance(e, ast.IfExp):
            return combine(self.kind(e.body), self.kind(e.orelse), self.kind(e.test))
        return UNKNOWN

    def _under_export(self, e) -> bool | None:
        """The value ``e`` always has while torch exports (True/False), or None when it may vary."""
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            inner = self._under_export(e.operand)
            return None if inner is None else not inner
        if isinstance(e, ast.Call) and not e.args:
            dotted = tuple(dotted_name(e.func))
            if dotted in _TRUE_UNDER_EXPORT or dotted == (self.runtime, "tracing"):
                return True
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in self.hints.exporting_calls:
            return True
        return None

    def _comparison(self, e: ast.Compare) -> str:
        if all(isinstance(op, (ast.Is, ast.IsNot)) for op in e.ops):
            return STATIC  # identity is never a tensor
        operands = [e.left, *e.comparators]
        if any(_is_none(o) or _is_str(o) or _is_str_display(o) for o in operands):
            return STATIC  # a tensor compared with None or a string is not a tensor
        if any(_is_dtype_like(o) for o in operands):
            return STATIC
        # ``in`` asks the container (``pad_id in ids[:, -1]``: Tensor.__contains__ reads data)
        return combine(*(self.kind(o) for o in operands))

    def _attribute(self, e: ast.Attribute) -> str:
        if e.attr in _STATIC_ATTRS:
            return STATIC
        if e.attr == "shape":
            return SHAPE
        dotted = dotted_name(e)
        if dotted and dotted[0] == "torch":
            return STATIC  # torch.float16, torch.jit...
        if len(dotted) == 2 and dotted[0] == self.self_name and dotted[1] in self.tensor_attributes:
            return TENSOR  # a parameter or buffer of the module discovery reads this method for
        if dotted and self.hints.static_attribute_parts.intersection(dotted):
            return STATIC  # (hint) self.config.x
        if dotted and self.hints.self_attributes and dotted[0] == self.self_name and len(dotted) == 2:
            return STATIC  # (hint) self.num_heads
        return TENSOR if self.kind(e.value) == TENSOR else UNKNOWN

    def _call(self, e: ast.Call) -> str:
        func = e.func
        if isinstance(func, ast.Name):
            name = func.id
            if name in _STATIC_CALLS:
                return STATIC
            if self.hints.flag_calls and name.startswith(self.hints.flag_calls):
                return STATIC  # (hint) is_torchdynamo_compiling()
            if name == "len":
                return SHAPE if e.args and self.kind(e.args[0]) in (TENSOR, UNKNOWN) else STATIC
            if name in ("any", "all"):
                return self._items_kind(e.args)
            if name in ("bool", "int", "float", "abs", "max", "min"):
                return combine(*(self.kind(a) for a in e.args)) if e.args else STATIC
            return UNKNOWN
        if not isinstance(func, ast.Attribute):
            return UNKNOWN
        name = func.attr  # a method, also on a call's result: torch.isfinite(x).all()
        dotted = dotted_name(func)
        if self.runtime is not None and dotted == [self.runtime, "tracing"]:
            return STATIC  # (normalise/reports.py: a report runs when torch does not trace)
        if self.runtime is not None and dotted == [self.runtime, name] and name in _RUNTIME_FORMS:
            if name in ("equal", "allclose"):
                return TENSOR  # torch.equal(a, b), torch.allclose(a, b)
            if name in ("any_", "all_"):
                return self._items_kind(e.args)
            return combine(*(self.kind(a) for a in e.args))  # _ub.bool_(t): what bool(t) was
        if name in _STATIC_METHODS or name in _TENSOR_IS_METHODS:
            return STATIC
        if dotted and dotted[0] == "torch":
            if name in _SHAPE_METHODS:  # torch.numel(x) reads a size, not data
                return SHAPE
            # torch.is_tensor, torch.is_grad_enabled (not torch.is_nonzero(t): bool(t) of data)
            static = name in _STATIC_TORCH or (name.startswith("is_") and name != "is_nonzero")
            static = static or (len(dotted) > 2 and dotted[1] in _STATIC_MODULES)
            return STATIC if static else TENSOR
        if name in _SHAPE_METHODS:
            return SHAPE
        if name in _TENSOR_METHODS or self.kind(func.value) == TENSOR:
            return TENSOR  # (a tensor's other methods give tensors, or numbers read from one)
        if self.hints.flag_calls and name.startswith(self.hints.flag_calls):
            return STATIC  # (hint) self.is_decoder_layer()
        return UNKNOWN

    def _items_kind(self, args) -> str:
        """Kind of ``any(args)``/``all(args)``: that of the items (``all([a.all(), b.all()])``)."""
        if len(args) == 1 and isinstance(args[0], (ast.List, ast.Tuple, ast.Set)):
            return combine(*(self.kind(x) for x in args[0].elts))
        return combine(*(self.kind(a) for a in args))

    def loop_candidate(self, iterable) -> bool:
        """A ``for`` over a tensor or a symbolic ``range(n)`` (``ast`` or libcst iterable)."""
        if isinstance(iterable, cst.CSTNode):
            iterable = as_ast(iterable)
        if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and iterable.func.id == "range":
            if not 1 <= len(iterable.args) <= 3 or iterable.keywords:
                return False
            counted = (SHAPE, TENSOR, UNKNOWN) if self.counted_unknown else (SHAPE, TENSOR)
            return any(self.kind(a) in counted for a in iterable.args)
        if isinstance(iterable, ast.Call) and getattr(iterable.func, "id", None) in ("enumerate", "zip", "reversed"):
            first = iterable.args[0] if iterable.args else None  # enumerate(x), zip(x, y): over x
            return first is not None and not isinstance(first, ast.Starred) and self.loop_candidate(first)
        rows = unbound(iterable)
        if rows is not None:  # x.unbind(0), torch.unbind(x): the rows of x
            return self.loop_candidate(rows)
        if isinstance(iterable, ast.Subscript) and isinstance(iterable.slice, ast.Slice):
            return self.loop_candidate(iterable.value)  # x[1:], x[:-1]: some rows of x
        if isinstance(iterable, ast.Name) and iterable.id in self.params:
            return True  # `for row in x` over an argument: usually a tensor; the runtime checks
        # (a SHAPE iterable, ``x.shape[-2:]``, is a tuple of sizes: a plain Python loop, never a scan)
        return self.kind(iterable) == TENSOR

    def on_data(self, fn: ast.FunctionDef) -> bool:
        """Is there a construct on tensor data in ``fn``: a TENSOR condition, a loop over a tensor or over sizes?

        What model discovery asks (flags, None tests and size tests alone do not count).
        """
        for node in own_nodes(fn):
            if isinstance(node, (ast.If, ast.While, ast.Assert, ast.IfExp)) and self.kind(node.test) == TENSOR:
                return True
            if isinstance(node, ast.For) and self.loop_candidate(node.iter):
                it = node.iter
                if isinstance(it, ast.Call) and getattr(it.func, "id", None) == "range" or self.kind(it) == TENSOR:
                    return True  # (not ``for row in x`` over an argument, which may be a list)
        return False

    def candidates(self, fn: ast.FunctionDef, kinds) -> set:
        """The ``kinds`` (``passes.Kind``) of which ``fn`` holds a candidate: a cheap screen, the passes decide."""
        by_type: dict[type, list] = {}
        for kind in kinds:
            for node_type in kind.nodes:
                by_type.setdefault(node_type, []).append(kind)
        found = set()
        for node in own_nodes(fn):
            for kind in by_type.get(type(node), ()):
                if kind not in found and kind.finds(node, self):
                    found.add(kind)
        return found
