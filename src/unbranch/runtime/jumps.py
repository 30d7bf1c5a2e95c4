"""Flags: those standing for ``break``/``continue`` (normalise/jump_flags), and the user's own set under
a tensor condition (``literals`` of the control-flow operators)."""

from __future__ import annotations

import torch
from torch.utils import _pytree as pytree

from ._tracing import is_symbolic, truth_tensor

# the operators rewritten code calls as ``_ub.<name>``
__all__ = ["flag"]


def flag(value=False) -> torch.Tensor:
    """``value`` as a 0-d bool tensor: what a ``cond`` output or a loop carry can hold on every path.

    Used where a flag may be set inside a converted branch or carried by a converted loop;
    elsewhere the compiler keeps plain ``True``/``False``.
    """
    if isinstance(value, torch.Tensor) or is_symbolic(value):  # (a SymBool from data: never guarded on)
        return truth_tensor(value)
    if isinstance(value, bool) and torch.compiler.is_dynamo_compiling():
        # (strict export: dynamo would know no value of the tensor, and the guard it sets would be a cond
        # even where Python decided it, carrying what that step has not bound yet, ``prev = None``; the
        # compiler lists the flags among the literals a cond gives and a loop carries as tensors)
        return value
    return torch.tensor(bool(value))


def tensorised(values: tuple, positions, device=None) -> tuple:
    """``values`` with the bools, ints and floats at ``positions`` as 0-d tensors, on ``device`` when given,
    where the 0-d CPU tensors among ``values`` go too.

    The user's own flags and counters (``found = True`` under a tensor condition, ``hits += 1``):
    Python values on every path eager runs take, and as they enter a ``cond``'s outputs or a
    loop's carry while torch exports, tensors, which those operators can give on every path.
    ``device`` (see ``accelerator``): a flag made on the CPU (``_ub.flag(False)``) and set from
    data on a GPU is a CPU tensor on one path and a GPU one on the other, which the operators refuse.
    """

    def entry(k, v):
        if k in positions and isinstance(v, (bool, int, float)):
            return torch.tensor(v, device=device)  # (a float: of the default dtype, as Python's meets tensors)
        if device is not None and isinstance(v, torch.Tensor) and v.dim() == 0 and v.device.type == "cpu":
            return v.to(device)
        return v

    return tuple(entry(k, v) for k, v in enumerate(values))


def accelerator(*values):
    """The device other than the CPU that a tensor among ``values`` lives on; None when there is none.

    Where a branch's or a loop's data lives on a GPU, the tensors the runtime makes for it (flags,
    counters, step indices) live there too, as a CPU 0-d tensor meeting GPU data gives a GPU result
    eagerly: ``cond``, ``scan`` and ``while_loop`` take each value on one device on every path.
    """
    for leaf in pytree.tree_leaves(values):
        if isinstance(leaf, torch.Tensor) and leaf.device.type != "cpu":
            return leaf.device
    return None
