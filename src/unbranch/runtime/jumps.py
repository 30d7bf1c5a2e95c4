"""Flags: those standing for ``break``/``continue`` (normalise/jump_flags), and the user's own set under
a tensor condition (``literals`` of the control-flow operators)."""

from __future__ import annotations

import torch

# the operators rewritten code calls as ``_ub.<name>``
__all__ = ["flag"]


def flag(value=False) -> torch.Tensor:
    """``value`` as a 0-d bool tensor: what a ``cond`` output or a loop carry can hold on every path.

    Used where a flag may be set inside a converted branch or carried by a converted loop;
    elsewhere the compiler keeps plain ``True``/``False``.
    """
    if isinstance(value, torch.Tensor):
        return value.bool().reshape(())
    return torch.tensor(bool(value))


def tensorised(values: tuple, positions) -> tuple:
    """``values`` with the bools and ints at ``positions`` as 0-d tensors.

    The user's own flags and counters (``found = True`` under a tensor condition, ``hits += 1``):
    Python values on every path eager runs take, and as they enter a ``cond``'s outputs or a
    loop's carry while torch exports, tensors, which those operators can give on every path.
    """
    return tuple(torch.tensor(v) if k in positions and isinstance(v, (bool, int)) else v for k, v in enumerate(values))
