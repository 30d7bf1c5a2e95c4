"""What a rewritten branch costs where the model is deployed: ``ep.module()`` and onnxruntime vs eager.

For the core constructs (if, for -> scan, while -> while_loop) and tiny BART in float16, on
inputs taking each branch outcome (loop: several iterations / none): CPU time per call of
the eager model, of the exported program's module and of the ONNX model in onnxruntime,
interleaved (order alternating) over ``--repeats`` rounds of ``--calls`` calls. For the
``if``, the same model with the branch written out (no condition) gives what the branch alone
costs: the issue's goal is a cond within 10 % of the branch it runs.

    python benchmarks/deploy_cost.py [--repeats 7] [--calls 200]
"""

from __future__ import annotations

import argparse
import copy
import logging
import statistics
import sys
import time
import warnings
from pathlib import Path

import onnxruntime
import torch
from _common import machine, write
from torch.export import Dim

import unbranch
import unbranch.onnx
from unbranch.hf.zoo import MODELS

sys.path.insert(0, str(Path(__file__).resolve().parent / "programs"))
from deploy_programs import Renormalise  # noqa: E402


class Divide(torch.nn.Module):
    """Renormalise's then-branch alone."""

    def forward(self, x):
        y = x * 2
        return y / y.abs().max()


class Double(torch.nn.Module):
    """Renormalise's else-branch alone."""

    def forward(self, x):
        return x * 2


class RunningSum(torch.nn.Module):
    def forward(self, x):
        acc = torch.zeros(x.shape[1])
        for i in range(x.shape[0]):
            acc += torch.tanh(x[i]) * 2
        return acc


class DoubleUntil(torch.nn.Module):
    def forward(self, x):
        while x.abs().sum() < 100:
            x = x * 2 + 1
        return x


def deployed(model, args: tuple = (), kwargs: dict | None = None, dynamic_shapes=None, rewrite=None) -> dict:
    """Eager, exported-program and onnxruntime callables of ``model`` (or of the ``rewrite`` targets)."""
    kwargs = kwargs or {}
    with unbranch.torch_export_rewrite(model, rewrite=rewrite):
        ep = torch.export.export(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = unbranch.onnx.export(ep)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(program.model_proto.SerializeToString(), options)
    exported = ep.module()

    def feeds(a, kw):
        named = dict(zip([i.name for i in session.get_inputs()], a)) if a else kw
        return {i.name: named[i.name].numpy() for i in session.get_inputs()}

    return {
        "eager": lambda a, kw: model(*a, **kw),
        "exported": lambda a, kw: exported(*a, **kw),
        "onnxruntime": lambda a, kw, f={}: session.run(None, f.setdefault(id(kw), feeds(a, kw))),
    }


def per_call(run, args, kwargs, calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        run(args, kwargs)
    return (time.process_time() - start) / calls


def measure(runners: dict, args, kwargs, repeats: int, calls: int) -> dict:
    """Median CPU µs per call of each runner, rounds interleaved with alternating order."""
    with torch.no_grad():
        for run in runners.values():
            run(args, kwargs)  # first calls compile or allocate: not measured
        times: dict[str, list] = {k: [] for k in runners}
        order = list(runners.items())
        for i in range(repeats):
            for label, run in order if i % 2 == 0 else order[::-1]:
                times[label].append(per_call(run, args, kwargs, calls))
    return {k: round(statistics.median(v) * 1e6, 2) for k, v in times.items()}


def constructs(repeats: int, calls: int) -> dict:
    dyn = ({0: Dim.DYNAMIC},)
    examples = {"Renormalise": torch.randn(5, 4), "RunningSum": torch.randn(5, 4), "DoubleUntil": torch.rand(5, 2)}
    cases = {
        "if / then (divides)": (Renormalise(), (torch.randn(64, 4) * 10,), Divide()),
        "if / else (no change)": (Renormalise(), (torch.randn(64, 4) * 0.001,), Double()),
        "for -> scan, 64 steps": (RunningSum(), (torch.randn(64, 4),), None),
        "while -> while_loop, 7 iterations": (DoubleUntil(), (torch.full((64, 2), 0.01),), None),
        "while -> while_loop, 0 iterations": (DoubleUntil(), (torch.full((64, 2), 40.0),), None),
    }
    built = {}
    results = {}
    for label, (model, args, branch_alone) in cases.items():
        key = type(model).__name__
        if key not in built:
            # named: discovery looks for tensor conditions, and finds no loop to rewrite
            built[key] = deployed(model, (examples[key],), dynamic_shapes=dyn, rewrite=[type(model).forward])
        runners = dict(built[key])
        if branch_alone is not None:  # what the branch taken costs without any condition
            alone = deployed(branch_alone, (examples[key],), dynamic_shapes=dyn)
            runners.update({f"{k} (branch alone)": v for k, v in alone.items() if k != "eager"})
        results[label] = measure(runners, args, {}, repeats, calls)
        print(label, results[label], flush=True)
    return results


def bart(repeats: int, calls: int) -> dict:
    """Tiny BART on (4, 16) inputs; float32 has no cond (the clamp's dtype test is Python): the reference."""
    tiny = MODELS["BartModel"]
    model = tiny.build("BartModel", torch.float16)
    flipped = copy.deepcopy(model)
    tiny.flip_model(flipped)  # the encoder layer's float16 overflow: the clamp runs
    example = tiny.inputs(2, 7)
    results = {}
    sides = {
        "BART float16 / no overflow (else)": model,
        "BART float16 / overflow, clamp (then)": flipped,
        "BART float32 / no cond (reference)": tiny.build("BartModel", torch.float32),
    }
    for label, m in sides.items():
        with torch.no_grad():
            m(**example)
        runners = deployed(m, kwargs=example, dynamic_shapes=tiny.dynamic_shapes(example))
        results[label] = measure(runners, (), tiny.inputs(4, 16), repeats, calls)
        print(label, results[label], flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="interleaved rounds per runner")
    parser.add_argument("--calls", type=int, default=200, help="calls per round (BART: a tenth)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    torch.set_num_threads(1)  # a second OpenMP thread stalls whenever another process takes a core
    info = machine()
    results = {**constructs(args.repeats, args.calls), **bart(args.repeats, max(args.calls // 10, 1))}
    ratios = {
        label: {k: round(v / r["eager"], 3) for k, v in r.items() if k != "eager"} for label, r in results.items()
    }
    result = {
        "machine": info,
        "what": "CPU µs per call (median of interleaved rounds), 1 torch thread, 1 onnxruntime thread; "
        "ratios are over eager; 'branch alone' is the if's taken branch exported without a condition",
        "repeats": args.repeats,
        "calls": args.calls,
        "onnxruntime": onnxruntime.__version__,
        "us_per_call": results,
        "ratio_to_eager": ratios,
    }
    path = write("deploy_cost", result)
    print(f"-> {path}")


if __name__ == "__main__":
    main()
