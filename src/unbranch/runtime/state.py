"""Attributes a converted ``if`` or loop sets: the construct works on a local (normalise/attribute_state),
written back here once it is done."""

from __future__ import annotations

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

from ._tracing import fail, origin_of_caller, tracing

# the operators rewritten code calls as ``_ub.<name>``
__all__ = ["store_attribute"]


def store_attribute(owner, name: str, value) -> None:
    """``owner.<name> = value`` after a converted construct that rebinds the attribute (``self.n += 1``).

    Eagerly exactly that, and nothing when ``value`` is still the attribute's own object (changed
    in place, or the side that sets it not taken). While torch exports, a registered buffer is
    updated in place instead: the program then records the buffer's mutation, where a new tensor
    bound to the name was dropped (strict export, torch 2.13, measured). Anything else that would
    have to hold a traced value (a Python int counted under the condition comes out of the cond as
    a symbolic int; an attribute that is no buffer) is refused: the exported program would not
    keep it, and the traced value could stay on the module.
    """
    old = getattr(owner, name)
    if value is old:
        return
    # (under strict export dynamo shows a symbolic int as an int: every new value counts as traced)
    symbolic = isinstance(value, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool))
    if not (tracing() and (symbolic or torch.compiler.is_dynamo_compiling())):
        setattr(owner, name, value)
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
