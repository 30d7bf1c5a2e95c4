"""Programs of the six families real code writes (issue 37), each with inputs taking every path.

1 Python values decided by data (a flag, None, a string, an object, a module, a callable);
2 loops whose length is data (``while True`` with a tensor ``break``, ``range`` of a tensor,
  comprehensions and generators over rows); 3 every spelling of a tensor predicate (``float(t)``,
  ``math.isclose``, ``torch.allclose``, ``max(..., key=)``); 4 containers of tensors changed in
  branches and loops; 5 statements that only report (warnings, logging) in a branch; 6 sides that
  differ only in layout (``w.t()`` against ``w``).

``PROGRAMS`` maps a name to ``Program(family, model factory, example, dynamic shapes, inputs)``;
``tests/test_families.py`` exports each in both modes and compares with eager on every input,
and ``benchmarks/families.py`` records how many export.
"""

from __future__ import annotations

import logging
import math
import warnings
from dataclasses import dataclass

import torch
from torch.export import Dim

logger = logging.getLogger("families")


@dataclass(frozen=True)
class Program:
    family: int
    make: object  # () -> nn.Module
    example: tuple
    dynamic: tuple
    inputs: list  # argument tuples: every path, other sizes


def _rows(n, k=4, sign=1.0, shift=0.25):
    return sign * (torch.arange(n * k, dtype=torch.float32).reshape(n, k) / (n * k) + shift)


D0 = ({0: Dim.DYNAMIC},)


# --- 1. Python values decided by data ----------------------------------------------------


class Negated:
    def __init__(self, f):
        self.f = f

    def __call__(self, x):
        return -self.f(x)


class FlagChoosesObject(torch.nn.Module):
    def forward(self, t, x):
        flipped = False
        if t[-1] < t[0]:
            flipped = True
        g = Negated(torch.tanh) if flipped else torch.tanh
        return g(x) * 2


class OptionalMask(torch.nn.Module):
    def forward(self, x, valid):
        mask = None
        if valid.any():
            mask = ~valid
        if mask is not None:
            x = x.masked_fill(mask.unsqueeze(-1), 0.0)
        return x + 1


class RunningMean(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(4))
        self.register_buffer("ready", torch.tensor(False))

    def update_(self, x):
        if self.ready:
            return
        self.mean.copy_(x.mean(0))
        self.ready.fill_(True)

    def forward(self, x):
        self.update_(x)
        return x - self.mean


class DispatchByIndex(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = torch.nn.ModuleList([torch.nn.Linear(4, 3) for _ in range(3)])

    def forward(self, h, task):
        return self.heads[int(task)](h)


class MatchOnValue(torch.nn.Module):
    def forward(self, x, kind):
        match int(kind):
            case 0:
                y = x * 2
            case 1:
                y = x - 1
            case _:
                y = -x
        return y


class ModeString(torch.nn.Module):
    def forward(self, x):
        mode = "scale"
        if x.abs().max() > 2:
            mode = "clip"
        if mode == "clip":
            return x.clamp(-2, 2)
        return x * 0.5


class ModuleChosen(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 4)

    def forward(self, x):
        layer = self.a if x.mean() > 0.5 else self.b
        return layer(x)


class ScaleNoneOnOneSide(torch.nn.Module):
    def forward(self, x):
        scale = None
        if x.sum() > 4:
            scale = x.abs().max()
        out = x * 2
        if scale is not None:
            out = out / scale
        return out


# --- 2. loops whose length is data ---------------------------------------------------------


class WhileTrueBreak(torch.nn.Module):
    def forward(self, x):
        while True:
            x = x * 0.5
            if x.abs().sum() < 1:
                break
        return x


class RangeOfTensor(torch.nn.Module):
    def forward(self, x, n):
        for _ in range(n):
            x = x * 0.9 + 0.1
        return x


class RangeOfItem(torch.nn.Module):
    def forward(self, x, steps):
        for _ in range(int(steps.item())):
            x = torch.tanh(x) + 0.1
        return x


class StackComprehension(torch.nn.Module):
    def forward(self, x):
        return torch.stack([torch.tanh(r) * 2 for r in x])


class AnyGenerator(torch.nn.Module):
    def forward(self, x):
        if any(p.sum() > 1.5 for p in x.unbind(0)):
            return x * 0.5
        return x


class SumGenerator(torch.nn.Module):
    def forward(self, x):
        return sum(v * v for v in x)


class RowsBreak(torch.nn.Module):
    def forward(self, x):
        acc = torch.zeros_like(x[0])
        for row in x:
            if row.sum() > 2:
                break
            acc = acc + row
        return acc


class RowWriteDynamicWidth(torch.nn.Module):
    def forward(self, x):
        out = torch.zeros_like(x)
        for i in range(x.shape[0]):
            out[i] = x[i] * 2 + 1
        return out


class RowIndexDynamicWidth(torch.nn.Module):
    def forward(self, x):
        acc = torch.zeros(x.shape[1])
        for i in range(x.shape[0]):
            acc = acc + x[i] * (i + 1)
        return acc


# --- 3. spellings of a tensor predicate ----------------------------------------------------


class FloatOfTensor(torch.nn.Module):
    def forward(self, x):
        if float(x.mean()) > 0.5:
            return x * 2
        return x


class IntArgmax(torch.nn.Module):
    def forward(self, x):
        if int(x.sum(1).argmax()) == 0:
            return x + 1
        return x - 1


class MathIsclose(torch.nn.Module):
    def forward(self, x):
        v = x.sum().item()
        if math.isclose(v, 0.0, abs_tol=1e-3):
            return x
        return x / v


class AbsOfItem(torch.nn.Module):
    def forward(self, x):
        v = x.mean().item()
        if abs(v) > 0.5:
            return x * 0.5
        return x


class Allclose(torch.nn.Module):
    def forward(self, x, y):
        if torch.allclose(x, y):
            return x
        return x - y


class IscloseAll(torch.nn.Module):
    def forward(self, x, y):
        if torch.isclose(x, y).all():
            return x * 3
        return y


class IsNonzero(torch.nn.Module):
    def forward(self, x):
        if torch.is_nonzero(x.sum() > 1):
            return x * 2
        return x


class MaxWithKey(torch.nn.Module):
    def forward(self, a, b, c):
        return max([a, b, c], key=lambda t: t.sum()) * 2


class BoolReturnedByHelper(torch.nn.Module):
    @staticmethod
    def any_large(x):
        return bool((x > 1.5).any())

    def forward(self, x):
        if self.any_large(x):
            return x * 0.5
        return x


# --- 4. containers ---------------------------------------------------------------------------


class ListChangedInBranch(torch.nn.Module):
    def forward(self, x, y):
        params = [x.clone(), y.clone()]
        if x.sum() > 0:
            for p in params:
                p.mul_(0.5)
        return params[0] + params[1]


class ListEntryIncremented(torch.nn.Module):
    def forward(self, x):
        buf = [x.sum(0), x.mean(0)]
        if x.max() > 1:
            buf[0] += 1
        return buf[0] * buf[1]


class DictEntryDecremented(torch.nn.Module):
    def forward(self, x):
        acc = {"n": x.sum(0), "k": x.mean(0)}
        if x.min() < 0.5:
            acc["n"] -= acc["k"]
        return acc["n"]


class SharedAppend(torch.nn.Module):
    def forward(self, x):
        outs = []
        if x.sum() > 2:
            y = x * 2
            outs.append(y)
        else:
            y = -x
            outs.append(y)
        return torch.cat(outs) + 1


class SetOnOneSideReadUnderSameTest(torch.nn.Module):
    def forward(self, x):
        big = x.sum() > 3
        if big:
            scale = x.abs().max()
        y = x * 2
        if big:
            y = y / scale
        return y


class DelInBranch(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            tmp = x * 2
            x = tmp + 1
            del tmp
        return x


# --- 5. statements that only report --------------------------------------------------------


def warn_once(msg, rank=0):
    if rank == 0:
        warnings.warn(msg, stacklevel=2)


class WrappedWarning(torch.nn.Module):
    def forward(self, x):
        if torch.isnan(x).any():
            warn_once("NaN in the input")
            x = torch.nan_to_num(x)
        return x * 2


class LoggerWarning(torch.nn.Module):
    def forward(self, x):
        if x.abs().max() > 3:
            logger.warning("large activations")
            x = x.clamp(-3, 3)
        return x + 1


class PrintInBranch(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 5:
            print("sum above 5")
            x = x / 2
        return x


# --- 6. sides that differ in layout -----------------------------------------------------------


class TransposedSide(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        if x.mean() > 0.5:
            w = self.w.t()
        else:
            w = self.w
        return x @ w


# --- added with the mechanisms of the second round: an index bound to a name, numbers compared by
# max/min, keys read with .item(), containers whose length or keys a side changes, reports that
# torch cannot trace inside a cond, sides of two dtypes ---------------------------------------------


class HeadByBoundIndex(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.heads = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))

    def forward(self, x, which):
        k = int(which.sum()) % 3
        return self.heads[k](x)


class ExtremesOfItems(torch.nn.Module):
    def forward(self, x):
        lo, hi = x.min().item(), x.max().item()
        peak = max(abs(lo), abs(hi))
        if min(peak, 1.5) == 1.5:
            x = x / peak
        return x + max(peak, 0.5)


class SortedByItemKeys(torch.nn.Module):
    def forward(self, x):
        parts = x.split(2, dim=-1)
        ordered = sorted(parts, key=lambda p: p.abs().sum().item(), reverse=True)
        return torch.cat(ordered, dim=-1)


class AppendsOnBothSides(torch.nn.Module):
    def forward(self, x):
        parts = [x]
        if x.mean() > 0.5:
            parts.append(x.exp())
        else:
            parts.append(x.sin())
        parts.append(x * 2)
        return torch.cat(parts, dim=-1)


class KeyAddedOnOneSide(torch.nn.Module):
    def forward(self, x, y):
        terms = {"main": x.pow(2).mean()}
        if (y > 0).any():
            terms["aux"] = y.clamp_min(0).mean()
        return sum(terms.values()) + x


class EntryDeletedOnOneSide(torch.nn.Module):
    def forward(self, x):
        feats = {"a": x * 2, "b": x + 1}
        if x.min() < 0:
            del feats["b"]
        return feats.get("b", feats["a"]) - 1


class SidesOfTwoDtypes(torch.nn.Module):
    def forward(self, counts):
        if counts.sum() > 10:
            y = counts * 0.5
        else:
            y = counts * 2
        return y.float() / 3


class CategorisedWarning(torch.nn.Module):
    def forward(self, x):
        if x.abs().max() > 2:
            warnings.warn(f"clipping a peak of {x.abs().max().item():.2f}", RuntimeWarning, stacklevel=2)
            x = x.clamp(-2, 2)
        return x * 3


class ReportingHelper(torch.nn.Module):
    @staticmethod
    def _report(x):
        if not torch.isfinite(x).all():
            warnings.warn("non-finite values", RuntimeWarning, stacklevel=3)
        elif x.abs().max() > 3:
            logger.info("large magnitude %.3f", x.abs().max().item())

    def forward(self, x):
        self._report(x)
        return torch.nan_to_num(x).clamp(-3, 3)


def _positive_mask(x, threshold=0.0):
    """A helper giving None or a mask, decided by data: its caller reads which."""
    if (x > threshold).any():
        return x > threshold
    return None


class HelperGivesNoneOrMask(torch.nn.Module):
    def forward(self, x):
        above = _positive_mask(x, threshold=0.5)
        below = _positive_mask(-x)
        y = x * 2
        if above is not None:
            y = torch.where(above, y, 0.0)
        if below is not None:
            y = y + below.float()
        return y


_ACTIVATIONS = (torch.sin, torch.tanh, torch.relu)


class ActivationByIndexArithmetic(torch.nn.Module):
    def forward(self, x):
        return _ACTIVATIONS[int((x > 0).sum()) % 3](x)  # a tuple of functions, indexed by data


class AllcloseBoundToName(torch.nn.Module):
    def forward(self, x, y):
        same = torch.allclose(x, y)
        if same:
            return x * 2
        return x + y


class MinByFloatKey(torch.nn.Module):
    def forward(self, x, y):
        best = min((x, y), key=lambda t: float(t.sum()))
        return best * 2


class SymmetrisedWhenNot(torch.nn.Module):
    def forward(self, a):
        if not torch.allclose(a, a.mT, atol=1e-6):
            a = 0.5 * (a + a.mT)  # a view attribute of what the branch is handed
        return a @ a.mT


class MaskHandedOnByAMethod(torch.nn.Module):
    def prepare(self, x):
        scaled = x * 1.5
        return _positive_mask(scaled)  # None or a mask, given on as this method's own result

    def forward(self, x):
        mask = self.prepare(x)
        return x if mask is None else x * mask


class MethodPicksSubmodule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(4, 4)
        self.down = torch.nn.Linear(4, 4)

    def head(self, x):
        if x.mean() > 0:
            return self.up
        return self.down

    def forward(self, x):
        h = self.head(x)
        out = h(x)  # the module the data chose
        return out.relu()


class MethodPicksActivation(torch.nn.Module):
    def activation(self, x):
        if x.abs().max() > 4:
            return torch.tanh  # squash large inputs
        return torch.nn.functional.gelu

    def forward(self, x, scale: bool = True):
        if scale:
            act = self.activation(x)
            return act(x) * 3
        return x


_X = _rows(5)
PROGRAMS = {
    "flag chooses an object": Program(
        1,
        FlagChoosesObject,
        (torch.tensor([3.0, 1.0]), _X),
        (None, {0: Dim.DYNAMIC}),
        [(torch.tensor([1.0, 3.0]), _rows(6)), (torch.tensor([3.0, 1.0]), _rows(3))],
    ),
    "optional mask": Program(
        1,
        OptionalMask,
        (_X, torch.tensor([True, False, True, True, False])),
        ({0: Dim.DYNAMIC}, {0: Dim.DYNAMIC}),
        [(_rows(3), torch.zeros(3, dtype=torch.bool)), (_rows(4), torch.tensor([True, False, False, True]))],
    ),
    "bare return under a buffer test": Program(
        1,
        RunningMean,
        (_X,),
        D0,
        [(_rows(6),), (_rows(3, sign=-1),)],
    ),
    "dispatch by a 0-d tensor": Program(
        1,
        DispatchByIndex,
        (_X, torch.tensor(1)),
        (D0[0], None),
        [(_rows(3), torch.tensor(0)), (_rows(6), torch.tensor(2)), (_rows(2), torch.tensor(1))],
    ),
    "match on a tensor's value": Program(
        1,
        MatchOnValue,
        (_X, torch.tensor(1)),
        (D0[0], None),
        [(_rows(3), torch.tensor(0)), (_rows(6), torch.tensor(2)), (_rows(2), torch.tensor(1))],
    ),
    "mode string": Program(1, ModeString, (_X * 10,), D0, [(_rows(3) * 10,), (_rows(6),)]),
    "module chosen": Program(1, ModuleChosen, (_X,), D0, [(_rows(3) + 1,), (_rows(6) - 1,)]),
    "None on one side, tested later": Program(1, ScaleNoneOnOneSide, (_X * 3,), D0, [(_rows(3),), (_rows(7) * 4,)]),
    "while True with a tensor break": Program(2, WhileTrueBreak, (_X * 8,), D0, [(_rows(3),), (_rows(6) * 100,)]),
    "range of a 0-d tensor": Program(
        2,
        RangeOfTensor,
        (_X, torch.tensor(3)),
        (D0[0], None),
        [(_rows(3), torch.tensor(0)), (_rows(6), torch.tensor(7))],
    ),
    "range of int(t.item())": Program(
        2,
        RangeOfItem,
        (_X, torch.tensor(2.0)),
        (D0[0], None),
        [(_rows(3), torch.tensor(0.0)), (_rows(6), torch.tensor(5.0))],
    ),
    "stack of a comprehension over rows": Program(2, StackComprehension, (_X,), D0, [(_rows(3),), (_rows(8),)]),
    "any() of a generator over rows": Program(2, AnyGenerator, (_X,), D0, [(_rows(3),), (_rows(7) * 3,)]),
    "sum() of a generator over rows": Program(2, SumGenerator, (_X,), D0, [(_rows(3),), (_rows(7),)]),
    "for row in x with a tensor break": Program(2, RowsBreak, (_X * 3,), D0, [(_rows(3),), (_rows(7) * 5,)]),
    "row writes, dynamic width": Program(
        2, RowWriteDynamicWidth, (_X,), ({0: Dim.DYNAMIC, 1: Dim.DYNAMIC},), [(_rows(3, 6),), (_rows(7, 2),)]
    ),
    "row reads, dynamic width": Program(
        2, RowIndexDynamicWidth, (_X,), ({0: Dim.DYNAMIC, 1: Dim.DYNAMIC},), [(_rows(3, 6),), (_rows(7, 2),)]
    ),
    "float(t)": Program(3, FloatOfTensor, (_X,), D0, [(_rows(3) + 1,), (_rows(6) - 1,)]),
    "int(t.argmax())": Program(3, IntArgmax, (_X,), D0, [(_rows(3).flip(0),), (_rows(6),)]),
    "math.isclose of an item": Program(3, MathIsclose, (_X,), D0, [(_rows(3) - _rows(3).mean(),), (_rows(6),)]),
    "abs() of an item": Program(3, AbsOfItem, (_X,), D0, [(_rows(3) * 4,), (_rows(6) * 0.1,)]),
    "torch.allclose": Program(
        3,
        Allclose,
        (_X, _X + 1),
        ({0: Dim.DYNAMIC}, {0: Dim.DYNAMIC}),
        [(_rows(3), _rows(3)), (_rows(6), _rows(6) * 2)],
    ),
    "torch.isclose(...).all()": Program(
        3, IscloseAll, (_X, _X + 1), ({0: Dim.DYNAMIC}, {0: Dim.DYNAMIC}), [(_rows(3), _rows(3)), (_rows(6), -_rows(6))]
    ),
    "torch.is_nonzero": Program(3, IsNonzero, (_X,), D0, [(_rows(3) * 0.01,), (_rows(6),)]),
    "max with key=": Program(
        3,
        MaxWithKey,
        (_X, -_X, _X * 2),
        ({0: Dim.DYNAMIC},) * 3,
        [(_rows(3), _rows(3) * 3, -_rows(3)), (-_rows(6), -_rows(6) * 2, _rows(6) * 0.1)],
    ),
    "bool returned by a helper": Program(3, BoolReturnedByHelper, (_X * 4,), D0, [(_rows(3),), (_rows(6) * 5,)]),
    "list of tensors changed in a branch": Program(
        4,
        ListChangedInBranch,
        (_X, _X.clone()),
        ({0: Dim.DYNAMIC}, {0: Dim.DYNAMIC}),
        [(_rows(3, sign=-1), _rows(3)), (_rows(6), _rows(6))],
    ),
    "list entry += in a branch": Program(4, ListEntryIncremented, (_X * 4,), D0, [(_rows(3),), (_rows(6) * 5,)]),
    "dict entry -= in a branch": Program(4, DictEntryDecremented, (_X,), D0, [(_rows(3) + 1,), (_rows(6),)]),
    "append shared by both sides": Program(4, SharedAppend, (_X,), D0, [(_rows(3) * 0.1,), (_rows(6),)]),
    "set on one side, read under the same test": Program(
        4, SetOnOneSideReadUnderSameTest, (_X * 3,), D0, [(_rows(3) * 0.1,), (_rows(6) * 3,)]
    ),
    "del in a branch": Program(4, DelInBranch, (_X,), D0, [(_rows(3, sign=-1),), (_rows(6),)]),
    "wrapped warning in a branch": Program(
        5, WrappedWarning, (_X,), D0, [(_rows(3),), (torch.tensor([[1.0, float("nan"), 0.0, 2.0]] * 3),)]
    ),
    "logger.warning in a branch": Program(5, LoggerWarning, (_X * 8,), D0, [(_rows(3),), (_rows(6) * 9,)]),
    "print in a branch": Program(5, PrintInBranch, (_X * 3,), D0, [(_rows(3),), (_rows(6) * 4,)]),
    "sides differing in layout": Program(6, TransposedSide, (_X,), D0, [(_rows(3) + 1,), (_rows(6) - 1,)]),
    "index bound to int(t) picks a module": Program(
        1,
        HeadByBoundIndex,
        (_X, torch.tensor([2.0])),
        ({0: Dim.DYNAMIC}, None),
        [(_rows(3), torch.tensor([0.0])), (_rows(6), torch.tensor([1.0])), (_rows(2), torch.tensor([5.0]))],
    ),
    "max and min of numbers read from data": Program(
        3, ExtremesOfItems, (_X * 4,), D0, [(_rows(3) * 0.5,), (_rows(6, sign=-1) * 9,)]
    ),
    "sorted by keys read with .item()": Program(
        3,
        SortedByItemKeys,
        (torch.arange(30.0).reshape(5, 6) % 7,),
        D0,
        [(torch.arange(18.0).reshape(3, 6).flip(-1),), (-torch.arange(36.0).reshape(6, 6) % 5,)],
    ),
    "appends of differing values on both sides": Program(
        4, AppendsOnBothSides, (_X,), D0, [(_rows(3) * 0.1,), (_rows(6) * 3,)]
    ),
    "dict gains a key on one side": Program(
        4,
        KeyAddedOnOneSide,
        (_X, _rows(5)),
        ({0: Dim.DYNAMIC}, {0: Dim.DYNAMIC}),
        [(_rows(3), _rows(3, sign=-1)), (_rows(6), _rows(4))],
    ),
    "dict entry deleted on one side": Program(4, EntryDeletedOnOneSide, (_X,), D0, [(_rows(3, sign=-1),), (_rows(6),)]),
    "sides of two dtypes": Program(
        6,
        SidesOfTwoDtypes,
        (torch.arange(10).reshape(5, 2),),
        D0,
        [(torch.zeros(3, 2, dtype=torch.int64),), (torch.arange(12).reshape(6, 2),)],
    ),
    "warning with a category formatting data": Program(
        5, CategorisedWarning, (_X * 4,), D0, [(_rows(3),), (_rows(6) * 9,)]
    ),
    "helper gives None or a mask": Program(
        1, HelperGivesNoneOrMask, (_rows(5) - 0.5,), D0, [(_rows(3),), (-_rows(6),), (_rows(7) - 0.6,)]
    ),
    "a tuple of functions indexed by int(t) % 3": Program(
        1, ActivationByIndexArithmetic, (_X,), D0, [(_rows(3, sign=-1),), (_rows(6) - 0.5,), (_rows(4) - 0.3,)]
    ),
    "torch.allclose bound to a name": Program(
        3, AllcloseBoundToName, (_X, _X + 1), (D0[0], D0[0]), [(_rows(3), _rows(3)), (_rows(6), -_rows(6))]
    ),
    "min with a float() key": Program(
        3, MinByFloatKey, (_X, -_X), (D0[0], D0[0]), [(_rows(3), -_rows(3)), (-_rows(6), _rows(6))]
    ),
    "allclose to its own transpose": Program(
        3,
        SymmetrisedWhenNot,
        (torch.arange(18.0).reshape(2, 3, 3) / 9,),
        D0,
        [(torch.ones(4, 3, 3),), (torch.arange(45.0).reshape(5, 3, 3) / 20,)],
    ),
    "None or a mask handed on by a method": Program(
        1, MaskHandedOnByAMethod, (_X,), D0, [(-_rows(3),), (_rows(6) - 0.5,)]
    ),
    "method picks a submodule": Program(1, MethodPicksSubmodule, (_X,), D0, [(_rows(3),), (-_rows(6),)]),
    "method picks a function, called in a Python if": Program(
        1, MethodPicksActivation, (_X,), D0, [(_rows(3) * 10,), (_rows(6),)]
    ),
    "if/elif of reports in a helper": Program(
        5,
        ReportingHelper,
        (_X,),
        D0,
        [(torch.tensor([[float("inf"), 1.0, 0.0, 2.0]] * 3),), (_rows(6) * 9,), (_rows(2),)],
    ),
}


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and torch.allclose(a, b, equal_nan=True, atol=1e-5, rtol=1e-4)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def check(program: Program, strict: bool, export) -> str:
    """ "ok", or what went wrong: the export's error, or the first input where the program and eager
    differ (results, or the model's state after the call). ``export(model, example, dynamic, strict)``."""
    model, twin = program.make(), program.make()
    twin.load_state_dict(model.state_dict())
    try:
        ep = export(model, program.example, program.dynamic, strict)
    except Exception as e:
        return f"error: {type(e).__name__}: {str(e).splitlines()[0][:300]}"
    exported = ep.module()
    for args in [program.example, *program.inputs]:
        try:
            got = exported(*[a.clone() for a in args])
        except Exception as e:
            return f"run: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        want = twin(*[a.clone() for a in args])
        if not _same(got, want):
            return f"differs on {[tuple(a.shape) for a in args]}"
        state = {k: v for k, v in exported.state_dict().items()}
        for k, v in twin.state_dict().items():
            if k in state and not _same(state[k], v):
                return f"state {k} differs on {[tuple(a.shape) for a in args]}"
    return "ok"
