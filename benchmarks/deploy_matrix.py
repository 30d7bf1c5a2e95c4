"""The deployment matrix: per construct and backend, does the exported program run like eager, and how fast.

1. **Matrix**: every program of ``benchmarks/programs/deploy_programs.py`` (one per construct and lowering),
   exported inside ``torch_export_rewrite`` with a dynamic first dimension, built for each
   backend of ``benchmarks/programs/deploy_backends.py`` (``ep.module()``, onnxruntime, AOTInductor,
   ``torch.compile(ep.module())``, ExecuTorch) and compared with eager on each side and at
   other sizes: "ok", "limit" (the error users get, at export or when the backend builds it)
   or "fails" (with the error), and the build time.
2. **Row loop** (the issue's ``out[i] = x[i] * 2 + 1``, 16 columns) at 64, 1,024 and 8,192 rows:
   CPU ms per call of the eager Python loop, of the exported program on each backend (a vmap
   over the steps: non-strict export), in ``ep.module()`` of the strict export (a scan with the
   rows stacked) and of the lowering before issue 21 (the buffer carried through the scan and
   cloned every step: the runtime's ``rows`` ignored while exporting), interleaved rounds, medians.
3. **Other constructs** at 64 and 1,024 rows, each backend, against eager.
4. **cond vs where**: a small pure branch (``if y.abs().max() > 1: y = y / y.abs().max()``)
   as unbranch's cond and written branch-free by hand (``torch.where`` over both sides).

    python benchmarks/deploy_matrix.py [--repeats 5] [--quick]   # ExecuTorch cells need executorch installed
    python benchmarks/deploy_matrix.py --device cuda --jobs 6 [--results DIR]   # -> deploy_matrix_cuda.json

On the CPU: one torch thread, one onnxruntime thread, CPU time per call; the machine's load is
recorded. On CUDA (``--device cuda``): programs, inputs and exports on the GPU, the backends of
``CUDA_BACKENDS`` (``ep.module()``, AOTInductor, ``torch.compile`` and its ``reduce-overhead``
mode with CUDA graphs), wall time per call up to ``torch.cuda.synchronize()``; the matrix's
cells build in ``--jobs`` processes, the timings run alone.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import logging
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

import torch
from _common import RESULTS, machine, write
from torch.export import Dim

sys.path.insert(0, str(Path(__file__).resolve().parent / "programs"))
from deploy_backends import BACKENDS, CUDA_BACKENDS, available  # noqa: E402
from deploy_programs import PROGRAMS, RowLoop, on  # noqa: E402

import unbranch  # noqa: E402
import unbranch.runtime as runtime  # noqa: E402
from unbranch.runtime import loops  # noqa: E402

LIMITS = {  # as tests/test_deploy.py pins them: (program, backend) -> export options that raise
    ("while", "executorch"),
    ("while-fixed", "executorch"),
    ("range-from-one", "executorch"),
}


def _tuple(out) -> tuple:
    return tuple(out) if isinstance(out, (list, tuple)) else (out,)


def _first_line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return f"{type(e).__name__}: {lines[0] if lines else ''}"[:300]


def cell(name: str, backend: str, device: str) -> dict:
    """One program on one backend: "ok", "limit" (the error users get) or "fails" (with the error)."""
    program = PROGRAMS[name]
    build = (CUDA_BACKENDS if device == "cuda" else BACKENDS)[backend]
    model = program.build()
    start = time.perf_counter()
    try:
        if (name, backend) in LIMITS:
            try:
                program.export(model, device=device, target=backend)
            except unbranch.UnbranchError as e:
                result = {"status": "limit", "at": "export", "error": str(e)[:400]}
            else:
                result = {"status": "fails", "error": "no UnbranchError at export"}
        else:
            ep = program.export(model, device=device)
            with tempfile.TemporaryDirectory() as workdir:
                run = build(ep, workdir)
                for args in program.inputs(device).values():
                    expected = _tuple(model(*(a.clone() for a in args)))
                    got = run(*(a.clone() for a in args))
                    for g, e in zip(got, expected, strict=True):
                        torch.testing.assert_close(g, e)
            result = {"status": "ok"}
    except Exception as e:  # recorded, not raised: the matrix says which cell fails and how
        result = {"status": "fails", "error": _first_line(e), "where": traceback.format_exc(limit=-2)[-600:]}
    result["seconds"] = round(time.perf_counter() - start, 1)
    return result


def _quiet() -> None:
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)


def matrix(backends: dict, device: str, jobs: int) -> dict:
    results: dict = {name: {"construct": p.construct, "lowering": p.lowering} for name, p in PROGRAMS.items()}
    todo = []
    for name in PROGRAMS:
        for backend in backends:
            why = available(backend)
            if why:
                results[name][backend] = {"status": "not run", "why": why}
            else:
                todo.append((name, backend))
    for (name, backend, _), result in _each(cell, [(name, backend, device) for name, backend in todo], jobs):
        results[name][backend] = result
        print(f"{name:16s} {backend:12s} {result['status']:6s} {result.get('error', '')[:100]}", flush=True)
    checks = [(backend, device) for backend in backends if not available(backend)]
    results["raise"]["failing check"] = dict(
        (backend, result) for (backend, _), result in _each(failing_check, checks, jobs)
    )
    return results


def _each(function, calls: list[tuple], jobs: int):
    """(call, function(*call)) for each call: here when jobs is 1, else each in a fresh process of its
    own (``--call``), ``jobs`` at a time, so that compiles run side by side and a cell that kills its
    process (a segfault, a CUDA error) takes no other cell with it."""
    if jobs == 1:
        yield from ((call, function(*call)) for call in calls)
        return

    def isolated(call):
        done = subprocess.run(
            [sys.executable, __file__, "--call", function.__name__, json.dumps(call)], capture_output=True, text=True
        )
        answers = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode == 0 and answers:
            return json.loads(answers[-1])
        died = f"the process died (exit status {done.returncode})"
        return {"status": "fails", "error": died, "where": done.stderr[-600:]}

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = {pool.submit(isolated, call): call for call in calls}
        for future in concurrent.futures.as_completed(futures):
            yield futures[future], future.result()


def failing_check(backend: str, device: str) -> dict:
    """What a backend does when the ``raise`` program's check fails: "kept" (raises with the user's
    message), "dropped" (returns values) or "error" (raises something else: on CUDA a failed
    ``_assert_async`` is a device-side assert, which leaves the process's CUDA context unusable)."""
    program = PROGRAMS["raise"]
    bad = on(device, (torch.full((3, 4), 500.0),))
    try:
        with tempfile.TemporaryDirectory() as workdir:
            run = (CUDA_BACKENDS if device == "cuda" else BACKENDS)[backend](program.export(device=device), workdir)
            run(*bad)
            if device == "cuda":
                torch.cuda.synchronize()
    except Exception as e:
        return {"status": "kept" if "input out of range" in str(e) else "error", "error": _first_line(e)}
    return {"status": "dropped"}


def per_call(run, args, seconds: float = 0.3) -> tuple[float, int]:
    """Seconds per call, over as many calls as fit in about ``seconds`` (at least 1): CPU time, or on a
    GPU wall time up to the end of each call's work."""
    gpu = args[0].is_cuda
    clock = time.perf_counter if gpu else time.process_time
    calls, start = 0, clock()
    while True:
        run(*args)
        if gpu:
            torch.cuda.synchronize()
        calls += 1
        spent = clock() - start
        if spent >= seconds:
            return spent / calls, calls


def timed(runners: dict, args, repeats: int, failed: dict) -> dict:
    """Median ms per call of each runner, rounds interleaved with alternating order. A runner whose
    first calls raise leaves ``runners`` for ``failed`` (label -> the error)."""
    with torch.no_grad():
        for label, run in list(runners.items()):
            try:
                run(*args)  # first calls compile or allocate: not measured
                run(*args)  # CUDA graphs are recorded on the second call
            except Exception as e:
                failed[label] = _first_line(e)
                del runners[label]
                print(f"  {label}: fails when run ({failed[label][:150]})", flush=True)
        times: dict[str, list] = {k: [] for k in runners}
        order = list(runners.items())
        for i in range(repeats):
            for label, run in order if i % 2 == 0 else order[::-1]:
                times[label].append(per_call(run, args)[0])
    return {k: round(statistics.median(v) * 1e3, 4) for k, v in times.items()}


def _export(model, example, strict=False, **context):
    with unbranch.torch_export_rewrite(rewrite=[type(model).forward], **context):
        dims = tuple({0: Dim.DYNAMIC} for _ in example)
        return torch.export.export(model, example, dynamic_shapes=dims, strict=strict)


def _carried_buffer_export(model, example):
    """The lowering before issue 21: the buffer carried through the scan (``rows`` ignored)."""
    original = loops.for_range

    def for_range(*args, rows=(), **kwargs):
        return original(*args, **kwargs)

    loops.for_range = runtime.for_range = for_range
    try:
        return _export(model, example)
    finally:
        loops.for_range = original
        runtime.for_range = original


def runners_for(ep, backends: dict, workdir) -> dict:
    out = {}
    for backend, build in backends.items():
        if available(backend):
            continue
        sub = Path(workdir) / backend
        sub.mkdir()
        try:
            out[backend] = build(ep, str(sub))
        except Exception as e:
            print(f"  {backend}: cannot build ({_first_line(e)})", flush=True)
    return out


def row_loop(sizes, repeats: int, backends, device: str) -> dict:
    model = RowLoop()
    results: dict = {"failed": {}}
    with tempfile.TemporaryDirectory() as workdir:
        largest = torch.randn(max(sizes), 16, device=device)
        ep = _export(model, (largest,))
        new = runners_for(ep, backends, workdir)
        old_dir = Path(workdir) / "carried"
        old_dir.mkdir()
        old = runners_for(_carried_buffer_export(model, (largest,)), {"module": backends["module"]}, old_dir)
        strict_dir = Path(workdir) / "strict"
        strict_dir.mkdir()
        scanned = runners_for(_export(model, (largest,), strict=True), {"module": backends["module"]}, strict_dir)
        for n in sizes:
            args = (torch.randn(n, 16, device=device),)
            runners = {"eager": lambda *a: model(*a)}
            runners.update(new)
            runners.update({f"{k} (carried buffer, before)": v for k, v in old.items()})
            runners.update({f"{k} (strict export: scan, rows stacked)": v for k, v in scanned.items()})
            ms = timed(runners, args, repeats, results["failed"])
            results[str(n)] = {"ms": ms, "ratio_to_eager": {k: round(v / ms["eager"], 3) for k, v in ms.items()}}
            print(f"rows {n}: {results[str(n)]['ratio_to_eager']}", flush=True)
    return results


def constructs(names, sizes, repeats: int, backends, device: str) -> dict:
    results = {}
    for name in names:
        program = PROGRAMS[name]
        model = program.build()
        results[name] = {"failed": {}}
        with tempfile.TemporaryDirectory() as workdir:
            ep = _export(model, on(device, program.make(max(sizes))), **program.context)
            runners = {"eager": lambda *a, m=model: m(*a)}
            runners.update(runners_for(ep, {b: f for b, f in backends.items() if (name, b) not in LIMITS}, workdir))
            for n in sizes:
                ms = timed(runners, on(device, program.make(n)), repeats, results[name]["failed"])
                ratios = {k: round(v / ms["eager"], 3) for k, v in ms.items()}
                results[name][str(n)] = {"ms": ms, "ratio_to_eager": ratios}
                print(f"{name} {n}: {ratios}", flush=True)
    return results


class CondSmall(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        if y.abs().max() > 1:
            y = y / y.abs().max()
        return y


class WhereSmall(torch.nn.Module):
    """CondSmall branch-free: both sides computed, ``torch.where`` picks."""

    def forward(self, x):
        y = x * 2
        m = y.abs().max()
        return torch.where(m > 1, y / m, y)


def cond_vs_where(sizes, repeats: int, backends, device: str) -> dict:
    results: dict = {"failed": {}}
    with tempfile.TemporaryDirectory() as workdir:
        built = {}
        for model in (CondSmall(), WhereSmall()):
            sub = Path(workdir) / type(model).__name__
            sub.mkdir()
            example = (torch.randn(max(sizes), 4, device=device),)  # ExecuTorch plans memory for the example's size
            built[type(model).__name__] = (model, runners_for(_export(model, example), backends, sub))
        for n in sizes:
            for side, scale in (("then", 10.0), ("else", 0.001)):
                args = (torch.randn(n, 4, device=device) * scale,)
                runners = {"eager": lambda *a: CondSmall()(*a)}
                for label, (_, rs) in built.items():
                    runners.update({f"{k} {label}": v for k, v in rs.items()})
                ms = timed(runners, args, repeats, results["failed"])
                results[f"{n} rows, {side}"] = {
                    "ms": ms,
                    "where_over_cond": {
                        b: round(ms[f"{b} WhereSmall"] / ms[f"{b} CondSmall"], 3)
                        for b in backends
                        if f"{b} CondSmall" in ms and f"{b} WhereSmall" in ms
                    },
                }
                print(f"cond vs where {n} {side}: {results[f'{n} rows, {side}']['where_over_cond']}", flush=True)
    return results


PHASES = ["row_loop", "matrix", "cond_vs_where", "constructs"]
CONSTRUCTS = ["if", "while-fixed", "while-bounded", "carry", "appends", "range-from-one", "break"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds per runner")
    parser.add_argument("--quick", action="store_true", help="the row loop at 64 and 1,024 rows only")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--jobs", type=int, default=1, help="processes building the matrix's cells")
    parser.add_argument("--results", type=Path, default=RESULTS, help="where the JSON goes")
    parser.add_argument("--phases", nargs="+", choices=PHASES, default=PHASES, help="what to run (default: all)")
    parser.add_argument("--backends", nargs="+", help="only these backends")
    parser.add_argument("--call", nargs=2, metavar=("FUNCTION", "JSON"), help=argparse.SUPPRESS)  # one cell (_each)
    args = parser.parse_args()
    _quiet()
    if args.call:
        print(json.dumps({"cell": cell, "failing_check": failing_check}[args.call[0]](*json.loads(args.call[1]))))
        return
    torch.set_num_threads(1)  # a second OpenMP thread stalls whenever another process takes a core
    cuda = args.device == "cuda"
    backends = {k: f for k, f in (CUDA_BACKENDS if cuda else BACKENDS).items() if k in (args.backends or [k])}
    phases = ["row_loop"] if args.quick else args.phases
    name = ("deploy_matrix_cuda" if cuda else "deploy_matrix") + ("" if phases == PHASES else "_" + "_".join(phases))
    result = {
        "machine": machine(),
        "what": "matrix: each program exported with a dynamic first dimension, built per backend, compared with "
        "eager on each side and other sizes; timings: "
        + (
            "wall ms per call up to torch.cuda.synchronize() (median of interleaved rounds of >= 0.3 s), "
            "programs, inputs and exports on the GPU"
            if cuda
            else "CPU ms per call (median of interleaved rounds of >= 0.3 s), 1 torch thread, 1 onnxruntime thread"
        )
        + "; ratios are over the eager module",
        "repeats": args.repeats,
        "backends": list(backends),
        "versions": {m: _version(m) for m in ("onnxruntime", "executorch")},
    }
    if cuda:
        result["machine"]["gpu"] = torch.cuda.get_device_name()
    sizes = [64, 1024] if args.quick else [64, 1024, 8192]
    run = {
        "row_loop": lambda: row_loop(sizes, args.repeats, backends, args.device),
        "matrix": lambda: matrix(backends, args.device, args.jobs),
        "cond_vs_where": lambda: cond_vs_where([64, 4096], args.repeats, backends, args.device),
        "constructs": lambda: constructs(CONSTRUCTS, [64, 1024], args.repeats, backends, args.device),
    }
    for phase in phases:
        result[phase] = run[phase]()
        path = write(name, result, args.results)  # after each phase: a run cut short keeps what it measured
    print(f"-> {path}")


def _version(module: str) -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version(module)
    except importlib.metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    main()
