"""Run a rewritten program before returning it: it must work where eager works, as eager does.

torch can return a program that accepts less than it was asked for: a side's slice that needs a
size (``kv[:, -6:]`` guards ``size >= 6``), sizes of two sides merged into an unbacked one with a
runtime assertion on the example's, or a graph that fails on every call (functorch's vmap inside a
cond). Such a program exports, and the user finds out only when it runs. So the program unbranch
rewrote is run, with eager beside it, on the example inputs and on inputs of other sizes for each
dynamic dimension (rows repeated or dropped, just outside the range the program states where it
is narrower than the dimension's own). A failure or difference where eager works is an error; a
size only the program's guards on input sizes refuse is named in a warning (torch specialises on
sizes, as without unbranch: a zoo model's position table, a window's padding). The model's and the
program's state (buffers, parameters, plain attributes) are put back after each run.
"""

from __future__ import annotations

import contextlib
import re
import warnings

import sympy
import torch
from torch.utils import _pytree as pytree
from torch.utils._sympy.numbers import int_oo

from ..errors import UnbranchError
from .failures import named_dims
from .quiet import quiet
from .report import site_of

# how far an exported program's floating results may be from eager's (max_diff)
TOLERANCE = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 5e-2}
_REGISTRIES = ("_parameters", "_buffers", "_modules")  # a module's dicts of its tensors and children
_GUARD = "Guard failed"  # how ep.module() refuses inputs outside what its guards on input sizes allow
_SMALLEST = 2  # torch specialises sizes 0 and 1: a dynamic dimension is at least 2 in a program


def checked(ep, mod, args, kwargs, dynamic_shapes, methods, warn_only: bool = False) -> None:
    """Raise UnbranchError (``warn_only``: warn) where the program made from ``methods`` fails or
    differs from eager; warn where it only refuses, by a guard on its input sizes, sizes eager takes
    (torch specialised on a size, as it does without unbranch)."""
    wrong, narrowed = problems(ep, mod, args, kwargs, dynamic_shapes)
    names = ", ".join(f"{rm.qualname} ({rm.source.path}:{rm.source.line})" for rm in methods) or "nothing"
    if narrowed:
        warnings.warn(
            f"unbranch: the exported program made from rewritten code ({names}) refuses sizes eager takes: "
            f"{'; '.join(narrowed)}",
            stacklevel=3,
        )
    if not wrong:
        return
    text = (
        f"the exported program made from rewritten code ({names}) does not do what eager does: "
        f"{'; '.join(wrong)}; export(..., check=False) returns it unchecked"
    )
    if warn_only:
        warnings.warn(f"unbranch: {text}", stacklevel=3)
        return
    raise UnbranchError(text, construct="export check")


def problems(ep, mod, args, kwargs=None, dynamic_shapes=None) -> tuple[list[str], list[str]]:
    """Where ``ep`` fails or differs from eager ``mod``, and where it only refuses by a guard on its
    input sizes what eager takes: one line each."""
    kwargs = dict(kwargs or {})
    leaves, rebuild = _user_inputs(ep, args, kwargs)
    wrong, narrowed = list(_unrunnable(ep)), []
    program = ep.module()
    with _kept(mod, ep) as restore, quiet(warnings_too=True):
        # (a named Dim's own bounds are what was asked: a program stating them is no narrower)
        named = {id(tensor) for _, tensor, _, _ in named_dims(mod, args, kwargs, dynamic_shapes)}
        others = _other_sizes(ep, leaves, named)
        for label, sizes in [("the example inputs", {}), *others]:
            inputs = rebuild(_resized(leaves, sizes)) if sizes else (args, kwargs)
            mine, theirs = _copied(inputs), _copied(inputs)  # (each run changes its own, compared after)
            expected = _run(mod, *theirs)
            restore()  # (what eager changed, a parameter cast to another dtype among it, is the program's too)
            if isinstance(expected, BaseException):
                continue  # eager fails there too: nothing the program must do
            got = _run(program, *mine)
            restore()
            if isinstance(got, AssertionError) and str(got).startswith(_GUARD):
                narrowed.append(f"on {label}: {_first_line(got)}")
                continue
            why = _differs(got, expected) or _differs(mine, theirs, "input")
            if why:
                wrong.append(f"on {label}: {why}")
    return wrong, narrowed


def _unrunnable(ep):
    """What torch leaves in a branch's graph that cannot run, whichever side the example took:
    functorch's batching of a ``torch.vmap`` (the program raises "tensor may have escaped"
    whenever that side runs)."""
    for module in ep.graph_module.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.find_nodes(op="call_function", target=torch.ops.higher_order.cond):
            for side in node.args[1:3]:
                graph = getattr(module, side.target).graph if side.op == "get_attr" else None
                if graph is not None and any(_batches(n) for n in graph.nodes):
                    yield (
                        f"at {site_of(node) or 'a converted if'}: a side calls torch.vmap, whose batching torch "
                        "leaves in the branch's graph, and the program fails whenever that side runs"
                    )


def _batches(node) -> bool:
    return getattr(node.target, "__name__", "") == "_add_batch_dim"


def max_diff(actual, expected, per_tensor: bool = False) -> float:
    """Largest ``|actual - expected| / (1 + |expected|)`` over floating leaves (NaN on both sides: equal).

    ``per_tensor`` divides by ``1 + max |expected|`` of the whole tensor instead: onnxruntime's
    kernels round differently from torch's, and next to float16 values of 6e4 (a clamped
    overflow) an element of 2 may be off by one float16 step of those, 32.
    """
    worst = 0.0
    for a, e in zip(pytree.tree_leaves(actual), pytree.tree_leaves(expected)):
        if isinstance(e, torch.Tensor) and e.is_floating_point():
            a, e = a.float(), e.float()
            both_nan = torch.isnan(a) & torch.isnan(e)
            scale = e.abs().nan_to_num(0, 0, 0).max() if per_tensor and e.numel() else e.abs()
            diff = torch.where(both_nan, 0.0, (a - e).abs() / (1 + scale))
            worst = max(worst, float(diff.nan_to_num(float("inf")).max()) if diff.numel() else 0.0)
    return worst


def _copied(inputs):
    return pytree.tree_map_only(torch.Tensor, lambda t: t.clone(), inputs)


def _differs(got, expected, what: str = "result") -> str:
    if isinstance(got, BaseException):
        return f"the program raises where eager works: {type(got).__name__}: {_first_line(got)}"
    got_leaves, want = pytree.tree_leaves(got), pytree.tree_leaves(expected)
    if len(got_leaves) != len(want):
        return f"the program gives {len(got_leaves)} values where eager gives {len(want)}"
    for k, (g, e) in enumerate(zip(got_leaves, want)):
        if isinstance(e, (int, float, bool)) and isinstance(g, torch.Tensor) and g.dim() == 0:
            g = g.item()  # (a number decided by data: the program gives the 0-d tensor holding it)
        if isinstance(e, torch.Tensor) != isinstance(g, torch.Tensor):
            return f"{what} {k} is {type(g).__name__} where eager gives {type(e).__name__}"
        if isinstance(e, torch.Tensor):
            if g.shape != e.shape or g.dtype != e.dtype:
                return f"{what} {k} is {g.dtype} {tuple(g.shape)} where eager gives {e.dtype} {tuple(e.shape)}"
            tol = TOLERANCE.get(e.dtype, 1e-4)
            if e.is_floating_point() and not max_diff(g, e) <= tol:
                return f"{what} {k} differs from eager by {max_diff(g, e):.1e}"
            if not e.is_floating_point() and not torch.equal(g, e):
                return f"{what} {k} differs from eager"
        elif isinstance(e, (int, float, bool, str)) and g != e and not _close_numbers(g, e):
            return f"{what} {k} is {g!r} where eager gives {e!r}"
    return ""


def _close_numbers(a, b) -> bool:
    return isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) <= 1e-4 * (1 + abs(b))


def _run(fn, args, kwargs):
    """``fn(*args, **kwargs)``, or the exception it raised; the same random numbers for every call."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # compared by the caller: a failure is a result here
            return e


def _user_inputs(ep, args, kwargs):
    """The leaves of (args, kwargs) in the order of the program's user inputs, and how to put
    leaves back into (args, kwargs)."""
    spec = ep.call_spec.in_spec
    keys = spec.child(1).context if spec is not None and spec.num_children == 2 else None
    if keys is not None and set(keys) == set(kwargs):
        kwargs = {k: kwargs[k] for k in keys}
    leaves, flat_spec = pytree.tree_flatten((tuple(args), kwargs))
    return leaves, lambda new: pytree.tree_unflatten(new, flat_spec)


def _other_sizes(ep, leaves, named: set[int]):
    """(label, {(leaf, dim): size}) for each size worth a run: every free size one larger, and each
    size just outside the program's range where that is narrower than a dynamic dimension's own."""
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
    users = placeholders[len(placeholders) - len(leaves) :] if len(placeholders) >= len(leaves) else []
    where: dict = {}  # symbol -> [(leaf, dim)]
    fixed = set()  # symbols some size depends on in another way than being it
    for k, (node, leaf) in enumerate(zip(users, leaves)):
        val = node.meta.get("val")
        if not isinstance(leaf, torch.Tensor) or not isinstance(val, torch.Tensor) or val.dim() != leaf.dim():
            continue
        for d, size in enumerate(val.shape):
            expr = size.node.expr if isinstance(size, torch.SymInt) else None
            if isinstance(expr, sympy.Symbol):
                where.setdefault(expr, []).append((k, d))
            elif expr is not None:
                fixed |= expr.free_symbols
    free = {s: places for s, places in where.items() if s not in fixed}
    if not free:
        return
    ranges = ep.range_constraints
    hint = {s: leaves[places[0][0]].shape[places[0][1]] for s, places in free.items()}
    larger = {}
    for s, places in free.items():
        if s not in ranges or _bound(ranges[s].upper) is None or hint[s] + 1 <= _bound(ranges[s].upper):
            larger.update({p: hint[s] + 1 for p in places})
    if larger:
        yield "inputs one larger in each dynamic dimension", larger
    for s, places in free.items():
        if s not in ranges or any(id(leaves[k]) in named for k, _ in places):
            continue
        low, high = _bound(ranges[s].lower), _bound(ranges[s].upper)
        if low is not None and low > _SMALLEST:
            yield _label(leaves, places, low - 1), {p: low - 1 for p in places}
        if high is not None:
            yield _label(leaves, places, high + 1), {p: high + 1 for p in places}


def _bound(value) -> int | None:
    """A range's end as an int, None where it is unbounded (torch's int_oo)."""
    try:
        return int(value) if value not in (int_oo, -int_oo, sympy.oo, -sympy.oo) else None
    except TypeError:
        return None


def _label(leaves, places, size) -> str:
    return f"inputs of size {size} in {', '.join(f'dimension {d} of input {k}' for k, d in places)}"


def _resized(leaves, sizes: dict) -> list:
    """The leaves with the sizes given: rows taken cyclically from the example's (their values stay
    ones the model saw)."""
    new = list(leaves)
    for (k, d), size in sizes.items():
        t = new[k]
        rows = torch.arange(size, device=t.device) % t.shape[d]
        new[k] = t.index_select(d, rows)
    return new


@contextlib.contextmanager
def _kept(mod, ep):
    """Yields ``restore()``, which puts back what running the model or the program changed: every
    tensor of the model and of the program's state (in place, so aliases stay), and the modules'
    plain attributes; called once more on leaving."""
    tensors = {id(t): t for t in _tensors_of(mod, ep)}
    saved = {key: t.detach().clone() for key, t in tensors.items()}
    modules = list(mod.modules()) if isinstance(mod, torch.nn.Module) else []
    attributes = [(m, dict(m.__dict__), {k: dict(getattr(m, k)) for k in _REGISTRIES}) for m in modules]

    def restore():
        with torch.no_grad():
            for key, t in tensors.items():
                if (t.shape, t.dtype, t.device) == (saved[key].shape, saved[key].dtype, saved[key].device):
                    t.copy_(saved[key])
                else:  # (``module.to(dtype)`` in a forward binds new data to the same tensor)
                    t.data = saved[key].clone()
        for m, before, registries in attributes:
            m.__dict__.clear()
            m.__dict__.update(before)
            for k, entries in registries.items():  # the same dicts, their entries as they were
                getattr(m, k).clear()
                getattr(m, k).update(entries)

    try:
        yield restore
    finally:
        restore()


def _tensors_of(mod, ep):
    if isinstance(mod, torch.nn.Module):
        yield from mod.parameters()
        yield from mod.buffers()
    yield from (t for t in ep.state_dict.values() if isinstance(t, torch.Tensor))
    yield from (t for t in ep.constants.values() if isinstance(t, torch.Tensor))


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return re.sub(r"\s+", " ", text.splitlines()[0] if text else "")[:300]
