"""``if cond: raise E(msg)`` that still checks under export.

    _ub.raise_if(x.shape[0] < 2, lambda: ValueError("too short"))

Eager (or a Python condition): raise exactly ``E(msg)``. Tensor condition while tracing:
``torch._assert_async`` (the only check that keeps the message, and works in strict mode).
SymBool: ``torch._check`` (strict export rejects a message there, TORCH_FACTS §9).
"""

from __future__ import annotations

import torch

from ._tracing import fail, is_symbolic, origin_of_caller


def raise_if(pred, make_exception):
    if not is_symbolic(pred):
        if pred:
            raise make_exception()
        return
    if isinstance(pred, torch.Tensor):
        torch._assert_async(torch.logical_not(pred), _message(make_exception))
    elif torch.compiler.is_dynamo_compiling():
        torch._check(torch.sym_not(pred))
    else:
        torch._check(torch.sym_not(pred), lambda: _message(make_exception))


def _message(make_exception) -> str:
    # only exc.args is readable under dynamo (str(exc) and formatting an exception are not)
    exc = make_exception()
    args = exc.args
    text = args[0] if args and isinstance(args[0], str) else ""
    return type(exc).__name__ + ": " + text


def unconverted(pred, why: str, construct: str = "if"):
    """The condition of a construct unbranch had to leave as plain Python (``why`` says why).

    Returns ``pred`` unchanged; while tracing, a tensor condition would fail deep inside torch
    anyway, so fail here instead with the reason and the original file and line.
    """
    if is_symbolic(pred) and isinstance(pred, torch.Tensor):
        where = origin_of_caller(1)
        fail(f"{where}: this {construct} on a tensor condition could not be converted: {why}", construct)
    return pred
