"""``unbranch`` command line: validate tiny models (one or all), rewrite one function, emit the catalogue."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

DEFAULT_MODELS = ["BartModel"]


def _validate(args) -> int:
    import torch

    if args.all or args.filter or args.shard or args.source or args.results or args.report:
        return _sweep(args)
    from .hf.validate import subject, validate

    names = args.models or DEFAULT_MODELS
    unknown = []
    for n in names:
        try:
            subject(n)
        except (KeyError, ValueError, ImportError, AttributeError):
            unknown.append(n)
    if unknown:
        print(
            f"unknown model(s): {', '.join(unknown)}; give a transformers model or config class, "
            "a config.json, or package.module:factory",
            file=sys.stderr,
        )
        return 2
    dtype = getattr(torch, args.dtype or "float16")
    results = []
    for i, name in enumerate(names, 1):
        if len(names) > 1 and not args.json:
            bar = "#" * (20 * i // len(names))
            print(f"\r[{bar:<20}] {i}/{len(names)} {name:<28}", end="", file=sys.stderr, flush=True)
        for strict in _modes(args):
            results.append(validate(name, dtype, strict=strict, onnx=args.onnx))
            if args.verbose:
                print(results[-1].log, file=sys.stderr)
    if len(names) > 1 and not args.json:
        print(file=sys.stderr)
    if args.json:
        print(json.dumps([r.as_dict() for r in results], indent=2, default=sorted))
    else:
        _table(results)
    return 0 if all(r.ok for r in results) else 1


def _modes(args) -> list[bool]:
    return [False, True] if args.both_modes else [args.strict]


def _sweep(args) -> int:
    """``validate --all``: every architecture in its own process, resumable, with a summary and a report."""
    import time

    from .hf import sweep

    shard = tuple(int(x) for x in args.shard.split("/")) if args.shard else None
    names = args.models or sweep.targets(args.filter, shard, args.source)
    dtype, started, results, ran = args.dtype or "float32", time.monotonic(), [], []
    for strict in _modes(args):

        def progress(done, todo, res):
            ran.append(res.model)
            if not args.json:
                sweep.progress_line(done, todo, res, started)

        results += sweep.sweep(names, args.results or "sweep-results", dtype, strict, args.jobs, args.timeout, progress)
    if args.json:
        print(json.dumps([r.as_dict(log=args.verbose) for r in results], indent=2, default=sorted))
    else:
        print(sweep.summary(results))
    if args.report:
        mode = "strict and non-strict" if args.both_modes else "strict" if args.strict else "non-strict"
        title = f"Sweep: {dtype}, {mode} export\n\n    unbranch {' '.join(args.argv)}"
        with open(args.report, "w") as f:
            run = (
                f"This run validated {len(ran)} of them in {(time.monotonic() - started) / 60:.1f} min wall time "
                f"({args.jobs} at a time); the others were results kept from earlier runs."
            )
            f.write(sweep.markdown(results, title, len(names) * len(_modes(args)), verbose=args.verbose, run=run))
    return 0 if not any(r.outcome[0] in ("harm", "not fixed") for r in results) else 1


def _table(results) -> None:
    head = (
        "model",
        "dtype",
        "plain export",
        "with unbranch",
        "conds",
        "both sides",
        "max diff (example/other/flipped)",
        *(("onnxruntime",) if any(r.onnx for r in results) else ()),
        "outcome",
        "result",
    )
    rows = []
    for r in results:
        diffs = " / ".join(f"{k} {v:.0e}" for k, v in r.max_diff.items()) or "-"
        plain = "ok" if r.plain == "ok" else "fails (" + r.plain.split(":")[0] + ")" if r.plain else "-"
        sides = f"{sum(len(s) == 2 for s in r.sides.values())}/{len(r.sides)} ifs" if r.sides else "-"
        rows.append(
            (
                r.model,
                r.dtype,
                plain,
                r.rewritten if r.rewritten in ("ok", "") else "FAILS",
                str(r.conds),
                sides,
                diffs,
                *((_onnx_cell(r),) if r.onnx else ()),
                r.outcome[0],
                "PASS" if r.ok else "FAIL",
            )
        )
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    for row in (head, tuple("-" * w for w in widths), *rows):
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths)))
    for r in results:
        if r.outcome[1]:
            print(f"\n{r.model}: {r.outcome[0]}: {r.outcome[1]}")
        if r.onnx not in ("", "ok"):
            print(f"\n{r.model}: ONNX: {r.onnx}")
        if r.dropped_checks or r.dropped_assertions:
            checks = "; ".join(r.dropped_checks) or "none"
            print(
                f"{r.model}: not in the ONNX model: checks {checks}; {r.dropped_assertions} data-dependent assertion(s)"
            )
        if r.methods:
            print(f"{r.model}: rewrote {', '.join(r.methods)}")


def _onnx_cell(r) -> str:
    if r.onnx != "ok":
        return "FAILS"
    ops = " ".join(f"{n} {op}" for op, n in sorted(r.onnx_ops.items())) or "no If/Loop/Scan"
    return f"{ops}, max diff {max(r.onnx_diff.values(), default=0):.0e}"


def _load(target: str):
    module_name, _, qual = target.partition(":")
    if not qual:
        raise SystemExit("expected package.module:Class.method")
    obj = importlib.import_module(module_name)
    for part in qual.split("."):
        obj = obj.__dict__[part] if isinstance(obj, type) and part in obj.__dict__ else getattr(obj, part)
    return obj


def _rewrite(args) -> int:
    from .api import transform_method

    rm = transform_method(_load(args.target), prefix=args.prefix)
    if args.output:
        _write(args.output, rm)
    else:
        print(rm.code)
        print(rm.diff())
    return 0


def _write(directory: str, rm, stem: str | None = None) -> list[str]:
    os.makedirs(directory, exist_ok=True)
    base = os.path.join(directory, stem or rm.qualname.replace("<locals>", "locals"))
    header = f"# unbranch rewrite of {rm.qualname} ({rm.function.__module__}); `unbranch emit` regenerates it\n"
    files = {base + ".py": header + rm.code, base + ".diff": rm.diff().replace(rm.source.path, rm.function.__module__)}
    for path, text in files.items():
        with open(path, "w") as f:
            f.write(text)
    return list(files)


def emit(directory: str) -> list[str]:
    """Write the rewritten source and diff of every catalogue entry under ``directory``."""
    from .api import transform_method
    from .hf.catalog import CATALOGUE, resolve
    from .rewriting import MODEL_OPTIONS

    written = []
    for module, entries in sorted(CATALOGUE.items()):
        family = module.split(".")[-2] if module.startswith("transformers.models.") else module
        for qualname, hooks in sorted(entries.items()):
            rm = transform_method(resolve(module, qualname), **MODEL_OPTIONS, **hooks)
            written += _write(os.path.join(directory, family), rm, qualname)
    return written


def _emit(args) -> int:
    for path in emit(args.output):
        print(path)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="unbranch", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("validate", help="export tiny models with and without unbranch, compare with eager")
    v.add_argument(
        "models",
        nargs="*",
        help="transformers model or config classes, config.json files or directories, package.module:factory "
        f"(returning model, inputs, dynamic shapes); default: {' '.join(DEFAULT_MODELS)}",
    )
    v.add_argument("--dtype", choices=["float16", "float32", "bfloat16"], help="default: float16, float32 for a sweep")
    v.add_argument("--strict", action="store_true", help="use torch.export's strict mode")
    v.add_argument("--both-modes", action="store_true", help="non-strict and strict export")
    v.add_argument("--all", action="store_true", help="sweep every architecture (one process per model)")
    v.add_argument("--filter", metavar="REGEX", help="sweep the architectures whose name matches")
    v.add_argument("--shard", metavar="I/N", help="sweep the I-th of N slices of the architectures")
    v.add_argument("--source", metavar="REGEX", help="sweep the architectures whose modeling file matches")
    v.add_argument("--jobs", type=int, default=1, help="models validated in parallel (sweep)")
    v.add_argument("--timeout", type=float, default=300.0, help="seconds per model (sweep)")
    v.add_argument(
        "--results", metavar="DIR", help="sweep into DIR (default sweep-results), one file per model; a re-run resumes"
    )
    v.add_argument("--report", metavar="FILE.md", help="write the sweep's markdown report")
    v.add_argument("--json", action="store_true", help="print results as JSON")
    v.add_argument("--onnx", action="store_true", help="also convert to ONNX and compare onnxruntime with eager")
    v.add_argument("-v", "--verbose", action="store_true", help="show what torch and onnx printed")
    v.set_defaults(run=_validate)
    r = sub.add_parser("rewrite", help="print or write the rewritten source of one function")
    r.add_argument("target", help="package.module:Class.method")
    r.add_argument("-o", "--output", help="directory to write <qualname>.py and .diff into")
    r.add_argument("--prefix", default="branch_cond")
    r.set_defaults(run=_rewrite)
    e = sub.add_parser("emit", help="regenerate the catalogue's rewritten files")
    e.add_argument("-o", "--output", default="rewrites")
    e.set_defaults(run=_emit)
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
