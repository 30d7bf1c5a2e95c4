"""What surrounds an export: torch.compile untouched, nothing left behind, programs that outlive unbranch.

Uses a user module of its own (sample_user) whose model loops over a tensor's length and
branches on tensor values, found by ``torch_export_rewrite(model)`` alone (discovery).
"""

import inspect
import json
import linecache
import os
import subprocess
import sys

import pytest
import sample_user
import torch
from helpers import MODES, assert_same, count_branches, count_ops
from torch.export import Dim

import unbranch


def _export(model, strict):
    with unbranch.torch_export_rewrite(model) as report:
        ep = torch.export.export(model, (sample_user.inputs(5)[0],), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict)
    return ep, report


@pytest.mark.parametrize("strict", MODES)
def test_discovery_finds_loops_and_ifs(strict):
    model = sample_user.Recurrent()
    ep, report = _export(model, strict)
    assert sorted(rm.qualname for rm in report) == ["Recurrent.forward", "squash"]
    assert count_ops(ep, torch.ops.higher_order.scan) == 1 and count_branches(ep) == 2
    for length in (5, 2, 9):  # the example's length, and others: the loop is not unrolled
        for x in sample_user.inputs(length):  # each side of both ifs
            assert_same(ep.module()(x), model(x))


class Picker(torch.nn.Module):
    """forward leaves its data-dependent branch to a helper method: discovery follows ``self._pick``."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.Identity()  # a submodule call: its class is scanned, not followed as a helper

    def forward(self, x):
        return self._pick(self.norm(x)) + 1

    def _pick(self, x):
        if x.sum() > 0:
            return x * 2
        return -x


@pytest.mark.parametrize("strict", MODES)
def test_discovery_follows_helper_methods_called_on_self(strict):
    model = Picker()
    with unbranch.torch_export_rewrite(model) as report:
        ep = torch.export.export(model, (torch.ones(3, 4),), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict)
    assert [rm.qualname for rm in report] == ["Picker._pick"] and count_branches(ep) == 1
    assert "Picker._pick" in str(report)
    for x in (torch.ones(3, 4), -torch.ones(3, 4), torch.ones(6, 4), -torch.ones(2, 4)):  # each side, other sizes
        assert_same(ep.module()(x), model(x))


class Layered(torch.nn.Module):
    def forward(self, x):
        return self._outer(x)

    def _outer(self, x):  # depth 1: nothing to rewrite
        return self.helper(x) if x.dim() > 1 else x

    def helper(self, x):  # depth 2: followed
        if x.sum() > 0:
            x = x * 2
        return self._deep(x)

    def _deep(self, x):  # depth 3: followed
        if x.sum() > 0:
            x = x + 1
        return self._deeper(x)

    def _deeper(self, x):  # depth 4: too far
        if x.sum() > 0:
            x = x + 1
        return x


def test_discovery_follows_helpers_three_calls_deep():
    from unbranch.exporting.discovery import discover

    assert [fn.__qualname__ for fn, hooks in discover(Layered())] == ["Layered.helper", "Layered._deep"]


def _compiled_matches_eager(model, fullgraph, backend):
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=backend, fullgraph=fullgraph)
    for length in (5, 3):
        for x in sample_user.inputs(length):
            assert_same(compiled(x), model(x))


@pytest.mark.parametrize(
    "name, fullgraph, backend",
    [
        ("Recurrent", False, "eager"),  # the original's data-dependent ifs break the graph: no fullgraph
        ("Accumulate", True, "eager"),
        ("Accumulate", True, "inductor"),
        ("Fill", False, "inductor"),  # lowered to scan: DataDependentOutputException in inductor
    ],
)
def test_torch_compile_inside_the_context_runs_the_original_logic(name, fullgraph, backend):
    model = getattr(sample_user, name)()
    _compiled_matches_eager(model, fullgraph, backend)  # what works without unbranch...
    with unbranch.torch_export_rewrite(rewrite=[model, type(model).forward]) as report:
        assert f"{name}.forward" in [rm.qualname for rm in report]  # ...works with the rewrite swapped in
        _compiled_matches_eager(model, fullgraph, backend)


def test_lower_under_compile_is_opt_in():
    model = sample_user.Recurrent()
    with unbranch.torch_export_rewrite(model, lower_under_compile=True):
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="eager", fullgraph=True)  # cond + scan: one graph
        for x in sample_user.inputs(4):
            assert_same(compiled(x), model(x))
    assert not unbranch.runtime.settings.current().lower_under_compile


def _state(module):
    return set(vars(module)), {f: f.__code__ for f in (sample_user.squash, sample_user.Recurrent.forward)}


def test_nothing_stays_in_the_user_module():
    before = _state(sample_user)
    model = sample_user.Recurrent()
    with unbranch.torch_export_rewrite(model):
        assert "_ub" in vars(sample_user)  # swapped-in code reads the runtime as a global
        with unbranch.torch_export_rewrite(rewrite=[sample_user.squash]):  # nested, same module
            pass
        assert "_ub" in vars(sample_user)  # the outer context still needs it
        x = sample_user.inputs(3)[0]
        inside = model(x)
    assert _state(sample_user) == before
    assert_same(model(x), inside)
    # a rewritten function taken out of a context keeps working, and binds nothing
    rm = unbranch.transform_method(sample_user.squash)
    for x in sample_user.inputs(3):
        assert_same(rm.func(x), sample_user.squash(x))
    assert _state(sample_user) == before


def test_linecache_holds_no_real_file_under_a_rewritten_name():
    real = inspect.getsourcefile(sample_user)
    lines = linecache.getlines(real)
    model = sample_user.Recurrent()
    with unbranch.torch_export_rewrite(model) as report:
        names = {rm.code_object.co_filename for rm in report}
        assert linecache.getlines(real) == lines
    assert names and all(name.startswith("unbranch:") and not os.path.exists(name) for name in names)
    assert linecache.getlines(real) == lines and inspect.getsource(sample_user.squash).startswith("def squash")


LOAD_AND_RUN = """
import json, sys, torch
ep = torch.export.load(sys.argv[1])
cases = torch.load(sys.argv[2])
diffs = [float((ep.module()(x) - expected).abs().max()) for x, expected in cases]
print(json.dumps({"diffs": diffs, "unbranch": any(m.startswith("unbranch") for m in sys.modules)}))
"""


def test_saved_program_runs_where_unbranch_is_absent(tmp_path):
    model = sample_user.Recurrent()
    ep, _ = _export(model, strict=False)
    torch.export.save(ep, tmp_path / "model.pt2")
    cases = [(x, model(x)) for length in (5, 2, 7) for x in sample_user.inputs(length)]
    torch.save(cases, tmp_path / "cases.pt")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-c", LOAD_AND_RUN, str(tmp_path / "model.pt2"), str(tmp_path / "cases.pt")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["unbranch"] is False
    assert len(result["diffs"]) == len(cases) and max(result["diffs"]) < 1e-5
