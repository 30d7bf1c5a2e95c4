"""The suite's tiers, and what several test files share.

Tiers (markers, given here by file so that no test can fall between them; CI runs all):
  compiler     rewrites, analyses, layout and emitted text, eager exactness: no export
  backend      ONNX Runtime, AOTInductor, inductor and ExecuTorch cells (slow too: compiles, conversions)
  fuzz         bounded samples of the program generators (slow too: the benchmarks run them at length)
  second_mode  strict=True of a test parametrised over both export modes, outside the core files
               (where both modes are the point); `-m "not second_mode"` runs one mode there
  slow         real transformers models (marked in their files), and the backend and fuzz tiers

    pytest -m compiler                                       # about a minute
    pytest -m "not slow and not backend and not second_mode"  # the default tier
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# the program generators the benchmarks run at length and the tests in bounded samples
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "programs"))

COMPILER = {"test_rules.py", "test_analysis.py", "test_layout.py", "test_output_text.py", "test_catalogue_hooks.py"}
BACKEND = {"test_onnx.py", "test_loop_onnx.py", "test_deploy.py", "test_deploy_rows.py"}
FUZZ = {"test_fuzz.py", "test_loop_fuzz.py"}  # (and the tests named *fuzz* elsewhere)
# where both export modes are what is tested: every construct's lowering in each mode
CORE = {
    "test_export.py",
    "test_jumps.py",
    "test_loops.py",
    "test_checks.py",
    "test_ternary.py",
    "test_effects.py",
    "test_cheap_branches.py",
    "test_guided.py",
}


def pytest_configure(config):
    for marker, meaning in (
        ("compiler", "rewrites and eager exactness, no export (under a minute)"),
        ("backend", "ONNX Runtime, AOTInductor, inductor and ExecuTorch"),
        ("fuzz", "bounded samples of the program generators"),
        ("second_mode", "strict=True outside the core files: deselect to run one export mode there"),
    ):
        config.addinivalue_line("markers", f"{marker}: {meaning}")


def pytest_collection_modifyitems(config, items):
    """Tiers by file; then the slow tests first, so that none of the minutes-long ones starts last
    while the other worker has nothing left to take (xdist's worksteal splits the list in order)."""
    for item in items:
        name = item.path.name
        if name in COMPILER:
            item.add_marker(pytest.mark.compiler)
        if name in BACKEND:
            item.add_marker(pytest.mark.backend)
            item.add_marker(pytest.mark.slow)
        if name in FUZZ or "fuzz" in item.originalname:
            item.add_marker(pytest.mark.fuzz)
            item.add_marker(pytest.mark.slow)
        params = getattr(getattr(item, "callspec", None), "params", {})
        if params.get("strict") is True and name not in CORE:
            item.add_marker(pytest.mark.second_mode)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def validated(tmp_path_factory, worker_id):
    """``hf.validate.validate`` run once per (model, dtype, mode, onnx) for the whole run, across the
    xdist workers (a pickle under their shared temporary directory, behind a file lock): one BART
    float16 validation serves every test that reads it, the model tests and the command line's alike."""
    import pickle

    import torch
    from filelock import FileLock

    from unbranch.hf.validate import validate

    base = tmp_path_factory.getbasetemp()
    shared = base if worker_id == "master" else base.parent

    def get(name: str, dtype=torch.float16, strict: bool = False, onnx: bool = False):
        path = shared / f"validated-{name}-{str(dtype).replace('torch.', '')}-{strict}-{onnx}.pickle"
        with FileLock(f"{path}.lock"):
            if path.exists():
                return pickle.loads(path.read_bytes())
            result = validate(name, dtype, strict=strict, onnx=onnx)
            path.write_bytes(pickle.dumps(result))
            return result

    return get


@pytest.fixture
def recorded_validation(validated, monkeypatch):
    """The command line's ``validate`` made to read the session's validations (its formatting is tested,
    the validation itself once, by the fixture above)."""
    import unbranch.hf.validate as module

    monkeypatch.setattr(module, "validate", validated)
