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

from .analysis.changes import Changes
from .analysis.effects import mutated_parameters
from .libcst_internals import parse_module
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
        if not isinstance(tree, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return ()
        if not Changes(tree).may_change([a.arg for a in (*tree.args.posonlyargs, *tree.args.args)], helpers):
            return ()  # no positional parameter's object can change in place
        node = parse_module(text).body[0]
    except Exception:  # no source (builtins, C, exec'd code) or not parseable: nothing known
        return ()
    return mutated_parameters(node, helpers)
