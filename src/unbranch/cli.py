"""The unbranch command line: validate tiny models (one or all), rewrite one function, emit the catalogue.

Every mistake in what it is given ends in one line saying what is wrong, and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import json
import os
import re
import sys
import types

from .errors import UnbranchError

DEFAULT_MODELS = ["BartModel"]
DESCRIPTION = (
    "Make torch.export work on PyTorch code that branches on tensor values: validate tiny models with and "
    "without unbranch, print or write the rewrite of one function, regenerate the catalogue's rewrites/."
)


class UsageError(Exception):
    """Something the user gave that cannot be used: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse prints the whole usage first; one line is enough
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _validate(args) -> int:
    import torch

    if args.all or args.filter or args.shard or args.source or args.results or args.report:
        return _sweep(args)
    from .hf.validate import validate

    names = args.models or DEFAULT_MODELS
    problems = [p for p in map(_model_problem, names) if p]
    if problems:
        raise UsageError("; ".join(problems))
    dtype = getattr(torch, args.dtype or "float16")
    results = []
    for i, name in enumerate(names, 1):
        if len(names) > 1 and not args.json:
            bar = "#" * (20 * i // len(names))
            print(f"\r[{bar:<20}] {i}/{len(names)} {name:<28}", end="", file=sys.stderr, flush=True)
        for strict in _modes(args):
            results.append(validate(name, dtype, strict=strict, onnx=args.onnx))
            if args.verbose:
                print(_details(results[-1]), file=sys.stderr)
    if len(names) > 1 and not args.json:
        print(file=sys.stderr)
    if args.json:
        print(json.dumps([r.as_dict() for r in results], indent=2, default=sorted))
    else:
        _table(results)
    return 0 if all(r.ok for r in results) else 1


def _model_problem(name: str) -> str:
    """Why ``name`` names no model to validate ("" when it does)."""
    from .hf.validate import subject

    if ":" in name and not os.path.exists(name):  # package.module:factory
        try:
            _load(name)
        except UsageError as e:
            return str(e)
        return ""
    try:
        subject(name)
    except (OSError, ValueError) as e:  # a config.json that is missing, not JSON, without a known model_type
        return str(e)
    except KeyError:
        hint = _close_names(name)
        return f"{name}: not a transformers model or config class, a config.json or package.module:factory" + (
            f" (did you mean {' or '.join(hint)}?)" if hint else ""
        )
    return ""


def _close_names(name: str) -> list[str]:
    import difflib

    import transformers

    from .hf.zoo import MODELS

    known = [n for n in dir(transformers) if n[:1].isupper() and n.endswith(("Model", "Config"))] + list(MODELS)
    return difflib.get_close_matches(name, list(dict.fromkeys(known)), n=2, cutoff=0.75)


def _details(r) -> str:
    """What ``-v`` shows of one validation: both exports' outcome and place, then what torch printed, headed."""
    mode = "strict" if r.strict else "non-strict"
    lines = [f"=== {r.model}, {r.dtype}, {mode} export ==="]
    if r.built:
        lines.append(f"not built: {r.built}")
    else:
        for label, outcome, where in (
            ("plain export", r.plain, r.plain_where),
            ("with unbranch", r.rewritten, r.rewritten_where),
        ):
            lines.append(f"{label}: " + ("ok" if outcome == "ok" else f"{outcome} at {where or '?'}"))
        if r.methods:
            lines.append(f"rewrote: {', '.join(r.methods)}")
        lines += [f"catalogue entry no longer applies, left out: {entry}" for entry in r.stale]
    if r.log.strip():
        lines += ["--- what torch printed ---", r.log.rstrip()]
    return "\n".join(lines) + "\n"


def _modes(args) -> list[bool]:
    return [False, True] if args.both_modes else [args.strict]


def _sweep(args) -> int:
    """``validate --all``: every architecture in its own process, resumable, with a summary and a report."""
    import time

    from .hf import sweep

    names = args.models or sweep.targets(args.filter, args.shard, args.source)
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
        for entry in r.stale:
            print(f"{r.model}: catalogue entry no longer applies, left out: {entry}")


def _onnx_cell(r) -> str:
    if r.onnx != "ok":
        return "FAILS"
    ops = " ".join(f"{n} {op}" for op, n in sorted(r.onnx_ops.items())) or "no If/Loop/Scan"
    return f"{ops}, max diff {max(r.onnx_diff.values(), default=0):.0e}"


def _load(target: str):
    """The object ``package.module:Class.method`` (or ``path/file.py:function``) names; UsageError if none."""
    module_name, _, qual = target.partition(":")
    if not module_name or not qual:
        raise UsageError(f"expected package.module:Class.method or file.py:function, got {target!r}")
    obj = _import(module_name)
    parts = qual.split(".")
    for i, part in enumerate(parts):
        try:
            obj = obj.__dict__[part] if isinstance(obj, type) and part in obj.__dict__ else getattr(obj, part)
        except AttributeError:
            owner = f"{module_name}:{'.'.join(parts[:i])}" if i else module_name
            raise UsageError(f"{owner} has no attribute {part!r}") from None
    return obj


def _import(name: str) -> types.ModuleType:
    """The module ``name`` (a dotted name, found from the current directory as ``python -m`` would, or a .py file)."""
    try:
        if name.endswith(".py"):
            if not os.path.isfile(name):
                raise UsageError(f"{name}: no such file")
            spec = importlib.util.spec_from_file_location(os.path.basename(name)[:-3], name)
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module  # inspect finds the source of its functions through it
            spec.loader.exec_module(module)
            return module
        if "" not in sys.path and os.getcwd() not in sys.path:  # the console script does not add it
            sys.path.insert(0, os.getcwd())
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name and (name == e.name or name.startswith(e.name + ".")):
            raise UsageError(f"no module named {e.name!r} (looked in the current directory and sys.path)") from None
        raise UsageError(f"cannot import {name}: it needs {e.name!r}, which is not installed") from None
    except SyntaxError as e:
        raise UsageError(f"cannot import {name}: {e.filename}:{e.lineno}: syntax error: {e.msg}") from None
    except UsageError:
        raise
    except Exception as e:  # the module raised while importing
        raise UsageError(f"cannot import {name}: {type(e).__name__}: {_first_line(e)}") from None


def _first_line(e: BaseException) -> str:
    return next((line.strip() for line in str(e).splitlines() if line.strip()), "")


def _function(target: str):
    """What ``target`` names, if it is Python code unbranch can rewrite; UsageError saying what it is otherwise."""
    obj = _load(target)
    if isinstance(obj, types.ModuleType):
        raise UsageError(f"{target} is a module: name a function or method in it ({target}.name)")
    if isinstance(obj, type):
        example = "forward" if callable(getattr(obj, "forward", None)) else "<method>"
        raise UsageError(f"{target} is a class: name one of its methods ({target}.{example})")
    plain = obj.__func__ if isinstance(obj, (staticmethod, classmethod, types.MethodType)) else obj
    if inspect.isbuiltin(plain) or inspect.ismethoddescriptor(plain) or isinstance(plain, types.WrapperDescriptorType):
        raise UsageError(f"{target} is a builtin, implemented in C: it has no Python source to rewrite")
    if not callable(plain) and not isinstance(obj, (staticmethod, classmethod)):
        raise UsageError(f"{target} is a {type(obj).__name__}, not a function")
    return obj


def _rewrite(args) -> int:
    from .api import transform_method

    rm = transform_method(_function(args.target), prefix=args.prefix)
    if not rm.changed:
        print(f"{rm.qualname}: nothing to rewrite (no branch or loop on tensor values)", file=sys.stderr)
    if args.output:
        py, diff = _write(args.output, rm)
        what = "rewritten source" if rm.changed else "source, unchanged"
        print(f"wrote {py} ({what}) and {diff} (diff)")
    else:
        print(rm.code)
        print(rm.diff())
    return 0


def _write(directory: str, rm, stem: str | None = None, header: str = "") -> list[str]:
    os.makedirs(directory, exist_ok=True)
    base = os.path.join(directory, stem or rm.qualname.replace("<locals>", "locals"))
    header = (
        header or f"# unbranch rewrite of {rm.qualname} ({rm.function.__module__}); `unbranch emit` regenerates it\n"
    )
    files = {base + ".py": header + rm.code, base + ".diff": rm.diff().replace(rm.source.path, rm.function.__module__)}
    for path, text in files.items():
        with open(path, "w") as f:
            f.write(text)
    return list(files)


def emit(directory: str) -> list[str]:
    """Write the rewritten source and diff of every catalogue entry under ``directory``, and one per recipe.

    A recipe's file shows its rewrite of the first class it picks and lists all of them; ``VERSION``
    names the transformers release whose code they show. Every entry must still apply to the
    installed transformers: else one UnbranchError names each that does not, and nothing is written.
    """
    import transformers

    from .api import transform_method
    from .hf.catalog import CATALOGUE, RECIPES, recipe_entries, recipe_modules, resolve
    from .load.rewriting import MODEL_OPTIONS

    planned, stale = [], []

    def build(module, qualname, hooks):
        try:
            return transform_method(resolve(module, qualname), **MODEL_OPTIONS, **hooks)
        except (UnbranchError, ImportError, AttributeError) as e:
            stale.append(f"{module}:{qualname}: {e}")

    for module, entries in sorted(CATALOGUE.items()):
        family = module.split(".")[-2] if module.startswith("transformers.models.") else module
        for qualname, hooks in sorted(entries.items()):
            if rm := build(module, qualname, hooks):
                planned.append((os.path.join(directory, family), rm, qualname, ""))
    for recipe in RECIPES:
        uses = []
        for module in recipe_modules():
            try:
                importlib.import_module(module)
            except ImportError:  # a model needing a library that is not installed
                continue
            uses += [(module, q) for q, h in recipe_entries(module).items() if h is recipe.hooks]
        built = [build(m, q, recipe.hooks) for m, q in uses]
        if not uses:
            stale.append(f"recipe {recipe.name}: its trigger matches no class")
        elif all(built):
            listing = "".join(f"#   {m}:{q}\n" for m, q in uses)
            header = (
                f"# unbranch recipe {recipe.name}, shown on {built[0].qualname} ({built[0].function.__module__});"
                f" `unbranch emit` regenerates it.\n# It rewrites the {recipe.method} of these {len(uses)} classes,"
                f" picked by their source matching the pattern\n#   {recipe.trigger.pattern}\n"
                f"# in this version:\n{listing}"
            )
            planned.append((os.path.join(directory, "recipes"), built[0], recipe.name, header))
    if stale:
        raise UnbranchError(
            f"{len(stale)} catalogue entries do not apply to transformers {transformers.__version__} "
            f"(nothing written): {'; '.join(stale)}"
        )
    written = [path for args in planned for path in _write(*args)]
    version = os.path.join(directory, "VERSION")  # the code shown is this release's
    with open(version, "w") as f:
        f.write(f"transformers {transformers.__version__}\n")
    return [*written, version]


def _emit(args) -> int:
    for path in emit(args.output):
        print(path)
    return 0


def _shard(text: str) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected I/N (the I-th of N slices, e.g. 1/4), got {text!r}") from None
    if not 1 <= i <= n:
        raise argparse.ArgumentTypeError(f"expected I/N with 1 <= I <= N, got {text!r}")
    return i, n


def _regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as e:
        raise argparse.ArgumentTypeError(f"not a regular expression: {text!r} ({e})") from None
    return text


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if not value > 0:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
        return value

    parse.__name__ = kind.__name__
    return parse


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    from .version import VERSION

    def of(package):
        try:
            return version(package)
        except PackageNotFoundError:
            return "not installed"

    deps = ", ".join(f"{p} {of(p)}" for p in ("torch", "transformers", "libcst"))
    return f"unbranch {VERSION} ({deps}, Python {sys.version.split()[0]})"


class _Version(argparse.Action):
    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(_version())  # argparse's own version action wraps it at the terminal's width
        parser.exit()


def main(argv=None) -> int:
    parser = _Parser(prog="unbranch", description=DESCRIPTION)
    parser.add_argument("--version", action=_Version, help="print the versions of unbranch, torch and transformers")
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
    v.add_argument("--filter", metavar="REGEX", type=_regex, help="sweep the architectures whose name matches")
    v.add_argument("--shard", metavar="I/N", type=_shard, help="sweep the I-th of N slices of the architectures")
    v.add_argument("--source", metavar="REGEX", type=_regex, help="sweep the architectures whose modeling file matches")
    v.add_argument("--jobs", type=_positive(int), default=1, help="models validated in parallel (sweep)")
    v.add_argument("--timeout", type=_positive(float), default=300.0, help="seconds per model (sweep)")
    v.add_argument(
        "--results", metavar="DIR", help="sweep into DIR (default sweep-results), one file per model; a re-run resumes"
    )
    v.add_argument("--report", metavar="FILE.md", help="write the sweep's markdown report")
    v.add_argument("--json", action="store_true", help="print results as JSON")
    v.add_argument("--onnx", action="store_true", help="also convert to ONNX and compare onnxruntime with eager")
    v.add_argument(
        "-v", "--verbose", action="store_true", help="show each export's error and place, and what torch printed"
    )
    v.set_defaults(run=_validate)
    r = sub.add_parser("rewrite", help="print or write the rewritten source of one function")
    r.add_argument("target", help="package.module:Class.method, package.module:function or path/file.py:function")
    r.add_argument("-o", "--output", metavar="DIR", help="write <qualname>.py and <qualname>.diff into DIR")
    r.add_argument(
        "--prefix", default="branch_cond", help="name prefix of the generated branch functions (default: branch_cond)"
    )
    r.set_defaults(run=_rewrite)
    e = sub.add_parser("emit", help="regenerate the catalogue's rewritten files")
    e.add_argument(
        "-o", "--output", metavar="DIR", default="rewrites", help="directory to write into (default: rewrites)"
    )
    e.set_defaults(run=_emit)
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    if args.command == "validate" and args.report and not os.path.isdir(os.path.dirname(args.report) or "."):
        return _fail(args, f"--report {args.report}: no such directory")
    try:
        return args.run(args)
    except (UsageError, UnbranchError) as e:
        return _fail(args, str(e))
    except ModuleNotFoundError as e:
        if e.name in ("transformers", "onnx", "onnxscript", "onnxruntime", "onnx_ir"):
            return _fail(args, f"this needs {e.name}, which is not installed (pip install {e.name.replace('_', '-')})")
        raise
    except OSError as e:  # writing -o/--report/--results
        return _fail(args, f"{e.filename or ''}: {e.strerror or e}".lstrip(": "))


def _fail(args, message: str) -> int:
    print(f"unbranch {args.command}: {_single_line(message)}", file=sys.stderr)
    return 2


def _single_line(message: str) -> str:
    return " ".join(line.strip() for line in message.strip().splitlines() if line.strip())


if __name__ == "__main__":
    sys.exit(main())
