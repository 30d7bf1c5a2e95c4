"""The deployment matrix: per construct and backend, does the exported program run like eager, and how fast.

1. **Matrix**: every program of ``tests/deploy_programs.py`` (one per construct and lowering),
   exported inside ``torch_export_rewrite`` with a dynamic first dimension, built for each
   backend of ``tests/deploy_backends.py`` (``ep.module()``, onnxruntime, AOTInductor,
   ``torch.compile(ep.module())``, ExecuTorch) and compared with eager on each side and at
   other sizes: "ok", "limit" (the error users get, at export or when the backend builds it)
   or "fails" (with the error), and the build time.
2. **Row loop** (the issue's ``out[i] = x[i] * 2 + 1``, 16 columns) at 64, 1,024 and 8,192 rows:
   CPU ms per call of the eager Python loop, of the exported program on each backend, and of
   the lowering before this issue (the buffer carried through the scan and cloned every
   step: the runtime's ``rows`` ignored while exporting), interleaved rounds, medians.
3. **Other constructs** at 64 and 1,024 rows, each backend, against eager.
4. **cond vs where**: a small pure branch (``if y.abs().max() > 1: y = y / y.abs().max()``)
   as unbranch's cond and written branch-free by hand (``torch.where`` over both sides).

    python benchmarks/deploy_matrix.py [--repeats 5] [--quick]   # ExecuTorch cells need executorch installed

One torch thread, one onnxruntime thread; the machine's load is recorded.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

import torch
from _common import machine, write
from torch.export import Dim

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from deploy_backends import BACKENDS, available  # noqa: E402
from deploy_programs import PROGRAMS, RowLoop  # noqa: E402

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


def matrix() -> dict:
    results: dict = {}
    for name, program in PROGRAMS.items():
        results[name] = {"construct": program.construct, "lowering": program.lowering}
        for backend, build in BACKENDS.items():
            why = available(backend)
            if why:
                results[name][backend] = {"status": "not run", "why": why}
                continue
            model = program.build()
            start = time.perf_counter()
            try:
                if (name, backend) in LIMITS:
                    try:
                        program.export(model, target=backend)
                    except unbranch.UnbranchError as e:
                        cell = {"status": "limit", "at": "export", "error": str(e)[:400]}
                    else:
                        cell = {"status": "fails", "error": "no UnbranchError at export"}
                else:
                    ep = program.export(model)
                    with tempfile.TemporaryDirectory() as workdir:
                        run = build(ep, workdir)
                        for args in program.inputs().values():
                            expected = _tuple(model(*(a.clone() for a in args)))
                            got = run(*(a.clone() for a in args))
                            for g, e in zip(got, expected, strict=True):
                                torch.testing.assert_close(g, e)
                    cell = {"status": "ok"}
            except Exception as e:  # recorded, not raised: the matrix says which cell fails and how
                cell = {"status": "fails", "error": _first_line(e), "where": traceback.format_exc(limit=-2)[-600:]}
            cell["seconds"] = round(time.perf_counter() - start, 1)
            results[name][backend] = cell
            print(f"{name:16s} {backend:12s} {cell['status']:6s} {cell.get('error', '')[:100]}", flush=True)
    return results


def per_call(run, args, seconds: float = 0.3) -> tuple[float, int]:
    """CPU seconds per call, over as many calls as fit in about ``seconds`` (at least 1)."""
    calls, start = 0, time.process_time()
    while True:
        run(*args)
        calls += 1
        spent = time.process_time() - start
        if spent >= seconds:
            return spent / calls, calls


def timed(runners: dict, args, repeats: int) -> dict:
    """Median CPU ms per call of each runner, rounds interleaved with alternating order."""
    with torch.no_grad():
        for run in runners.values():
            run(*args)  # first calls compile or allocate: not measured
        times: dict[str, list] = {k: [] for k in runners}
        order = list(runners.items())
        for i in range(repeats):
            for label, run in order if i % 2 == 0 else order[::-1]:
                times[label].append(per_call(run, args)[0])
    return {k: round(statistics.median(v) * 1e3, 4) for k, v in times.items()}


def _export(model, example, **context):
    with unbranch.torch_export_rewrite(rewrite=[type(model).forward], **context):
        return torch.export.export(model, example, dynamic_shapes=tuple({0: Dim.DYNAMIC} for _ in example))


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


def runners_for(ep, backends, workdir) -> dict:
    out = {}
    for backend in backends:
        if available(backend):
            continue
        sub = Path(workdir) / backend
        sub.mkdir()
        try:
            out[backend] = BACKENDS[backend](ep, str(sub))
        except Exception as e:
            print(f"  {backend}: cannot build ({_first_line(e)})", flush=True)
    return out


def row_loop(sizes, repeats: int, backends) -> dict:
    model = RowLoop()
    results = {}
    with tempfile.TemporaryDirectory() as workdir:
        largest = torch.randn(max(sizes), 16)
        ep = _export(model, (largest,))
        new = runners_for(ep, backends, workdir)
        old_dir = Path(workdir) / "carried"
        old_dir.mkdir()
        old = runners_for(_carried_buffer_export(model, (largest,)), ["module"], old_dir)
        for n in sizes:
            args = (torch.randn(n, 16),)
            runners = {"eager": lambda *a: model(*a)}
            runners.update(new)
            runners.update({f"{k} (carried buffer, before)": v for k, v in old.items()})
            ms = timed(runners, args, repeats)
            results[str(n)] = {"ms": ms, "ratio_to_eager": {k: round(v / ms["eager"], 3) for k, v in ms.items()}}
            print(f"rows {n}: {results[str(n)]['ratio_to_eager']}", flush=True)
    return results


def constructs(names, sizes, repeats: int, backends) -> dict:
    results = {}
    for name in names:
        program = PROGRAMS[name]
        model = program.build()
        results[name] = {}
        with tempfile.TemporaryDirectory() as workdir:
            ep = _export(model, program.make(max(sizes)), **program.context)
            runners = {"eager": lambda *a, m=model: m(*a)}
            runners.update(runners_for(ep, [b for b in backends if (name, b) not in LIMITS], workdir))
            for n in sizes:
                ms = timed(runners, program.make(n), repeats)
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


def cond_vs_where(sizes, repeats: int, backends) -> dict:
    results = {}
    with tempfile.TemporaryDirectory() as workdir:
        built = {}
        for model in (CondSmall(), WhereSmall()):
            sub = Path(workdir) / type(model).__name__
            sub.mkdir()
            example = (torch.randn(max(sizes), 4),)  # ExecuTorch plans memory for the example's size
            built[type(model).__name__] = (model, runners_for(_export(model, example), backends, sub))
        for n in sizes:
            for side, scale in (("then", 10.0), ("else", 0.001)):
                args = (torch.randn(n, 4) * scale,)
                runners = {"eager": lambda *a: CondSmall()(*a)}
                for label, (_, rs) in built.items():
                    runners.update({f"{k} {label}": v for k, v in rs.items()})
                ms = timed(runners, args, repeats)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds per runner")
    parser.add_argument("--quick", action="store_true", help="the row loop at 64 and 1,024 rows only, no matrix")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    torch.set_num_threads(1)  # a second OpenMP thread stalls whenever another process takes a core
    info = machine()
    backends = list(BACKENDS)
    result = {
        "machine": info,
        "what": "matrix: each program exported with a dynamic first dimension, built per backend, compared with "
        "eager on each side and other sizes; timings: CPU ms per call (median of interleaved rounds of >= 0.3 s), "
        "1 torch thread, 1 onnxruntime thread; ratios are over the eager module",
        "repeats": args.repeats,
        "versions": {m: _version(m) for m in ("onnxruntime", "executorch")},
    }
    if not args.quick:
        result["matrix"] = matrix()
    sizes = [64, 1024] if args.quick else [64, 1024, 8192]
    result["row_loop"] = row_loop(sizes, args.repeats, backends)
    if not args.quick:
        names = ["if", "while-fixed", "while-bounded", "carry", "appends", "range-from-one", "break"]
        result["constructs"] = constructs(names, [64, 1024], args.repeats, backends)
        result["cond_vs_where"] = cond_vs_where([64, 4096], args.repeats, backends)
    path = write("deploy_matrix", result)
    print(f"-> {path}")


def _version(module: str) -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version(module)
    except importlib.metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    main()
