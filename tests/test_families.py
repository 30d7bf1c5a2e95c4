"""Issue 37: what real code writes, by family. Each program of ``families.PROGRAMS`` exports through
``unbranch.export`` in both modes, with dynamic shapes, and its program matches the original eager
model (results, and the state of every buffer it changes) on inputs taking every path, at sizes
other than the example's. The plain export of each stops at control flow on data.
"""

import pytest
import torch
from families import PROGRAMS, check
from helpers import MODES

import unbranch


def _export(model, example, dynamic, strict):
    return unbranch.export(model, example, dynamic_shapes=dynamic, strict=strict)


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_family_program_exports_and_matches_eager(name, strict):
    assert check(PROGRAMS[name], strict, _export) == "ok"


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_plain_export_stops_at_data(name):
    """What each program needs unbranch for (non-strict export; strict fails the same places)."""
    program = PROGRAMS[name]
    with pytest.raises(Exception):  # noqa: B017 (torch's errors vary by family: guards, constraints, cond)
        torch.export.export(program.make(), program.example, dynamic_shapes=program.dynamic)
