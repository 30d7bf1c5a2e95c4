"""``if cond: raise E(msg)`` that still checks under export.

    _ub.raise_if(x.shape[0] < 2, lambda: ValueError("too short"))

Eager (or a Python condition): raise exactly ``E(msg)``. Tensor condition while tracing:
``torch._assert_async`` (the only check that keeps the message, and works in strict mode);
a SymBool from data (``.item()``) likewise, on its tensor form. A SymBool on sizes:
``torch._check`` (strict export rejects a message there, TORCH_FACTS §9), after telling the
user, with their own message, when the example input itself fails it.
"""

from __future__ import annotations

import threading

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch._subclasses.functional_tensor import FunctionalTensor
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols, guard_or_false

from ._tracing import fail, is_symbolic, origin_of_caller, tracing, truth
from .settings import current

# the operators rewritten code calls as ``_ub.<name>``
__all__ = ["raise_if", "shown", "tracing", "unconverted"]  # (tracing: a report in a branch runs when it is False)


# how a failed check on data fails under export (``checks=`` of unbranch.export and the context,
# settings.checks):
# "async" asserts the condition where it is (torch._assert_async): no wait for the device, but on
# CUDA a failure is a device-side assert that leaves the process's CUDA context unusable; "sync"
# copies the 0-d condition to the CPU first and asserts it there: the call waits for the device,
# and a failure is a RuntimeError with the message, which the caller catches and after which the
# next call works; "auto": sync for a condition on an accelerator, async on the CPU (the same there)
CHECK_MODES = ("auto", "async", "sync")


def check(ok: torch.Tensor, message: str) -> None:
    """Assert the 0-d bool tensor ``ok`` in the exported program, as the settings' ``checks`` say."""
    mode = current().checks
    if mode == "sync" or (mode == "auto" and ok.device.type != "cpu"):
        ok = ok.to("cpu")  # (torch._check of its value would be dropped under strict export: TORCH_FACTS §9)
    torch._assert_async(ok, message)


def raise_if(pred, make_exception, text=None):
    """Raise ``make_exception()`` when ``pred`` holds; a runtime assertion when it is symbolic.

    The exception is built only when the check fails. Under export the assertion's message is
    fixed at trace time: ``text`` (given by the compiler when the message formats values: a function
    formatting those it can, see ``shown``) stands for it, else the message of the exception built
    there (constant arguments).
    """
    if not is_symbolic(pred):
        if pred:
            _raise(make_exception, text)
        return
    if isinstance(pred, torch.Tensor):
        check(torch.logical_not(truth(pred)), _message(make_exception, text))
    elif torch.compiler.is_dynamo_compiling():
        # strict export drops a check's message: should the example itself fail the check,
        # say so with the user's text (guarding a pred on sizes adds the check's own constraint;
        # a pred from data, ``.item()``, is not guarded and stays False here)
        if guard_or_false(pred):
            fail(f"{origin_of_caller(1)}: {_message(make_exception, text)}", "raise")
        _assert_data(pred, make_exception, text)
    elif free_unbacked_symbols(pred):
        _assert_data(pred, make_exception, text)
    else:
        # (the message is made only should the example itself fail: its sizes are known then)
        torch._check(torch.sym_not(pred), lambda: _message(make_exception, text, example=True))


def _assert_data(pred, make_exception, text):
    """A check on a SymBool from data (``x.sum().item() > c``) that stays in the graph with its message.

    ``torch._check`` drops one on a float from the graph (measured): assert its tensor form.
    """
    ok = torch.scalar_tensor(torch.sym_not(pred), dtype=torch.bool)
    check(ok, _message(make_exception, text))


def _raise(make_exception, text):
    if tracing() and torch.compiler.is_dynamo_compiling():
        # under strict export dynamo would report the user's exception as "Observed exception":
        # raise what it lets through, with the user's text (session turns it into UnbranchError)
        fail(f"{origin_of_caller(2)}: {_message(make_exception, text)}", "raise")
    raise make_exception()


def _message(make_exception, text=None, example: bool = False) -> str:
    """What a failed check says; ``example``: about the example input, whose sizes ``shown`` may give."""
    if callable(text) and not example:
        return text()
    if callable(text):  # (non-strict export only: dynamo would warn of the side effect)
        _EXAMPLE.on = True
        try:
            return text()
        finally:
            _EXAMPLE.on = False
    if text is not None:
        return text
    # only exc.args is readable under dynamo (str(exc) and formatting an exception are not)
    exc = make_exception()
    if isinstance(exc, type):
        exc = exc()
    args = exc.args
    text = args[0] if args and isinstance(args[0], str) else ""
    return f"{type(exc).__name__}: {text}"


def shown(value, source: str, conversion: str = "", spec: str = "") -> str:
    """A field of a check's message as the exported program fixes it while torch traces: Python's text
    for a plain value (a name, a type, a static size), as ``f"{value!conversion:spec}"`` gives it; the
    field's source, ``<value>``, for a value torch traces as data (a tensor, a symbolic size), whose
    value no message made at export time can show. Under strict export every number is shown so:
    dynamo shows a symbolic int as an int."""
    if getattr(_EXAMPLE, "on", False) and isinstance(value, torch.SymInt) and value.node.has_hint():
        value = value.node.hint  # (the message is about the example input: its size)
    if _traced(value, torch.compiler.is_dynamo_compiling()):
        return f"<{source}>"
    if isinstance(value, type) and issubclass(value, _TRACING_TENSORS):
        value = torch.Tensor  # (``type(x)`` of a traced tensor: eagerly a Tensor)
    elif isinstance(value, str) and value in {t.__name__ for t in _TRACING_TENSORS}:
        value = "Tensor"  # (``type(x).__name__``)
    if conversion:
        value = {"r": repr, "s": str, "a": ascii}[conversion](value)
    return format(value, spec)


_EXAMPLE = threading.local()  # on: a message made about the example input (see _message)

# the tensor types torch traces a model's tensors as (non-strict export)
_TRACING_TENSORS = (FakeTensor, FunctionalTensor)


def _traced(value, numbers: bool, depth: int = 0) -> bool:
    if isinstance(value, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool)):
        return True
    if numbers and isinstance(value, (int, float)):
        return True
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    if isinstance(value, (tuple, list)) and depth < 4:
        return any(_traced(v, numbers, depth + 1) for v in value)
    return False


def unconverted(pred, why: str, construct: str = "if"):
    """The condition of a construct unbranch had to leave as plain Python (``why`` says why).

    Returns ``pred`` unchanged; while tracing, a tensor condition would fail deep inside torch
    anyway, so fail here instead with the reason and the original file and line.
    """
    if is_symbolic(pred) and isinstance(pred, torch.Tensor):
        where = origin_of_caller(1)
        fail(f"{where}: this {construct} on a tensor condition could not be converted: {why}", construct)
    return pred
