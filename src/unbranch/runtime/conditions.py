"""Python's truth tests on tensors, in a form ``torch.cond`` can take while torch.export traces.

    if bool(t):                 ->  if _ub.bool_(t):
    if int(n) == 3:             ->  if _ub.int_(n) == 3:
    if any(t.any() for t in xs) ->  if _ub.any_(t.any() for t in xs):
    if pad_id in ids[:, -1]:    ->  if _ub.in_(pad_id, ids[:, -1]):
    if torch.equal(a, b):       ->  if _ub.equal(a, b):
    if torch.allclose(a, b):    ->  if _ub.allclose(a, b):
    if math.isclose(v, 0.0):    ->  if _ub.isclose(v, 0.0):

(normalise/condition_forms.py writes these, in the tests of dispatched ifs and whiles only.)
Each helper returns exactly what Python's form returns, unless torch.export traces and a
value is symbolic: then a 0-d tensor or a SymBool stands for the Python bool or int, which
the dispatched ``if`` turns into a ``torch.cond``. Where the Python form would fail (a
tensor of several elements, an unsupported operand), the helper evaluates the Python form
itself, so it fails as the original did.
"""

from __future__ import annotations

import functools
import math
import numbers
import operator

import torch
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols, statically_known_false, statically_known_true

from ._tracing import fail, is_symbolic, tracing, truth, truth_tensor
from .checks import check
from .loops import Stacked

# the operators rewritten code calls as ``_ub.<name>``
__all__ = [
    "all_",
    "allclose",
    "any_",
    "bool_",
    "equal",
    "first",
    "float_",
    "in_",
    "indices",
    "int_",
    "isclose",
    "isfinite",
    "isinf",
    "isnan",
    "len_",
    "max_",
    "min_",
    "not_in",
]

_SYM_NUMBERS = (torch.SymInt, torch.SymFloat)


def _known_true(c) -> bool:
    """Is the bool or SymBool ``c`` true for every size, asking without adding a guard?

    A real bool is told by identity first: under strict export dynamo shows a SymBool as a
    bool, and answers ``statically_known_false(True)`` with True (measured, torch 2.13).
    """
    return c is True or (c is not False and statically_known_true(c))


def _known_false(c) -> bool:
    return c is False or (c is not True and statically_known_false(c))


def _one_element(t: torch.Tensor) -> bool:
    """Is ``t`` known to hold exactly one element (``bool(t)`` defined) without guarding on it?"""
    return _known_true(t.numel() == 1)


def _truth(value):
    """``bool(value)``, or a symbolic stand-in for it while tracing."""
    if tracing():
        if isinstance(value, torch.Tensor) and _one_element(value):
            return truth(value)  # (the one truth every lowering takes: 0-d, bool)
        if isinstance(value, (bool, torch.SymBool)):
            return value  # (under strict export a SymBool shows as a bool: bool() would specialise it)
        if isinstance(value, (int, float, *_SYM_NUMBERS)):
            return value != 0  # exact for Python numbers; a SymBool for symbolic ones
    return bool(value)


def bool_(value):
    """``bool(value)``; the tensor (or SymBool) ``value != 0`` while torch.export traces."""
    return _truth(value)


def int_(value):
    """``int(value)``; for a one-element tensor while tracing, its value truncated: a symbolic int
    (``.item()``) under non-strict export, which a size (``torch.zeros(n)``), an index, arithmetic
    and a dispatched test take; an int64 0-d tensor under dynamo (strict export), which refuses such
    an int as an index or a loop's length (measured, torch 2.13) but takes the tensor there."""
    if tracing() and isinstance(value, torch.Tensor) and _one_element(value) and not value.is_complex():
        whole = (value.trunc() if value.is_floating_point() else value).to(torch.int64).reshape(())
        return whole if torch.compiler.is_dynamo_compiling() else whole.item()
    if tracing() and isinstance(value, torch.SymFloat):
        return torch.sym_int(value)
    if tracing() and isinstance(value, torch.SymInt):
        return value
    return int(value)


def float_(value):
    """``float(value)``; for a one-element tensor while tracing, its value as a float64 tensor."""
    if tracing() and isinstance(value, torch.Tensor) and _one_element(value) and not value.is_complex():
        return value.to(torch.float64).reshape(())
    if tracing() and isinstance(value, _SYM_NUMBERS):
        return torch.sym_float(value)
    return float(value)


def _combine(values, op: str):
    """``values[0] or values[1] or ...`` (``op`` "or", else "and") of symbolic truths."""
    if any(isinstance(v, torch.Tensor) for v in values):
        join = torch.logical_or if op == "or" else torch.logical_and
        return functools.reduce(join, [truth_tensor(v) for v in values])
    return functools.reduce(operator.or_ if op == "or" else operator.and_, values)


def any_(iterable):
    """``any(iterable)``; while tracing, the logical or of the symbolic items (all of them are evaluated),
    or of the rows a scan stacked (a loop appended them)."""
    if isinstance(iterable, Stacked):
        return _rows_truth(iterable).any()
    return any(iterable) if not tracing() else _fold(iterable, "or")


def all_(iterable):
    """``all(iterable)``; while tracing, the logical and of the symbolic items (all of them are evaluated),
    or of the rows a scan stacked."""
    if isinstance(iterable, Stacked):
        return _rows_truth(iterable).all()
    return all(iterable) if not tracing() else _fold(iterable, "and")


def first(items, rows, value, *default):
    """``next(value(r) for r in rows if test, *default)``, the loop before it having appended each
    row's test to ``items`` (normalise/comprehensions). Eagerly the first row whose test holds,
    else the default or StopIteration, as ``next`` gives. While tracing, the index of the first
    true test (an argmax), the row read there, and a check standing for the StopIteration (or
    ``torch.where`` of a tensor default)."""
    if isinstance(items, Stacked):
        hits = _rows_truth(items)
    elif tracing() and any(is_symbolic(t) for t in items):
        hits = torch.stack([truth_tensor(t) for t in items])
    else:
        for row, test in zip(rows, items):
            if test:
                return value(row)
        if default:
            return default[0]
        raise StopIteration
    found = hits.any()
    if not default:
        check(found, "StopIteration: no item of the generator given to next() passed its test")
    at = hits.to(torch.int64).argmax().reshape(1)  # (the first of the largest: the first true test)
    if isinstance(rows, torch.Tensor) and rows.device != at.device:
        at = at.to(rows.device)  # (``indices``' arange is made on the CPU)
    chosen = value(rows.index_select(0, at).squeeze(0))
    if not default:
        return chosen
    if _scalar(default[0]) and isinstance(chosen, torch.Tensor) and chosen.dim() == 0:
        # a number for a default, a 0-d row (an index): a 0-d tensor either way, as a loop's counter is
        return torch.where(found, chosen, torch.full((), default[0], dtype=chosen.dtype, device=chosen.device))
    if not isinstance(default[0], torch.Tensor):
        fail(
            "next() of a generator filtered on data, with a default that is no tensor: data decides whether "
            "the result is the default or a row, and an exported program gives one kind of value",
            "next",
        )
    return torch.where(found, chosen, default[0])


def indices(*bounds):
    """``range(*bounds)`` of ``next(i for i in range(n) if ...)``: while tracing, ``torch.arange`` (Python's
    range needs ints: a symbolic size would be fixed to the example's)."""
    return torch.arange(*bounds) if tracing() else range(*bounds)


def _scalar(value) -> bool:
    return isinstance(value, (int, float, torch.SymInt, torch.SymFloat)) and not isinstance(value, bool)


def _rows_truth(items) -> torch.Tensor:
    """The truth of each stacked item: one element each, as ``bool()`` needs of every item."""
    rows = items.tensor()
    rows = rows.reshape(rows.shape[0], -1)
    torch._check(rows.shape[1] == 1, lambda: "bool() of an item of several elements")
    rows = rows[:, 0]
    return rows if rows.dtype == torch.bool else rows != 0


def _fold(iterable, op: str):
    """The symbolic items joined by ``op``; a Python item that decides the result ends it as Python would."""
    decisive = op == "or"  # any() stops at a true item, all() at a false one
    symbolic = []
    for item in iterable:
        truth = _truth(item)
        if is_symbolic(truth):
            symbolic.append(truth)
        elif bool(truth) == decisive:
            return decisive
    return _combine(symbolic, op) if symbolic else not decisive


_CONTAINED = (torch.Tensor, numbers.Number, torch.SymInt, torch.SymFloat, torch.SymBool)


def in_(item, container):
    """``item in container``; while tracing, a tensor for a tensor container (``Tensor.__contains__``
    without its ``.item()``), and a symbolic or over the items of a list or tuple."""
    if tracing():
        if isinstance(container, torch.Tensor) and isinstance(item, _CONTAINED):
            return (container == item).any()
        if isinstance(container, (list, tuple)) and isinstance(item, (torch.Tensor, *_SYM_NUMBERS, torch.SymBool)):
            return any_(True if element is item else element == item for element in container)
    return item in container


def not_in(item, container):
    """``item not in container`` (see ``in_``)."""
    found = in_(item, container)
    if not is_symbolic(found):
        return not found
    return torch.logical_not(found) if isinstance(found, torch.Tensor) else torch.sym_not(found)


def equal(a, b):
    """``torch.equal(a, b)``: same size and same elements; while tracing, a 0-d bool tensor.

    Sizes that may differ at run time (two dynamic dims) are compared symbolically, and the
    elements on the common prefix of both flattened tensors, so no guard ties the sizes.
    """
    if not (tracing() and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return torch.equal(a, b)
    if a.dim() != b.dim():
        return False
    same = [sa == sb for sa, sb in zip(a.shape, b.shape)]
    if any(_known_false(s) for s in same):
        return False
    unknown = [s for s in same if not _known_true(s)]
    if not unknown:
        return (a == b).all()
    n = torch.sym_min(a.numel(), b.numel())
    elements = (a.reshape(-1)[:n] == b.reshape(-1)[:n]).all()
    return _combine([functools.reduce(operator.and_, unknown), elements], "and")


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """``torch.allclose(a, b, ...)``; while tracing, a 0-d bool tensor (torch's own gives Python the
    answer, which is data)."""
    if not (tracing() and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return torch.allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    return torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan).all()


def _of_data(value) -> bool:
    """A number that may be data while tracing: a one-element tensor, a symbolic float or int (under
    dynamo, which shows those as Python numbers, any number that is not an int)."""
    if not tracing():
        return False
    dynamo = torch.compiler.is_dynamo_compiling() and isinstance(value, float)
    return dynamo or isinstance(value, (torch.Tensor, *_SYM_NUMBERS))


def _number(value) -> torch.Tensor:
    """``value`` as a 0-d float64 tensor (a one-element tensor's element, a symbolic or Python number)."""
    if isinstance(value, torch.Tensor):
        return value.to(torch.float64).reshape(())
    return torch.scalar_tensor(value, dtype=torch.float64)


def isclose(a, b, *, rel_tol=1e-09, abs_tol=0.0):
    """``math.isclose(a, b, ...)``; while tracing, on a number that is data, a 0-d bool tensor of the same
    test: equal, or ``|a - b| <= max(rel_tol * max(|a|, |b|), abs_tol)``."""
    if not (_of_data(a) or _of_data(b)):
        return math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)
    a, b = _number(a), _number(b)
    bound = torch.maximum(rel_tol * torch.maximum(a.abs(), b.abs()), torch.scalar_tensor(abs_tol, dtype=torch.float64))
    return (a == b) | ((a - b).abs() <= bound)


def isfinite(value):
    """``math.isfinite(value)``; a 0-d bool tensor for a number that is data while tracing."""
    return torch.isfinite(_number(value)) if _of_data(value) else math.isfinite(value)


def isnan(value):
    """``math.isnan(value)``; a 0-d bool tensor for a number that is data while tracing."""
    return torch.isnan(_number(value)) if _of_data(value) else math.isnan(value)


def isinf(value):
    """``math.isinf(value)``; a 0-d bool tensor for a number that is data while tracing."""
    return torch.isinf(_number(value)) if _of_data(value) else math.isinf(value)


def len_(value):
    """``len(value)``; a tensor's length while torch.export traces, when it is data (``len(boxes[keep])``).

    ``Tensor.__len__`` must give Python an int, which a length computed from data (unbacked)
    cannot be under export; the SymInt itself serves every use a size has. A length torch
    knows as a size keeps Python's ``len`` (and its specialisation), as the original.
    """
    if isinstance(value, torch.Tensor) and tracing() and value.dim() > 0:
        n = value.shape[0]
        if isinstance(n, torch.SymInt) and free_unbacked_symbols(n):
            return n
    return len(value)


def max_(*values):
    """``max(a, b, ...)``; the largest without asking for a value, where one is data while tracing."""
    return _extreme(values, max, torch.sym_max, torch.maximum)


def min_(*values):
    """``min(a, b, ...)``; the smallest without asking for a value, where one is data while tracing."""
    return _extreme(values, min, torch.sym_min, torch.minimum)


def _extreme(values, python, symbolic, elementwise):
    """Python's ``max``/``min`` of numbers, or while tracing, where one is data, ``torch.sym_max`` of
    the numbers (``.item()``s), the element-wise form where one is a 0-d tensor standing for a number
    (a comparison would ask Python for its truth). A NaN then propagates, as torch's forms do."""
    numbers_only = all(isinstance(v, (int, float, *_SYM_NUMBERS)) and not isinstance(v, bool) for v in values)
    tensors = all(
        (isinstance(v, torch.Tensor) and _one_element(v)) or isinstance(v, (int, float, *_SYM_NUMBERS)) for v in values
    )
    data = any(is_symbolic(v) or (isinstance(v, _SYM_NUMBERS) and free_unbacked_symbols(v)) for v in values)
    if not tracing() or len(values) < 2 or not data:
        return python(*values)
    if numbers_only:
        return functools.reduce(symbolic, values)
    if tensors:
        as_tensors = [v.reshape(()) if isinstance(v, torch.Tensor) else torch.full((), v) for v in values]
        return functools.reduce(elementwise, as_tensors)
    return python(*values)
