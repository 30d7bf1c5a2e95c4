"""Export tiny transformers models with and without unbranch and compare with eager.

For each model: plain ``torch.export`` with dynamic batch and sequence (expected to fail
where a data-dependent branch exists), then the same inside ``torch_export_rewrite(model)``;
the exported program must match eager on the example inputs, on another batch/sequence
size, and on inputs or weights that flip the rewritten branch. With ``onnx=True`` the
exported program is also converted (``unbranch.onnx.export``) and run in onnxruntime on
the same cases.
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass, field

import torch
from torch.utils import _pytree as pytree

from ._quiet import quiet
from .api import cond_nodes, observe_branches, torch_export_rewrite
from .zoo import MODELS

TOLERANCE = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 5e-2}


@dataclass
class Result:
    model: str
    dtype: str
    plain: str = ""  # "ok" or the exception class of the plain export
    rewritten: str = ""  # "ok" or the exception of the export inside torch_export_rewrite
    conds: int = 0
    methods: list = field(default_factory=list)
    max_diff: dict = field(default_factory=dict)  # inputs -> max |exported - eager|
    sides: dict = field(default_factory=dict)  # dispatched tensor if (file:line) -> sides eager took
    onnx: str = ""  # "" (not asked), "ok" or the exception of the ONNX conversion or run
    onnx_ops: dict = field(default_factory=dict)  # If / Loop / Scan -> count in the ONNX model
    onnx_diff: dict = field(default_factory=dict)  # inputs -> max |onnxruntime - eager| (per tensor)
    dropped_checks: list = field(default_factory=list)  # messages of the checks the ONNX model does not make
    dropped_assertions: int = 0  # and how many data-dependent assertions (torch._check, .item() ranges)
    seconds: float = 0.0
    log: str = ""  # what torch and onnx printed, captured (shown with -v)

    @property
    def both_sides(self) -> bool:
        """Did the inputs take both sides of every dispatched if that eager runs reached?"""
        return bool(self.sides) and all(len(s) == 2 for s in self.sides.values())

    @property
    def ok(self) -> bool:
        tol = TOLERANCE.get(getattr(torch, self.dtype), 1e-4)
        diffs = [*self.max_diff.values(), *self.onnx_diff.values()]
        return self.rewritten == "ok" and self.onnx in ("", "ok") and all(d <= tol for d in diffs)

    def as_dict(self) -> dict:
        return {**{k: v for k, v in asdict(self).items() if k != "log"}, "ok": self.ok}


def max_diff(actual, expected, per_tensor: bool = False) -> float:
    """Largest ``|actual - expected| / (1 + |expected|)`` over floating leaves (NaN on both sides: equal).

    ``per_tensor`` divides by ``1 + max |expected|`` of the whole tensor instead: onnxruntime's
    kernels round differently from torch's, and next to float16 values of 6e4 (a clamped
    overflow) an element of 2 may be off by one float16 step of those, 32.
    """
    worst = 0.0
    for a, e in zip(pytree.tree_leaves(actual), pytree.tree_leaves(expected)):
        if isinstance(e, torch.Tensor) and e.is_floating_point():
            a, e = a.float(), e.float()
            both_nan = torch.isnan(a) & torch.isnan(e)
            scale = e.abs().nan_to_num(0, 0, 0).max() if per_tensor and e.numel() else e.abs()
            diff = torch.where(both_nan, 0.0, (a - e).abs() / (1 + scale))
            worst = max(worst, float(diff.nan_to_num(float("inf")).max()) if diff.numel() else 0.0)
    return worst


def _tensors(tree) -> list:
    return [leaf for leaf in pytree.tree_leaves(tree) if isinstance(leaf, torch.Tensor)]


def _as(dtype, kwargs: dict) -> dict:
    """Float inputs (pixels, mel features) in the model's dtype."""
    return {k: v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for k, v in kwargs.items()}


def _export(tiny, model, kwargs, strict):
    return torch.export.export(model, (), kwargs=kwargs, dynamic_shapes=tiny.dynamic_shapes(kwargs), strict=strict)


def _error(e: Exception) -> str:
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first[:120]}"


def _tensor_sites(report) -> set[str]:
    """``file:line`` of every rewritten if whose condition looks like tensor data."""
    return {
        f"{rm.source.path}:{n.line}" for rm in report for n in rm.notes if n.kind == "cond" and n.condition == "tensor"
    }


def validate(name: str, dtype=torch.float16, strict: bool = False, onnx: bool = False) -> Result:
    """Plain export, rewritten export, eager comparisons (and onnxruntime ones) for one tiny model."""
    start = time.perf_counter()
    tiny = MODELS[name]
    res = Result(name, str(dtype).replace("torch.", ""))
    model = tiny.build(name, dtype)
    example = _as(dtype, tiny.inputs(2, 7))
    with quiet() as log:
        with torch.no_grad():
            model(**example)  # warm-up: some models finish setting themselves up on the first call
        try:
            _export(tiny, model, example, strict)  # expected to fail: torch logs its partial graph
            res.plain = "ok"
        except Exception as e:
            res.plain = _error(e)
        try:
            with torch_export_rewrite(model) as report:
                ep = _export(tiny, model, example, strict)
            res.rewritten, res.conds = "ok", len(cond_nodes(ep))
            res.methods = [rm.qualname for rm in report]
        except Exception as e:
            res.rewritten = _error(e)
            ep = None
        if ep is not None:
            _compare(res, tiny, model, example, ep, report, strict if onnx else None)
    res.log = log.getvalue()
    res.seconds = time.perf_counter() - start
    return res


def _compare(res: Result, tiny, model, example, ep, report, onnx_strict: bool | None) -> None:
    """Exported program (and ONNX model unless ``onnx_strict`` is None) against eager on every case."""
    dtype = getattr(torch, res.dtype)
    exported = ep.module()
    # other lengths keep seq % 4 == 7 % 4: LED pads to a multiple of its window in plain Python
    cases = {"example": (model, example), "other shape": (model, _as(dtype, tiny.inputs(3, 11)))}
    if tiny.flip_inputs:
        cases["flipped inputs"] = (model, _as(dtype, tiny.inputs(3, 11, flip=True)))
    flipped = copy.deepcopy(model)
    if tiny.flip_model(flipped):
        cases["flipped weights"] = (flipped, _as(dtype, tiny.inputs(2, 11)))
    sessions = {}
    if onnx_strict is not None:
        sessions[id(model)] = _onnx_session(res, ep)
        if "flipped weights" in cases and sessions[id(model)]:  # the ONNX optimiser folds weights: convert it too
            with torch_export_rewrite(flipped):
                sessions[id(flipped)] = _onnx_session(res, _export(tiny, flipped, example, onnx_strict))
    with torch.no_grad():
        for label, (eager, kwargs) in cases.items():
            exported.load_state_dict(eager.state_dict(), strict=False)
            expected = eager(**kwargs)
            res.max_diff[label] = max_diff(exported(**kwargs), expected)
            if sessions.get(id(eager)):
                try:
                    res.onnx_diff[label] = max_diff(
                        _run(sessions[id(eager)], kwargs), _tensors(expected), per_tensor=True
                    )
                except Exception as e:
                    res.onnx, sessions = _error(e), {}
            with torch_export_rewrite(eager), observe_branches() as seen:
                eager(**kwargs)  # the rewritten code, eagerly: which sides do these inputs take?
            for site, sides in seen.items():
                res.sides.setdefault(site, set()).update(sides)
    res.sides = {site: sorted(sides) for site, sides in res.sides.items() if site in _tensor_sites(report)}


def _onnx_session(res: Result, ep):
    """Convert ``ep`` with ``unbranch.onnx.export``; an onnxruntime session, or None (error in ``res``)."""
    import warnings

    from . import onnx as unbranch_onnx

    try:
        import onnx_ir
        import onnxruntime

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", unbranch_onnx.DroppedChecksWarning)  # recorded in res instead
            program = unbranch_onnx.export(ep, verbose=True)  # into the log validate captures (-v)
        session = onnxruntime.InferenceSession(
            program.model_proto.SerializeToString(), providers=["CPUExecutionProvider"]
        )
    except Exception as e:
        res.onnx = _error(e)
        return None
    res.onnx, res.onnx_ops = "ok", {}
    res.dropped_checks, assertions = unbranch_onnx.dropped_checks(ep)
    res.dropped_assertions = len(assertions)
    for node in onnx_ir.traversal.RecursiveGraphIterator(program.model.graph):
        if node.op_type in ("If", "Loop", "Scan"):
            res.onnx_ops[node.op_type] = res.onnx_ops.get(node.op_type, 0) + 1
    return session


def _run(session, kwargs: dict) -> list:
    feeds = {i.name: kwargs[i.name].numpy() for i in session.get_inputs()}
    return [torch.from_numpy(o) for o in session.run(None, feeds)]
