"""Export a module inside torch_export_rewrite and compare it with the original eager module."""

import inspect

import pytest
import torch
from torch.export import Dim

import unbranch
from unbranch.exporting.report import branch_nodes

# the export modes a test runs in (conftest.py marks strict=True outside the core files as `second_mode`)
MODES = [pytest.param(False, id="nonstrict"), pytest.param(True, id="strict")]

# (major, minor) of the torch installed: what an older release cannot export at all is its own limit
TORCH = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])


def line_of(obj, text: str) -> int:
    """The file line of the first line of ``obj``'s source holding ``text`` (what an error should name)."""
    lines, first = inspect.getsourcelines(obj)
    return first + next(k for k, line in enumerate(lines) if text in line)


def all_dynamic(args):
    return tuple({i: Dim.DYNAMIC for i in range(a.dim())} if isinstance(a, torch.Tensor) else None for a in args)


def count_branches(ep) -> int:
    """The ifs converted in the exported program, nested subgraphs included: each a cond, or the
    torch.where choosing between cheap sides (report.branch_nodes)."""
    return len(branch_nodes(ep))


def count_ops(ep, op) -> int:
    """Calls of ``op`` anywhere in the exported program, nested subgraphs included."""
    return sum(
        n.target is op
        for gm in ep.graph_module.modules()
        if isinstance(gm, torch.fx.GraphModule)
        for n in gm.graph.nodes
    )


def count_vmaps(ep) -> int:
    """Loops whose steps carry nothing, run as one batched computation (non-strict export)."""
    import torch._functorch.predispatch as predispatch

    return count_ops(ep, predispatch._vmap_increment_nesting)


def count_loops(ep) -> int:
    """Loop operators: scans, and loops whose steps carry nothing, batched with vmap."""
    return count_ops(ep, torch.ops.higher_order.scan) + count_vmaps(ep)


def assert_same(actual, expected, rtol=None, atol=None):
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True)


def export_rewritten(model, example, strict, rewrite=None, dynamic_shapes=None, **context):
    targets = rewrite if rewrite is not None else [type(model).forward]
    with unbranch.torch_export_rewrite(rewrite=targets, **context):
        return torch.export.export(model, example, dynamic_shapes=dynamic_shapes or all_dynamic(example), strict=strict)


def check_export(model, example, inputs, strict, conds=None, rewrite=None, rtol=None, atol=None):
    """Export with every dim dynamic; ``ep.module()`` must match the original on each input."""
    ep = export_rewritten(model, example, strict, rewrite)
    if conds is not None:
        assert count_branches(ep) == conds
    for args in inputs:
        assert_same(ep.module()(*args), model(*args), rtol=rtol, atol=atol)
    return ep


# models whose flipped weights overflow one clamp of a layer: the clamps after cross-attention and
# the feed-forward only ever see the side eager runs take (each clamp has its own line in a report)
ONE_CLAMP_FLIPPED = {"LongT5Model"}
