"""Which functions a model needs rewritten: the catalogue, plus a scan of the model's own code.

The scan looks at each submodule class's ``forward`` (where it is defined) and at the
top-level functions of the modules those classes come from. A function is a candidate
when the compiler, run on it, dispatches at least one condition it classifies as TENSOR
(``.any()``, ``.item()``, ``torch.*`` ...) or converts a loop (a ``for`` over a range of a
tensor's size, a ``while`` on a tensor condition): flags, None tests and shape tests alone
do not make a method worth touching.
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
from .source import innermost_function

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

# code object -> does discovery want it rewritten (entering again re-reads nothing)
_WANTED: dict = cache.memo()


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


def _module_functions(module_name: str):
    module = sys.modules.get(module_name)
    for value in list(vars(module).values()) if module else ():
        if isinstance(value, types.FunctionType) and value.__module__ == module_name:
            yield value


def discover(model: torch.nn.Module) -> list:
    """(callable, hooks) pairs for every function of ``model`` that needs rewriting.

    The scan compiles candidates with the options torch_export_rewrite uses for them, so
    entering the context reuses that work from the cache.
    """
    found: dict = {}
    classes, modules = set(), set()
    for sub in model.modules():
        cls = type(sub)
        if cls in classes:
            continue
        classes.add(cls)
        for lookup in CATALOGUES:
            for spec in lookup(cls) or ():
                spec = dict(spec)
                found.setdefault(spec.pop("function"), spec)
        for klass in cls.__mro__:
            if klass is torch.nn.Module or klass.__module__.startswith("torch."):
                break
            if "forward" in klass.__dict__:
                forward = klass.__dict__["forward"]
                modules.add(klass.__module__)  # its helper functions are scanned too
                if _scan(forward):
                    found.setdefault(forward, {})
    for name in modules:
        for fn in _module_functions(name):
            if fn not in found and _scan(fn):
                found[fn] = {}
    return list(found.items())
