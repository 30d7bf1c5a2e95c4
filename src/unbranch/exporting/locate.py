"""From a place torch named (file, line, function name) to the function object to rewrite.

A live frame gives the code object itself; a strict export's user stack gives only a file,
a line and a name, which are looked up in the module loaded from that file (classes, their
methods, static and class methods, properties, decorated functions, nested functions).
The function is then whichever function object runs that code: a module function or a
method of any class (``nn.Module`` or not). A nested function's object is made anew on each
call of its parent, so it is reached through its parent: :class:`Nested`.
"""

from __future__ import annotations

import gc
import inspect
import sys
import types
from dataclasses import dataclass

from ..load.swap import original_code


@dataclass(frozen=True)
class Nested:
    """A function defined inside ``parent`` (at any depth): its code is a constant of the parent's code."""

    parent: types.FunctionType
    code: types.CodeType

    @property
    def probe(self) -> types.FunctionType:
        """A function object for the nested code (cells empty), enough to read and rewrite its source."""
        cells = tuple(types.CellType() for _ in self.code.co_freevars)
        fn = types.FunctionType(self.code, self.parent.__globals__, self.code.co_name, None, cells or None)
        fn.__qualname__ = self.code.co_qualname
        return fn


def code_at(path: str, line: int, name: str) -> types.CodeType | None:
    """The code object of function ``name`` in file ``path`` whose lines hold ``line`` (innermost)."""
    best = None
    for code in _codes_in(_module_of(path)):
        if code.co_name == name and code.co_filename == path and _holds(code, line):
            if best is None or code.co_firstlineno > best.co_firstlineno:
                best = code
    return best


def _holds(code: types.CodeType, line: int) -> bool:
    lines = [ln for _, _, ln in code.co_lines() if ln is not None]
    return bool(lines) and code.co_firstlineno <= line <= max(lines)


def _module_of(path: str):
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) == path:
            return module
    return None


def _functions_in(namespace, module: str, seen: set):
    """Every function reachable from a module's or a class's namespace (unwrapped, methods included)."""
    for value in list(vars(namespace).values()):
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property):
            yield from (f for f in (value.fget, value.fset, value.fdel) if isinstance(f, types.FunctionType))
            continue
        if isinstance(value, type) and id(value) not in seen and value.__module__ == module:
            seen.add(id(value))
            yield from _functions_in(value, module, seen)
        elif callable(value):
            if isinstance(value, types.FunctionType) and hasattr(value, "__wrapped__"):
                yield value  # a decorator's wrapper runs too (functools.wraps), with its own code
            try:
                fn = inspect.unwrap(value)
            except ValueError:
                continue
            if isinstance(fn, types.FunctionType):
                yield fn


def _codes_in(module):
    """Code objects of ``module``'s functions and, recursively, of the functions nested in them."""
    if module is None:
        return
    stack = [original_code(fn) for fn in _functions_in(module, module.__name__, set())]
    while stack:
        code = stack.pop()
        yield code
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))


def function_for(code: types.CodeType, known=()) -> types.FunctionType | Nested | None:
    """What runs ``code``: the function object whose code it is, or the parent it is nested in.

    A lambda's or a comprehension's code (``<lambda>``, ``<listcomp>``...) is part of the function
    holding it, which is what gets rewritten. ``known``: functions to try before every object the
    collector holds (a scan of tens of milliseconds in a process that imported torch).
    """
    if code.co_name.startswith("<"):
        holder = _holder(code)
        return function_for(holder, known) if holder is not None else None
    # (a function discovery found held by the model, a hook made in ``__init__`` among them, is the
    # one that runs, though made inside another function)
    named = _named(known, code, held=True) or _named(gc.get_referrers(code), code)
    if named is not None:
        return named
    module = _module_of(code.co_filename)
    functions = list(_functions_in(module, module.__name__, set())) if module is not None else []
    # the very function object first: one a factory or a decorator made, kept in a class or the
    # module (``forward = make_forward(0.4)``, a ``functools.wraps`` wrapper), runs this code itself,
    # where the factory holding the code would only make new ones
    for fn in functions:
        if original_code(fn) is code:
            return fn
    for fn in functions:
        if _contains(original_code(fn), code):
            return Nested(fn, code)
    for ref in gc.get_referrers(code):  # a function not reachable from its module (made by a factory)
        if isinstance(ref, types.FunctionType) and original_code(ref) is code:
            return ref
    return None


def _named(refs, code: types.CodeType, held: bool = False) -> types.FunctionType | None:
    """The first of ``refs`` that is a function running ``code`` not made inside another one (``held``:
    or made inside one and kept)."""
    for ref in refs:
        made_inside = "<locals>" in getattr(ref, "__qualname__", "")
        if isinstance(ref, types.FunctionType) and original_code(ref) is code and (held or not made_inside):
            return ref
    return None


def _holder(code: types.CodeType) -> types.CodeType | None:
    """The code object whose constants hold ``code`` (its module's functions, searched at any depth)."""
    for candidate in _codes_in(_module_of(code.co_filename)):
        if any(c is code for c in candidate.co_consts):
            return candidate
    return None


def _contains(container: types.CodeType, code: types.CodeType) -> bool:
    return any(c is code or _contains(c, code) for c in container.co_consts if isinstance(c, types.CodeType))
