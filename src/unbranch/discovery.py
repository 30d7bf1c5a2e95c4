"""Which functions a model needs rewritten: the catalogue, plus a scan of the model's own code.

The scan looks at each submodule class's ``forward`` (where it is defined), at the plain
methods that ``forward`` calls on ``self`` (``self._merge(...)``, two calls deep), and at the
top-level functions of the modules those classes come from. A function is a candidate
when the compiler, run on it, dispatches at least one condition it classifies as TENSOR
(``.any()``, ``.item()``, ``torch.*`` ...) or converts a loop (a ``for`` over a range of a
tensor's size, a ``while`` on a tensor condition): flags, None tests and shape tests alone
do not make a method worth touching. The other conditions of a candidate are rewritten as
always (dispatched at run time when the classifier cannot tell).
"""

from __future__ import annotations

import inspect
import re
import sys
import types

import torch

from . import cache
from .analysis.classify import TENSOR
from .errors import UnbranchError
from .rewriting import MODEL_OPTIONS, options_for, rewrite
from .source import get_source, innermost_function

# a branch header mentioning tensor data, or a for loop over sizes or over a plain name (``for row
# in x``), not over attributes (``for layer in self.layers``); the compiler's classifier confirms it
_TENSORISH = re.compile(
    r"^\s*((if|elif|while)\b.*(\.(any|all|item|sum|max|min|mean|isfinite|isinf|isnan|eq|ne|gt|lt)\(|torch\.)"
    r"|for\b.*\bin\b.*(\.shape|\.size\(|\.item\())",
    re.MULTILINE,
)
# lookups (a class -> rewrite specs, or None) that integrations register: unbranch.hf.catalog's
# transformers catalogue; the compiler itself knows no model library
CATALOGUES: list = []

# a converted for loop counts when it plainly runs over a size: the compiler also converts loops
# over names it cannot type (``for t in tensors``, a tuple of tensors), which a model must not pay for
_SIZED = re.compile(r"\bin\b.*(\.shape|\.size\(|\.item\()")

_HELPER_DEPTH = 2  # forward -> self.helper() -> self.helper_of_helper()

# code object -> does discovery want it rewritten (entering again re-reads nothing)
_WANTED: dict = cache.memo()
# code object -> names it calls as methods of its first parameter (``self.NAME(``)
_SELF_CALLS: dict = cache.memo()


def _scan(fn) -> bool:
    """Does discovery want ``fn`` rewritten? Answered once per code object."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if code is None:
        return False
    if code not in _WANTED:
        _WANTED[code] = _scan_source(fn)
    return _WANTED[code]


def _scan_source(fn) -> bool:
    try:
        src = inspect.getsource(fn)
    except (OSError, TypeError):
        return False
    if not _TENSORISH.search(src):
        return False
    try:
        inner = innermost_function(fn)
        rm = rewrite(inner, options_for(inner, **MODEL_OPTIONS))
    except UnbranchError:
        return False
    lines = rm.source.text.splitlines()
    return any(
        (n.kind in ("cond", "check", "while_loop") and n.condition == TENSOR)
        or (n.kind == "scan" and _SIZED.search(lines[n.line - rm.source.line]))
        for n in rm.notes
    )


def _self_calls(fn) -> tuple[str, ...]:
    """The names ``fn`` calls on its first parameter (``self.NAME(...)``), read once per code object."""
    try:
        fn = innermost_function(fn)
    except UnbranchError:
        return ()
    code = fn.__code__
    if code not in _SELF_CALLS:
        names: tuple[str, ...] = ()
        if code.co_argcount:
            try:
                text = get_source(fn).text
            except UnbranchError:
                text = ""
            me = re.escape(code.co_varnames[0])
            names = tuple(dict.fromkeys(re.findall(rf"(?<![\w.]){me}\.(\w+)\s*\(", text)))
        _SELF_CALLS[code] = names
    return _SELF_CALLS[code]


def _helpers(forward, module: torch.nn.Module) -> list:
    """The plain methods of ``module``'s class that ``forward`` calls on ``self``, two calls deep.

    Submodules (their own class is scanned), instance attributes, static and class methods,
    properties and what torch.nn.Module itself defines are not followed.
    """
    cls, found, frontier = type(module), [], [forward]
    for _ in range(_HELPER_DEPTH):
        following = []
        for fn in frontier:
            for name in _self_calls(fn):
                if name == "forward" or name in vars(module) or name in module._modules:
                    continue
                owner = next((k for k in cls.__mro__ if name in k.__dict__), None)
                if owner is None or owner is torch.nn.Module or owner.__module__.startswith("torch."):
                    continue
                method = owner.__dict__[name]
                if isinstance(method, types.FunctionType) and method not in found and method is not forward:
                    found.append(method)
                    following.append(method)
        frontier = following
    return found


def _module_functions(module_name: str):
    module = sys.modules.get(module_name)
    for value in list(vars(module).values()) if module else ():
        if isinstance(value, types.FunctionType) and value.__module__ == module_name:
            yield value


def catalogue_entries(model: torch.nn.Module) -> list:
    """(function, hooks) of every catalogue entry for the classes of ``model``'s submodules."""
    found: dict = {}
    for cls in dict.fromkeys(type(sub) for sub in model.modules()):
        for lookup in CATALOGUES:
            for spec in lookup(cls) or ():
                spec = dict(spec)
                found.setdefault(spec.pop("function"), spec)
    return list(found.items())


def discover(model: torch.nn.Module) -> list:
    """(callable, hooks) pairs for every function of ``model`` that needs rewriting.

    The scan compiles candidates with the options torch_export_rewrite uses for them, so
    entering the context reuses that work from the cache.
    """
    found: dict = dict(catalogue_entries(model))
    classes, modules = set(), set()
    for sub in model.modules():
        cls = type(sub)
        if cls in classes:
            continue
        classes.add(cls)
        for klass in cls.__mro__:
            if klass is torch.nn.Module or klass.__module__.startswith("torch."):
                break
            if "forward" in klass.__dict__:
                forward = klass.__dict__["forward"]
                modules.add(klass.__module__)  # its helper functions are scanned too
                if _scan(forward):
                    found.setdefault(forward, {})
                for helper in _helpers(forward, sub):
                    if helper not in found and _scan(helper):
                        found[helper] = {}
    for name in modules:
        for fn in _module_functions(name):
            if fn not in found and _scan(fn):
                found[fn] = {}
    return list(found.items())
