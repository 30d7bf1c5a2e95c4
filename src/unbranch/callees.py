"""Which of the functions a function calls change their arguments in place, read from their source.

A branch calling ``fill_(ids)`` changes ``ids`` as surely as one calling ``ids.add_(1)``; the
effects analysis sees that only if it knows what ``fill_`` does. The helpers reachable by
name (module functions in the function's globals, methods of its class through ``self``) are
summarised as the positions of the arguments they change, memoised per code object.
"""

from __future__ import annotations

import inspect
import re
import types

import libcst as cst

from .analysis.effects import mutated_parameters
from .source import get_source

# text that could change something in place; a helper without any is not parsed
_SCREEN = re.compile(r"_\(|\]\s*\S?=|out=|inplace|[-+*/@%&|^]=")
_SUMMARIES: dict = {}  # code object -> positions of the parameters it changes in place
_DEPTH = 3  # helpers of helpers are followed this far


def mutating_callees(fn: types.FunctionType, depth: int = _DEPTH) -> dict[str, tuple[int, ...]]:
    """``{"fill_": (0,), "self.clip": (0,)}``: callee (as the call spells it) -> arguments it changes."""
    found = {}
    code = fn.__code__
    owner = _owner_class(fn)
    self_name = code.co_varnames[0] if owner is not None and code.co_argcount else None
    for name in code.co_names:
        target = fn.__globals__.get(name)
        if isinstance(target, types.FunctionType):
            positions = _summary(target, depth, skip_self=False)
            if positions:
                found[name] = positions
        if self_name is not None:
            attr = inspect.getattr_static(owner, name, None)
            if isinstance(attr, (types.FunctionType, staticmethod)):
                positions = _summary(
                    getattr(attr, "__func__", attr), depth, skip_self=isinstance(attr, types.FunctionType)
                )
                if positions:
                    found[f"{self_name}.{name}"] = positions
    return found


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
    try:
        text = get_source(fn).text
        if not _SCREEN.search(text):
            return ()
        node = cst.parse_module(text).body[0]
    except Exception:  # no source (builtins, C, exec'd code) or not parseable: nothing known
        return ()
    if not isinstance(node, cst.FunctionDef):
        return ()
    return mutated_parameters(node, mutating_callees(fn, depth - 1))
