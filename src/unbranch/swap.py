"""The one place that writes ``__code__``: swap rewritten code into the user's functions, and put the originals back."""

from __future__ import annotations

import contextlib
import types

from . import loader

# functions whose __code__ is swapped right now -> their original code object
_ORIGINAL_CODE: dict[types.FunctionType, types.CodeType] = {}


def original_code(fn: types.FunctionType) -> types.CodeType:
    """``fn``'s own code, also while a context has swapped rewritten code into it."""
    return _ORIGINAL_CODE.get(fn, fn.__code__)


@contextlib.contextmanager
def swapped_in(rewritten):
    """Run the body with each RewrittenMethod's code in its function; restore every original on exit.

    Nested contexts and duplicates restore exactly: each swap remembers the code it replaced,
    and the registry forgets a function when its original code is back.
    """
    swapped = []
    try:
        for rm in rewritten:
            fn = rm.function
            loader.bind_runtime(fn, rm.runtime)
            _ORIGINAL_CODE.setdefault(fn, fn.__code__)
            swapped.append((fn, fn.__code__, rm.runtime))
            fn.__code__ = rm.code_object
        yield
    finally:
        for fn, code, name in reversed(swapped):
            fn.__code__ = code
            loader.unbind_runtime(fn, name)
            if code is _ORIGINAL_CODE.get(fn):
                del _ORIGINAL_CODE[fn]
