"""Run an exported program where people deploy it: each backend gives a callable ``run(*tensors) -> tuple``.

Shared by ``tests/test_deploy*.py`` and ``benchmarks/deploy_matrix.py``. ``BACKENDS`` maps a
name to a builder ``build(ep, workdir) -> run``; a builder raises what the backend raises
when it cannot take the program (at build time, or at run time when called).

- ``module``: ``ep.module()``;
- ``onnxruntime``: ``unbranch.onnx.export(ep)`` in onnxruntime's CPU provider;
- ``aoti``: ``torch._inductor.aoti_compile_and_package`` then ``aoti_load_package``;
- ``compile``: ``torch.compile(ep.module())`` (inductor), run with
  ``torch._dynamo.config.capture_scalar_outputs = True`` (scans need it, see ``compile_``);
- ``executorch``: ``to_edge_transform_and_lower(ep).to_executorch()``, run by
  ``executorch.runtime`` (portable kernels): only where the ``executorch`` package imports;
- ``cudagraphs`` (``CUDA_BACKENDS`` only): ``torch.compile(ep.module(), mode="reduce-overhead")``.
"""

from __future__ import annotations

import importlib.util
import os
import warnings

import torch


def _as_tuple(out) -> tuple:
    if isinstance(out, (list, tuple)):
        return tuple(out)
    return (out,)


def module(ep, workdir):
    mod = ep.module()
    return lambda *args: _as_tuple(mod(*args))


def onnxruntime_(ep, workdir):
    import onnxruntime

    import unbranch.onnx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", unbranch.onnx.DroppedChecksWarning)
        program = unbranch.onnx.export(ep)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        program.model_proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    names = [i.name for i in session.get_inputs()]

    def run(*args):
        outputs = session.run(None, {n: a.numpy() for n, a in zip(names, args)})
        return tuple(torch.from_numpy(o) for o in outputs)

    return run


def aoti(ep, workdir):
    path = os.path.join(workdir, "model.pt2")
    with torch.no_grad():
        torch._inductor.aoti_compile_and_package(ep, package_path=path)
    runner = torch._inductor.aoti_load_package(path)

    def run(*args):
        with torch.no_grad():
            return _as_tuple(runner(*args))

    return run


def compile_(ep, workdir, mode=None):
    """With ``capture_scalar_outputs``: inductor lowers a scan to a while_loop indexed by ``.item()``,
    which fails without it (torch 2.13: ``DataDependentOutputException: aten._local_scalar_dense``)."""
    torch._dynamo.reset()
    compiled = torch.compile(ep.module(), mode=mode)

    def run(*args):
        with torch.no_grad(), torch._dynamo.config.patch(capture_scalar_outputs=True):
            return _as_tuple(compiled(*args))

    return run


def executorch(ep, workdir):
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime

    program = to_edge_transform_and_lower(ep).to_executorch()
    path = os.path.join(workdir, "model.pte")
    with open(path, "wb") as f:
        f.write(program.buffer)
    method = Runtime.get().load_program(path).load_method("forward")
    return lambda *args: tuple(method.execute(list(args)))


def cudagraphs(ep, workdir):
    """``torch.compile(ep.module(), mode="reduce-overhead")``: inductor's code replayed as CUDA graphs.
    A replay overwrites the outputs of the one before: read them before the next call."""
    return compile_(ep, workdir, mode="reduce-overhead")


BACKENDS = {
    "module": module,
    "onnxruntime": onnxruntime_,
    "aoti": aoti,
    "compile": compile_,
    "executorch": executorch,
}

# on a GPU (``benchmarks/deploy_matrix.py --device cuda``): onnxruntime and ExecuTorch run here on the CPU only
CUDA_BACKENDS = {"module": module, "aoti": aoti, "compile": compile_, "cudagraphs": cudagraphs}


def available(name: str) -> str | None:
    """Why backend ``name`` cannot run on this machine (None when it can)."""
    needs = {
        "onnxruntime": ("onnx", "onnxscript", "onnx_ir", "onnxruntime"),
        "executorch": ("executorch",),
    }.get(name, ())
    missing = [m for m in needs if importlib.util.find_spec(m) is None]
    if missing:
        return f"{', '.join(missing)} not installed"
    if name in ("aoti", "compile", "cudagraphs") and not _compiler():
        return "no C++ compiler"
    if name == "cudagraphs" and not torch.cuda.is_available():
        return "no CUDA device"
    return None


def _compiler() -> bool:
    import shutil

    return any(shutil.which(c) for c in ("g++", "gcc", "c++", "clang++"))
