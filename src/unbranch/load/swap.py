"""The one place that writes ``__code__``: swap rewritten code into the user's functions, and put the originals back."""

from __future__ import annotations

import contextlib
import types

from ..runtime._tracing import as_torch_has_it, checks_kept
from . import loader

# functions whose __code__ is swapped right now -> their original code object
_ORIGINAL_CODE: dict[types.FunctionType, types.CodeType] = {}


def original_code(fn: types.FunctionType) -> types.CodeType:
    """``fn``'s own code, also while a context has swapped rewritten code into it."""
    return _ORIGINAL_CODE.get(fn, fn.__code__)


@contextlib.contextmanager
def swapped_in(rewritten):
    """Run the body with each RewrittenMethod's code in its function; restore every original on exit.

    A nested function (``rm.parent`` set) has no function object to swap until its parent
    runs: its code is swapped into the parent's code, where the parent's ``def`` finds it,
    after the parent's own swap (if any). Nested contexts and duplicates restore exactly:
    each swap remembers the code it replaced, and the registry forgets a function when its
    original code is back.
    """
    swapped = []
    try:
        for rm in sorted(rewritten, key=lambda rm: rm.parent is not None):
            fn = rm.function if rm.parent is None else rm.parent
            code = rm.code_object
            if rm.parent is not None:
                code = replace_nested(fn.__code__, rm.function.__code__, rm.code_object)
                if code is None:  # (the parent's current code no longer defines it)
                    continue
            loader.bind_runtime(fn, rm.runtime)
            _ORIGINAL_CODE.setdefault(fn, fn.__code__)
            swapped.append((fn, fn.__code__, rm.runtime, _anchor(rm.code_object)))
            fn.__code__ = code
        with checks_kept():
            yield
    finally:
        for fn, code, name, anchor in reversed(swapped):
            fn.__code__ = code
            loader.unbind_runtime(fn, name)
            if anchor is not None:
                _ANCHORS.discard(anchor)
            if code is _ORIGINAL_CODE.get(fn):
                del _ORIGINAL_CODE[fn]


@contextlib.contextmanager
def swapped_out():
    """Run the body with every swapped function's original code back: the program as if unbranch were not there."""
    current = {fn: fn.__code__ for fn in _ORIGINAL_CODE}
    try:
        for fn in current:
            fn.__code__ = _ORIGINAL_CODE[fn]
        with as_torch_has_it():
            yield
    finally:
        for fn, code in current.items():
            fn.__code__ = code


try:  # frames non-strict export keeps in a node's stack_trace, besides ``forward`` (torch.fx private)
    from torch.fx.proxy import _STACK_TRACE_ANCHORS as _ANCHORS
except ImportError:
    _ANCHORS = set()


def _anchor(code: types.CodeType) -> tuple | None:
    """Keep the rewritten function's frames in stack traces while swapped in: a cond node made by a
    helper then names the helper's code (``Report.conds``, error messages). None: torch had it already."""
    anchor = (code.co_filename, code.co_name)
    if anchor in _ANCHORS:
        return None
    _ANCHORS.add(anchor)
    return anchor


def replace_nested(container: types.CodeType, old: types.CodeType, new: types.CodeType) -> types.CodeType | None:
    """``container`` with the code of nested function ``old`` replaced by ``new`` (at any depth), or None.

    Found by identity, or, in a container compiled again from rewritten text (the parent was
    rewritten too; nested functions stay as written), by the same name and bytecode.
    """
    consts = list(container.co_consts)
    for k, c in enumerate(consts):
        if not isinstance(c, types.CodeType):
            continue
        if c is old or (c.co_name == old.co_name and c.co_code == old.co_code and c.co_names == old.co_names):
            consts[k] = new
            return container.replace(co_consts=tuple(consts))
        inner = replace_nested(c, old, new)
        if inner is not None:
            consts[k] = inner
            return container.replace(co_consts=tuple(consts))
    return None
