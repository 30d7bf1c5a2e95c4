"""Bad input: one exception class naming file, line and construct; nothing swapped in."""

import libcst as cst
import pytest
import torch
from helpers import count_branches, export_rewritten, line_of

import unbranch
from unbranch import UnbranchError


class OneSided(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            y = x + 1
        return y


def test_variable_set_in_one_branch_only():
    with pytest.raises(UnbranchError) as info:
        unbranch.transform_method(OneSided.forward, strict=True)
    err = info.value
    assert err.path == __file__ and err.line == line_of(OneSided.forward, "if x.sum() > 0")
    assert err.construct == "if" and "'y' is set only in the if-branch" in str(err)


STEPS = (0, 1, 2)  # (a global: for all the compiler knows, a generator)


class BreakInBranch(torch.nn.Module):
    def forward(self, x):
        for _ in STEPS:  # an iterable the loop may not advance past the break: it stays Python
            if x.sum() > 0:
                break
            x = x + 1
        return x


def test_break_leaving_a_tensor_branch_is_refused():
    with pytest.raises(UnbranchError, match="break/continue leaving the branch"):
        unbranch.transform_method(BreakInBranch.forward, strict=True)


class FlagBreak(torch.nn.Module):
    def forward(self, x, stop):
        for _ in STEPS:
            if stop:
                break
            x = x + 1
        return x


def test_unconvertible_if_on_unknown_condition_stays_python_and_explains():
    rm = unbranch.transform_method(FlagBreak.forward)
    assert "_ub.unconverted(stop, " in rm.code and "break/continue leaving the branch" in rm.code
    m = FlagBreak()
    x = torch.randn(2, 3)
    with unbranch.torch_export_rewrite(rewrite=[FlagBreak.forward]):
        torch.testing.assert_close(m(x, True), x)  # eager: plain Python, exact
        torch.testing.assert_close(m(x, False), x + 3)
    ep = export_rewritten(m, (x, False), strict=False)
    torch.testing.assert_close(ep.module()(x, False), x + 3)
    with pytest.raises(
        UnbranchError, match=r"test_errors.py:\d+: this if on a tensor condition could not be converted: break/continue"
    ):
        export_rewritten(m, (x, x.sum() > 0), strict=False)


class GlobalInBranch(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            global COUNTER
            COUNTER = 1
        return x


def test_global_in_branch_is_refused():
    with pytest.raises(UnbranchError, match="global/nonlocal in a branch") as info:
        unbranch.transform_method(GlobalInBranch.forward, strict=True)
    assert info.value.line == line_of(GlobalInBranch.forward, "if x.sum() > 0")


class DifferentStructures(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x + 1, x - 1
        return x * 2


def test_branches_returning_different_structures():
    m = DifferentStructures()
    with pytest.raises(UnbranchError, match=r"test_errors.py:\d+: torch.cond rejected.*needs the same tensors"):
        export_rewritten(m, (torch.randn(2, 3),), strict=False)


class Good(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            x = x + 1
        return x


def test_a_failing_rewrite_swaps_nothing():
    good_code, bad_code = Good.forward.__code__, OneSided.forward.__code__
    with pytest.raises(UnbranchError):
        with unbranch.torch_export_rewrite(rewrite=[Good.forward, OneSided.forward], strict=True):
            pass
    assert Good.forward.__code__ is good_code and OneSided.forward.__code__ is bad_code


def test_exception_in_body_restores_everything():
    m, code = Good(), Good.forward.__code__
    with pytest.raises(KeyError):
        with unbranch.torch_export_rewrite(rewrite=[(Good, "forward")]) as report:
            assert Good.forward.__code__ is not code and len(report) == 1
            raise KeyError("boom")
    assert Good.forward.__code__ is code
    ep = export_rewritten(m, (torch.randn(2, 3),), strict=False)
    assert count_branches(ep) == 1 and Good.forward.__code__ is code


@pytest.mark.parametrize("bad", [None, "forward", 3, len, torch.relu, lambda x: x])
def test_garbage_targets(bad):
    with pytest.raises(UnbranchError):
        with unbranch.torch_export_rewrite(rewrite=[Good.forward, bad]):
            pass
    assert Good.forward.__code__.co_filename == __file__


def test_generator_is_refused():
    def gen(x):
        if x.sum() > 0:
            yield x

    with pytest.raises(UnbranchError, match="generators"):
        unbranch.transform_method(gen)


def test_no_source_is_refused():
    scope = {}
    exec("def made(x):\n    if x.sum() > 0:\n        x = x + 1\n    return x\n", scope)
    with pytest.raises(UnbranchError, match="no source available"):
        unbranch.transform_method(scope["made"])


class NoSourceInside(torch.nn.Module):
    """A model whose layer's forward has no retrievable source (made with exec)."""

    def __init__(self):
        super().__init__()
        scope = {"torch": torch}
        exec("def forward(self, x):\n    if x.sum() > 0:\n        x = x + 1\n    return x\n", scope)
        self.inner = type("Made", (torch.nn.Module,), {"forward": scope["forward"]})()
        self.gate = Good()

    def forward(self, x):
        return self.inner(self.gate(x))


def test_model_rewrite_is_best_effort():
    m = NoSourceInside()
    with unbranch.torch_export_rewrite(m) as report:
        assert [rm.qualname for rm in report] == ["Good.forward"]
    # the exec'd forward is not even a candidate (no source to scan): nothing to skip, nothing raised
    assert report.skipped == []
    with pytest.raises(UnbranchError, match="no source available"):
        with unbranch.torch_export_rewrite(rewrite=[type(m.inner).forward]):
            pass


def test_coroutine_is_refused():
    async def coro(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(UnbranchError, match="generators and coroutines"):
        unbranch.transform_method(coro)


class Twice:  # not a module-level function: model discovery would pick it up
    def forward(self, x):
        if x.sum() > 0:
            x = x + 1
        if x.sum() > 0:
            y = x
        return y


def test_the_error_names_the_line_of_the_if_it_is_about_when_two_headers_are_the_same():
    twice, first = Twice.forward, Twice.forward.__code__.co_firstlineno
    with pytest.raises(UnbranchError) as info:
        unbranch.transform_method(twice, strict=True)
    assert info.value.line == first + 3  # the second header, not the first identical one
    rm = unbranch.transform_method(twice)  # default: stays Python, noted at its own line
    assert [(n.kind, n.line) for n in rm.notes] == [("cond", first + 1), ("left", first + 3)]


def test_lines_survive_a_pre_rewriter_that_rebuilds_every_node():
    first = Twice.forward.__code__.co_firstlineno

    def rebuild(fn):  # a user's transformer rebuilds each node it passes through
        return fn.visit(cst.CSTTransformer())

    rm = unbranch.transform_method(Twice.forward, pre_rewriter=rebuild)
    assert [(n.kind, n.line) for n in rm.notes] == [("cond", first + 1), ("left", first + 3)]


class CarriedChangesShape(torch.nn.Module):
    def forward(self, x, y):
        for _ in range(x.shape[0]):
            if x.abs().mean() > 0:
                y = y - 0.25
                break
            if y.shape[0] <= 3:
                return torch.tanh(x) + 1.0
            x = y * 2  # x carries y's rows from here: another dynamic size than before the step
        return y * torch.tanh(x)


class WhileCarriedChangesShape(torch.nn.Module):
    def forward(self, x, y):
        i = 0
        while i < 3 and (y < -0.5).all():
            i = i + 1
            if y.mean() < -0.5:
                y = x * 2  # y carries x's rows from here: another dynamic size than before the step
                return torch.tanh(y - x), y
        return x, y


class ConstantTable(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.tensor([0.5, -1.0, 2.0])  # a plain attribute: no parameter, no buffer

    def forward(self, x):
        out = torch.zeros_like(x)
        for i in range(x.shape[0]):
            r = x[i] * self.table
            if r.sum() > 0:
                r = -r
            out[i] = r
        return out


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize(
    "make, header",
    [(CarriedChangesShape, "for _ in range(x.shape[0])"), (WhileCarriedChangesShape, "while i < 3")],
)
def test_a_loop_torch_cannot_carry_is_an_error_at_the_loop_in_the_users_terms(make, header, strict):
    """torch's raw "Expected init and carry to have same metadata" (scan) and "Expected
    body_fn_output and carried_inputs to have same metadata" (while_loop) become an
    UnbranchError at the loop."""
    dims = ({0: torch.export.Dim.DYNAMIC}, {0: torch.export.Dim.DYNAMIC})
    with pytest.raises(UnbranchError) as info:
        with unbranch.torch_export_rewrite(rewrite=[make.forward]):
            torch.export.export(make(), (torch.randn(4, 3), torch.randn(4, 3)), dynamic_shapes=dims, strict=strict)
    assert info.value.path == __file__ and info.value.line == line_of(make.forward, header)
    assert "a value a loop carries has another shape" in str(info.value)


def test_a_constant_tensor_in_a_loop_is_explained_and_strict_export_takes_it():
    """Non-strict: torch's scan fails on a plain tensor attribute in a cond ("Cannot access data
    pointer"); the error names the loop and the way out. Strict export takes it and runs like the
    model, and so does non-strict export where the if's cheap sides become a torch.where."""
    model, dims = ConstantTable(), ({0: torch.export.Dim.DYNAMIC},)
    with pytest.raises(UnbranchError) as info:
        unbranch.export(model, (torch.randn(5, 3),), dynamic_shapes=dims, branches="cond")
    assert info.value.path == __file__ and info.value.line == line_of(ConstantTable.forward, "for i in range")
    assert "register_buffer" in str(info.value) and "Cannot access data pointer" not in str(info.value)
    selected = unbranch.export(model, (torch.randn(5, 3),), dynamic_shapes=dims)
    ep = unbranch.export(model, (torch.randn(5, 3),), dynamic_shapes=dims, strict=True)
    x = torch.tensor(
        [
            [1.0, 1.0, 1.0],
            [1.0, -1.0, 1.0],
            [0.0, 1.0, 0.0],
            [2.0, 0.0, 0.0],
            [0.0, 0.0, 1.0],
            [1.0, 2.0, 3.0],
            [3.0, 1.0, 0.0],
        ]
    )
    assert {bool((r * model.table).sum() > 0) for r in x} == {True, False}  # both sides of the if
    torch.testing.assert_close(ep.module()(x), model(x))
    torch.testing.assert_close(selected.module()(x), model(x))


class TraceableAssert(torch.nn.Module):
    def forward(self, x):
        torch._assert((x > -100).all(), "input out of range")  # torch's traceable assert
        if x.sum() > 0:
            x = x * 2
        return x


@pytest.mark.parametrize("strict", [False, True])
def test_torch_assert_on_a_tensor_is_a_check_in_the_exported_program(strict):
    """Plain export stops at torch._assert's bool(); rewritten, it is a runtime check that passes
    and fails as eagerly (both sides of the if, another size)."""
    model = TraceableAssert()
    ep = unbranch.export(model, (torch.randn(4, 3),), dynamic_shapes=({0: torch.export.Dim.DYNAMIC},), strict=strict)
    for x in (torch.rand(6, 3), -torch.rand(2, 3)):
        torch.testing.assert_close(ep.module()(x), model(x))
    bad = torch.full((5, 3), -1000.0)
    with pytest.raises(AssertionError, match="input out of range"):
        model(bad)
    with pytest.raises(Exception, match="input out of range"):
        ep.module()(bad)
    with unbranch.torch_export_rewrite(rewrite=[TraceableAssert.forward]):  # eagerly the same error
        with pytest.raises(AssertionError, match="input out of range"):
            model(bad)


def test_a_cond_rejected_for_a_guard_on_data_names_the_expression_not_torchs_advice():
    from unbranch.runtime.control_flow import rejection

    text = (
        "Could not guard on data-dependent expression zuf0 > -0.5 (unhinted: zuf0 > -0.5).  (Size-like symbols: none)\n"
        "\nconsider using data-dependent friendly APIs such as guard_or_false, guard_or_true and statically_known_true."
    )
    why = rejection(RuntimeError(text))
    assert why.startswith("code inside needs a Python value computed from data")
    assert why.endswith("(Could not guard on data-dependent expression zuf0 > -0.5)")


class NoisyBranch(torch.nn.Module):
    """A random tensor of a dynamic size drawn in a branch (diffusers' schedulers do, through
    ``randn_tensor(..., generator=None)``): torch cannot trace it inside torch.cond."""

    def forward(self, x):
        if x.sum() > 0:
            x = x + torch.randn(x.shape, generator=None) * 0
        return x


@pytest.mark.parametrize("strict", [False, True], ids=["nonstrict", "strict"])
def test_a_call_torch_cannot_trace_in_a_branch_is_named(strict):
    """Not torch's raw error (strict) nor its generic explanation with the call's fake arguments:
    the call and torch's reason, at the user's line (the if's, or under strict the call's)."""
    lines = {line_of(NoisyBranch, "if x.sum()"), line_of(NoisyBranch, "torch.randn(")}
    with pytest.raises(UnbranchError, match=r"torch could not trace randn\(\) inside it: SymIntArrayRef") as caught:
        export_rewritten(NoisyBranch(), (torch.randn(3, 4),), strict)
    assert caught.value.path.endswith("test_errors.py") and caught.value.line in lines
    assert "FakeTensor" not in str(caught.value) and "call_function" not in str(caught.value)


class RowsOfAGenerator(torch.nn.Module):
    """A generator method yielding rows over a dynamic count (unbranch rewrites no generator)."""

    def rows(self, x):
        for r in x.unbind(0):
            yield r * 2

    def forward(self, x):
        acc = torch.zeros(x.shape[1])
        for r in self.rows(x):
            if r.sum() > 0:
                acc = acc + r
        return acc


def test_refusal_inside_rewritten_code_names_the_users_file_and_line():
    """The error names the line in the user's file (not the rewritten code's) and says why."""
    with pytest.raises(UnbranchError) as info:
        unbranch.export(RowsOfAGenerator(), (torch.randn(5, 3),), dynamic_shapes=({0: torch.export.Dim.DYNAMIC},))
    err = info.value
    assert err.path == __file__ and err.line == line_of(RowsOfAGenerator.rows, "for r in x.unbind(0)")
    assert "unbranch:" not in str(err) and "generators and coroutines are not supported" in str(err)


class ResetOnDone(torch.nn.Module):
    """A recurrent step whose state is appended, then reset in place for finished rows (tianshou-like)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.cell = torch.nn.GRUCell(3, 4)

    def forward(self, x, done):
        h = torch.zeros(x.shape[0], 4)
        outs = []
        for t in range(x.shape[1]):
            h = self.cell(x[:, t], h)
            outs.append(h)
            for b in range(h.shape[0]):
                if done[b, t]:
                    h[b] = 0.0
        return torch.stack(outs, 1), h


def test_an_in_place_change_autograd_saved_is_explained_and_no_grad_exports():
    """With grad enabled torch's loop op refuses the step's in-place reset of a tensor autograd saved: the
    error names the user's file (not torch's ``<string>``) and says so; under no_grad it exports and matches."""
    model = ResetOnDone().eval()
    example = (torch.randn(2, 3, 3), torch.tensor([[False, True, False], [False, False, False]]))
    dims = ({0: torch.export.Dim.DYNAMIC, 1: torch.export.Dim.DYNAMIC},) * 2
    with pytest.raises(UnbranchError, match="autograd saved for the gradient") as info:
        unbranch.export(model, example, dynamic_shapes=dims)
    assert info.value.path == __file__
    with torch.no_grad():
        ep = unbranch.export(model, example, dynamic_shapes=dims)
        for x, done in [
            example,
            (torch.randn(4, 5, 3), torch.rand(4, 5) > 0.5),
            (torch.randn(3, 2, 3), torch.ones(3, 2) > 0),
        ]:
            got, want = ep.module()(x, done), model(x, done)
            torch.testing.assert_close(got, want)
