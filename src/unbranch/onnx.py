"""ONNX conversion of programs exported with unbranch (``pip install unbranch[onnx]``).

    ep = torch.export.export(model, args, dynamic_shapes=ds)     # inside torch_export_rewrite
    program = unbranch.onnx.export(ep)                            # a torch.onnx.ONNXProgram
    program.save("model.onnx")

Plain ``torch.onnx.export(ep, dynamo=True)`` plus what programs holding ``cond`` /
``scan`` / ``while_loop`` and runtime checks need (docs/onnx.md has the measurements):

- the conversion runs under ``torch.no_grad()``: with grad enabled, torch's ONNX
  type-promotion pass re-traces every ``cond`` whose operands require grad, and an
  ``.item()`` earlier in the graph (LED's chunking) then fails it with
  ``PendingUnbackedSymbolNotFound``; ONNX graphs carry no autograd, so nothing is lost;
- runtime checks (``torch._assert_async`` / ``_assert_scalar``, what ``if ...: raise``
  becomes) have no ONNX operator and are dropped: a ``DroppedChecksWarning`` lists them;
- ``onnxruntime_float16=True`` rewrites two float16 patterns onnxruntime's CPU provider gets
  wrong or cannot run (:func:`fix_float16_for_onnxruntime`).
"""

from __future__ import annotations

import importlib.util
import warnings

import torch

from .errors import UnbranchError
from .exporting.quiet import quiet

# float32 values at or above this round to float16 infinity (round to nearest even past 65504)
FLOAT16_OVERFLOW = 65520.0
_CHECKS = ("aten._assert_async.msg", "aten._assert_async.default", "aten._assert_scalar.default")
_CONTROL_FLOW = ("cond", "scan", "while_loop")


class DroppedChecksWarning(UserWarning):
    """Runtime checks of an exported program that its ONNX model no longer makes."""


def _graph_modules(ep):
    return [gm for gm in ep.graph_module.modules() if isinstance(gm, torch.fx.GraphModule)]


def dropped_checks(ep) -> tuple[list[str], list[str]]:
    """The checks of ``ep`` (nested subgraphs included) that its ONNX model will not make.

    Returns the messages of the ``torch._assert_async`` nodes (what a rewritten
    ``if ...: raise`` becomes, the user's exception text kept) and the expressions of the
    ``_assert_scalar`` nodes (``torch._check`` on data-dependent values, and the range
    assertions torch adds by itself after ``.item()``).
    """
    messages, assertions = [], []
    for gm in _graph_modules(ep):
        for node in gm.graph.nodes:
            if node.op == "call_function" and str(node.target) in _CHECKS:
                text = str(node.args[1]) if len(node.args) > 1 else node.name
                (assertions if "assert_scalar" in str(node.target) else messages).append(text)
    return messages, assertions


def _control_flow(ep) -> list[str]:
    return [
        f"{node.target.name()} ({node.name})"
        for gm in _graph_modules(ep)
        for node in gm.graph.nodes
        if isinstance(node.target, torch._ops.HigherOrderOperator) and node.target.name() in _CONTROL_FLOW
    ]


def export(ep, *, onnxruntime_float16: bool = True, verbose: bool = False, **kwargs):
    """``torch.onnx.export(ep, dynamo=True, **kwargs)`` for a program with control flow and checks.

    Returns the ``torch.onnx.ONNXProgram``. Warns ``DroppedChecksWarning`` when checks of
    ``ep`` do not survive. A failure of a program with ``cond``/``scan``/``while_loop``
    raises ``UnbranchError`` naming them, with torch's error as the cause. torch's progress
    lines and warnings are captured unless ``verbose``.
    """
    missing = [m for m in ("onnx", "onnxscript", "onnx_ir") if importlib.util.find_spec(m) is None]
    if missing:
        raise ImportError(f"unbranch.onnx needs {', '.join(missing)}: pip install 'unbranch[onnx]'")
    try:
        with torch.no_grad(), quiet(not verbose):
            program = torch.onnx.export(ep, dynamo=True, verbose=verbose, **kwargs)
    except Exception as e:
        flow = _control_flow(ep)
        if not flow:
            raise
        cause = str(e).split("## Exception summary")[-1].strip().splitlines()
        raise UnbranchError(
            f"torch.onnx could not convert this program with {', '.join(flow)}: "
            f"{cause[0] if cause else type(e).__name__}",
            construct="torch.onnx.export",
        ) from e
    messages, assertions = dropped_checks(ep)
    if messages or assertions:
        warnings.warn(
            f"the ONNX model does not make {len(messages) + len(assertions)} runtime check(s) of the exported "
            f"program (ONNX has no assertion operator): it returns values where the exported program raises. "
            f"Checks: {'; '.join(messages) or 'none'}; data-dependent assertions: {len(assertions)}",
            DroppedChecksWarning,
            stacklevel=2,
        )
    if onnxruntime_float16:
        fix_float16_for_onnxruntime(program.model)
    return program


def fix_float16_for_onnxruntime(model) -> int:
    """Rewrite the float16 patterns onnxruntime's CPU provider gets wrong; returns how many.

    ``IsInf(Cast<float>(h))`` with ``h`` float16: onnxruntime computes float16 ``Add``/``Mul``
    in float32 and drops the float32 -> float16 -> float32 round trip, so a sum that overflows
    float16 (inf in torch) reaches ``IsInf`` finite and a clamp guarded by it is skipped.
    ``|x| >= 65520`` is what rounding to float16 would have turned into inf: exact either way.
    ``ScatterND`` with a reduction on float16 has no CPU kernel: it runs in float32.
    ``model`` is an ``onnx_ir.Model`` (``ONNXProgram.model``), changed in place.
    """
    import numpy as np
    import onnx_ir as ir

    changed = 0
    for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
        new = _Nodes()
        if node.op_type == "IsInf" and node.domain == "" and _is_float16_cast(node.inputs[0]):
            if not all(node.attributes.get_int(k, 1) for k in ("detect_positive", "detect_negative")):
                continue
            limit = new.op("Constant", value=ir.tensor(np.array(FLOAT16_OVERFLOW, dtype=np.float32)))
            result = new.op("GreaterOrEqual", new.op("Abs", node.inputs[0]), limit)
        elif node.op_type == "ScatterND" and node.attributes.get_string("reduction", "none") != "none":
            if node.inputs[0].dtype != ir.DataType.FLOAT16:
                continue
            data, indices, updates = node.inputs
            wide = new.op(
                "ScatterND",
                new.op("Cast", data, to=ir.DataType.FLOAT),
                indices,
                new.op("Cast", updates, to=ir.DataType.FLOAT),
                reduction=node.attributes.get_string("reduction"),
            )
            result = new.op("Cast", wide, to=ir.DataType.FLOAT16)
        else:
            continue
        _replace(node, new, result)
        changed += 1
    return changed


def if_conditions_as_outputs(model) -> list[str]:
    """Add the condition of every top-level ``If`` of ``model`` (an ``onnx_ir.Model``, changed in
    place) to its outputs, after the model's own; the conditions' names, one per If in graph order:
    what onnxruntime returns for them says which side each If took."""
    conditions = [node.inputs[0] for node in model.graph if node.op_type == "If"]
    model.graph.outputs.extend(c for c in dict.fromkeys(conditions) if not c.is_graph_output())
    return [c.name for c in conditions]


def _is_float16_cast(value) -> bool:
    import onnx_ir as ir

    cast = value.producer()
    return (
        cast is not None
        and cast.op_type == "Cast"
        and cast.attributes.get_int("to") == ir.DataType.FLOAT
        and cast.inputs[0].dtype == ir.DataType.FLOAT16
    )


class _Nodes(list):
    """New ONNX nodes, in the order they are created (an order their inputs respect)."""

    def op(self, op_type: str, *inputs, **attributes):
        import onnx_ir as ir

        node = ir.node(op_type, list(inputs), attributes=attributes)
        self.append(node)
        return node.outputs[0]


def _replace(node, new: list, result) -> None:
    """Insert ``new`` before ``node``, hand ``node``'s output (name, type, uses) to ``result``, drop ``node``."""
    import onnx_ir as ir

    old = node.outputs[0]
    name, result.dtype, result.shape = old.name, old.dtype, old.shape
    old.name, result.name = None, name
    for k, value in enumerate(n.outputs[0] for n in new):
        value.name = value.name or f"{name}_unbranch_{k}"  # unnamed values would get clashing default names
    graph = node.graph
    graph.insert_before(node, new)
    ir.convenience.replace_all_uses_with(old, result)
    if old.is_graph_output():
        graph.outputs[graph.outputs.index(old)] = result
    graph.remove(node, safe=True)
