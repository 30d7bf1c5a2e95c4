"""Loops that become ``scan`` / ``while_loop`` only when the trip count is symbolic.

    acc = _ub.for_range(x.shape[0], loop_body_1, reads=(x,), rows=(z,), carry=(acc,))
    n, acc = _ub.while_stmt(loop_cond_2, loop_body_2, (n, acc))

The body keeps the user's statements, in-place updates included: ``mutated`` names the
carried values the body may change in place. Eagerly they change as in the original loop;
under ``scan``/``while_loop`` (which forbid that) each step changes a clone, and the final
value is copied back into the original tensor, so its aliases see it. Under ``scan`` the
body receives, for each tensor it reads as ``x[i]``, a view whose ``[i]`` is the current
slice, and for each tensor it fills as ``z[i] = v``, a sink that keeps ``v``; the stacked
rows are written into ``z`` afterwards.
"""

from __future__ import annotations

import torch
from torch.utils import _pytree as pytree

from ._tracing import fresh_outputs, is_symbolic, tracing


class _Row:
    """``x`` inside a scanned body: ``x[i]`` is the slice of the current step."""

    def __init__(self, value):
        self.value = value

    def __getitem__(self, index):
        return self.value


class _Sink:
    """``z`` inside a scanned body: ``z[i] = v`` keeps ``v`` as this step's row."""

    def __init__(self):
        self.value = None

    def __setitem__(self, index, value):
        self.value = value


def _as_tuple(out, n: int) -> tuple:
    if n == 0:
        return ()
    return (out,) if n == 1 else tuple(out)


def _from_tuple(state: tuple):
    if not state:
        return None
    return state[0] if len(state) == 1 else state


def _symbolic_length(n) -> bool:
    if not tracing():
        return False
    return isinstance(n, torch.SymInt) or torch.compiler.is_dynamo_compiling()


def _fresh_carry(state, mutated):
    """The carried values a traced step may change in place, cloned (loop ops forbid input mutation)."""
    return tuple(v.clone() if k in mutated else v for k, v in enumerate(state))


def _write_back(carry, final, mutated, kept) -> tuple:
    """Copy what the loop left in in-place-changed carries into the originals (their aliases see it).

    The carries in ``kept`` were only ever changed in place: they come back as the originals.
    """
    final = list(final)
    for k in mutated:
        if isinstance(carry[k], torch.Tensor):
            carry[k].copy_(final[k])
            if k in kept:
                final[k] = carry[k]
    return tuple(final)


def for_range(n, body, reads=(), rows=(), carry=(), mutated=(), kept=()):
    """``for i in range(n): body`` -> ``scan`` over ``i`` when ``n`` is a symbolic size."""
    tensors = all(isinstance(t, torch.Tensor) for t in (*reads, *rows, *pytree.tree_leaves(carry)))
    if not (tensors and _symbolic_length(n)):
        state = tuple(carry)
        for i in range(n):
            state = _as_tuple(body(i, *reads, *rows, *state), len(carry))
        return _from_tuple(state)
    from torch._higher_order_ops.scan import scan

    def step(state, xs):
        index, *slices = xs
        sinks = [_Sink() for _ in rows]
        own = _fresh_carry(state[: len(carry)], mutated)
        out = _as_tuple(body(index, *(_Row(s) for s in slices), *sinks, *own), len(carry))
        ys = tuple(s.value for s in sinks)
        out = fresh_outputs(out, (*state, *slices)) or (state[0] + 0,)  # scan needs a carry: a dummy one
        return out, fresh_outputs(ys, (*state, *slices, *out))

    device = next((t.device for t in (*reads, *rows)), None)
    xs = (torch.arange(n, device=device), *(t[:n] for t in reads))
    state, ys = scan(step, tuple(carry) or (torch.zeros((), device=device),), xs)
    for target, stacked in zip(rows, ys):
        target[: stacked.shape[0]] = stacked
    return _from_tuple(_write_back(carry, tuple(state)[: len(carry)], mutated, kept))


def for_each(iterable, body, carry=(), mutated=(), kept=()):
    """``for row in x: body`` -> ``scan`` over the first dimension of a tensor of symbolic length."""
    symbolic = isinstance(iterable, torch.Tensor) and _symbolic_length(iterable.shape[0])
    if not symbolic or not all(isinstance(t, torch.Tensor) for t in pytree.tree_leaves(carry)):
        state = tuple(carry)
        for row in iterable:
            state = _as_tuple(body(row, *state), len(carry))
        return _from_tuple(state)
    from torch._higher_order_ops.scan import scan

    def step(state, row):
        out = _as_tuple(body(row, *_fresh_carry(state[: len(carry)], mutated)), len(carry))
        return fresh_outputs(out, (*state, row)) or (state[0] + 0,), ()

    state, _ = scan(step, tuple(carry) or (torch.zeros((), device=iterable.device),), iterable)
    return _from_tuple(_write_back(carry, tuple(state)[: len(carry)], mutated, kept))


def while_stmt(cond, body, carry=(), mutated=(), kept=()):
    """``while cond: body`` -> ``while_loop`` once the condition is a symbolic value."""
    state = tuple(carry)
    while True:
        pred = cond(*state)
        if is_symbolic(pred):
            break
        if not pred:
            return _from_tuple(state)
        state = _as_tuple(body(*state), len(carry))
    from torch._higher_order_ops.while_loop import while_loop

    def test(*values):
        p = cond(*values)
        return p if not isinstance(p, torch.Tensor) or p.dtype == torch.bool else p != 0

    def step(*values):
        return fresh_outputs(_as_tuple(body(*_fresh_carry(values, mutated)), len(carry)), values)

    return _from_tuple(_write_back(state, tuple(while_loop(test, step, state)), mutated, kept))
