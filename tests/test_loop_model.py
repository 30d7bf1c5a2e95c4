"""Loops that data leaves: a name first bound in the loop, nested breaks through flags, rows of slices.

Each model goes through ``unbranch.export`` with every dimension dynamic; ``ep.module()`` must
match the original eager model on inputs taking each exit (first step, a middle one, none:
the ``else``), and on shapes other than the example's.
"""

import contextlib

import pytest
import torch
from helpers import MODES, all_dynamic, assert_same

import unbranch


class FirstMatch(torch.nn.Module):
    """``for ... else``: the first row with a positive sum, doubled; else zeros (``out`` first bound in the loop)."""

    def forward(self, x):
        for i in range(4):
            if x[i].sum() > 0:
                out = x[i] * 2
                break
        else:
            out = x[0] * 0
        return out


class FirstMatchBound(torch.nn.Module):
    """The same search with the result bound before the loop (a row of ``x`` carried by the loop op)."""

    def forward(self, x):
        out = x[0] * 0
        for i in range(4):
            if x[i].sum() > 0:
                out = x[i]
                break
        return out


FIRST_MATCH_CODE = FirstMatch.forward.__code__


def _rows(n, positive_at):
    """``n`` rows of 3 with negative sums, except the row ``positive_at`` (None: none is positive)."""
    x = -torch.rand(n, 3) - 0.1
    if positive_at is not None:
        x[positive_at] = torch.rand(3) + 0.1
    return x


def _narrowed(narrows: bool, rows: int = 3):
    """Where the program needs more rows than eager takes: the check's warning, naming the size."""
    if not narrows:
        return contextlib.nullcontext()
    return pytest.warns(UserWarning, match=f"refuses sizes eager takes: on inputs of size {rows} in dimension 0")


def _same(model, ep, inputs):
    for args in inputs:
        assert_same(ep.module()(*(a.clone() for a in args)), model(*(a.clone() for a in args)))


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize("model", [FirstMatch(), FirstMatchBound()], ids=["first-bound", "bound-before"])
def test_search_with_break_exits_at_every_step(model, strict):
    example = (_rows(5, 2),)
    with _narrowed(not strict):  # (non-strict: the bounded loop op reads row 3 at every step, eager may stop before)
        ep = unbranch.export(model, example, dynamic_shapes=all_dynamic(example), strict=strict)
    inputs = [(_rows(n, at),) for n, at in [(5, 0), (6, 1), (7, 3), (4, None), (9, None), (8, 5)]]
    _same(model, ep, inputs)
    wide = -torch.rand(6, 5) - 0.1
    wide[2] = 1.0
    _same(model, ep, [(wide,)])  # another row width


def test_first_bound_eager_is_exact():
    """Inside the context the rewritten loop runs eagerly: the same values, and Python's own error
    where the name stays unbound (no row before the fifth, and no else)."""

    class LastMatch(torch.nn.Module):
        def forward(self, x):
            for i in range(4):
                if x[i].sum() > 0:
                    found = x[i]
                    break
            return found

    model = FirstMatch()
    inputs = [_rows(5, at) for at in (0, 3, None)]
    expected = [x[at] * 2 if at is not None else x[0] * 0 for x, at in zip(inputs, (0, 3, None))]
    with unbranch.torch_export_rewrite(rewrite=[FirstMatch.forward, LastMatch.forward]):
        assert FirstMatch.forward.__code__ is not FIRST_MATCH_CODE  # (the rewritten code runs)
        for x, want in zip(inputs, expected):
            assert_same(model(x), want)
        with pytest.raises(UnboundLocalError, match="'found'"):
            LastMatch()(_rows(5, None))
    assert FirstMatch.forward.__code__ is FIRST_MATCH_CODE


class NestedBreak(torch.nn.Module):
    """An inner ``break`` sets a flag the outer loop reads and breaks on."""

    def forward(self, x):
        found = False
        total = x.new_zeros(())
        for i in range(3):
            for j in range(3):
                if x[i, j] > 0:
                    found = True
                    break
                total = total + x[i, j]
            if found:
                break
        return total


@pytest.mark.parametrize("strict", MODES)
def test_nested_break_through_a_flag(strict):
    model = NestedBreak()
    example = (-torch.rand(4, 4),)
    ep = unbranch.export(model, example, dynamic_shapes=all_dynamic(example), strict=strict)
    inputs = []
    for i, j in [(0, 0), (1, 2), (2, 1), (None, None)]:
        x = -torch.rand(5, 3)
        if i is not None:
            x[i, j] = 1.0
        inputs.append((x,))
    _same(model, ep, inputs)


class Increasing(torch.nn.Module):
    """``all`` over pairs of neighbouring rows feeding a raise; a loop over the same pairs."""

    def forward(self, t):
        if not all(a < b for a, b in zip(t[:-1], t[1:])):
            raise ValueError("times must increase")
        steps = t.new_zeros(())
        for before, after in zip(t[:-1], t[1:]):
            steps = steps + (after - before) ** 2
        return steps


@pytest.mark.parametrize("strict", MODES)
def test_pairs_of_rows_over_a_dynamic_length(strict):
    model = Increasing()
    example = (torch.arange(5.0),)
    with _narrowed(True, rows=2):  # (the pairs t[:-1], t[1:] as a loop op need 3 rows, where eager takes 2)
        ep = unbranch.export(model, example, dynamic_shapes=all_dynamic(example), strict=strict)
    _same(model, ep, [(torch.arange(7.0) ** 2,), (torch.tensor([0.0, 0.5, 3.0]),)])
    with pytest.raises(ValueError):
        model(torch.tensor([0.0, 2.0, 1.0]))
    with pytest.raises(RuntimeError, match="times must increase"):
        ep.module()(torch.tensor([0.0, 2.0, 1.0]))


class FirstRow(torch.nn.Module):
    """A search over the rows of a dynamic count: ``hit`` first bound in the loop, of a row's kind."""

    def forward(self, x):
        for i, row in enumerate(x):
            if row.sum() > 0:
                hit = row * 2 + i
                break
        else:
            hit = x[0] * 0
        return hit


def test_first_bound_over_rows_is_carried_from_a_row_of_its_kind():
    """Non-strict export (strict export traces the first step's cond on a marker: refused)."""
    model = FirstRow()
    example = (_rows(5, 2),)
    ep = unbranch.export(model, example, dynamic_shapes=all_dynamic(example), strict=False)
    _same(model, ep, [(_rows(n, at),) for n, at in [(5, 0), (7, 6), (3, None), (1, None), (6, 3)]])


class ScaleRows(torch.nn.Module):
    """Rows of the input changed in place through ``enumerate(x.unbind(0))``: the caller's tensor changes."""

    def forward(self, x):
        for i, row in enumerate(x.unbind(0)):
            row.clamp_(min=-0.5 * (i + 1))
        return x * 1


class BumpRows(torch.nn.Module):
    """``row += 1`` and, under a condition on the row, ``row.mul_``; the rest of the step reads the new row."""

    def forward(self, x):
        x = x.clone()
        total = x.new_zeros(x.shape[1:])
        for row in x:
            row += 1
            if row.sum() > 2:
                row.mul_(0.5)
            total = total + row
        return x, total


class HalveUntil(torch.nn.Module):
    """Rows halved in place until the running sum passes a bound (``for ... else``): the rows the loop
    reached are changed, the others are not; the else's value where no break came."""

    def forward(self, x):
        acc = torch.zeros(x.shape[1])
        for row in x:
            row.mul_(0.5)
            if acc.sum() > 0.5:
                hit = row * 2
                break
            acc = acc + row
        else:
            hit = acc * 0
        return acc, hit


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize(
    "model", [ScaleRows(), BumpRows(), HalveUntil()], ids=["input-rows", "local-rows", "break-else"]
)
def test_rows_changed_in_place_over_a_dynamic_count(model, strict):
    example = (torch.randn(5, 3),)
    ep = unbranch.export(model, (example[0].clone(),), dynamic_shapes=all_dynamic(example), strict=strict)
    for x in (torch.randn(5, 3), torch.randn(8, 3) * 3, torch.randn(2, 4), torch.randn(1, 3)):
        mine, theirs = x.clone(), x.clone()
        assert_same(ep.module()(mine), model(theirs))
        assert_same(mine, theirs)  # the input's rows, as the original leaves them


class LastRow(torch.nn.Module):
    """Loop variables read after loops over a dynamic count: the last row, the last index."""

    def forward(self, x):
        acc = torch.zeros(x.shape[1])
        for k, row in enumerate(x):
            acc = acc + row * k
        for i in range(x.shape[0]):
            acc = acc + x[i]
        return acc + row, k + i


@pytest.mark.parametrize("strict", MODES)
def test_loop_variables_after_loops_over_a_dynamic_count(strict):
    model = LastRow()
    example = (torch.randn(5, 3),)
    ep = unbranch.export(model, example, dynamic_shapes=all_dynamic(example), strict=strict)
    for x in (torch.randn(5, 3), torch.randn(8, 3), torch.randn(2, 4)):
        got, want = ep.module()(x), model(x)
        assert_same(got[0], want[0])
        assert int(got[1]) == want[1]
    with unbranch.torch_export_rewrite(rewrite=[LastRow.forward]):
        assert_same(model(torch.randn(3, 2))[1], 4)
        with pytest.raises(UnboundLocalError):
            model(torch.randn(0, 2))  # (no step: Python leaves the variables unbound)


class FirstPositive(torch.nn.Module):
    """``next`` of a generator filtered on each row's data; the same name outside the generator."""

    def forward(self, x):
        r = next(r * 2 for r in x.unbind(0) if r.sum() > 0)
        return r + 1


@pytest.mark.parametrize("strict", MODES)
def test_next_of_a_filtered_generator_over_rows(strict):
    model = FirstPositive()
    example = (_rows(5, 2),)
    ep = unbranch.export(model, example, dynamic_shapes=all_dynamic(example), strict=strict)
    _same(model, ep, [(_rows(5, 0),), (_rows(7, 6),), (_rows(3, 1),), (_rows(6, 3).add(0.2),)])
    with pytest.raises(StopIteration):
        model(_rows(4, None))
    with pytest.raises(RuntimeError, match="StopIteration"):
        ep.module()(_rows(4, None))


class FirstIndex(torch.nn.Module):
    """``next`` over the indices of a dynamic count, a size for a default (sequence trimming at an end token)."""

    def forward(self, s):
        end = next((i for i in range(s.shape[0]) if s[i] == 2), s.shape[0])
        return s * end, end


@pytest.mark.parametrize("strict", MODES)
def test_next_of_indices_with_a_default(strict):
    model = FirstIndex()
    example = (torch.tensor([3, 2, 1]),)
    ep = unbranch.export(model, example, dynamic_shapes=all_dynamic(example), strict=strict)
    for s in (torch.tensor([2, 5, 1, 1]), torch.tensor([1, 1, 1, 1, 2]), torch.tensor([1, 7, 1, 1, 1, 3])):
        got, want = ep.module()(s), model(s)
        assert_same(got[0], want[0])
        assert int(got[1]) == want[1]  # (the first index, then the default where no item passes)


class HalvingSteps(torch.nn.Module):
    """A ``while`` on data carrying an int counter and a float that changes; a scan carrying a float."""

    def forward(self, x):
        steps, t = 0, 0.0
        y = x
        while y.abs().max() > 0.5:
            y = y * 0.5
            steps += 1
            t = t + 0.25
        scale = 1.0
        acc = torch.zeros(x.shape[1:])
        for row in x:
            acc = acc + row * scale
            scale = scale * 0.5
        return y * t, acc * scale, steps


@pytest.mark.parametrize("strict", MODES)
def test_numbers_a_loop_changes_are_carried(strict):
    model = HalvingSteps()
    example = (torch.randn(5, 3) * 4,)
    ep = unbranch.export(model, example, dynamic_shapes=all_dynamic(example), strict=strict)
    for x in (torch.randn(5, 3) * 4, torch.randn(7, 2) * 40, torch.zeros(3, 3), torch.full((2, 3), 0.75)):
        got, want = ep.module()(x), model(x)
        assert_same(got[:2], want[:2])
        assert int(got[2]) == want[2]
        if not strict:  # (a number again after the loop; under strict export a 0-d tensor holding it)
            assert isinstance(got[2], int)


class StopsAt(torch.nn.Module):
    """Greedy steps that stop on data, the step index read after the loop (the step the break stopped at)."""

    def forward(self, x):
        acc = x[0] * 0
        for step in range(4):
            acc = acc + x[step]
            if acc.sum() > 0:
                break
        return acc, step


class Refine(torch.nn.Module):
    """k-means-like: a tensor made in each step and changed in place before it becomes the carried one."""

    def forward(self, x):
        means = x * 2
        for _ in range(5):
            new = torch.zeros_like(means)
            new.add_(means * 0.5 + x * 0.5)
            shift = (new - means).abs().max()
            means = new
            if shift < 1e-3:
                break
        return means


class Patience(torch.nn.Module):
    """Layers of a ModuleList by index, a counter set under a data test, a break on it (PABEE-like early exit)."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(3, 3) for _ in range(4))

    def forward(self, x):
        h, calm, last = x, 0, None
        for i in range(4):
            h = torch.tanh(self.layers[i](h)) + h
            if last is not None and (h - last).abs().max() < 0.5:
                calm += 1
            else:
                calm = 0
            last = h
            if calm == 1:
                break
        return h


class BestSoFar(torch.nn.Module):
    """``prev = None`` before the loop, tested in the first step's break condition (``prev is not None and``),
    then the step's value: a break on data after a first step Python decides."""

    def forward(self, x):
        prev = None
        y = x
        for _ in range(5):
            y = y * 0.5 + 1
            if prev is not None and (y - prev).abs().max() < 0.2:
                break
            prev = y
        return y


@pytest.mark.parametrize("strict", MODES)
def test_loops_a_break_stops_on_data(strict):
    cases = [
        (StopsAt(), [(_rows(5, at),) for at in (0, 2, None)], (_rows(5, 1),)),
        (Refine(), [(torch.randn(4, 3),), (torch.zeros(6, 3),), (torch.randn(3, 3) * 100,)], (torch.randn(4, 3),)),
        (BestSoFar(), [(torch.randn(6, 3) * 10,), (torch.full((3, 3), 2.0),), (torch.zeros(2, 3),)], (_rows(4, 1),)),
    ]
    if not strict:  # (strict export: the steps after the first break on data are a while_loop, whose counter
        # cannot index the ModuleList: "Could not guard on data-dependent expression u0 >= -4")
        torch.manual_seed(0)
        cases.append((Patience(), [(torch.randn(2, 3) * s,) for s in (0.01, 1.0, 10.0)], (torch.randn(2, 3),)))
    for model, inputs, example in cases:
        ep = unbranch.export(model, example, dynamic_shapes=({0: torch.export.Dim.DYNAMIC},), strict=strict)
        for args in inputs:
            got, want = ep.module()(*args), model(*args)
            if isinstance(want, tuple):
                assert_same(got[0], want[0])
                assert int(got[1]) == want[1]
            else:
                assert_same(got, want)


class RowAtBreak(torch.nn.Module):
    """The loop variables (index and row) read after a loop over rows a break on data may stop."""

    def forward(self, x):
        acc = torch.zeros(x.shape[1])
        for i, row in enumerate(x.unbind(0)):  # noqa: B007 (read after the loop)
            acc = acc + row * 0.5
            if (row > 0).all():
                break
        return acc, row * 2, i


class ReturnsRow(torch.nn.Module):
    """A return inside the loop reading the row it stopped at and an int counter; the row after the loop."""

    def forward(self, x):
        acc = torch.zeros(x.shape[1])
        n = 0
        for row in x:
            if row.sum() > 0:
                return acc * 2, row * n
            acc = acc + row * 0.5
            n += 1
        return acc, row * n


class RebindsRow(torch.nn.Module):
    """The row rebound in the step before the break: after the loop it holds the stopped step's new value."""

    def forward(self, x):
        for row in x:
            row = row * 2 - 0.1
            if row.sum() > 0:
                break
        return row


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize("model", [RowAtBreak(), ReturnsRow(), RebindsRow()], ids=["break", "return", "rebound"])
def test_loop_variables_after_a_break_over_a_dynamic_count(model, strict):
    """Each step records where it is; after the loop the variables are those of the step that stopped it
    (the first, a middle one, the last), carried by the loop op, in both export modes."""
    example = (_rows(5, 2),)
    ep = unbranch.export(model, example, dynamic_shapes=all_dynamic(example), strict=strict)
    for x in (_rows(5, 0), _rows(7, 3), _rows(6, None), _rows(3, 2), _rows(4, None)[:, :2]):
        got, want = ep.module()(x), model(x)
        if isinstance(want, torch.Tensor):
            assert_same(got, want)
        else:
            assert_same(got[:2], want[:2])
        if isinstance(want, tuple) and len(want) == 3:
            assert int(got[2]) == want[2]
    x = _rows(4, 1)
    want = model(x)
    with unbranch.torch_export_rewrite(rewrite=[type(model).forward]):
        assert_same(model(x), want)
        with pytest.raises(UnboundLocalError):
            model(torch.zeros(0, 3))  # (no step: Python leaves the variables unbound)
