"""Validate one model of another library: plain ``torch.export`` against ``unbranch.export``, both against eager.

A builder returns a :class:`Built`: the model, its example inputs (keyword arguments), the
dynamic dimensions of those inputs written with :data:`BATCH` / :func:`space` markers, and
optionally inputs that take the other side of a data-dependent branch. The markers become
``Dim.DYNAMIC`` first; where the plain export fails for another reason than control flow on
data (a model that needs a fixed image size...), the next level of :data:`LEVELS` is tried
(dynamic batch only, then ``Dim.AUTO``, then static), and the level used is recorded.

Outcomes are those of the transformers sweep (:class:`unbranch.hf.validate.Result`): the
"rewritten" export here is ``unbranch.export`` itself.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields

import torch
from torch.export import Dim
from torch.fx.experimental.symbolic_shapes import is_concrete_int
from torch.utils import _pytree as pytree

import unbranch
from unbranch.exporting.failures import kind_of
from unbranch.exporting.quiet import quiet
from unbranch.exporting.report import branch_nodes, observe_branches
from unbranch.hf.validate import Result, _tensor_sites, _where, error_line, max_diff


@dataclass(frozen=True)
class Dyn:
    """A dynamic dimension: ``batch`` or ``space`` (image sides, time...), and the size another case adds."""

    kind: str
    step: int


BATCH = Dyn("batch", 1)


def space(step: int = 16) -> Dyn:
    return Dyn("space", step)


LEVELS = ("dynamic", "dynamic batch", "auto", "static")


@dataclass
class Built:
    model: torch.nn.Module
    inputs: dict  # keyword arguments of forward
    shapes: dict | None = None  # input name -> {dim: Dyn} (lists and tuples of those for list inputs)
    flips: dict = field(default_factory=dict)  # label -> inputs taking another side of a data-dependent branch
    seed: int | None = None  # seed torch before each run (models drawing random numbers: training detectors)
    tolerance: float | None = None


@dataclass
class Entry:
    """A model of the sweep: its name (unique), library and builder; ``mode`` is eval or train."""

    name: str
    library: str
    make: Callable[[], Built]
    mode: str = "eval"


def grouped(library: str, groups: dict) -> list[Entry]:
    """An Entry ``group.name`` for each builder of each group (``group -> () -> {name: () -> Built}``).
    A group is called again when one of its entries is built: listing them builds nothing."""
    return [
        Entry(f"{group}.{name}", library, functools.partial(_built, groups, group, name))
        for group, make in groups.items()
        for name in make()
    ]


def _built(groups: dict, group: str, name: str) -> Built:
    return groups[group]()[name]()


@dataclass
class LibResult(Result):
    library: str = ""
    mode: str = "eval"
    level: str = ""  # the level of LEVELS the exports used
    dims: str = ""  # what the dynamic dimensions were, in short
    tried: list = field(default_factory=list)  # [level, plain export's error(, unbranch's)] of levels given up
    plain_kind: str = ""  # failures.kind_of the plain export's error: data, shape or ""
    attempts: list = field(default_factory=list)  # unbranch.export's attempts, one line each
    unbranch_report: str = ""
    tol: float = 1e-4

    @property
    def tolerance(self) -> float:
        return self.tol


class _Call(torch.nn.Module):
    def __init__(self, fn, fixed: dict):
        super().__init__()
        self.fn, self.fixed = fn, fixed  # an nn.Module fn is a submodule: its parameters are the model's


def call(fn, names, **fixed) -> torch.nn.Module:
    """A module whose ``forward(self, <names>)`` is ``fn(<name>=<name>..., **fixed)``.

    torch.export takes neither ``**kwargs`` nor a function: this gives a function (a kornia op)
    or a method (``model.encode``) a forward with named tensor arguments.
    """
    names = list(names)
    source = (
        f"def forward(self, {', '.join(names)}):\n"
        f"    return self.fn({''.join(f'{n}={n}, ' for n in names)}**self.fixed)\n"
    )
    namespace: dict = {}
    exec(compile(source, f"<call {getattr(fn, '__qualname__', fn)}>", "exec"), namespace)
    cls = type("Call", (_Call,), {"forward": namespace["forward"]})
    return cls(fn, fixed)


def spec_at(shapes, level: str):
    """The dynamic_shapes ``torch.export`` takes for ``shapes`` at ``level`` (None where nothing is dynamic)."""

    def dim(d: Dyn):
        if level == "dynamic" or (level == "dynamic batch" and d.kind == "batch"):
            return Dim.DYNAMIC
        return Dim.AUTO if level == "auto" else None

    def convert(node):
        if isinstance(node, dict) and all(isinstance(v, Dyn) for v in node.values()):
            out = {k: dim(v) for k, v in node.items() if dim(v) is not None}
            return out or None
        if isinstance(node, dict):
            return {k: convert(v) for k, v in node.items()}
        if isinstance(node, (list, tuple)):
            return type(node)(convert(v) for v in node)
        return node

    return convert(shapes) if shapes else None


def _levels(shapes) -> list[str]:
    """The levels that give different specs for ``shapes`` (in order)."""
    out, seen = [], []
    for level in LEVELS:
        spec = repr(spec_at(shapes, level))
        if spec not in seen:
            seen.append(spec)
            out.append(level)
    return out


def describe(shapes) -> str:
    kinds = sorted({leaf.kind for leaf in pytree.tree_leaves(shapes) if isinstance(leaf, Dyn)})
    return "+".join(kinds) or "none"


def grown(inputs, shapes, level: str = "dynamic", dynamic: set | None = None):
    """``inputs`` with every dimension dynamic at ``level`` grown by its step (values repeated cyclically).

    ``dynamic``: the (path, dim) pairs that stayed dynamic in the program (``Dim.AUTO``); others are kept.
    """

    def grow(path, value, dims):
        if not isinstance(value, torch.Tensor) or not isinstance(dims, dict):
            return value
        for d, marker in dims.items():
            if not isinstance(marker, Dyn) or (level == "dynamic batch" and marker.kind != "batch"):
                continue
            if dynamic is None or (path, d) in dynamic:
                size = value.shape[d]
                value = value.index_select(d, torch.arange(size + marker.step) % size)
        return value

    def walk(path, value, dims):
        if isinstance(value, dict) and isinstance(dims, dict) and not isinstance(value, torch.Tensor):
            return {k: walk(path + (k,), v, dims.get(k)) for k, v in value.items()}
        if isinstance(value, (list, tuple)) and isinstance(dims, (list, tuple)):
            return type(value)(walk(path + (i,), v, d) for i, (v, d) in enumerate(zip(value, dims)))
        return grow(path, value, dims)

    return walk((), inputs, shapes or {})


def _symbolic_dims(ep, inputs) -> set:
    """(path, dim) of every input dimension the exported program keeps symbolic."""
    leaves, _ = pytree.tree_flatten_with_path(inputs)
    users = [n for n in ep.graph.nodes if n.op == "placeholder" and n.name in ep.graph_signature.user_inputs]
    out = set()
    tensors = [(p, v) for p, v in leaves if isinstance(v, torch.Tensor)]
    if len(tensors) != len(users):
        return out
    for (path, _), node in zip(tensors, users):
        key = tuple(getattr(k, "key", getattr(k, "idx", None)) for k in path)
        val = node.meta.get("val")
        for d, size in enumerate(getattr(val, "shape", ())):
            if isinstance(size, torch.SymInt) and not is_concrete_int(size):  # (a SymInt torch fixed to a number)
                out.add((key, d))
    return out


def _export(fn, model, inputs, spec, strict):
    return fn(model, (), inputs, dynamic_shapes=spec, strict=strict)


def _plain(model, inputs, spec, strict):
    return _export(torch.export.export, model, inputs, spec, strict)


def _unbranch(model, inputs, spec, strict):
    return _export(unbranch.export, model, inputs, spec, strict)


def validate(entry: Entry, strict: bool = False, level_limit: float | None = None) -> LibResult:
    """Build, export plainly and with unbranch (walking down LEVELS as needed), compare with eager.

    ``level_limit``: seconds a plain export may take at a level before the next level is tried.
    """
    start = time.perf_counter()
    res = LibResult(entry.name, "float32", strict=strict, source=entry.library, library=entry.library, mode=entry.mode)
    with quiet() as log:
        try:
            built = entry.make()
            model = built.model.train() if entry.mode == "train" else built.model.eval()
            res.dims = describe(built.shapes)
            if built.tolerance:
                res.tol = built.tolerance
            with torch.no_grad():
                _call(model, built.inputs, built.seed)  # warm-up: some models set themselves up on first call
        except Exception as e:
            res.built = error_line(e)
        if not res.built:
            _exports(res, model, built, strict, level_limit)
    res.log = log.getvalue()[-200_000:]
    res.seconds = time.perf_counter() - start
    return res


def _call(model, inputs, seed):
    if seed is not None:
        torch.manual_seed(seed)
    return model(**inputs)


class ExportTimeout(Exception):
    pass


@contextlib.contextmanager
def _time_limit(seconds: float | None):
    """Raise ExportTimeout in this (the main) thread after ``seconds``; no limit for None."""
    if not seconds:
        yield
        return

    def expire(signum, frame):
        raise ExportTimeout(f"export took over {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _exports(res: LibResult, model, built: Built, strict: bool, level_limit: float | None = None) -> None:
    if built.shapes:  # torch.export wants every argument named: None for those with no dynamic dimension
        built.shapes = {name: built.shapes.get(name) for name in built.inputs}
    levels = _levels(built.shapes)
    plain = ep = None
    for n, level in enumerate(levels):
        spec = spec_at(built.shapes, level)
        res.level = level
        last = n == len(levels) - 1
        with _time_limit(None if last else level_limit):  # a level too slow to trace: the next one
            plain, error = _try(_plain, model, built.inputs, spec, strict)
        if isinstance(error, ExportTimeout):
            res.tried.append([level, f"ExportTimeout: {error}"])
            continue
        kind = kind_of(error) if error is not None else None
        if error is None or kind == "data" or last:
            break
        tried = [level, _short(error_line(error))]
        if kind == "shape":  # a branch fixed a dimension declared dynamic: unbranch.export may keep it
            ep, uerror = _try(_unbranch, model, built.inputs, spec, strict)
            if ep is not None:
                break
            tried.append(_short(error_line(uerror)))
        res.tried.append(tried)
    if error is not None:
        res.plain, res.plain_where = _short(error_line(error)), _where(error)
        res.plain_control_flow = kind is not None  # as validate: data, or a dimension a branch fixed
        res.plain_kind = kind or ""
    else:
        res.plain = "ok"
    if ep is None:
        ep, uerror = _try(_unbranch, model, built.inputs, spec, strict)
    report = None
    if ep is not None:
        res.rewritten, res.conds = "ok", len(branch_nodes(ep))
        report = unbranch.report_of(ep)
    else:
        res.rewritten = _short(error_line(uerror))
        path, line = getattr(uerror, "path", None), getattr(uerror, "line", None)
        res.rewritten_where = f"{_short(path)}:{line}" if path and line else _where(uerror)
        report = getattr(uerror, "report", None)
    if report is not None:
        res.methods, res.exports = [rm.qualname for rm in report], len(report.attempts)
        res.unbranch_report = str(report)
        res.attempts = [a.error or "exported" for a in report.attempts]
    if ep is None and plain is None:
        return
    program = ep if ep is not None else plain
    dynamic = _symbolic_dims(program, built.inputs) if res.level == "auto" else None
    cases = {"example": built.inputs}
    if res.level != "static" and (dynamic is None or dynamic):
        cases["other shape"] = grown(built.inputs, built.shapes, res.level, dynamic)
    cases.update(built.flips)
    _compare(res, model, cases, plain, ep, report, built.seed)


def _try(fn, model, inputs, spec, strict):
    try:
        return fn(model, inputs, spec, strict), None
    except Exception as e:
        return None, e


def _short(text: str) -> str:
    """Paths made relative to site-packages (``torchvision/ops/boxes.py``)."""
    return re.sub(r"/\S*?site-packages/", "", text)


def _diff(actual, expected) -> float:
    """max_diff over floating tensors, after checking both have the same tensors, shapes and integer values."""
    got, want = pytree.tree_leaves(actual), pytree.tree_leaves(expected)
    got = [t for t in got if isinstance(t, torch.Tensor)]
    want = [t for t in want if isinstance(t, torch.Tensor)]
    if len(got) != len(want):
        raise ValueError(f"{len(got)} output tensors, eager has {len(want)}")
    for a, e in zip(got, want):
        if a.shape != e.shape:
            raise ValueError(f"output shape {tuple(a.shape)}, eager has {tuple(e.shape)}")
        if not e.is_floating_point() and not e.is_complex() and not torch.equal(a, e):
            raise ValueError(f"integer output differs from eager ({e.dtype}, shape {tuple(e.shape)})")
    return max_diff(got, want)


def _compare(res: LibResult, model, cases: dict, plain, ep, report, seed) -> None:
    state = copy.deepcopy(model.state_dict())  # training runs change buffers: every run starts from here
    rewritten = list(report) if report is not None else []  # (report.applied() swaps them in)
    with torch.no_grad():
        for label, kwargs in cases.items():
            model.load_state_dict(state)
            try:
                expected = _call(model, kwargs, seed)
            except Exception as e:  # the case itself is bad (a size the model refuses): no comparison
                res.run_errors[f"{label} (eager)"] = error_line(e)
                continue
            for program, diffs in ((plain, res.plain_diff), (ep, res.max_diff)):
                if program is None:
                    continue
                try:
                    diffs[label] = _diff(_call(program.module(), kwargs, seed), expected)
                except Exception as e:
                    diffs[label] = float("inf")
                    res.run_errors.setdefault(label, error_line(e))
            if rewritten:
                model.load_state_dict(state)
                with report.applied(), observe_branches() as seen:
                    _call(model, kwargs, seed)  # the rewritten code, eagerly: which sides do these inputs take?
                for site, sides in seen.items():
                    res.sides.setdefault(site, set()).update(sides)
    model.load_state_dict(state)
    sites = _tensor_sites(rewritten)
    res.sides = {site: sorted(sides) for site, sides in res.sides.items() if site in sites}


RESULTS = "libraries-results"  # where a sweep writes one result per model


def load(path: str) -> LibResult:
    with open(path) as f:
        d = json.load(f)
    known = {f.name for f in fields(LibResult)}
    return LibResult(**{k: v for k, v in d.items() if k in known})


def save(res: LibResult, path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    d = res.as_dict(log=True)
    d["both_sides"], d["flipped"] = res.both_sides, res.flipped
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(d, f, indent=1, default=sorted)
    os.replace(tmp, path)  # complete or absent
