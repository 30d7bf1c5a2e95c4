"""An item of a list, tuple, dict or module list chosen by an index that is data.

    out = self.heads[int(task)](h)   ->   out = _ub.select(self.heads, _ub.int_(task), lambda item: item(h))
    s = scales[int(t)]               ->   s = _ub.select(scales, _ub.int_(t))
    best = max(xs, key=score)        ->   best = _ub.max_by(score, xs)

Eagerly (or for a Python index) ``container[index]``, then ``use`` of it: exactly the
original. Under export with a symbolic index the container's items are known and few: one
``torch.cond`` per item on ``index == key``, each side running ``use`` on its item (a chain,
the last item the remaining side), after a check that the index is a key (Python raises
otherwise). Items that are numbers give the chosen number as a 0-d tensor; items that are
tensors of one shape, with no ``use``, are stacked and indexed (no cond at all). A tensor
container is indexed by the tensor itself, as Python does (a 0-d index by ``index_select``).

``max``/``min``/``sorted`` with a ``key`` compare the keys in Python; keys that are data
(``key=lambda t: t.sum()``) are stacked instead, and the items (tensors of one shape) taken by
``argmax``/``argmin``/a stable ``argsort``: the first of equal maxima or minima, and equal keys
in their order, as Python gives them.
"""

from __future__ import annotations

import numbers

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

from ._tracing import fail, is_symbolic, origin_of_caller
from .checks import check
from .control_flow import _cond_exp

# the operators rewritten code calls as ``_ub.<name>``
__all__ = ["max_by", "min_by", "select", "sorted_by"]


def select(container, index, use=None):
    """``use(container[index])`` (``container[index]`` without ``use``); a chain of conds over the
    items when ``index`` is symbolic."""
    if isinstance(container, torch.Tensor) and _row_index(index):
        item = _at(container, torch.where(index < 0, index + container.shape[0], index).reshape(()))
        return item if use is None else use(item)
    if isinstance(container, torch.Tensor) or not _symbolic(index):
        item = container[index]
        return item if use is None else use(item)
    keys = _keys(container)
    if keys is None:
        fail(
            f"{origin_of_caller(1)}: an item chosen by data from a {type(container).__name__}, whose items "
            "cannot be listed (a list, tuple, dict or module list can)",
            "subscript",
        )
    if not keys:
        fail(f"{origin_of_caller(1)}: an item chosen by data from an empty {type(container).__name__}", "subscript")
    index = _as_tensor(index)
    check(_is_key(index, keys, container), f"{origin_of_caller(1)}: index out of range")
    items = [container[k] for k in keys]
    if use is None:
        if all(isinstance(v, numbers.Number) for v in items):
            return _at(torch.tensor(items), _position(index, keys, container))
        if _one_shape(items):
            return _at(torch.stack(items), _position(index, keys, container))
    use = (lambda v: v) if use is None else use
    return _chain(index, keys, items, use, not isinstance(container, dict), origin_of_caller(1))


def _row_index(index) -> bool:
    """A 0-d integer tensor while tracing: Python's ``t[index]`` would ask for its value."""
    return (
        is_symbolic(index)
        and isinstance(index, torch.Tensor)
        and index.dim() == 0
        and not index.is_floating_point()
        and index.dtype != torch.bool
    )


def _at(stacked: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
    """``stacked[position]`` for a 0-d index tensor (a Python subscript would want its value)."""
    return stacked.index_select(0, position.reshape(1)).squeeze(0)


def _one_shape(items) -> bool:
    """Tensors all of one shape, known without a guard (sizes may be symbolic)."""
    if not all(isinstance(v, torch.Tensor) for v in items):
        return False
    first = items[0].shape
    return all(
        len(v.shape) == len(first) and all(statically_known_true(a == b) for a, b in zip(v.shape, first)) for v in items
    )


def _symbolic(index) -> bool:
    return is_symbolic(index) or isinstance(index, (torch.SymInt, torch.SymFloat))


def _keys(container) -> list | None:
    if isinstance(container, dict):
        return list(container)
    if isinstance(container, (list, tuple, torch.nn.ModuleList, torch.nn.ParameterList, torch.nn.Sequential)):
        return list(range(len(container)))
    return None


def _as_tensor(index) -> torch.Tensor:
    if isinstance(index, torch.Tensor):
        return index.reshape(())
    return torch.scalar_tensor(index, dtype=torch.int64)


def _is_key(index, keys, container) -> torch.Tensor:
    if isinstance(container, dict):
        return torch.stack([index == k for k in keys]).any()
    n = len(keys)
    return (index >= -n) & (index < n)  # (Python's negative indices count from the end)


def _position(index, keys, container) -> torch.Tensor:
    """The item's position in ``keys`` as a 0-d tensor (a negative index counted from the end)."""
    if isinstance(container, dict):
        return torch.stack([index == k for k in keys]).to(torch.int64).argmax()
    return torch.where(index < 0, index + len(keys), index)


def _chain(index, keys, items, use, sequence: bool, origin: str):
    """``use(items[j])`` for the key ``index`` equals, as nested conds (the last key the remaining side)."""
    if len(keys) == 1:
        return use(items[0])
    pred = index == keys[0]
    if sequence:  # (the same item by its negative index)
        pred = pred | (index == keys[0] - len(keys))

    def first():
        return use(items[0])

    def rest():
        return _chain(index, keys[1:], items[1:], use, sequence, origin)

    return _cond_exp(pred, first, rest, origin)


def max_by(key, *items):
    """``max(*items, key=key)``; by the keys' ``argmax`` when they are data."""
    return _by(max, key, items, lambda keys: keys.argmax(), origin_of_caller(1))


def min_by(key, *items):
    """``min(*items, key=key)``; by the keys' ``argmin`` when they are data."""
    return _by(min, key, items, lambda keys: keys.argmin(), origin_of_caller(1))


def sorted_by(key, items, reverse=False):
    """``sorted(items, key=key, reverse=reverse)``; by a stable ``argsort`` of the keys when they are data."""
    items = list(items)
    keys = [key(v) for v in items]
    stacked = _stacked(items, keys, origin_of_caller(1))
    if stacked is None:
        return [v for _, v in sorted(zip(keys, items), key=lambda pair: pair[0], reverse=reverse)]
    values, scores = stacked
    return list(values[torch.argsort(scores, stable=True, descending=reverse)].unbind(0))


def _by(builtin, key, items, position, where: str):
    """``builtin(*items, key=key)``, or the item at ``position(stacked keys)`` when the keys are data."""
    items = list(items[0]) if len(items) == 1 else list(items)
    keys = [key(v) for v in items]
    stacked = _stacked(items, keys, where)
    if stacked is None:
        return builtin(zip(keys, items), key=lambda pair: pair[0])[1]
    values, scores = stacked
    return _at(values, position(scores))


def _stacked(items, keys, where: str):
    """(items stacked, keys stacked) when a key is data; None when Python compares them (eagerly, or
    keys that are Python values). Items that are not tensors of one shape cannot be chosen by data."""
    # (dynamo shows a number from .item() as a float, and sorts only constants: there tensors go by their keys)
    dynamo = torch.compiler.is_compiling() and all(isinstance(v, torch.Tensor) for v in items)
    if not dynamo and not any(_symbolic(k) for k in keys):
        return None
    if not all(isinstance(v, torch.Tensor) for v in items):
        fail(
            f"{where}: items compared by keys that are data must be tensors (of one shape: stacked, then "
            "indexed by the keys' argmax/argmin/argsort)",
            "key",
        )
    return torch.stack(items), torch.stack([_key_tensor(k) for k in keys])


def _key_tensor(key) -> torch.Tensor:
    """A key as a 0-d tensor: a number from ``.item()`` as a tensor filled with it (``as_tensor``
    would ask for its value), in Python's precision."""
    if isinstance(key, (torch.SymFloat, float)):
        return torch.full((), key, dtype=torch.float64)
    if isinstance(key, (torch.SymInt, int)):
        return torch.full((), key, dtype=torch.int64)
    return torch.as_tensor(key).reshape(())
