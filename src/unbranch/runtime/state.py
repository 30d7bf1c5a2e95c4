"""Attributes a converted ``if`` or loop sets: the construct works on a local (normalise/attribute_state),
written back here once it is done."""

from __future__ import annotations

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

from ._tracing import fail, origin_of_caller, tracing
from .unbound_names import Unbound

# the operators rewritten code calls as ``_ub.<name>``
__all__ = ["attribute", "data", "store_attribute"]


def attribute(owner, name: str):
    """``owner.<name>`` for a construct that binds it without reading it: it may not exist before,
    and then the local is unbound until the construct binds it (an ``Unbound`` marker)."""
    try:
        return getattr(owner, name)
    except AttributeError:
        return Unbound(name)


def data(tensor):
    """``tensor.data`` of an attribute a converted construct changes (``self.loc.data.copy_(m)``, ActNorm's
    first-batch init): eagerly exactly that; while torch traces, ``tensor.detach()``, the same storage
    without autograd, whose in-place changes the trace records (a ``.data`` tensor escapes it: the
    program then fails, mixing fake modes, measured torch 2.13)."""
    return tensor.detach() if tracing() else tensor.data


_MISSING = object()  # (an attribute the construct binds first)


def store_attribute(owner, name: str, value) -> None:
    """``owner.<name> = value`` after a converted construct that rebinds the attribute (``self.n += 1``).

    Eagerly exactly that, and nothing when ``value`` is still the attribute's own object (changed
    in place, or the side that sets it not taken). While torch exports, a registered buffer is
    updated in place instead: the program then records the buffer's mutation, where a new tensor
    bound to the name was dropped (strict export, torch 2.13, measured). Anything else that would
    have to hold a traced value on a module (a Python int counted under the condition comes out of
    the cond as a symbolic int; an attribute that is no buffer) is refused: the exported program
    would not keep it, and the traced value could stay on the module. An object that is no module
    (an output's field) holds it as a local would.
    """
    if isinstance(value, Unbound):
        return  # the construct did not bind it, and it did not exist before
    old = getattr(owner, name, _MISSING)
    if value is old:
        return
    # (under strict export dynamo shows a symbolic int as an int: every new value counts as traced)
    symbolic = isinstance(value, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool))
    if not (tracing() and (symbolic or torch.compiler.is_dynamo_compiling())):
        setattr(owner, name, value)
        return
    if not isinstance(owner, torch.nn.Module):
        if torch.compiler.is_dynamo_compiling():
            fail(
                f"{origin_of_caller(1)}: this construct sets attribute '{name}' of a {type(owner).__name__} object "
                "under a tensor condition; strict export (torch 2.13) loses an attribute set on an object after a "
                "torch.cond (its program gives the old value, measured): export with strict=False",
                "attribute",
            )
        setattr(owner, name, value)  # (an object no module holds, an output's field, may hold a traced value)
        return
    buffers = getattr(owner, "_buffers", {})
    if name in buffers and _same_layout(old, value):
        old.copy_(value)
        return
    held = "a buffer of another shape or dtype" if name in buffers else f"a {type(old).__name__}, not a buffer"
    fail(
        f"{origin_of_caller(1)}: this construct sets attribute '{name}' under a tensor condition, which torch.export "
        f"can carry out only into a registered buffer of the same shape and dtype ('{name}' holds {held}): "
        "register it with register_buffer, or set it outside the branch or loop",
        "attribute",
    )


def _same_layout(old, value: torch.Tensor) -> bool:
    return (
        isinstance(old, torch.Tensor)
        and old.dtype == value.dtype
        and old.dim() == value.dim()
        and all(statically_known_true(a == b) for a, b in zip(old.shape, value.shape))
    )
