"""Is a value symbolic right now? The one question every runtime helper asks first."""

from __future__ import annotations

import contextlib
import logging
import re

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_false, statically_known_true

from .settings import current


def tracing() -> bool:
    """Does torch.export trace right now (or torch.compile, when asked for)?

    Measured (torch 2.13): ``is_exporting()`` is True in non-strict and strict export, and
    inside the branches of a cond they trace; it is False under torch.compile (eager and
    inductor backends), whose graphs must stay what the original code gives.
    """
    return torch.compiler.is_exporting() or (current().lower_under_compile and torch.compiler.is_compiling())


# what a user's code logs with (``log.warning(...)``), as dynamo's ignore set names them
_LOGGING = frozenset(
    getattr(logging.Logger, name)
    for name in ("debug", "info", "warning", "warn", "error", "exception", "critical", "log")
)


@contextlib.contextmanager
def logging_dropped():
    """Logging calls in what torch's control-flow operators trace are no-ops, as strict export
    makes them. Under non-strict export torch traces the operators' bodies with dynamo outside
    export mode, which refuses them ("logging.Logger method not supported for non-export cases");
    under strict export (dynamo already tracing) there is nothing to change."""
    if torch.compiler.is_dynamo_compiling():
        yield
        return
    config = torch._dynamo.config
    with config.patch(ignore_logging_functions=config.ignore_logging_functions | _LOGGING):
        yield


_KEPT_BY_US = [0]  # open checks_kept contexts; cond is in the impure set because of them


@contextlib.contextmanager
def checks_kept():
    """While open, dead-code elimination keeps a ``torch.cond`` whose outputs nothing uses.

    A cond nested in a branch whose sides only check (``assert``, ``raise`` -> ``_assert_async``)
    has no outputs; torch counts cond as pure and drops it from the branch graph (measured,
    torch 2.13 strict export): the checks vanished from the program without a word.
    """
    from torch.fx.node import _side_effectful_functions as impure

    cond = torch.ops.higher_order.cond
    added = cond not in impure
    impure.add(cond)
    _KEPT_BY_US[0] += added
    try:
        yield
    finally:
        _KEPT_BY_US[0] -= added
        if added:
            impure.discard(cond)


@contextlib.contextmanager
def as_torch_has_it():
    """While open, cond is pure again if only :func:`checks_kept` made it impure (a plain export's rules)."""
    from torch.fx.node import _side_effectful_functions as impure

    cond = torch.ops.higher_order.cond
    ours = _KEPT_BY_US[0] > 0 and cond in impure
    if ours:
        impure.discard(cond)
    try:
        yield
    finally:
        if ours:
            impure.add(cond)


def is_symbolic(value) -> bool:
    """True for a tensor or a SymBool while torch exports (see tracing), else False.

    Under strict export dynamo shows a SymBool as ``bool``; a real bool is then told apart
    by identity with ``True``/``False`` (measured: this neither guards nor specialises).
    """
    if value is True or value is False or not tracing():
        return False
    if isinstance(value, (torch.SymBool, bool)):
        # decided by the shapes' ranges alone (numel(x) == 0 with sizes >= 2): plain Python, no
        # cond; these queries add no guard, and dynamo traces through them
        return not (statically_known_true(value) or statically_known_false(value))
    return isinstance(value, torch.Tensor)


def settled(value):
    """``value``, or the Python bool it is known to be while torch traces: under non-strict export a
    tensor made from Python values alone (a jump flag set from Python tests, ``_ub.flag(False)``)
    carries its value (a fake tensor's ``constant``), and a test of it decides nothing from data."""
    constant = getattr(value, "constant", None) if isinstance(value, torch.Tensor) else None
    if isinstance(constant, torch.Tensor) and constant.numel() == 1:
        return bool(constant)
    return value


def truth(pred):
    """A tensor condition as every lowering takes it (a cond, a where, a check, a loop's exit): Python's
    ``bool()`` of a one-element tensor of any rank and dtype, as a 0-d bool tensor. A ``(1,)`` condition
    left as it is broadcasts a where's result to its shape, and a float one is no where or while_loop
    condition; a tensor of no or several elements raises as ``bool()`` does (a size unknown while tracing
    is checked to be 1, as eager needs). Anything else comes back as it is."""
    if not isinstance(pred, torch.Tensor):
        return pred
    n = pred.numel()
    if not statically_known_true(n == 1):
        empty = statically_known_true(n == 0)
        if empty or statically_known_true(n > 1):
            message = f"Boolean value of Tensor with {'no values' if empty else 'more than one value'} is ambiguous"
            if torch.compiler.is_dynamo_compiling():  # (dynamo would report the exception as its own)
                fail(f"this line: {message} (a condition of shape {tuple(pred.shape)})", "condition")
            raise RuntimeError(message)
        torch._check(n == 1)
    if pred.dim():
        pred = pred.reshape(())
    return pred if pred.dtype == torch.bool else pred != 0


def truth_tensor(pred) -> torch.Tensor:
    """:func:`truth` as a tensor: a bool or SymBool joining a tensor condition is a 0-d one."""
    return truth(pred) if isinstance(pred, torch.Tensor) else torch.full((), pred, dtype=torch.bool)


def is_tensor(value) -> bool:
    return isinstance(value, torch.Tensor)


def fresh_outputs(values, inputs):
    """Higher-order ops forbid returning an input, a view of one, a parameter, or one tensor twice: copy those.

    ``inputs``: the tensors the body was given, and any other tensor it may hand back as it is
    (a module's buffers).
    """
    from torch.utils import _pytree as pytree

    seen: list = []

    def fresh(o):
        copy = o._base is not None or isinstance(o, torch.nn.Parameter) or any(o is t for t in (*inputs, *seen))
        seen.append(o)
        return o.clone() if copy else o

    return pytree.tree_map_only(torch.Tensor, fresh, values)


def copy_into(target: torch.Tensor, value) -> None:
    """``target.copy_(value)``: a branch's or loop's change written back into the tensor it changed. Into
    a parameter (a leaf that requires grad) without grad, as eager's change was made (through ``.data``
    or under ``torch.no_grad()``: autograd refuses any other)."""
    if target.is_leaf and target.requires_grad:
        with torch.no_grad():
            target.copy_(value)
    else:
        target.copy_(value)


def fail(message: str, construct: str, cause: BaseException | None = None):
    """Raise the project's error (``cause`` chained). Under dynamo (strict export) an exception raised
    here would be the traced code's own, which a ``try`` around the construct catches, exporting the
    ``except`` side for every input: a graph break instead, which nothing catches, its argument the
    same text (``exporting.failures.runtime_failure`` reads it back)."""
    from ..errors import UnbranchError

    inner = failure_in(cause) if cause is not None else None
    if inner is not None:  # a construct inside this one failed: its reason is the one to give
        message, construct = inner[0], inner[1]
    if torch.compiler.is_dynamo_compiling():
        torch._dynamo.graph_break(f"unbranch: {message} [{construct}]")
    error = UnbranchError.placed(message, construct)
    if cause is not None:
        raise error from cause
    raise error


# what ``fail`` leaves in the text of the error dynamo raises for it: "unbranch: <message> [<construct>]"
_FAILED = re.compile(r"unbranch: (.*?) \[([^\]]+)\][\"']\)")


def failure_in(error: BaseException) -> tuple[str, str, BaseException] | None:
    """(message, construct, the exception holding it) of a ``fail`` under dynamo among ``error``
    and its causes: the innermost reason, which an enclosing cond's rejection must pass on."""
    from ..errors import UnbranchError

    seen = error
    while seen is not None:
        if isinstance(seen, UnbranchError):
            where = f"{seen.path}:{seen.line}: " if seen.path and seen.line else ""
            return f"{where}{seen.reason}", seen.construct or "", seen
        found = _FAILED.search(str(seen))
        if found:
            return found.group(1), found.group(2), seen
        seen = seen.__cause__ or seen.__context__
    return None


def origin_of_caller(depth: int) -> str:
    """``file:line`` of the user's code behind the rewritten frame ``depth`` levels up."""
    import sys

    from . import source_map

    if torch.compiler.is_dynamo_compiling():
        return "this line"  # frames are not inspectable under dynamo: errors.runtime_failure places it
    frame = sys._getframe(depth + 1)
    return source_map.describe(frame.f_code.co_filename, frame.f_lineno)
