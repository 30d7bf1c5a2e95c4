"""Loops that become ``scan`` / ``while_loop`` only when the trip count is symbolic.

    acc = _ub.for_range(x.shape[0], loop_body_1, carry=(acc, out), mutated=(1,), kept=(1,))
    acc = _ub.for_range((1, x.shape[0], 2), loop_body_2, carry=(acc,))
    h = _ub.for_each(x, loop_body_3, carry=(h,), enumerated=0)
    n, acc = _ub.while_stmt(loop_cond_4, loop_body_4, (n, acc))

Eagerly (or with a plain Python length) each is the original Python loop, run by the same
body function. Under export with a symbolic length:

- ``range(n)`` and ``for row in x`` become a ``scan``; the index, scanned as
  ``torch.arange(n)``, reaches the body as a 0-d integer tensor, so ``(i + 1) * x[i]``,
  ``i % 2`` are tensor arithmetic there, and the compiler wrote subscripts holding it as
  ``_ub.at(x)[i - 1]`` (below);
- ``range(a, b, step)`` becomes a ``while_loop`` over a 0-d tensor counter (a scan over
  ``arange(a, b)`` would pin its derived length away from 0 and 1);
- ``mutated`` names the carried values the body changes in place (``out[i] = v``,
  ``acc += v``): each step changes a clone (loop ops forbid input mutation) and the final
  value is copied back into the original tensor, so its aliases see it; ``kept`` those never
  rebound, which come back as the original objects.

``at(t)[i - 1]``, ``at(out)[i, :] = v``: a subscript with the loop index. Measured (torch
2.13): the index as a SymInt (``.item()``) fails as soon as the step also reads a parameter
("u4 is not tracked with proxy", "Could not guard on ... <= -u4 - 1") and inside a tuple
subscript ("got SymInt"); a 0-d tensor in a Python subscript is turned into an int
("Could not extract specialized integer"). ``index_select`` reads and ``index_put_``
writes with the 0-d tensor work in both export modes; eagerly ``at(t)`` is ``t`` itself.
"""

from __future__ import annotations

import builtins

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true
from torch.utils import _pytree as pytree

from ._tracing import (
    copy_into,
    fail,
    fresh_outputs,
    is_symbolic,
    logging_dropped,
    origin_of_caller,
    settled,
    tracing,
    truth,
    truth_tensor,
)
from .checks import check
from .jumps import accelerator, tensorised
from .settings import current
from .unbound_names import Unbound

# the operators rewritten code calls as ``_ub.<name>``
__all__ = [
    "at",
    "cat",
    "for_each",
    "for_range",
    "last_index",
    "last_item",
    "length",
    "row",
    "stack",
    "sum_",
    "unconverted_loop",
    "while_stmt",
    "write_row",
]

# (torch_export_rewrite(target=..., max_loop_iterations=..., batch_loops=...): settings.target,
# max_iterations, batch)
TARGETS = ("executorch",)


def _origin() -> str:
    """``file:line`` of the user's loop behind the first frame outside this module (the rewritten code)."""
    import sys

    from . import source_map

    if torch.compiler.is_dynamo_compiling():
        return origin_of_caller(0)  # frames are not inspectable under dynamo
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    return source_map.describe(frame.f_code.co_filename, frame.f_lineno) if frame else "a loop"


def _dynamic(values) -> bool:
    return any(not isinstance(d, int) for v in values if isinstance(v, torch.Tensor) for d in v.shape)


def _for_executorch(carry, where, construct: str = "for") -> None:
    """Under ``target="executorch"``: refuse a loop ExecuTorch would run wrongly, at export.

    Measured (ExecuTorch 1.4.1, portable runtime): a scan whose carried value has a dynamic
    shape builds, then fails when run on another size than the example's
    (``op_copy.cpp: tensor_is_broadcastable_to``); carries of fixed shape run right.
    """
    if current().target == "executorch" and _dynamic(carry):
        fail(
            f"{where() if callable(where) else where}: this loop carries a value whose shape is dynamic; ExecuTorch "
            "1.4 runs such a scan wrongly on other sizes (copy_ fails in op_copy.cpp). Carry values of fixed "
            "size (e.g. write rows as out[i] = v, which becomes a per-step output), or export for another target",
            construct,
        )


def _while(test, step, state, where, bound=None) -> tuple:
    """``while_loop(test, step, state)``; under ``target="executorch"``, which has no while_loop, a
    scan of ``bound`` steps (the most the loop takes, when known; else ``max_loop_iterations``) whose
    step runs the body only while ``test`` holds (a ``cond``), or an UnbranchError at export when no
    bound was given."""
    state = _bound_markers(state, None, "while")
    bound = current().max_iterations if bound is None else bound
    if current().target != "executorch":
        from torch._higher_order_ops.while_loop import while_loop

        pairs = _equal_sizes([v.shape if isinstance(v, torch.Tensor) else () for v in state])

        def told(*values):
            _told(pairs, values)
            return step(*values)

        with logging_dropped():
            return tuple(while_loop(test, told if pairs else step, state))
    place = where()
    if bound is None:
        fail(
            f"{place}: ExecuTorch has no while_loop ('Unsupported control flow operator: while_loop'), and this "
            "loop's trip count is no size a scan can take: give torch_export_rewrite(..., "
            "max_loop_iterations=N) to run it as a scan of at most N steps",
            "while",
        )
    _for_executorch(state, place, "while")
    device = accelerator(state)
    state = tuple(_counter(v, device) for v in state)

    def scan_step(values, _):
        go = truth_tensor(test(*values))
        # (a value the body gives back unchanged is copied here: torch's own copy of it took another input's)
        new = torch.cond(
            go, lambda *v: fresh_outputs(tuple(step(*v)), v), lambda *v: tuple(t.clone() for t in v), tuple(values)
        )
        return tuple(new), ()

    final, _ = _scan(scan_step, state, torch.arange(bound, device=device), device, False)
    # ExecuTorch removes runtime checks (RemoveGraphAssertsPass): the other backends make this one
    message = f"{place}: this loop needs more than max_loop_iterations={bound} steps"
    check(torch.logical_not(truth_tensor(test(*final))), message)
    return final


def _equal_sizes(shapes) -> list[tuple]:
    """Pairs ((k, d), (j, e)) of symbolic sizes among ``shapes`` that are one size outside a loop op.

    Measured (torch 2.13, non-strict export): a loop op's step sees each input with sizes of its own,
    so a cond in it choosing between a scanned row and a carried value of the same size gives an
    unbacked size, which the loop op then refuses as a carry of another shape. Told inside the step
    (``torch._check``, true there as it is outside), the cond keeps the size."""
    if torch.compiler.is_dynamo_compiling():
        return []  # (dynamo traces the step with the sizes it has)
    first: dict = {}
    pairs = []
    for k, shape in enumerate(shapes):
        for d, size in enumerate(shape):
            if isinstance(size, torch.SymInt):
                key = size.node.expr
                if key in first:
                    pairs.append((first[key], (k, d)))
                else:
                    first[key] = (k, d)
    return pairs


def _told(pairs, tensors) -> None:
    for (k, d), (j, e) in pairs:
        torch._check(tensors[k].shape[d] == tensors[j].shape[e])


def _as_tuple(out, n: int) -> tuple:
    if n == 0:
        return ()
    return (out,) if n == 1 else tuple(out)


def _from_tuple(state: tuple):
    if not state:
        return None
    return state[0] if len(state) == 1 else state


def _symbolic(*values) -> bool:
    if not tracing():
        return False
    return torch.compiler.is_dynamo_compiling() or any(isinstance(v, (torch.SymInt, torch.Tensor)) for v in values)


def _data_dependent(n) -> bool:
    """A length known only at run time (``nonzero()``, ``unique()``): no loop op can take it."""
    if not isinstance(n, torch.SymInt) or torch.compiler.is_dynamo_compiling():
        return False
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    return bool(free_unbacked_symbols(n))


def _bound_markers(values, item=None, construct: str = "for") -> tuple:
    """``values`` with each name no step has bound yet (first_bound's marker) as zeros of its kind,
    from its ``like`` of the loop's first ``item`` (or a function giving it), evaluated off the
    record (``_shaped_like``); a marker without one (or with no ``item`` to give) fails, saying why."""
    values = tuple(values)
    if not any(isinstance(v, Unbound) for v in values):
        return values
    names = [v.name for v in values if isinstance(v, Unbound) and (v.like is None or item is None)]
    if names:
        fail(
            f"{_origin()}: '{names[0]}' is first bound inside this loop, which runs as one loop operator here (its "
            "trip count is symbolic or decided by data): the operator needs the value's shape before the loop. "
            f"Bind '{names[0]}' before the loop to a value of its shape",
            construct,
        )
    return tuple(_shaped_like(v.like, item) if isinstance(v, Unbound) else v for v in values)


def _shaped_like(like, item):
    """Zeros of the kind ``like(*item)`` gives, computed off the record (non-strict export's fake tensors:
    only the shape, dtype and device are read, so the program reads no row an empty loop lacks)."""
    from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing

    if torch.compiler.is_dynamo_compiling():  # (dynamo records the call; only its kind is used, the rest is dead)
        value = like(*(item() if callable(item) else item))
    else:
        with disable_proxy_modes_tracing(), torch._C.DisableTorchFunction():
            value = like(*(item() if callable(item) else item))
    if not isinstance(value, torch.Tensor):
        return value
    return torch.zeros(value.shape, dtype=value.dtype, device=value.device)


def _first_items(sources, enumerated=None) -> tuple:
    """What ``like`` takes for a loop over the rows of ``sources``: the first row of each (and the index)."""
    rows = tuple(t[0] for t in sources)
    return rows if enumerated is None else (enumerated, *rows)


def _all_tensors(values) -> bool:
    return all(isinstance(t, torch.Tensor) for t in pytree.tree_leaves(tuple(values)))


def _fresh_carry(state, mutated):
    """The carried values a traced step may change in place, cloned (loop ops forbid input mutation);
    a dict or list a step updates (``stats["sum"] = ...``) is a new one holding clones of its tensors."""
    return tuple(pytree.tree_map_only(torch.Tensor, torch.clone, v) if k in mutated else v for k, v in enumerate(state))


def _write_back(carry, final, mutated, kept) -> tuple:
    """Copy what the loop left in in-place-changed carries into the originals (their aliases see it).

    The carries in ``kept`` were only ever changed in place: they come back as the originals. A
    dict or list the loop updated gets the entries the loop left (as ``d[k] = v`` rebinds them).
    """
    final = list(final)
    for k in mutated:
        if isinstance(carry[k], torch.Tensor):
            copy_into(carry[k], final[k])
        elif isinstance(carry[k], dict):
            carry[k].clear()
            carry[k].update(final[k])
        elif isinstance(carry[k], list):
            carry[k][:] = list(final[k])
        else:
            continue
        if k in kept:
            final[k] = carry[k]
    return tuple(final)


def _refuse_data_dependent(construct: str):
    fail(
        f"{origin_of_caller(2)}: this {construct} loops over a sequence whose length depends on tensor data "
        "(nonzero(), unique(), a mask...): torch.export has no loop over such a length. Loop over a bound "
        "known from shapes (e.g. every expert) and mask the steps that do not apply",
        construct,
    )


def _scan(step, carry, xs, device, outputs: bool):
    """(final carry, stacked per-step outputs); ``outputs``: does ``step`` give any?"""
    from torch._higher_order_ops.scan import scan

    carry = _bound_markers(carry)
    init = tuple(carry) or (torch.zeros((), device=device),)  # scan needs a carry: a dummy one
    step, init, narrow = _float_carry(step, init)

    pairs = _equal_sizes([*(t.shape for t in pytree.tree_leaves(init)), *(x.shape[1:] for x in pytree.tree_leaves(xs))])

    def told(state, x):
        _told(pairs, [*pytree.tree_leaves(state), *pytree.tree_leaves(x)])
        return step(state, x)

    def with_output(state, x):
        # a scan without per-step outputs does not compile in AOTInductor (torch 2.13: "getitem is
        # not an OpOverload"): one 0-d output per step, dropped after the scan
        return told(state, x)[0], pytree.tree_leaves(state)[0].new_zeros(())

    with logging_dropped():
        state, ys = scan(told if outputs else with_output, init, xs)
    return tuple(narrow(tuple(state)))[: len(carry)], tuple(ys) if outputs else ()


def _vectorised(step, xs) -> tuple | None:
    """The outputs of a loop whose steps carry nothing from one to the next, stacked, computed at
    once by ``torch.vmap`` over the steps' inputs: no loop is left in the program. None where vmap
    cannot run the step (an op without a batching rule, ``.item()``, random numbers, a check), found
    by a first try that records nothing (a failed vmap leaves its nodes in the graph), under
    dynamo (strict export: a module's parameter read inside vmap fails, torch 2.13), and with
    ``batch_loops=False`` (all steps at once take all their memory at once); a scan then runs it.
    """
    if not current().batch or torch.compiler.is_dynamo_compiling():
        return None
    from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing

    try:  # (export records vmap's own steps through a torch-function mode, its ops through a dispatch mode)
        with disable_proxy_modes_tracing(), torch._C.DisableTorchFunction():
            torch.vmap(step)(*xs)
    except Exception:
        return None
    return tuple(fresh_outputs(torch.vmap(step)(*xs), xs))


def _float_carry(step, init):
    """(step, init, narrow) carrying integer and bool tensors as float64.

    torch 2.13's scan with an integer carry fails to export while grad is enabled, and a program
    exported under ``no_grad`` fails the same way when run with grad enabled ("outs_to_grad
    length (2) != tangents length (3)"). The step still sees and gives the original dtypes;
    float64 holds every integer up to 2**53 exactly.
    """
    leaves = pytree.tree_leaves(init)
    ints = {
        k: t.dtype
        for k, t in enumerate(leaves)
        if isinstance(t, torch.Tensor) and not (t.is_floating_point() or t.is_complex())
    }
    if not ints:
        return step, init, lambda state: state

    def cast(tree, dtype_of):
        values, spec = pytree.tree_flatten(tree)
        return pytree.tree_unflatten([v.to(dtype_of(k)) if k in ints else v for k, v in enumerate(values)], spec)

    def widen(tree):
        return cast(tree, lambda k: torch.float64)

    def narrow(tree):
        return cast(tree, ints.get)

    def step64(state, x):
        new, ys = step(narrow(state), x)
        return widen(new), ys

    return step64, widen(init), narrow


class _Row:
    """What a scan step passes for a buffer the body writes one row of (``rows``); the body's
    ``out = write_row(out, i, v)`` gives back another ``_Row`` holding ``v``, which the step
    returns as a per-step output instead of a copied buffer. (Immutable: dynamo loses an
    attribute set on a Python object after a cond nested in the scan step, measured.)"""

    def __init__(self, like: tuple, index, value=None):
        (self.shape, self.dtype, self.device), self.index, self.value = like, index, value

    def written(self, index, value) -> _Row:
        if index is not self.index or self.value is not None:
            fail("a loop body wrote its row buffer other than once at the loop index", "for")
        if not (isinstance(value, torch.Tensor) and value.dtype == self.dtype and value.device == self.device):
            value = torch.as_tensor(value, dtype=self.dtype, device=self.device)
        while value.dim() > len(self.shape) and value.shape[0] == 1:  # out[i] = v[None] drops it, as setitem does
            value = value[0]
        # a value of fewer dimensions than a row (out[i] = 0.5) gets size-1 ones: the rows' one copy into
        # the buffer broadcasts them as the store does (no size of the row is read in the step: under
        # dynamo a symbolic one from outside the step fails the scan, "LazyProxy")
        value = value.reshape((1,) * (len(self.shape) - value.dim()) + tuple(value.shape))
        return _Row((self.shape, self.dtype, self.device), index, value)

    def row(self) -> torch.Tensor:
        if self.value is None:
            fail("a loop body did not write its row at this step", "for")
        return self.value


def write_row(buffer, index, value):
    """``buffer[index] = value`` as a statement that gives the buffer back: the row store of a
    loop listed in ``rows`` (``out = write_row(out, i, v)``). Eagerly it is that store, on the
    buffer itself; in a scan step ``buffer`` is a ``_Row`` and the row is returned in a new one."""
    if isinstance(buffer, _Row):
        return buffer.written(index, value)
    at(buffer)[index] = value
    return buffer


def _numbers(values, decided: bool = False) -> tuple:
    """Positions of the Python numbers among ``values`` (a counter, a step size the loop changes): a
    loop op carries them as 0-d tensors (``tensorised``).

    Under dynamo a count that is a size shows as an int, as a static one does, and a loop whose carries
    are all tensors is a loop op either way: there only floats join them (an int may index a list in
    the body, which a Python loop over a static count does and a loop op cannot), unless data already
    ``decided`` the loop (a break's flag from data: a loop op or a cond a step carries them)."""
    kinds = (bool, int, float)
    if torch.compiler.is_dynamo_compiling() and not decided:
        kinds = (float,)
    return tuple(k for k, v in enumerate(values) if type(v) in kinds)


def _numbers_again(final: tuple, initial) -> tuple:
    """``final`` with the ints and floats that were Python numbers before the loop op as numbers again
    (``.item()``: symbolic while torch traces), as Python's loop leaves them; bools stay tensors,
    for the converted ``if`` that tests them. Not under dynamo (strict export): measured (torch 2.13),
    dynamo folds ``.item()`` of a while_loop's output carrying a number into the constant one traced
    step gave (``t + 0.25`` -> ``0.25``): a wrong program; the tensor itself holds the right value."""
    if torch.compiler.is_dynamo_compiling():
        return tuple(final)
    return tuple(
        v.item() if type(b) in (int, float) and isinstance(v, torch.Tensor) and v.dim() == 0 else v
        for v, b in zip(final, initial)
    ) + tuple(final[len(initial) :])


def _with_flags(carry, body, literals, count: int, device):
    """The carry and body a loop operator runs: the user's bool/int flags at ``literals`` as tensors
    (``found = True`` under a tensor condition in the body), on the way in and out of every step,
    on the loop's ``device`` (``jumps.accelerator``) with the 0-d CPU tensors among them."""
    if not literals and device is None:
        return tuple(carry), body

    def step(*args):
        return _from_tuple(tensorised(_as_tuple(body(*args), count), literals, device))

    return tensorised(tuple(carry), literals, device), step


def for_range(bounds, body, carry=(), mutated=(), kept=(), appends=(), rows=(), literals=(), reads=(), stops=()):
    """``for i in range(*bounds): body`` -> ``scan``/``while_loop`` when a bound is a symbolic size.

    ``appends``: the lists the body appends one value to at each step (``outs.append(v)``); the
    body returns those values after the carried ones. Eagerly they are appended; under a scan
    they come back stacked (``Stacked``), for ``_ub.stack``/``_ub.cat`` after the loop.
    ``rows``: the carries (among ``kept``) the body only writes, once per step at the index
    (``out[i] = v``). Eagerly the body writes them; under a scan the step gets a ``_Row`` in
    their place, its rows come back stacked and are copied into the buffer once, after the loop.
    ``literals``: the carries that are the user's bool or int flags (tensors in a scan or while_loop).
    ``stops``: as for ``for_each``.
    ``reads``: tensors the body reads whole rows of at the index and never changes (``x[i]``,
    written ``_ub.row(x_row, x, i)``); the body takes one argument for each after the index:
    ``None`` (the body reads ``x[i]`` itself), except under a scan, which slices each with as many
    rows as steps for its steps. No indexing op per step, and none whose gradient saves a size
    (strict export with grad enabled failed on one: "'SymInt' object has no attribute 'unsqueeze'").
    """
    start, stop, step = _range_args(bounds)
    n, m = len(carry), len(appends)
    device = None  # (eager loops take the plain path: the data's device only matters to the operators)
    initial = tuple(carry)
    # a Python loop takes the flags as the steps give them (one Python decided is no tensor: see jumps.flag)
    plain = (initial, body)
    if _symbolic(start, stop, step):
        device = accelerator(carry, reads)
        literals = (*literals, *_numbers(carry))
        carry, body = _with_flags(carry, body, literals, n + m, device)
    forwards = _is(start, 0) and _is(step, 1)
    # ``reversed(range(n))``, ``range(n - 1, -1, -1)``: the same steps as range(n), taken backwards
    backwards = _is(stop, -1) and _is(step, -1)
    steps = start + 1 if backwards else stop
    scannable = (forwards or backwards) and not isinstance(steps, torch.Tensor) and not _data_dependent(steps)
    if not torch.compiler.is_dynamo_compiling() and _symbolic(start, stop, step):
        carry = _bound_markers(carry, (start,))  # (a Python loop over a symbolic count would fix it)
    if not (_symbolic(start, stop, step) and _all_tensors(carry)) or (m and not scannable):
        state, step_body = plain[0], _unread(plain[1], len(reads))
        steps = range(start, stop, step)
        looped = False  # (a while_loop for the remaining steps was tried)
        for i in steps:
            state = _append(_as_tuple(step_body(i, *state), n + m), n, appends)
            flags = [settled(state[k]) for k in stops]
            if any(is_symbolic(f) for f in flags):
                # a break decided by data: the remaining steps are one while_loop that tests the flags,
                # not one cond each (where it cannot carry the state, each step's guard is one)
                rest = range(i + step, stop, step)
                device = accelerator(state, reads)
                numbers = (*literals, *_numbers(state[:n], decided=True))
                flagged, flagged_body = _with_flags(state, step_body, numbers, n, device)
                if len(rest) and not m and _all_tensors(flagged) and not looped:
                    looped = True
                    bounds = (rest.start, rest.stop, step)
                    carried = (flagged_body, list(flagged), mutated, kept, device)
                    try:
                        final = _counted_with_bounds(*bounds, *carried, stops=stops, bound=len(rest))
                        return _from_tuple(_numbers_again(_as_tuple(final, n), state[:n]))
                    except Exception as e:
                        if not _per_step_instead(e):
                            raise
                continue
            if any(flags):
                break  # (the remaining steps would do nothing: see for_each)
        return _from_tuple((*state, *appends))
    if scannable:
        _for_executorch(carry, _origin)
        # rows of a symbolic size stay in the carried buffer under non-strict export: dynamo takes no
        # SymInt into the step as a constant ("Cannot construct ConstantVariable"); under strict export
        # dynamo shows it as an int, and no row size is read in the step (see _Row.written)
        rows = tuple(k for k in rows if carry[k].dim() > 0 and all(isinstance(d, int) for d in carry[k].shape[1:]))
        loose = [k for k in range(n) if k not in rows]  # what the scan carries
        # (the buffers' metadata read here: read in the step, they would become inputs of the scan)
        like = {k: (carry[k].shape[1:], carry[k].dtype, carry[k].device) for k in rows}
        # the read tensors with a row per step: slices of the scan (the others are read in the step)
        sliced = [j for j, t in enumerate(reads) if isinstance(t, torch.Tensor) and _rows_of(t, steps)]

        def run_step(i, given, state):
            """(the loose carries after the step, its per-step outputs: rows written, values appended)."""
            chosen = dict(zip(sliced, given))
            written = {k: _Row(like[k], i) for k in rows}
            fresh = iter(_fresh_carry(state, [j for j, k in enumerate(loose) if k in mutated]))
            carried = (written[k] if k in written else next(fresh) for k in range(n))
            out = _as_tuple(body(i, *(chosen.get(j) for j in range(len(reads))), *carried), n + m)
            return tuple(out[k] for k in loose), (*(out[k].row() for k in rows), *out[n:])

        def scan_step(state, xs):
            new, per_step = run_step(xs[0], xs[1:], state[: len(loose)])
            return fresh_outputs(new, state) or (state[0] + 0,), fresh_outputs(per_step, (*state, *new))

        def each_step(i, *given):  # nothing carried from one step to the next (``loose`` is empty)
            return run_step(i, given, ())[1]

        # backwards, the steps take the rows flipped (torch's own reverse scan, which flips its
        # outputs back, does not compile in AOTInductor: "conflicting declaration", torch 2.13)
        in_order = (lambda t: t.flip(0)) if backwards else (lambda t: t)
        index = torch.arange(start, -1, -1, device=device) if backwards else torch.arange(steps, device=device)
        xs = [index, *(in_order(reads[j]) for j in sliced)]
        ys = _vectorised(each_step, xs) if not loose and (rows or m) else None
        if ys is None:
            final, ys = _scan(scan_step, [carry[k] for k in loose], xs, device, bool(rows) or m > 0)
        else:
            final = ()
        full = list(carry)
        for j, k in enumerate(loose):
            full[k] = final[j]
        for j, k in enumerate(rows):
            carry[k][:steps].copy_(in_order(ys[j]))  # one copy of the rows, not one of the buffer per step
        done = _numbers_again(_write_back(carry, full, [k for k in mutated if k not in rows], kept), initial)
        return _from_tuple((*done, *_stacked(appends, ys[len(rows) :])))
    # the stop goes in as a carried 0-d tensor. Closed over, a tensor stop (an enclosing loop's
    # index) is lifted under the same name as that index inside an enclosing cond or scan, and
    # dynamo's codegen then fails ("duplicate argument 'child_3' in function definition"); a
    # SymInt stop becomes an input of the while_loop that torch.compile's inductor cannot take
    # ("A subgraph argument other than striding has been modified", torch 2.13)
    final = _counted_with_bounds(start, stop, step, _unread(body, len(reads)), carry, mutated, kept, device)
    return _from_tuple(_numbers_again(_as_tuple(final, n), initial))


def _is(bound, value: int) -> bool:
    """Is ``bound`` the int ``value`` for every size, asking without a guard? (Under dynamo a SymInt,
    even one computed from data, shows as an int: ``==`` there would guard on it.)"""
    return isinstance(bound, int) and statically_known_true(bound == value)


def length(value):
    """``len(value)`` in the bounds of a ``for`` the compiler converted (``range(len(x))``): a tensor's
    length as the symbolic size it is while tracing. Python's ``len`` needs an int, which fixes the
    size to the example's under non-strict export; eagerly it is ``len(value)``."""
    if tracing() and isinstance(value, torch.Tensor) and value.dim() > 0:
        return value.shape[0]
    return len(value)


def _rows_of(t: torch.Tensor, stop) -> bool:
    """Does ``t`` have exactly ``stop`` rows, as far as the export knows (a scan's slices must)?"""
    return t.dim() > 0 and statically_known_true(t.shape[0] == stop)


def _unread(body, count: int):
    """The body of a loop with ``reads`` as the paths without rows call it: ``None`` for each row."""
    if not count:
        return body
    return lambda i, *state: body(i, *(None,) * count, *state)


def row(value, tensor, index):
    """``tensor[index]`` in a loop body with ``reads``: the row a scan step was given, else read here."""
    return at(tensor)[index] if value is None else value


def _counted_with_bounds(start, stop, step, body, carry, mutated, kept, device, stops=(), bound=None):
    """The while_loop of ``for_range``, the counter and the stop carried as 0-d tensors (see there).
    ``stops``: flags among the carry that end the loop once set (a break); ``bound``: the most steps
    it takes, known when the bounds are ints (ExecuTorch's masked scan then needs no
    ``max_loop_iterations``)."""

    n = len(carry)

    def test(k, last, *values):
        going = k < last if step > 0 else k > last
        for j in stops:
            going = torch.logical_and(going, torch.logical_not(truth_tensor(values[j])))
        return going

    def loop_step(k, last, *values):
        out = _as_tuple(body(k.clone(), *_fresh_carry(values, mutated)), n)
        return (k + step, last.clone(), *fresh_outputs(out, values))

    counter = start.clone() if isinstance(start, torch.Tensor) else _counter(start, device)
    last = stop.clone() if isinstance(stop, torch.Tensor) else _counter(stop, device)
    final = _while(test, loop_step, (counter, last, *carry), _origin, bound)[2:]
    return _from_tuple(_write_back(carry, final, mutated, kept))


def last_item(iterable, *names, enumerated=None, zipped=False, unbind=False):
    """The loop variables ``names`` after ``for_each`` ran (its forms): the last item, which the loop
    op does not leave behind. Unbound markers where the loop ran no step, as Python leaves them;
    while torch traces, a symbolic length is taken to be at least one (an empty one fails when
    the program runs, as reading the unbound name does)."""
    sources = tuple(iterable) if zipped else (iterable,)
    n = builtins.min(len(s) if not isinstance(s, torch.Tensor) else s.shape[0] for s in sources)
    if not _symbolic(n) and n == 0:
        found = tuple(Unbound(name) for name in names)
        return found[0] if len(found) == 1 else found
    items = tuple(s[n - 1] for s in sources)
    if enumerated is not None:
        items = (enumerated + n - 1, *items)
    return items[0] if len(items) == 1 else items


def last_index(bounds, name: str):
    """The index after ``for_range`` ran: the last of ``range(*bounds)``, unbound where it is empty
    (a symbolic count is taken to be at least one, as in :func:`last_item`)."""
    start, stop, step = _range_args(bounds)
    if not _symbolic(start, stop, step):
        steps = range(start, stop, step)
        return steps[-1] if len(steps) else Unbound(name)
    if isinstance(step, int) and step > 0:
        return start + ((stop - start - 1) // step) * step
    return start - ((start - stop - 1) // -step) * -step


def _per_step_instead(error: Exception) -> bool:
    """Did non-strict export's while_loop refuse the remaining steps of a static range, where one guard
    per step (a cond each, as without the loop op) can take them? Torch's refusals come before it
    records anything. Measured (torch 2.13): a cond in the step choosing between a row of a tensor
    the step reads and a carried row gives its output a size of its own, which while_loop refuses
    ("differ in shape: [u0] vs [s44]"); a step indexing a list of modules by the index needs an int,
    which the loop's 0-d counter gives only as a symbol no guard can read; a slice by a size from
    outside the step ("Cannot construct ConstantVariable" for a SymInt). Under strict export dynamo
    traces the loop itself, and the project's own refusals stand.
    """
    from ..errors import UnbranchError

    return not torch.compiler.is_dynamo_compiling() and not isinstance(error, UnbranchError)


def _append(out: tuple, n: int, appends) -> tuple:
    for target, value in zip(appends, out[n:]):
        target.append(value)
    return out[:n]


class Stacked:
    """A list the loop appended to, under a scan: what it held before, then one stacked tensor."""

    def __init__(self, before: list, rows: torch.Tensor):
        self.before, self.rows = list(before), rows

    def tensor(self) -> torch.Tensor:
        if not self.before:
            return self.rows
        return torch.cat([torch.stack(self.before), self.rows])


def _stacked(appends, ys) -> tuple:
    return tuple(Stacked(before, rows) for before, rows in zip(appends, ys))


def stack(tensors, dim=0):
    """``torch.stack(outs, dim)`` after a loop that appended to ``outs`` (a ``Stacked`` under a scan)."""
    if not isinstance(tensors, Stacked):
        return torch.stack(tensors, dim)
    return tensors.tensor().movedim(0, dim)


def sum_(items):
    """``sum(outs)`` after a loop that appended to ``outs``: the stacked rows summed under a scan."""
    if not isinstance(items, Stacked):
        return sum(items)
    return items.tensor().sum(0)


def cat(tensors, dim=0):
    """``torch.cat(outs, dim)`` after a loop that appended to ``outs`` (a ``Stacked`` under a scan)."""
    if not isinstance(tensors, Stacked):
        return torch.cat(tensors, dim)
    t = tensors.tensor()
    d = dim if dim >= 0 else dim + t.dim() - 1
    return t.movedim(0, d).flatten(d, d + 1)


def _range_args(bounds) -> tuple:
    args = bounds if isinstance(bounds, tuple) else (bounds,)
    if len(args) == 1:
        return 0, args[0], 1
    if len(args) == 2:
        return args[0], args[1], 1
    if isinstance(args[2], int) and not isinstance(args[2], bool) and args[2] == 0:
        raise ValueError("range() arg 3 must not be zero")
    return args


def for_each(
    iterable,
    body,
    carry=(),
    mutated=(),
    kept=(),
    enumerated=None,
    zipped=False,
    unbind=False,
    appends=(),
    literals=(),
    stops=(),
):
    """``for row in x: body`` -> ``scan`` over the first dimension of tensors of symbolic length.

    ``enumerated=start``: ``for i, row in enumerate(x, start)`` (the body takes ``i, row``);
    ``zipped``: ``for a, b in zip(x, y)`` (``iterable`` is the tuple of zipped values);
    ``unbind``: ``for row in x.unbind(0)`` (``iterable`` is ``x``, whose ``unbind(0)`` Python iterates);
    ``stops``: the carried flags of a ``break`` (or ``return``) guarding the whole body: the eager loop
    ends once one is set, as the original's break does (a generator is advanced no further).
    """
    sources = tuple(iterable) if zipped else (iterable,)
    lengths = [t.shape[0] for t in sources if isinstance(t, torch.Tensor) and t.dim() > 0]
    count, m = len(carry), len(appends)
    traced = len(lengths) == len(sources) and _symbolic(*lengths)
    initial = tuple(carry)
    plain = (initial, body)  # (what a Python loop takes: see for_range)
    if traced:
        carry = _bound_markers(carry, lambda: _first_items(sources, enumerated))  # (a Python loop would fix it)
        plain = (carry, body)
        # (a break's flag: the steps are a loop op, each with its cond on the flag, or a cond each)
        literals = (*literals, *_numbers(carry, decided=bool(stops)))
        carry, body = _with_flags(carry, body, literals, count + m, accelerator(carry, sources))
    traced = traced and _all_tensors(carry)
    if not traced:
        items = builtins.zip(*sources) if zipped else iterable.unbind(0) if unbind else iterable
        if enumerated is not None:
            items = ((i, *row) if zipped else (i, row) for i, row in builtins.enumerate(items, enumerated))
        state, body = plain
        for item in items:
            args = item if (zipped or enumerated is not None) else (item,)
            state = _append(_as_tuple(body(*args, *state), count + m), count, appends)
            flags = [settled(state[k]) for k in stops]
            if any(f is True if tracing() else f for f in flags):
                break  # (traced, a flag from data guards the remaining steps: they do nothing once it is set)
        return _from_tuple((*state, *appends))
    if any(_data_dependent(n) for n in lengths):
        _refuse_data_dependent("for loop")
    n = lengths[0]
    for other in lengths[1:]:
        n = torch.sym_min(n, other)
    xs = tuple(t[:n] for t in sources) if len(sources) > 1 else sources
    if enumerated is not None:
        xs = (torch.arange(n, device=sources[0].device), *xs)

    def arguments(rows) -> list:
        args = list(rows)
        if enumerated is not None:
            args[0] = rows[0] + enumerated
        return args

    if not count and m:  # steps that only append: batched, where vmap can run them (see _vectorised)
        ys = _vectorised(lambda *rows: _as_tuple(body(*arguments(rows)), m), xs)
        if ys is not None:
            return _from_tuple(_stacked(appends, ys))

    def step(state, rows):
        out = _as_tuple(body(*arguments(rows), *_fresh_carry(state[:count], mutated)), count + m)
        carried = fresh_outputs(out[:count], (*state, *rows)) or (state[0] + 0,)
        return carried, fresh_outputs(out[count:], (*state, *rows, *carried))

    _for_executorch(carry, _origin)
    final, ys = _scan(step, carry, xs, sources[0].device, m > 0)
    done = _numbers_again(_write_back(carry, final, mutated, kept), initial)
    return _from_tuple((*done, *_stacked(appends, ys)))


def unconverted_loop(iterable, why: str):
    """The iterable of a ``for`` unbranch left as Python (``why``): fails clearly on a data-dependent length."""
    if tracing() and isinstance(iterable, torch.Tensor) and iterable.dim() > 0 and _data_dependent(iterable.shape[0]):
        fail(
            f"{origin_of_caller(1)}: this for loop could not be converted ({why}) and loops over a "
            "length that depends on tensor data, which torch.export cannot unroll",
            "for",
        )
    return iterable


def _size_test(pred) -> bool:
    """A test on sizes under export, even one the size ranges decide (``0 < n`` with n >= 2 assumed):
    peeling such steps in Python would bake the assumption in (the program then fails for n == 1)."""
    if not tracing() or pred is True or pred is False:
        return False
    return isinstance(pred, (torch.SymBool, bool))


def while_stmt(cond, body, carry=(), mutated=(), kept=(), literals=()):
    """``while cond: body`` -> ``while_loop`` once the condition is a symbolic value."""
    state = tuple(carry)
    while True:
        pred = cond(*state)
        if is_symbolic(pred) or _size_test(pred):
            break
        if not pred:
            return _from_tuple(state)
        state = _as_tuple(body(*state), len(carry))
    if not torch.compiler.is_dynamo_compiling():
        state = _bound_markers(state, (), "while")  # (names the steps so far left unbound)
    # an int counter (``i = 0 ... i += 1``) goes in as a 0-d tensor: as a SymInt it fails once the
    # body also reads a parameter (measured); the compiler wrote its subscripts as ``_ub.at(t)[i]``
    device = accelerator(state)
    initial, numbers = state, _numbers(state)
    # (a number the body changes in place, ``n += 1`` once it is a tensor: nothing else holds it to write back to)
    written, kept = [k for k in mutated if k not in numbers], [k for k in kept if k not in numbers]
    state, body = _with_flags(state, body, (*literals, *numbers), len(carry), device)
    state = tuple(_counter(v, device) for v in state)
    carry = state

    def test(*values):
        return truth(cond(*values))

    def step(*values):
        return fresh_outputs(_as_tuple(body(*_fresh_carry(values, mutated)), len(carry)), values)

    final = _write_back(state, _while(test, step, state, _origin), written, kept)
    return _from_tuple(_numbers_again(final, initial))


def _counter(v, device=None):
    if isinstance(v, (int, torch.SymInt)) and not isinstance(v, bool):
        return torch.full((), v, dtype=torch.long, device=device)
    return v


class _At:
    """``t`` under tracing, indexed by the loop index (a 0-d integer tensor there)."""

    def __init__(self, tensor, clamped: bool = False):
        self.tensor, self.clamped = tensor, clamped

    def __getitem__(self, index):
        view = _chained(self.tensor, index, self.clamped)
        return self.tensor[index] if view is None else view

    def __setitem__(self, index, value):
        index = index if isinstance(index, tuple) else (index,)
        target = _chained(self.tensor, index)
        if target is None:
            self.tensor[index] = value
            return
        if isinstance(value, torch.Tensor) and value is target:
            return
        positions = [k for k, e in enumerate(index) if _is_index_tensor(e)]
        if not positions:
            target.copy_(value) if isinstance(value, torch.Tensor) else target.fill_(value)
            return
        # advanced indexing with one-element index tensors: an index_put_ (no .item(), no view)
        value = torch.as_tensor(value, dtype=self.tensor.dtype, device=self.tensor.device).expand(target.shape)
        adjacent = positions == list(range(positions[0], positions[-1] + 1))
        where = _result_dim(index, positions[0]) if adjacent else 0
        fixed = tuple(
            _wrapped(e, self.tensor, d).reshape(1) if _is_index_tensor(e) else e for d, e in _dims(index, self.tensor)
        )
        self.tensor[fixed] = value.unsqueeze(where)

    def select(self, dim, index):
        if not _is_index_tensor(index):
            return self.tensor.select(dim, index)
        return self[(slice(None),) * (dim % self.tensor.dim()) + (index,)]

    def narrow(self, dim, start, length):
        if not _is_index_tensor(start):
            return self.tensor.narrow(dim, start, length)
        dim = dim % self.tensor.dim()
        start = _wrapped(start, self.tensor, dim)
        return self.tensor.index_select(dim, start + torch.arange(length, device=start.device))


def _is_index_tensor(e) -> bool:
    return isinstance(e, torch.Tensor) and e.dim() == 0 and not e.is_floating_point() and e.dtype != torch.bool


def _wrapped(e, t, dim):
    """A possibly negative 0-d index into dimension ``dim`` of ``t``, made non-negative (Python's wrap)."""
    return torch.where(e < 0, e + t.shape[dim], e)


def _dims(index, t):
    """(dimension of ``t`` each element of ``index`` applies to, element)."""
    real = [e for e in index if e is not None and e is not Ellipsis]
    out, dim, seen = [], 0, 0
    for e in index:
        if e is None:
            out.append((None, e))
        elif e is Ellipsis:
            dim = t.dim() - (len(real) - seen)
            out.append((None, e))
        else:
            out.append((dim, e))
            dim += 1
            seen += 1
    return out


def _result_dim(index, position) -> int:
    """Where basic indexing leaves the dimension that element ``position`` of ``index`` indexes."""
    dim = 0
    for e in index[:position]:
        if e is None or isinstance(e, slice):
            dim += 1
        elif e is Ellipsis:
            return position  # (not reached for the forms the compiler emits)
    return dim


def _chained(t, index, clamped: bool = False):
    """``t[index]`` as select/index_select/slice/unsqueeze steps (ints, SymInts, 0-d integer tensors,
    slices, None, Ellipsis); None for anything else (left to torch's own indexing). ``clamped``: a
    0-d index out of range reads the nearest row (see ``at``)."""
    index = index if isinstance(index, tuple) else (index,)
    if not all(
        isinstance(e, (int, torch.SymInt, slice, type(None), type(Ellipsis)))
        and not isinstance(e, bool)
        or _is_index_tensor(e)
        for e in index
    ):
        return None
    real = [e for e in index if e is not None and e is not Ellipsis]
    dim, seen = 0, 0
    for e in index:
        if e is None:
            t = t.unsqueeze(dim)
            dim += 1
        elif e is Ellipsis:
            dim = t.dim() - (len(real) - seen)
        elif isinstance(e, slice):
            t = t[(slice(None),) * dim + (e,)]
            dim += 1
            seen += 1
        elif isinstance(e, torch.Tensor):
            if clamped:
                e = e.clamp(-t.shape[dim], t.shape[dim] - 1)
            # one aten.index with the 0-d index (negative ones wrap, as in Python): per scan step
            # it is one op where index_select needs the wrap, a reshape and a squeeze (five)
            t = torch.ops.aten.index.Tensor(t, [None] * dim + [e])
            seen += 1
        else:
            t = t.select(dim, e)
            seen += 1
    return t


def at(tensor, clamped: bool = False):
    """``at(t)[i - 1]``, ``at(out)[i, :] = v``: indexing by the loop index (eagerly: ``t`` itself).

    Under tracing the index is a 0-d tensor, which Python's indexing would turn into an int
    (``.item()``: "Could not extract specialized integer"); ``at`` reads with
    ``index_select`` and writes with ``index_put_`` instead. ``clamped`` marks a read in the
    right operand of ``and``/``or``, which a traced condition evaluates even where Python's
    short circuit would not (``i < n and x[i] > 0`` at ``i == n``): it reads a row in range,
    whose value the left operand makes irrelevant.
    """
    if tracing() and isinstance(tensor, torch.Tensor):
        return _At(tensor, clamped)
    return tensor
