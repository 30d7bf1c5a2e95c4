"""Flags that stand for ``break``/``continue`` in loops the compiler lowered (normalise/jump_flags)."""

from __future__ import annotations

import torch


def flag(value=False) -> torch.Tensor:
    """``value`` as a 0-d bool tensor: what a ``cond`` output or a loop carry can hold on every path.

    Used where a flag may be set inside a converted branch or carried by a converted loop;
    elsewhere the compiler keeps plain ``True``/``False``.
    """
    if isinstance(value, torch.Tensor):
        return value.bool().reshape(())
    return torch.tensor(bool(value))
