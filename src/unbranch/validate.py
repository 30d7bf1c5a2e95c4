"""Export tiny transformers models with and without unbranch and compare with eager.

For each model: plain ``torch.export`` with dynamic batch and sequence (expected to fail
where a data-dependent branch exists), then the same inside ``torch_export_rewrite(model)``;
the exported program must match eager on the example inputs, on another batch/sequence
size, and on inputs or weights that flip the rewritten branch.
"""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import asdict, dataclass, field

import torch
from torch.utils import _pytree as pytree

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
    seconds: float = 0.0

    @property
    def both_sides(self) -> bool:
        """Did the inputs take both sides of every dispatched if that eager runs reached?"""
        return bool(self.sides) and all(len(s) == 2 for s in self.sides.values())

    @property
    def ok(self) -> bool:
        tol = TOLERANCE.get(getattr(torch, self.dtype), 1e-4)
        return self.rewritten == "ok" and all(d <= tol for d in self.max_diff.values())

    def as_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


def max_diff(actual, expected) -> float:
    worst = 0.0
    for a, e in zip(pytree.tree_leaves(actual), pytree.tree_leaves(expected)):
        if isinstance(e, torch.Tensor) and e.is_floating_point():
            a, e = a.float(), e.float()
            both_nan = torch.isnan(a) & torch.isnan(e)
            diff = torch.where(both_nan, 0.0, (a - e).abs() / (1 + e.abs()))
            worst = max(worst, float(diff.nan_to_num(float("inf")).max()) if diff.numel() else 0.0)
    return worst


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


def validate(name: str, dtype=torch.float16, strict: bool = False) -> Result:
    """Plain export, rewritten export, and eager comparisons for one tiny model."""
    start = time.perf_counter()
    tiny = MODELS[name]
    res = Result(name, str(dtype).replace("torch.", ""))
    model = tiny.build(name, dtype)
    example = _as(dtype, tiny.inputs(2, 7))
    with torch.no_grad():
        model(**example)  # warm-up: some models finish setting themselves up on the first call
    logging.disable(logging.WARNING)  # a failing plain export logs its whole graph
    try:
        _export(tiny, model, example, strict)
        res.plain = "ok"
    except Exception as e:
        res.plain = _error(e)
    finally:
        logging.disable(logging.NOTSET)
    try:
        with torch_export_rewrite(model) as report:
            ep = _export(tiny, model, example, strict)
        res.rewritten, res.conds = "ok", len(cond_nodes(ep))
        res.methods = [rm.qualname for rm in report]
    except Exception as e:
        res.rewritten = _error(e)
        res.seconds = time.perf_counter() - start
        return res
    exported = ep.module()
    # other lengths keep seq % 4 == 7 % 4: LED pads to a multiple of its window in plain Python
    cases = {"example": (model, example), "other shape": (model, _as(dtype, tiny.inputs(3, 11)))}
    if tiny.flip_inputs:
        cases["flipped inputs"] = (model, _as(dtype, tiny.inputs(3, 11, flip=True)))
    flipped = copy.deepcopy(model)
    if tiny.flip_model(flipped):
        cases["flipped weights"] = (flipped, _as(dtype, tiny.inputs(2, 11)))
    with torch.no_grad():
        for label, (eager, kwargs) in cases.items():
            exported.load_state_dict(eager.state_dict(), strict=False)
            res.max_diff[label] = max_diff(exported(**kwargs), eager(**kwargs))
            with torch_export_rewrite(eager), observe_branches() as seen:
                eager(**kwargs)  # the rewritten code, eagerly: which sides do these inputs take?
            for site, sides in seen.items():
                res.sides.setdefault(site, set()).update(sides)
    res.sides = {site: sorted(sides) for site, sides in res.sides.items() if site in _tensor_sites(report)}
    res.seconds = time.perf_counter() - start
    return res
