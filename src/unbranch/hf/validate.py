"""Export tiny models with and without unbranch, compare with eager, and say what unbranch changed.

For each model: plain ``torch.export`` with dynamic shapes (expected to fail where a
data-dependent branch exists), then ``unbranch.export`` (which rewrites what torch's failures
name); both exported programs are compared with eager on the example inputs, on another size,
and (zoo models) on inputs or weights that flip the rewritten branch. :attr:`Result.outcome`
sums it up.
A model is a zoo name (hand-written, knows its branch flips), any transformers model or
config class (:mod:`unbranch.hf.factory`), a local ``config.json``, or ``package.module:factory``
returning ``(model, inputs, dynamic_shapes)`` (inputs: a dict of keyword arguments or a tuple
of positional ones). With ``onnx=True`` the program is also converted and run in onnxruntime.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import inspect
import os
import re
import time
import traceback
from dataclasses import asdict, dataclass, field

import torch
from torch.utils import _pytree as pytree

from ..api import export
from ..exporting.checked import TOLERANCE, max_diff
from ..exporting.failures import kind_of
from ..exporting.quiet import quiet
from ..exporting.report import branch_nodes, branch_sites, observe_branches, report_of
from .catalog import stale_entries
from .zoo import MODELS

OUTCOMES = ("no-harm", "fixed", "not fixed", "harm", "other failure", "not built")


@dataclass
class Result:
    model: str
    dtype: str
    strict: bool = False
    source: str = ""  # zoo, factory, config or user: where the model came from
    built: str = ""  # "" or why the model or its inputs could not be made
    plain: str = ""  # "ok" or the exception class of the plain export
    plain_control_flow: bool = False  # did the plain export fail at Python control flow on a tensor?
    plain_where: str = ""  # file:line the plain export failed at (the model's code)
    rewritten: str = ""  # "ok" or the exception of unbranch.export
    rewritten_where: str = ""
    conds: int = 0
    methods: list = field(default_factory=list)
    exports: int = 0  # how many exports unbranch.export made (1: the plain one worked)
    plain_diff: dict = field(default_factory=dict)  # inputs -> max |plain export - eager|
    max_diff: dict = field(default_factory=dict)  # inputs -> max |exported - eager|
    run_errors: dict = field(default_factory=dict)  # inputs -> why an exported program did not run
    sides: dict = field(default_factory=dict)  # dispatched tensor if (file:line) -> sides eager took
    onnx: str = ""  # "" (not asked), "ok" or the exception of the ONNX conversion or run
    onnx_ops: dict = field(default_factory=dict)  # If / Loop / Scan -> count in the ONNX model
    onnx_diff: dict = field(default_factory=dict)  # inputs -> max |onnxruntime - eager| (per tensor)
    onnx_then: dict = field(default_factory=dict)  # inputs -> how many top-level Ifs onnxruntime ran the then side of
    dropped_checks: list = field(default_factory=list)  # messages of the checks the ONNX model does not make
    dropped_assertions: int = 0  # and how many data-dependent assertions (torch._check, .item() ranges)
    stale: list = field(default_factory=list)  # catalogue entries for its classes that no longer apply (why)
    seconds: float = 0.0
    log: str = ""  # what torch and onnx printed, captured (shown with -v)

    @property
    def both_sides(self) -> bool:
        """Did the inputs take both sides of every dispatched if that eager runs reached?"""
        return bool(self.sides) and all(len(s) == 2 for s in self.sides.values())

    @property
    def flipped(self) -> bool:
        """Did the inputs take both sides of at least one dispatched if (the one the flip targets)?"""
        return any(len(s) == 2 for s in self.sides.values())

    @property
    def tolerance(self) -> float:
        return TOLERANCE.get(getattr(torch, self.dtype, None), 1e-4)

    @property
    def ok(self) -> bool:
        diffs = [*self.max_diff.values(), *self.onnx_diff.values()]
        return self.rewritten == "ok" and self.onnx in ("", "ok") and all(d <= self.tolerance for d in diffs)

    @property
    def outcome(self) -> tuple[str, str]:
        """One of OUTCOMES and a short reason (empty when all went well)."""
        tol = self.tolerance
        differs = sorted(k for k, d in self.max_diff.items() if not d <= tol)
        why_differs = "; ".join(f"{k}: {self.run_errors.get(k) or f'max diff {self.max_diff[k]:.1e}'}" for k in differs)
        if self.built:
            return "not built", self.built
        if self.plain != "ok":
            if not self.plain_control_flow:  # unbranch may still get past it (a catalogue hook)
                return "other failure", self.plain + (" (exports with unbranch)" if self.ok else "")
            if self.rewritten != "ok":
                return "not fixed", f"{self.rewritten} at {self.rewritten_where or '?'}"
            return ("fixed", "") if not differs else ("not fixed", f"exports but differs from eager: {why_differs}")
        if self.rewritten != "ok":
            return "harm", f"{self.rewritten} at {self.rewritten_where or '?'}"
        worse = [k for k in differs if self.plain_diff.get(k, float("inf")) <= tol]
        if worse:
            return "harm", "differs from eager where the plain export matches: " + why_differs
        plain_bad = sorted(k for k, d in self.plain_diff.items() if not d <= tol)
        if plain_bad:
            return "other failure", "plain export differs from eager: " + ", ".join(plain_bad)
        return "no-harm", ""

    def as_dict(self, log: bool = False) -> dict:
        d = {k: v for k, v in asdict(self).items() if log or k != "log"}
        return {**d, "ok": self.ok, "outcome": self.outcome[0], "reason": self.outcome[1]}


def _tensors(tree) -> list:
    return [leaf for leaf in pytree.tree_leaves(tree) if isinstance(leaf, torch.Tensor)]


def _as(dtype, inputs):
    """Float inputs (pixels, mel features) in the model's dtype."""
    return {k: v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for k, v in inputs.items()}


def error_line(e: Exception) -> str:
    """``Class: first line`` (and the next one when the first only announces it, as validators' errors do)."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()] or [""]
    first = " ".join(lines[:2]) if lines[0].endswith(":") and len(lines) > 1 else lines[0]
    return f"{type(e).__name__}: {first[:160]}"


_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def _where(e: Exception) -> str:
    """file:line of the model code an export error points at (its message, else its traceback)."""
    frames = _FRAME.findall(str(e)) or [(f.filename, str(f.lineno)) for f in traceback.extract_tb(e.__traceback__)]
    mine = [(f, n) for f, n in frames if f"{os.sep}torch{os.sep}" not in f and f"{os.sep}unbranch{os.sep}" not in f]
    path, line = (mine or frames or [("?", "?")])[-1]
    return f"{path.split('site-packages' + os.sep)[-1]}:{line}"


def _tensor_sites(report) -> set[str]:
    """``file:line`` of every rewritten if whose condition looks like tensor data."""
    return {
        f"{rm.source.path}:{n.line}" for rm in report for n in rm.notes if n.kind == "cond" and n.condition == "tensor"
    }


class Subject:
    """A model to validate: how to build it with example inputs, and which other inputs to compare on."""

    source = "factory"

    def __init__(self, name: str, make):
        self.name, self.make = name, make  # make(dtype) -> (model, inputs dict, dynamic shapes)

    def build(self, dtype):
        model, inputs, shapes = self.make(dtype)
        return model.eval().to(dtype), _as(dtype, inputs), shapes

    def cases(self, model, example: dict, shapes: dict, dtype) -> dict:
        """Label -> (model, inputs): the example, and the same inputs grown along every dynamic dimension."""
        return {"example": (model, example), "other shape": (model, grown(example, shapes))}


def grown(inputs: dict, shapes: dict) -> dict:
    """``inputs`` with every dynamic dimension 4 longer (the same size everywhere, values repeated cyclically)."""
    out = {}
    for name, value in inputs.items():
        dims = shapes.get(name) if isinstance(shapes, dict) else None
        for dim in dims or ():
            size = value.shape[dim]
            value = value.index_select(dim, torch.arange(size + 4) % size)
        out[name] = value
    return out


class ZooSubject(Subject):
    """A hand-written zoo entry: fresh inputs of another size and the inputs or weights that flip its branch."""

    source = "zoo"

    def __init__(self, name: str):
        self.name, self.tiny = name, MODELS[name]

    def build(self, dtype):
        example = _as(dtype, self.tiny.inputs(2, 7))
        return self.tiny.build(self.name, dtype), example, self.tiny.dynamic_shapes(example)

    def cases(self, model, example, shapes, dtype) -> dict:
        tiny = self.tiny
        # other lengths keep seq % 4 == 7 % 4: LED pads to a multiple of its window in plain Python
        cases = {"example": (model, example), "other shape": (model, _as(dtype, tiny.inputs(3, 11)))}
        if tiny.flip_inputs:
            cases["flipped inputs"] = (model, _as(dtype, tiny.inputs(3, 11, flip=True)))
        flipped = copy.deepcopy(model)
        if tiny.flip_model(flipped):
            cases["flipped weights"] = (flipped, _as(dtype, tiny.inputs(2, 11)))
        return cases


def subject(target: str) -> Subject:
    """What ``target`` names: a zoo model, a config file or directory, ``module:factory``, a transformers class."""
    from . import factory

    if target in MODELS:
        return ZooSubject(target)
    if os.path.exists(target) or target.endswith(".json"):
        cls, config = factory.from_config_file(target)  # OSError, ValueError: which file and what is wrong
        made = Subject(os.path.basename(os.path.abspath(target)), lambda dtype: factory.tiny_model(cls, config=config))
        made.source = "config"
        return made
    if ":" in target:
        module, _, attr = target.partition(":")
        made = Subject(target, lambda dtype: _user_model(getattr(importlib.import_module(module), attr)))
        made.source = "user"
        return made
    if factory.model_class(target) is None:
        raise KeyError(target)
    return Subject(target, lambda dtype: factory.tiny_model(target))


def _user_model(make):
    model, inputs, shapes = make()
    if isinstance(inputs, (tuple, list)):  # positional inputs: named after forward's parameters
        names = [p for p in inspect.signature(model.forward).parameters][: len(inputs)]
        inputs = dict(zip(names, inputs))
        shapes = dict(zip(names, shapes)) if isinstance(shapes, (tuple, list)) else shapes
    return model, inputs, shapes


def _export(model, inputs, shapes, strict):
    return torch.export.export(model, (), kwargs=inputs, dynamic_shapes=shapes, strict=strict)


def _unbranch_export(model, inputs, shapes, strict):
    return export(model, (), kwargs=inputs, dynamic_shapes=shapes, strict=strict)


def validate(name: str | Subject, dtype=torch.float16, strict: bool = False, onnx: bool = False) -> Result:
    """Plain export, rewritten export, eager comparisons (and onnxruntime ones) for one tiny model."""
    start = time.perf_counter()
    subj = name if isinstance(name, Subject) else subject(name)
    res = Result(subj.name, str(dtype).replace("torch.", ""), strict=strict, source=subj.source)
    with quiet() as log:
        try:
            model, example, shapes = subj.build(dtype)
            with torch.no_grad():
                model(**example)  # warm-up: some models finish setting themselves up on the first call
        except Exception as e:
            res.built = error_line(e)
        if not res.built:
            res.stale = stale_entries(model)
            _exports(res, subj, model, example, shapes, strict, onnx)
    res.log = log.text()  # blank lines dropped (torch logs empty records around its graph dumps)
    res.seconds = time.perf_counter() - start
    return res


def _exports(res: Result, subj: Subject, model, example, shapes, strict: bool, onnx: bool) -> None:
    plain = ep = report = None
    print("--- plain torch.export.export ---")  # headings in the captured log (-v)
    try:
        plain = _export(model, example, shapes, strict)  # expected to fail: torch logs its partial graph
        res.plain = "ok"
    except Exception as e:
        res.plain, res.plain_where = error_line(e), _where(e)
        res.plain_control_flow = kind_of(e) is not None
    print("--- unbranch.export ---")
    try:
        ep = _unbranch_export(model, example, shapes, strict)
        report = report_of(ep)
        res.rewritten, res.conds = "ok", len(branch_nodes(ep))
    except Exception as e:
        report = getattr(e, "report", None)
        res.rewritten, res.rewritten_where = error_line(e), _where(e)
    if report is not None:
        res.methods, res.exports = [rm.qualname for rm in report], len(report.attempts)
    if ep is not None or plain is not None:
        print("--- the exported programs against eager" + (", ONNX conversion ---" if onnx else " ---"))
        cases = subj.cases(model, example, shapes, getattr(torch, res.dtype))
        _compare(res, cases, plain, ep, report, (example, shapes, strict) if onnx and ep is not None else None)


def _run_exported(res: Result, diffs: dict, label: str, ep, eager, kwargs, expected) -> None:
    try:
        exported = ep.module()
        exported.load_state_dict(eager.state_dict(), strict=False)
        diffs[label] = max_diff(exported(**kwargs), expected)
    except Exception as e:  # the program does not run on these inputs (a specialised size...)
        diffs[label] = float("inf")
        res.run_errors.setdefault(label, error_line(e))


def _compare(res: Result, cases: dict, plain, ep, report, onnx: tuple | None) -> None:
    """Exported programs (and the ONNX model, given ``onnx``: the export's inputs, shapes and mode)
    against eager on every case."""
    sessions = {}
    if onnx is not None:
        model, flipped = cases["example"][0], cases.get("flipped weights", (None,))[0]
        sessions[id(model)] = _onnx_session(res, ep)
        if flipped is not None and sessions[id(model)]:  # the ONNX optimiser folds weights: convert it too
            sessions[id(flipped)] = _onnx_session(res, _unbranch_export(flipped, *onnx))
    with torch.no_grad():
        for label, (eager, kwargs) in cases.items():
            expected = eager(**kwargs)
            if plain is not None:
                _run_exported(res, res.plain_diff, label, plain, eager, kwargs, expected)
            if ep is None:
                continue
            _run_exported(res, res.max_diff, label, ep, eager, kwargs, expected)
            if sessions.get(id(eager)):
                try:
                    outputs, res.onnx_then[label] = _run(sessions[id(eager)], kwargs)
                    res.onnx_diff[label] = max_diff(outputs, _tensors(expected), per_tensor=True)
                except Exception as e:
                    res.onnx, sessions = error_line(e), {}
            with report.applied() if report is not None else contextlib.nullcontext(), observe_branches() as seen:
                eager(**kwargs)  # the rewritten code, eagerly: which sides do these inputs take?
            for site, sides in seen.items():
                res.sides.setdefault(site, set()).update(sides)
    sites = _tensor_sites(report) if report is not None else set()
    if ep is not None and (in_program := branch_sites(ep)):
        sites &= in_program  # an if a flag decides before the data (`output_attentions and t.any()`) has no cond
    res.sides = {site: sorted(sides) for site, sides in res.sides.items() if site in sites}


def _onnx_session(res: Result, ep):
    """Convert ``ep`` with ``unbranch.onnx.export``; an onnxruntime session whose outputs end with the
    condition of every top-level If (which side onnxruntime takes), or None (error in ``res``)."""
    import warnings

    from .. import onnx as unbranch_onnx

    try:
        import onnx_ir
        import onnxruntime

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", unbranch_onnx.DroppedChecksWarning)  # recorded in res instead
            program = unbranch_onnx.export(ep, verbose=True)  # into the log validate captures (-v)
        count = len(program.model.graph.outputs)
        conditions = unbranch_onnx.if_conditions_as_outputs(program.model)
        session = onnxruntime.InferenceSession(
            program.model_proto.SerializeToString(), providers=["CPUExecutionProvider"]
        )
    except Exception as e:
        res.onnx = error_line(e)
        return None
    res.onnx, res.onnx_ops = "ok", {}
    res.dropped_checks, assertions = unbranch_onnx.dropped_checks(ep)
    res.dropped_assertions = len(assertions)
    for node in onnx_ir.traversal.RecursiveGraphIterator(program.model.graph):
        if node.op_type in ("If", "Loop", "Scan"):
            res.onnx_ops[node.op_type] = res.onnx_ops.get(node.op_type, 0) + 1
    return session, count, conditions


def _run(onnx_session, kwargs: dict) -> tuple[list, int]:
    """The model's outputs in onnxruntime, and how many top-level Ifs took their then side."""
    session, count, conditions = onnx_session
    feeds = {i.name: kwargs[i.name].numpy() for i in session.get_inputs()}
    outputs = session.run(None, feeds)
    taken = dict(zip((o.name for o in session.get_outputs()), outputs))
    return [torch.from_numpy(o) for o in outputs[:count]], sum(bool(taken[name]) for name in conditions)
