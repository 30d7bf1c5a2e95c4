"""Rewritten loops convert to ONNX (scan -> Scan, while_loop -> Loop) and run in onnxruntime like eager."""

import pytest

for _module in ("onnx", "onnxscript", "onnx_ir", "onnxruntime"):
    pytest.importorskip(_module, reason="the onnx extra is not installed (pip install 'unbranch[onnx]')")

import test_loop_forms as forms  # noqa: E402
from test_onnx import assert_like_eager, convert  # noqa: E402

CASES = [
    pytest.param(forms.Weighted, forms.rows(4), "Scan", id="index-arithmetic"),
    pytest.param(forms.Recurrence, forms.rows(3), "Loop", id="range-from-one"),
    pytest.param(forms.Appends, forms.rows(3), "Scan", id="appends"),
    pytest.param(forms.WhileCounter, forms.rows(3), "Loop", id="while-counter"),
    pytest.param(forms.BranchInLoop, forms.rows(3), "If", id="branch-in-loop"),
]


@pytest.mark.parametrize("model, make, op", CASES)
def test_loop_converts_to_onnx(model, make, op):
    m = model()
    ops, run = convert(m, make(5))
    assert op in ops
    for n in (1, 2, 7):
        assert_like_eager(run, m, *make(n))
