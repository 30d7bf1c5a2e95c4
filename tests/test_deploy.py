"""The deployment matrix: each construct's lowering, exported with unbranch, run by each backend like eager.

Every cell exports one program of ``deploy_programs`` (dynamic first dimension), builds it for
one backend and compares it with the original eager module on inputs taking each branch or
loop exit and at sizes other than the example's. A cell a backend cannot run is pinned: the
test asserts the error users get, at export (``UnbranchError`` naming the file, line and the
limit) or where the backend itself refuses the program when it is built, never when it runs.
AOTInductor, ``torch.compile`` and ExecuTorch compile each program (seconds each): slow.
"""

import re
import tempfile
import warnings

import pytest
import torch
from deploy_backends import BACKENDS, CUDA_BACKENDS, available
from deploy_programs import EXAMPLE_ROWS, PROGRAMS

import unbranch

SLOW = {"aoti", "compile", "executorch", "cudagraphs"}

# (program, backend) -> (what the user does, exception, message): cells a backend cannot run
LIMITS = {
    ("while", "executorch"): ("export", unbranch.UnbranchError, r"has no while_loop.*max_loop_iterations=N"),
    ("while-fixed", "executorch"): ("export", unbranch.UnbranchError, r"has no while_loop.*max_loop_iterations=N"),
    ("range-from-one", "executorch"): ("export", unbranch.UnbranchError, r"has no while_loop.*max_loop_iterations"),
}


def cells(backends=BACKENDS, prefix=""):
    for name in PROGRAMS:
        for backend in backends:
            marks = [pytest.mark.slow] if backend in SLOW else []
            yield pytest.param(name, backend, id=f"{prefix}{name}-{backend}", marks=marks)


def _tuple(out) -> tuple:
    return tuple(out) if isinstance(out, (list, tuple)) else (out,)


def assert_like_eager(run, model, args):
    expected = _tuple(model(*(a.clone() for a in args)))
    got = run(*(a.clone() for a in args))
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("name, backend", cells())
def test_cell(name, backend):
    why = available(backend)
    if why:
        pytest.skip(why)
    program = PROGRAMS[name]
    model = program.build()
    limit = LIMITS.get((name, backend))
    if limit is not None:
        when, error, message = limit
        assert when == "export"
        with pytest.raises(error, match=message) as caught:
            program.export(model, target=backend)
        assert re.search(r"deploy_programs\.py:\d+", str(caught.value)), "the error names the user's file and line"
        return
    _runs_like_eager(program, model, BACKENDS[backend], "cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("name, backend", cells(CUDA_BACKENDS, "cuda-"))
def test_cuda_cell(name, backend):
    """The matrix on a GPU: program, inputs and export on CUDA, where the flags, counters and step
    indices the runtime makes must join the data (a CPU one failed every scan under torch.compile)."""
    why = available(backend)
    if why:
        pytest.skip(why)
    program = PROGRAMS[name]
    _runs_like_eager(program, program.build(), CUDA_BACKENDS[backend], "cuda")


def _runs_like_eager(program, model, build, device: str):
    ep = program.export(model, device=device)
    with tempfile.TemporaryDirectory() as workdir:
        run = build(ep, workdir)
        for args in program.inputs(device).values():
            assert args[0].shape[0] <= EXAMPLE_ROWS
            assert_like_eager(run, model, args)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["while", "while-fixed", "range-from-one"])
def test_executorch_rejects_while_loop_when_built(name):
    """Without target='executorch' the program has a while_loop, which ExecuTorch refuses as it builds it."""
    if available("executorch"):
        pytest.skip(available("executorch"))
    ep = PROGRAMS[name].export()
    with tempfile.TemporaryDirectory() as workdir, pytest.raises(Exception, match="Unsupported control flow operator"):
        BACKENDS["executorch"](ep, workdir)


def test_executorch_target_refuses_a_dynamic_carry_even_with_a_bound():
    """ExecuTorch 1.4 runs a scan carrying a value of dynamic shape wrongly on other sizes: refused at export."""
    program = PROGRAMS["while"]
    with pytest.raises(unbranch.UnbranchError, match=r"deploy_programs\.py:\d+: this loop carries a value whose shape"):
        program.export(target="executorch", max_loop_iterations=64)


def test_bounded_loop_checks_its_bound():
    """More steps than max_loop_iterations: the exported program fails its check (backends that keep checks)."""
    program = PROGRAMS["while-bounded"]
    model = program.build()
    ep = program.export(model, max_loop_iterations=3)
    small = (torch.full((4, 3), 1.5),)  # column sums 6: halved 3 times
    torch.testing.assert_close(_tuple(ep.module()(*small)), _tuple(model(*small)))
    with pytest.raises(RuntimeError, match=r"needs more than max_loop_iterations=3 steps"):
        ep.module()(torch.full((4, 3), 1000.0))


def test_target_arguments_are_checked():
    with pytest.raises(unbranch.UnbranchError, match="accepts None or one of 'executorch'"):
        unbranch.torch_export_rewrite(target="tflite")
    with pytest.raises(unbranch.UnbranchError, match="positive int"):
        unbranch.torch_export_rewrite(target="executorch", max_loop_iterations=0)
    with pytest.raises(unbranch.UnbranchError, match="without a target"):
        unbranch.torch_export_rewrite(max_loop_iterations=8)


def test_target_does_not_change_eager_runs():
    program = PROGRAMS["while-bounded"]
    model = program.build()
    big = (torch.full((2, 3), 1e6),)  # 20+ halvings: more than any bound below
    with unbranch.torch_export_rewrite(rewrite=[program.model.forward], target="executorch", max_loop_iterations=2):
        inside = model(*big)
    for a, b in zip(inside, model(*big)):
        torch.testing.assert_close(a, b)


# --- checks: what each backend does with a check that fails -------------------------------------------

# backend -> "kept" (raises with the user's message), or "dropped" (returns values; how users learn it)
CHECKS = {
    "module": "kept",
    "onnxruntime": "dropped",  # unbranch.onnx.export warns DroppedChecksWarning
    "aoti": "kept",
    "compile": "kept",
    "executorch": "dropped",  # ExecuTorch's RemoveGraphAssertsPass removes them, without a word
}


@pytest.mark.parametrize("backend", [pytest.param(b, marks=[pytest.mark.slow] if b in SLOW else []) for b in BACKENDS])
def test_failing_check(backend):
    why = available(backend)
    if why:
        pytest.skip(why)
    program = PROGRAMS["raise"]
    model = program.build()
    bad = (torch.full((3, 4), 500.0),)
    with pytest.raises(ValueError, match="input out of range"):
        model(*bad)
    ep = program.export(model)
    with tempfile.TemporaryDirectory() as workdir:
        run = BACKENDS[backend](ep, workdir)
        if CHECKS[backend] == "kept":
            with pytest.raises(RuntimeError, match="input out of range"):
                run(*bad)
        else:
            torch.testing.assert_close(run(*bad)[0], bad[0].cumsum(0))


def test_onnx_warns_about_the_checks_it_drops():
    pytest.importorskip("onnxruntime")
    import unbranch.onnx

    with pytest.warns(unbranch.onnx.DroppedChecksWarning, match="input out of range"):
        unbranch.onnx.export(PROGRAMS["raise"].export())


# --- torch.compile of a scan: a torch 2.13 limitation with a one-line workaround -----------------------


@pytest.mark.slow
def test_compile_of_a_scan_needs_capture_scalar_outputs():
    """Inductor lowers scan to a while_loop indexed by ``.item()``: without capture_scalar_outputs it
    fails (torch 2.13); ``deploy_backends.compile_`` sets it, and every scan cell passes with it."""
    if available("compile"):
        pytest.skip(available("compile"))
    ep = PROGRAMS["rows-cond"].export()  # (the plain row loop is a vmap: no loop left to lower)
    torch._dynamo.reset()
    with warnings.catch_warnings(), torch._dynamo.config.patch(capture_scalar_outputs=False):
        warnings.simplefilter("ignore")
        with pytest.raises(Exception, match="DataDependentOutputException"):
            torch.compile(ep.module())(torch.randn(5, 4))
    torch._dynamo.reset()
