"""Which of the functions a function calls change their arguments in place, read from their source.

A branch calling ``fill_(ids)`` changes ``ids`` as surely as one calling ``ids.add_(1)``; the
effects analysis sees that only if it knows what ``fill_`` does. The helpers reachable by
name (module functions in the function's globals, methods of its class through ``self``) are
summarised as the positions of the arguments they change, memoised per code object.

Most helpers change only what they made themselves (``out[i] = v`` into a fresh tensor,
``n += 1``): before libcst parses one, a walk of its ``ast`` follows each parameter through
every binding that may alias it (the effects analysis's view rules) and answers ``()`` when no
change in place can reach one: never where the effects analysis would find one.
"""

from __future__ import annotations

import ast
import inspect
import re
import types

import libcst as cst

from .analysis.effects import (
    CONTAINER_METHODS,
    STATEMENT_ONLY_METHODS,
    VIEW_FUNCTIONS,
    VIEW_METHODS,
    in_place,
    mutated_parameters,
)
from .source import get_source

# text that could change something in place; a helper without any is not parsed
_SCREEN = re.compile(r"_\(|\]\s*\S?=|out=|inplace|[-+*/@%&|^]=")
_SUMMARIES: dict = {}  # code object -> positions of the parameters it changes in place
_DEPTH = 3  # helpers of helpers are followed this far


class Callees:
    """What the functions ``fn`` calls change in place, resolved lazily, callee by callee.

    ``get("fill_")`` / ``get("self.clip")`` -> positions of the arguments it changes (``()`` if
    none or unknown). Only callees that a converted branch or loop actually calls are read,
    so functions with nothing to convert pay nothing. ``used`` records what was asked.
    """

    def __init__(self, fn: types.FunctionType, depth: int = _DEPTH):
        self.fn, self.depth = fn, depth
        self.used: dict[str, tuple[int, ...]] = {}

    def get(self, callee: str, default=()) -> tuple[int, ...]:
        if callee not in self.used:
            self.used[callee] = self._resolve(callee)
        return self.used[callee] or default

    def _resolve(self, callee: str) -> tuple[int, ...]:
        fn, code = self.fn, self.fn.__code__
        receiver, _, name = callee.rpartition(".")
        if not receiver:
            target = fn.__globals__.get(name)
            return _summary(target, self.depth, skip_self=False) if isinstance(target, types.FunctionType) else ()
        owner = _owner_class(fn)
        if owner is None or not code.co_argcount or receiver != code.co_varnames[0]:
            return ()
        attr = inspect.getattr_static(owner, name, None)
        if not isinstance(attr, (types.FunctionType, staticmethod)):
            return ()
        return _summary(getattr(attr, "__func__", attr), self.depth, skip_self=isinstance(attr, types.FunctionType))


def _owner_class(fn):
    parts = fn.__qualname__.split(".")
    if len(parts) < 2 or "<locals>" in parts:
        return None
    owner = fn.__globals__.get(parts[0])
    for part in parts[1:-1]:
        owner = getattr(owner, part, None)
    return owner if isinstance(owner, type) else None


def _summary(fn: types.FunctionType, depth: int, skip_self: bool) -> tuple[int, ...]:
    fn = inspect.unwrap(fn)
    code = getattr(fn, "__code__", None)
    if code is None or depth <= 0:
        return ()
    if code not in _SUMMARIES:
        _SUMMARIES[code] = ()  # a recursive helper sees no effects of itself while being read
        _SUMMARIES[code] = _read(fn, depth)
    positions = _SUMMARIES[code]
    return tuple(p - 1 for p in positions if p > 0) if skip_self else positions


def _read(fn: types.FunctionType, depth: int) -> tuple[int, ...]:
    helpers = Callees(fn, depth - 1)
    try:
        text = get_source(fn).text
        if not _SCREEN.search(text):
            return ()
        tree = ast.parse(text).body[0]
        if not isinstance(tree, (ast.FunctionDef, ast.AsyncFunctionDef)) or not _may_change_parameters(tree, helpers):
            return ()
        node = cst.parse_module(text).body[0]
    except Exception:  # no source (builtins, C, exec'd code) or not parseable: nothing known
        return ()
    return mutated_parameters(node, helpers)


_CHANGING = CONTAINER_METHODS | STATEMENT_ONLY_METHODS  # besides in-place methods: they change their receiver
_LOOPS = (ast.For, ast.AsyncFor, ast.comprehension)
_BINDINGS = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr, *_LOOPS)


def _may_change_parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef, helpers: Callees) -> bool:
    """Could ``effects.mutated_parameters`` find a positional parameter of ``fn`` changed in place?

    A superset of its answer: a name may hold a parameter's object if any binding of it may
    (``_names``, the effects analysis's ``alias_roots``, for every binding, where the analysis
    skips some), and a call changing its receiver may also change its first argument, which the
    analysis decides by the receiver. ``False`` is therefore certain.
    """
    body = [node for stmt in fn.body for node in ast.walk(stmt)]  # (as the analysis: not the decorators)
    bindings = []
    for node in body:
        if isinstance(node, _BINDINGS):
            value = node.iter if isinstance(node, _LOOPS) else node.value
            reads = _names(value) if value is not None else set()
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                bindings += [(n.id, reads) for n in ast.walk(target) if isinstance(n, ast.Name)]
    holding = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args)}  # names that may hold a parameter's object
    grown = None
    while grown != holding:
        grown, holding = holding, holding | {name for name, reads in bindings if reads & holding}
    for node in body:
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            changed = set().union(*(_stored_roots(t) for t in targets))
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                changed.add(node.target.id)
        elif isinstance(node, ast.Call):
            changed = _call_changes(node, helpers, holding)
        else:
            continue
        if changed & holding:
            return True
    return False


def _call_changes(call: ast.Call, helpers: Callees, holding: set[str]) -> set[str]:
    """Names a call may change in place (a helper is looked up only if it gets one of ``holding``)."""
    f = call.func
    positional = [a for a in call.args if not isinstance(a, ast.Starred)]
    out = set()
    if isinstance(f, ast.Attribute):
        if in_place(f.attr) or f.attr in _CHANGING:
            out |= _names(f.value) | (_names(positional[0]) if positional else set())
    for kw in call.keywords:
        if kw.arg == "out":
            out |= _names(kw.value)
        elif kw.arg == "inplace" and positional:
            out |= _names(positional[0])
    passed = [_names(a) for a in positional]
    callee = f.id if isinstance(f, ast.Name) else None
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        callee = f"{f.value.id}.{f.attr}"
    if callee is not None and any(names & holding for names in passed):
        out |= set().union(*(passed[p] for p in helpers.get(callee, ()) if p < len(passed)))
    return out


def _stored_roots(target) -> set[str]:
    """The names whose objects an assignment or ``del`` target changes (``x`` of ``x[i].a = v``)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_stored_roots(t) for t in target.elts))
    if isinstance(target, ast.Starred):
        return _stored_roots(target.value)
    if not isinstance(target, (ast.Subscript, ast.Attribute)):
        return set()
    while isinstance(target, (ast.Subscript, ast.Attribute)):
        target = target.value
    return {target.id} if isinstance(target, ast.Name) else set()


def _names(expr) -> set[str]:
    """``effects.alias_roots`` on the ``ast``: the names whose object ``expr`` may be (or be a view of)."""
    if isinstance(expr, ast.Name):
        return {expr.id}
    if isinstance(expr, (ast.Subscript, ast.Attribute, ast.Starred, ast.NamedExpr)):
        return _names(expr.value)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        f, root = expr.func, expr.func.value
        while isinstance(root, (ast.Subscript, ast.Attribute)):
            root = root.value
        if isinstance(root, ast.Name) and root.id == "torch":
            return _names(expr.args[0]) if f.attr in VIEW_FUNCTIONS and expr.args else set()
        if f.attr in VIEW_METHODS or in_place(f.attr):
            return _names(f.value)
        return set()
    if isinstance(expr, ast.IfExp):
        return _names(expr.body) | _names(expr.orelse)
    if isinstance(expr, (ast.Tuple, ast.List)):
        return set().union(*(_names(e) for e in expr.elts))
    return set()
