"""``if`` and boolean operators that become ``torch.cond`` and ``&``/``|``/``~`` only when needed.

    h, y = _ub.if_stmt(pred, if_true_1, if_false_1, (x, h))

Python predicate (or not tracing): call one branch, exactly like the original ``if``.
Tensor or SymBool predicate while tracing: ``torch.cond``, after adapting the branches to
its contract (tensor operands only, no aliasing of inputs, no input mutation).
"""

from __future__ import annotations

import collections
import math
import re
import sys
import traceback
import types

import torch
from torch._prims_common import is_contiguous_or_false
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols, statically_known_true
from torch.utils import _pytree as pytree

from ._tracing import (
    copy_into,
    fail,
    fresh_outputs,
    is_symbolic,
    logging_dropped,
    origin_of_caller,
    settled,
    truth,
    truth_tensor,
)
from .jumps import accelerator, tensorised
from .settings import applied, current

# the operators rewritten code calls as ``_ub.<name>``
__all__ = ["and_", "given", "if_exp", "if_stmt", "not_", "or_", "pick", "right_needed"]

# callbacks ``(filename, line, taken)`` told which side each eagerly dispatched if took (coverage)
observers: list = []


def if_stmt(
    pred,
    then_fn,
    else_fn,
    operands=(),
    mutated=(),
    tensor_outputs=True,
    kept=(),
    literals=(),
    in_place=(),
    keep=None,
    elementwise=None,
):
    """Run ``then_fn(*operands)`` or ``else_fn(*operands)``; a ``torch.cond`` when ``pred`` is symbolic.

    ``mutated`` lists the operand positions a branch may change in place. Eagerly the branch
    changes them itself, exactly as the original ``if``; under ``torch.cond`` (which forbids
    input mutation) the branches change clones, return them, and the change is copied back
    into the original tensors after the cond, so views and aliases of them see it too.
    ``kept`` pairs (output, operand) for outputs only ever changed in place: a tensor there is
    returned as the original object itself, as Python's ``x += 1`` leaves it.
    ``tensor_outputs`` is False when the compiler saw a branch produce a Python value (None, a
    float...): no cond can return that, so a shape condition takes the plain branch (and
    specialises, as the original ``if`` does) instead of failing the export.
    ``literals``: the outputs that are the user's bool or int flags; a cond gives them as tensors.
    ``in_place``: the operands whose entries (a list's or dict's tensors) a branch changes in place
    only, never rebinds: after a cond the change is copied into the very tensors (their aliases see it),
    where entries a branch rebinds are replaced in the container.
    ``keep``: ("then" or "else", why the other side cannot be traced, the if's file:line): under export
    only that side runs, after a check that the condition takes it (the program raises on an input
    taking the other).
    ``elementwise``: how many elementwise operations both sides make, when that is all they do
    (compiler.analysis.cost): under a tensor condition both may run and ``torch.where`` choose their
    values, as the settings' ``branches`` say (``_where_pays``).
    """
    pred = settled(pred)
    if is_symbolic(pred):
        pred = truth(pred)
    if keep is not None and is_symbolic(pred):
        return _one_side(pred, then_fn, else_fn, operands, keep)
    if not tensor_outputs and isinstance(pred, torch.Tensor) and is_symbolic(pred):
        fail(
            f"{origin_of_caller(1)}: a branch of this if on a tensor condition produces a Python value (None, a bool, "
            "a float...), which torch.cond cannot return",
            "if",
        )
    if is_symbolic(pred) and _runs_inplace_modules(operands):
        mutated = _tensor_operands(operands)  # what an inplace module changes is not visible in the source
    unwritable = _unwritable(then_fn, operands, mutated) if is_symbolic(pred) else None
    if unwritable and isinstance(pred, torch.Tensor):
        _refuse(unwritable)
    if not is_symbolic(pred) or unwritable or not (tensor_outputs or isinstance(pred, torch.Tensor)):
        taken = True if pred else False
        if observers:
            caller = sys._getframe(1)
            for observe in observers:
                observe(caller.f_code.co_filename, caller.f_lineno, taken)
        return then_fn(*operands) if taken else else_fn(*operands)
    _refuse_strict_autocast(origin_of_caller(1), "if")
    pred = _on_data(pred)
    if elementwise is not None and isinstance(pred, torch.Tensor) and _where_pays(elementwise, operands):
        chosen = _selected(pred, then_fn(*operands), else_fn(*operands))
        if chosen is not None:
            return chosen
    held = current().numbers_held
    try:
        return _cond(pred, then_fn, else_fn, operands, mutated, kept, literals, in_place, numbers=held)
    except Exception as e:  # under strict export dynamo never lets torch's own errors reach here
        if isinstance(pred, torch.SymBool):
            # A shape condition torch.cond cannot take (e.g. non-tensor outputs): specialise on
            # it as the plain ``if`` would have, rather than fail an export that worked before.
            return then_fn(*operands) if pred else else_fn(*operands)
        if gave_numbers(e) and not held:
            try:  # a side gives a number from data (``.item()``) or a float: through the cond as a 0-d tensor
                with applied(numbers_held=True):
                    return _cond(pred, then_fn, else_fn, operands, mutated, kept, literals, in_place, numbers=True)
            except Exception as again:  # (a number against a tensor, an int against a float: as torch says)
                e = again if torch_limit(again) else e
        containers = [k for k in range(len(operands)) if _container(operands[k])]
        everything = sorted({*_tensor_operands(operands), *containers})
        if "mutation" in str(e) and set(mutated) != set(everything):
            # changed in place by code the compiler cannot see (a helper, a C extension): every tensor
            # operand gets the clone-and-write-back treatment, if none shares memory, and so do the
            # entries of every list or dict (in place, where the compiler saw no entry rebound)
            unwritable = _unwritable(then_fn, operands, everything)
            if unwritable:
                _refuse(unwritable)
            unseen = [k for k in containers if k not in mutated]
            return _cond(pred, then_fn, else_fn, operands, everything, kept, literals, (*in_place, *unseen))
        # (through fail: under strict export torch 2.14's dynamo cannot build the project's error)
        fail(f"{origin_of_caller(1)}: torch.cond rejected this if on a tensor condition: {rejection(e)}", "if", e)


# how an if whose sides are a few elementwise operations lowers (``branches=``): "auto" evaluates both
# and selects with torch.where when they are at most CHEAP_OPS operations on at most CHEAP_ELEMENTS
# elements (the example's), where that measured faster than a cond (benchmarks/cheap_branches.py),
# but for ExecuTorch (target="executorch"), which runs the where slower (benchmarks/deploy_matrix.py);
# "where" whenever the sides are elementwise; "cond" never
BRANCH_MODES = ("auto", "where", "cond")
CHEAP_OPS = 8
CHEAP_ELEMENTS = 1 << 16


def _on_data(pred):
    """A symbolic truth of data (``t.item() > 0``, ``int(t) > 0``) as a 0-d tensor: a cond on it, never a
    guard (which torch cannot make on an unbacked symbol); any other condition as it is."""
    if isinstance(pred, torch.SymBool) and free_unbacked_symbols(pred):
        return torch.full((), pred, dtype=torch.bool)
    return pred


def _where_pays(ops: int, operands) -> bool:
    if torch.compiler.is_dynamo_compiling():
        return False  # (strict export keeps the cond)
    settings = current()
    if settings.branches != "auto" or settings.target == "executorch":
        return settings.branches == "where"
    sizes = [_example_numel(t) for t in pytree.tree_leaves(operands) if isinstance(t, torch.Tensor)]
    return ops <= CHEAP_OPS and all(n is not None and n <= CHEAP_ELEMENTS for n in sizes)


def _example_numel(t) -> int | None:
    """How many elements ``t`` has in the example traced (None for a size decided by data)."""
    n = t.numel()
    return n.node.hint if isinstance(n, torch.SymInt) else n


def _selected(pred, then_out, else_out):
    """``torch.where(pred, a, b)`` of each pair of the sides' tensors; None where they do not pair up
    (another structure, dtype, device or shape: a cond merges those, or refuses them)."""
    then_leaves, spec = pytree.tree_flatten(then_out)
    else_leaves, else_spec = pytree.tree_flatten(else_out)
    if spec != else_spec:
        return None
    chosen = []
    for a, b in zip(then_leaves, else_leaves):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            if a is not b:
                return None
            chosen.append(a)  # (the same object either way: a flag, a name neither side rebinds)
            continue
        same = a.dtype == b.dtype and a.device == b.device and a.dim() == b.dim()
        if not (same and all(statically_known_true(m == n) for m, n in zip(a.shape, b.shape))):
            return None
        chosen.append(torch.where(pred if pred.device == a.device else pred.to(a.device), a, b))
    return pytree.tree_unflatten(chosen, spec)


def _one_side(pred, then_fn, else_fn, operands, keep):
    """The side ``keep`` names, run after a check that ``pred`` takes it (the other cannot be traced)."""
    from .checks import raise_if

    side, why, origin = keep
    other = "else" if side == "then" else "then"
    message = (
        f"{origin}: this input takes the {other} side of the if, which the exported program does not hold "
        f"({why}); it runs the {side} side only"
    )
    raise_if(pred if side == "else" else not_(pred), lambda: RuntimeError(message))
    return (then_fn if side == "then" else else_fn)(*operands)


# the meanings below (and if_stmt's own refusal) that say a side gives a value no cond can return
# refusals of values the two sides cannot merge into one output, which may go once each side
# continues to the function's end (where Python values become constants and a dtype or rank
# may no longer differ: ``y = counts * 0.5`` against ``counts * 2``, then ``y.float()``)
_UNMERGED = (
    "a Python value",
    "a side gives None",
    "gives a Python float or string",
    "another value torch.cond cannot return",
    "tensors of different dtypes",
    "tensors of different ranks",
)


def unmerged(reason: str) -> bool:
    """Does a refusal of this module's say the sides give values one cond output cannot be?"""
    return any(marker in reason for marker in _UNMERGED)


# what torch.cond says when it rejects its branches, and what that means in the user's code
_LIMITS = [
    (
        ("expected both a and b to be FakeTensor",),
        "a side gives a number (an int) where the other gives a tensor (a 0-d counter, a value from data)",
    ),
    (
        ("Unmatched output spec", "differing branch outputs", "constant non-int"),
        "a side gives None (or another value that is neither a tensor nor an int) among its results, or the "
        "two sides give results of different structures; torch.cond needs the same tensors from both sides",
    ),
    (("expected same dtype",), "the two sides give tensors of different dtypes"),
    (
        ("needed for gradient computation has been modified by an inplace operation",),
        "code inside changes in place a tensor autograd saved for the gradient (torch traces a loop op's or "
        "cond's step with autograd where grad is enabled): export under torch.no_grad(), or make the change "
        "out of place",
    ),
    (("expected same dim",), "the two sides give tensors of different ranks"),
    (("HOP body output unsupported",), "a side gives a Python float or string; torch.cond returns tensors and ints"),
    (
        ("unsupported branch return type",),
        "a side gives a number computed from data (.item()) or another value torch.cond cannot return "
        "(tensors and constant ints only)",
    ),
    (
        ("Input-to-input aliasing",),
        "torch's tracing of a side took two of its inputs as views of one another (such as a tensor it was "
        "handed and a view of it a function the side calls reads), which torch.cond rejects (a torch limitation)",
    ),
    (("Encountered aliasing",), "a side gives back a tensor it was handed (or a view of one) unchanged"),
    (("Encountered input mutation",), "a side changes a tensor it was handed in place"),
    (
        ("Guard failed on the same frame it was created",),
        "torch's own tracing of this cond failed (a torch bug: 'Guard failed on the same frame it was created'); "
        "strict=True export traces it differently",
    ),
    (
        ("Expected init and carry to have same metadata", "Expected body_fn_output and carried_inputs to have same"),
        "a value a loop carries has another shape or dtype after a step than before it (e.g. a branch in "
        "the loop gives it a size that depends on the side taken); torch's scan and while_loop carry "
        "values that keep theirs",
    ),
    (
        ("@clone_input",),
        "torch's scan cannot take a tensor the loop reads that is no input, parameter or buffer of the "
        "model (a plain tensor attribute, a global): non-strict export fails reading its data pointer "
        "(torch 2.13, clone_input); register it with register_buffer, or export with strict=True",
    ),
    (
        ("duplicate argument",),
        "torch's dynamo generated a branch graph with two arguments of one name (a torch bug with conds "
        "nested in conds under strict export); strict=False export traces it differently",
    ),
]


def rejection(e: BaseException) -> str:
    """Why torch.cond rejected a branch, in the user's terms when torch's message is a known one."""
    known = torch_limit(e)
    if known:
        return known
    guard = _GUARD.search(str(e))
    if guard is not None:  # (torch's next line is its generic advice on guards)
        return f"code inside needs a Python value computed from data ({guard.group(0).strip()})"
    call = _FAILED_CALL.search(str(e))
    if call is not None:  # (the whole call, its arguments' fake tensors included, is noise to the user)
        op = next(name for name in call.group(1, 2, 3) if name)
        return f"torch could not trace {op}() inside it: {call.group(4).rsplit(': ', 1)[-1]}"
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[1] if len(lines) > 1 else (lines[0] if lines else "")


_GUARD = re.compile(r"Could not (?:guard on|extract specialized integer from) data-dependent expression [^\n(]*")
# "failed to run FX node with fake tensors: call_function <built-in method randn of ...>(...): got RuntimeError('...')"
_FAILED_CALL = re.compile(
    r"failed to run FX node with fake tensors: call_(?:function <(?:built-in method|function) (\w+)[^>]*>"
    r"|method (\w+)|module (\w+)).*?: got \w+\('(.+?)'\)",
    re.DOTALL,
)


def torch_limit(e: BaseException) -> str | None:
    """What a known torch limitation or bug that ``e`` (or its causes) reports means, or None.
    (Markers ``@name`` match a function of torch's that the failure passed through.)"""
    text, seen = "", e
    while seen is not None:
        text += str(seen) + "".join(f" @{f.f_code.co_name}" for f, _ in traceback.walk_tb(seen.__traceback__))
        seen = seen.__cause__ or seen.__context__
    return next((meaning for markers, meaning in _LIMITS if any(m in text for m in markers)), None)


_IMMUTABLE = (int, float, bool, complex, str, bytes, type(None), torch.SymInt, torch.SymFloat, torch.SymBool)


def _tensor_operands(operands) -> list[int]:
    return [k for k in range(len(operands)) if isinstance(operands[k], torch.Tensor)]


def _runs_inplace_modules(operands) -> bool:
    """Does a module among the operands (``self``) hold a submodule that works in place (``ReLU(inplace=True)``)?"""
    modules = [operands[k] for k in range(len(operands)) if isinstance(operands[k], torch.nn.Module)]
    return any(getattr(m, "inplace", False) is True for module in modules for m in module.children())


def _unwritable(branch, operands, mutated) -> str | None:
    """Why the operands a branch changes in place cannot be handed to a cond (None when they can).

    A list, dict or object cannot be cloned and written back; a tensor sharing memory with
    another operand (``a = y.view_as(x)``, ``x = y``) would, once cloned, stop showing the
    change through the other name inside the branch.
    """
    names = branch.__code__.co_varnames[: branch.__code__.co_argcount]
    name = lambda k: f"'{names[k]}'" if k < len(names) else f"operand {k}"  # noqa: E731
    # operands are reached by index, never bound to a loop variable: under tracing dynamo names
    # graph inputs after such variables, and nested conds then clash ("duplicate argument")
    roots = {k: _root(operands[k]) for k in _tensor_operands(operands)}
    for k in mutated:
        if k in roots:
            shared = [j for j in roots if j != k and roots[j] is roots[k]]
            if shared:
                return f"{name(k)} (sharing memory with {name(shared[0])})"
            continue
        if isinstance(operands[k], _IMMUTABLE):
            continue
        if isinstance(operands[k], tuple) and all(isinstance(v, (torch.Tensor, _IMMUTABLE)) for v in operands[k]):
            continue  # only its tensors can change, in place
        if _container(operands[k]):
            # its entries come back out of the cond and are written back (_cond): each a copy, which
            # an entry sharing memory with another tensor handed in would no longer be
            leaves = [_root(v) for v in pytree.tree_leaves(operands[k])]
            others = [_root(v) for j in roots for v in [operands[j]]]
            others += [
                r
                for j in range(len(operands))
                if j != k and _container(operands[j])
                for r in (_root(v) for v in pytree.tree_leaves(operands[j]))
            ]
            if any(r is q for n, r in enumerate(leaves) for q in [*leaves[:n], *others]):
                return f"{name(k)} (a {type(operands[k]).__name__} holding a tensor shared with another one handed in)"
            continue
        return f"{name(k)} (a {type(operands[k]).__name__})"
    return None


def _refuse_strict_autocast(where: str, construct: str) -> None:
    """Strict export under ``torch.autocast`` records a cond's outputs in the wrong dtype (torch 2.13): its
    program fails when run ("Tensor dtype mismatch"). Say so at export time instead."""
    if torch.compiler.is_dynamo_compiling() and any(torch.is_autocast_enabled(d) for d in ("cpu", "cuda")):
        fail(
            f"{where}: torch.cond inside torch.autocast cannot be exported in strict mode (torch records its outputs "
            "in the wrong dtype, and the program fails when run): export with strict=False, or branch outside "
            "the autocast region",
            construct,
        )


def _refuse(unwritable: str):
    """Fail the export of the if that called ``if_stmt`` (two frames up), naming what cannot be written back."""
    fail(
        f"{origin_of_caller(2)}: a branch of this if changes {unwritable} in place, which torch.cond cannot carry "
        "out of a branch",
        "if",
    )


def _root(t):
    return t._base if t._base is not None else t


def _cond(pred, then_fn, else_fn, operands, mutated, kept=(), literals=(), in_place=(), numbers=False):
    leaves, spec = pytree.tree_flatten(tuple(operands))
    # a number computed from data (``v = t.item()``) cannot be closed over by a branch ("Failed to
    # convert args/kwargs to proxy"): it goes in as the 0-d tensor holding it, which arithmetic and
    # comparisons in the branch take as they take the number
    leaves = [_held(leaf) for leaf in leaves]
    positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    tensors = [leaves[i] for i in positions]
    # one tensor under two names (``b = x``) goes in once and is one tensor in the branch, as it is
    # eagerly (given a copy for the second name, dynamo mixed up a nested cond's inputs, torch 2.13)
    distinct: list = []  # what torch.cond is given: each tensor object once
    slot = []  # for each of ``tensors``, its place in ``distinct``
    for t in tensors:
        found = next((d for d, u in enumerate(distinct) if u is t), None)
        if found is None:
            distinct.append(t)
            found = len(distinct) - 1
        slot.append(found)
    owners = _leaf_owners(operands)
    changed = set(mutated)
    containers = [k for k in mutated if _container(operands[k])]
    writable = [k for k, i in enumerate(positions) if owners[i] in changed and owners[i] not in containers]
    device = accelerator(pred, tensors)

    def adapt(fn):
        viewed = _reads_view_attribute(fn)

        def branch(*ts):
            # tensors are never bound to a local name here: dynamo names the branch graph's
            # inputs after such names, and two nested conds would then both take e.g. 't'
            # (torch's codegen: "duplicate argument 't' in function definition")
            if viewed:
                ts = tuple(map(torch.Tensor.view_as, ts, ts))
            values = list(leaves)
            for n, i in enumerate(positions):
                values[i] = ts[slot[n]]
            clones = tuple(ts[slot[k]].clone() for k in writable)
            for n, k in enumerate(writable):
                values[positions[k]] = clones[n]
            for n, i in enumerate(positions):  # a container's entries: its own copies, for the branch to change
                if owners[i] in containers:
                    values[i] = ts[slot[n]].clone()
            rebuilt = pytree.tree_unflatten(values, spec)
            out = fn(*rebuilt)
            out = () if out is None else _dense(out)
            if literals or device is not None:  # (one output is the value itself, as for kept)
                single = not isinstance(out, tuple)
                out = tensorised((out,) if single else out, literals, device)
                out = out[0] if single else out
            if numbers:
                out = _numbers_held(out, device)
            if containers:  # the dicts and lists as the branch left them (new objects: flattened operands)
                out = (out, tuple(rebuilt[k] for k in containers))
            return fresh_outputs((out, clones) if writable else out, (*ts, *_buffers(values)))

        branch.__name__ = getattr(fn, "__name__", "branch")
        return branch

    with logging_dropped():
        out = torch.cond(pred, adapt(then_fn), adapt(else_fn), _unaliased(distinct))
    if writable:  # (indexing, not loop variables: see the note in ``branch``)
        out, written = out
        for n, k in enumerate(writable):
            copy_into(tensors[k], written[n])
    if containers:
        out, entries = out
        for k, new in zip(containers, entries):
            old_leaves, new_leaves = pytree.tree_leaves(operands[k]), pytree.tree_leaves(new)
            if k in in_place and len(old_leaves) == len(new_leaves):
                for old, value in zip(old_leaves, new_leaves):
                    copy_into(old, value)  # (the same tensors, as Python's in-place change leaves them)
                continue
            if isinstance(operands[k], dict):
                operands[k].clear()
                operands[k].update(new)
            else:
                operands[k][:] = list(new)
    if numbers:
        out = pytree.tree_map(lambda v: v.held.item() if isinstance(v, _HELD) else v, out, is_leaf=_is_held)
    out = _restore_kind(out)
    for j, k in kept:
        if isinstance(operands[k], torch.Tensor) and k in changed:
            if isinstance(out, tuple):
                out = (*out[:j], operands[k], *out[j + 1 :])
            else:
                out = operands[k]
    return out


# a number a side gives, as the 0-d tensor holding it, marked with its type: torch.cond returns tensors
# (and ints equal on both sides), and keeps the marks, which must agree between the sides as the rest of
# the structure must; after the cond each becomes a number again (``.item()``: symbolic, from data)
_HeldBool = collections.namedtuple("_HeldBool", "held")
_HeldInt = collections.namedtuple("_HeldInt", "held")
_HeldFloat = collections.namedtuple("_HeldFloat", "held")
_HELD = (_HeldBool, _HeldInt, _HeldFloat)


def _is_held(v) -> bool:
    return isinstance(v, _HELD)


def _numbers_held(out, device):
    def held(v):
        for kinds, mark, dtype in _HOLDING:
            if isinstance(v, kinds):
                return mark(torch.scalar_tensor(v, dtype=dtype, device=device))
        return v

    return pytree.tree_map(held, out)


_HOLDING = (
    ((bool, torch.SymBool), _HeldBool, torch.bool),  # (first: a bool is an int too)
    ((int, torch.SymInt), _HeldInt, torch.int64),
    ((float, torch.SymFloat), _HeldFloat, torch.float64),
)


def gave_numbers(e: BaseException) -> bool:
    """Did torch.cond reject a side for giving a number it cannot return (a float, one from data)?"""
    meaning = torch_limit(e) or ""
    return meaning.startswith(("a side gives a number", "a side gives a Python float"))


def _dense(out):
    """``out`` with each tensor that is not contiguous made so: torch.cond needs the same strides from
    both sides, and a side giving ``w.t()`` where the other gives ``w`` differs in layout alone."""
    return pytree.tree_map_only(torch.Tensor, lambda t: t if is_contiguous_or_false(t) else t.contiguous(), out)


def _held(leaf):
    """An unbacked symbolic number as a 0-d tensor of its value (anything else as it is). Under dynamo,
    which shows a symbolic float as a Python float, every float (a constant one costs a 0-d input)."""
    if isinstance(leaf, float) and torch.compiler.is_dynamo_compiling():
        return torch.scalar_tensor(leaf, dtype=torch.float64)
    if isinstance(leaf, (torch.SymInt, torch.SymFloat, torch.SymBool)) and free_unbacked_symbols(leaf):
        kind = {torch.SymInt: torch.int64, torch.SymFloat: torch.float64, torch.SymBool: torch.bool}[type(leaf)]
        return torch.scalar_tensor(leaf, dtype=kind)
    return leaf


def _container(value) -> bool:
    """A dict or list of tensors (at any depth): a branch that rebinds its entries gives them back."""
    return isinstance(value, (dict, list)) and all(isinstance(v, torch.Tensor) for v in pytree.tree_leaves(value))


def _buffers(values) -> list:
    """The buffers and plain tensor attributes of the modules among a branch's operands (``self``):
    a branch may return one as it is (``b = self.final``), which export lifts to an input."""
    return [
        b
        for v in values
        if isinstance(v, torch.nn.Module)
        for b in (*v._buffers.values(), *vars(v).values())
        if isinstance(b, torch.Tensor)
    ]


# view attributes a branch may read of what it was handed: torch.cond's tracing takes ``a.mT`` of an
# input ``a`` as an input of its own, aliasing ``a``, and rejects the branch (torch 2.13, both modes;
# measured: "Encountered aliasing"); read of a view of ``a`` made in the branch, it traces
_VIEW_ATTRIBUTES = frozenset({"T", "mT", "H", "mH"})


def _reads_view_attribute(fn) -> bool:
    """Does ``fn`` (or a function defined in it) read ``.T``, ``.mT``, ``.H`` or ``.mH``?"""
    code = getattr(fn, "__code__", None)
    stack = [code] if code is not None else []
    while stack:
        code = stack.pop()
        if _VIEW_ATTRIBUTES.intersection(code.co_names):
            return True
        stack += [c for c in code.co_consts if isinstance(c, type(code))]
    return False


def _unaliased(tensors) -> tuple:
    """The operands, with a copy in place of each one torch.cond cannot take as it is.

    ``torch.cond`` rejects inputs that alias each other (``y = x[:]``, ``a = y.view_as(x)``;
    one tensor under two names is given once, see ``_cond``), and fails inside its metadata
    checks on a view whose offset is data (``alphas[t]`` for a tensor ``t``: an unbacked
    storage offset). Values are unchanged, and write-back still targets the originals.
    """
    roots = [_root(tensors[n]) for n in range(len(tensors))]
    copy = [any(roots[n] is r for r in roots[:n]) or _offset_is_data(tensors[n]) for n in range(len(tensors))]
    return tuple(tensors[n].clone() if copy[n] else tensors[n] for n in range(len(tensors)))


def _offset_is_data(t) -> bool:
    if t._base is None or torch.compiler.is_dynamo_compiling():
        return False  # (strict export: dynamo cannot read an offset, and takes such views itself)
    offset = t.storage_offset()
    return isinstance(offset, torch.SymInt) and bool(free_unbacked_symbols(offset))


def _leaf_owners(operands) -> list[int]:
    """For each pytree leaf of ``operands``, the position of the operand it belongs to."""
    return [k for k in range(len(operands)) for _ in pytree.tree_leaves(operands[k])]


def _restore_kind(out):
    # cond returns lists where the branch returned tuples; unpacking works the same either way.
    # Nothing came back: the branches returned None (no outputs, or one output that is None
    # on both sides, e.g. an optional mask absent at export): give that None back
    if isinstance(out, (list, tuple)) and not out:
        return None
    return tuple(out) if isinstance(out, list) else out


def and_(left, right_fn):
    """``left and right`` in a condition; ``&`` when ``left`` (then ``right``) is symbolic."""
    if not is_symbolic(left):
        return left and right_fn()
    right = right_fn()
    if not is_symbolic(right):
        return left if right else False
    if isinstance(left, torch.Tensor) or isinstance(right, torch.Tensor):
        return torch.logical_and(truth_tensor(left), truth_tensor(right))
    return left & right


def or_(left, right_fn):
    """``left or right`` in a condition; ``|`` when ``left`` (then ``right``) is symbolic."""
    if not is_symbolic(left):
        return left or right_fn()
    right = right_fn()
    if not is_symbolic(right):
        return True if right else left
    if isinstance(left, torch.Tensor) or isinstance(right, torch.Tensor):
        return torch.logical_or(truth_tensor(left), truth_tensor(right))
    return left | right


def right_needed(left, op: str) -> bool:
    """Would ``left and/or right`` evaluate ``right``? (Always, for a symbolic ``left``.)"""
    if is_symbolic(left):
        return True
    return bool(left) if op == "and" else not left


def given(value):
    """A right operand already evaluated, in the form ``and_``/``or_`` take."""
    return lambda: value


def not_(value):
    """``not value``; ``~`` (logical not) when ``value`` is symbolic."""
    if not is_symbolic(value):
        return not value
    if isinstance(value, torch.Tensor):
        return torch.logical_not(value)
    return torch.sym_not(value)


def if_exp(pred, then_fn, else_fn):
    """``then_fn() if pred else else_fn()``: a conditional expression; ``torch.cond`` when ``pred`` is symbolic.

    The sides are zero-argument functions (the compiler's lambdas), so only the side taken
    runs, exactly as Python evaluates ``a if c else b``. Under ``torch.cond`` their closures
    carry the tensors they read (torch lifts them, strict and non-strict alike); every tensor
    a side gives back is copied, since a side returning a tensor it closes over unchanged
    (``x if c else y``) would alias a cond input, which torch.cond rejects.
    """
    if not is_symbolic(pred):
        return then_fn() if _taken(pred) else else_fn()
    return _cond_exp(_on_data(truth(pred)), then_fn, else_fn, origin_of_caller(1))


def pick(pred, then_fn, else_fn):
    """``then_fn() if pred else else_fn()`` between values computed without effect (``t = 0 if t < 0
    else t``, ``min(c / (n - 1), 0.4) if lo <= s else 0.0``), as ``if_exp`` does, except under a tensor
    condition where a side is a Python float or a number against a tensor: torch.cond cannot merge
    those (it returns tensors and ints, one type from both sides), so both sides are evaluated and
    ``torch.where`` chooses, promoting the number as torch's operators do (a 0-d tensor for two
    floats). Two sides giving one Python value (diffusers' ``gamma``, 0.0 on both with the default
    settings) give it whatever the condition: the data decides nothing, and what follows stays
    Python. The compiler writes this only for sides with no effect to run twice."""
    if not is_symbolic(pred):
        return then_fn() if _taken(pred) else else_fn()
    pred = _on_data(truth(pred))
    if isinstance(pred, torch.Tensor):
        origin = origin_of_caller(1)
        try:
            sides = then_fn(), else_fn()
        except Exception as e:
            fail(
                f"{origin}: evaluating a side of this conditional expression that data may not take raised {e!r}",
                "conditional expression",
                e,
            )
        if _one_value(*sides):
            return sides[0]
        tensors = sum(isinstance(v, torch.Tensor) for v in sides)
        if tensors == 1 or (tensors == 0 and any(isinstance(v, float) for v in sides)):
            return torch.where(pred, *sides)
    # two tensors (a cond copies them, as if_exp), two ints (a cond gives symbolic ints), a shape test
    return _cond_exp(pred, then_fn, else_fn, origin_of_caller(1))


def _one_value(a, b) -> bool:
    """Are ``a`` and ``b`` one Python number (or bool, string, None), sign of a zero included?"""
    if type(a) is not type(b) or not isinstance(a, (int, float, str, type(None))):
        return False
    return a == b and (not isinstance(a, float) or math.copysign(1.0, a) == math.copysign(1.0, b))


def _taken(pred) -> bool:
    """Which side a Python condition takes, told to the observers (the caller's caller is the user's line)."""
    taken = True if pred else False
    if observers:
        caller = sys._getframe(2)
        for observe in observers:
            observe(caller.f_code.co_filename, caller.f_lineno, taken)
    return taken


def _cond_exp(pred, then_fn, else_fn, origin: str):
    _refuse_strict_autocast(origin, "conditional expression")
    try:
        with logging_dropped():
            out = torch.cond(pred, _copied(_holding(then_fn)), _copied(_holding(else_fn)), ())
    except Exception as e:  # (non-strict only: under strict export dynamo reports torch's errors itself)
        if isinstance(pred, torch.SymBool):
            # sides torch.cond cannot return (sizes, None...): specialise on the shape condition
            # as the original expression does, rather than fail an export that worked before
            return then_fn() if pred else else_fn()
        fail(
            f"{origin}: torch.cond rejected this conditional expression on a tensor condition: {rejection(e)}",
            "conditional expression",
            e,
        )
    return _restore_kind(out)


def _holding(side):
    """``side`` reading, for each number from data it closes over (``t`` of ``t = int(t)``), the 0-d
    tensor holding it: torch.cond lifts what a side closes over into its inputs, and cannot lift an
    unbacked number ("Attempted to wrap unbacked SymInt"; ``_held``, as for ``if_stmt``'s operands).
    A side only reads what it closes over (the compiler keeps ``:=`` out of them)."""
    if torch.compiler.is_dynamo_compiling() or not side.__closure__:
        return side  # (dynamo lifts the numbers it shows as symbols itself)
    try:
        values = [cell.cell_contents for cell in side.__closure__]
    except ValueError:  # (a name the side reads is not bound yet: it fails as Python would)
        return side
    held = [_held(v) for v in values]
    if all(h is v for h, v in zip(held, values)):
        return side
    closure = tuple(types.CellType(v) for v in held)
    return types.FunctionType(side.__code__, side.__globals__, side.__name__, side.__defaults__, closure)


def _copied(side):
    def branch():
        # dynamo names graph inputs after local names: no tensor is bound to one here (see _cond)
        # (a copy of one layout: a side giving ``w.t()`` where the other gives ``w`` differs in strides)
        return pytree.tree_map_only(torch.Tensor, lambda t: t.clone(memory_format=torch.contiguous_format), side())

    branch.__name__ = getattr(side, "__name__", "side")
    return branch
