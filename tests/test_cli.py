"""The command line: rewrite one function, validate a tiny model."""

import json

import pytest

from unbranch.cli import main


def test_rewrite_prints_code_and_diff(capsys):
    assert main(["rewrite", "sample_alias:Aliased.forward"]) == 0
    out = capsys.readouterr().out
    assert "_ub.if_stmt(tt.any(x > 1)" in out and "(original)" in out and "(unbranch)" in out


def test_rewrite_writes_files(tmp_path):
    assert main(["rewrite", "sample_alias:helper", "-o", str(tmp_path)]) == 0
    assert {p.name for p in tmp_path.iterdir()} == {"helper.py", "helper.diff"}
    assert "_ub.if_stmt(x.mean() > limit" in (tmp_path / "helper.py").read_text()


def test_validate_rejects_unknown_models(capsys):
    assert main(["validate", "NoSuchModel"]) == 2
    assert "unknown model" in capsys.readouterr().err


@pytest.mark.slow
def test_validate_default_model_json(capsys):
    assert main(["validate", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["model"] == "BartModel" and row["ok"] and row["plain"] != "ok" and row["rewritten"] == "ok"


@pytest.mark.slow
def test_validate_is_quiet_unless_verbose(capfd):
    assert main(["validate"]) == 0
    out, err = capfd.readouterr()
    assert len((out + err).splitlines()) <= 5 and "def forward" not in out + err  # the table alone
    assert main(["validate", "-v"]) == 0
    out, err = capfd.readouterr()
    assert "def forward" in err and "PASS" in out  # the failing plain export's partial graph, on demand


@pytest.mark.slow
def test_validate_onnx_column(capfd):
    assert main(["validate", "--onnx"]) == 0
    out, err = capfd.readouterr()
    assert "onnxruntime" in out.splitlines()[0] and "1 If, max diff" in out
    assert len((out + err).splitlines()) <= 5  # the conversion's output is captured too


def test_python_dash_m_runs_the_command_line():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "unbranch", "rewrite", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("usage: unbranch rewrite")
