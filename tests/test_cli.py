"""The command line: rewrite one function, validate a tiny model."""

import json

import pytest

from unbranch.cli import main


def test_rewrite_prints_code_and_diff(capsys):
    assert main(["rewrite", "sample_alias:Aliased.forward"]) == 0
    out = capsys.readouterr().out
    assert "_ub.if_stmt(tt.any(x > 1)" in out and "(original)" in out and "(unbranch)" in out


def test_rewrite_writes_files_and_says_where(tmp_path, capsys):
    assert main(["rewrite", "sample_alias:helper", "-o", str(tmp_path)]) == 0
    assert {p.name for p in tmp_path.iterdir()} == {"helper.py", "helper.diff"}
    assert "_ub.if_stmt(x.mean() > limit" in (tmp_path / "helper.py").read_text()
    out = capsys.readouterr().out
    assert out == f"wrote {tmp_path / 'helper.py'} (rewritten source) and {tmp_path / 'helper.diff'} (diff)\n"


def test_rewrite_a_file_path_target(tmp_path, capsys):
    (tmp_path / "mine.py").write_text("def f(x):\n    if x.sum() > 0:\n        x = x * 2\n    return x\n")
    assert main(["rewrite", f"{tmp_path / 'mine.py'}:f"]) == 0
    assert "_ub.if_stmt(x.sum() > 0" in capsys.readouterr().out


def run(capsys, *argv) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of the command line (argparse's own errors exit through SystemExit)."""
    try:
        code = main(list(argv))
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(capsys, *argv) -> str:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "", (code, out, err)
    assert err.endswith("\n") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    "target, says",
    [
        ("no_such_module_here:f", "no module named 'no_such_module_here'"),
        ("sample_alias:nope", "sample_alias has no attribute 'nope'"),
        ("sample_alias:Aliased.nope", "sample_alias:Aliased has no attribute 'nope'"),
        ("torch:relu", "torch:relu is a builtin, implemented in C"),
        ("torch:Tensor.add", "torch:Tensor.add is a builtin"),
        (
            "sample_alias:Aliased",
            "sample_alias:Aliased is a class: name one of its methods (sample_alias:Aliased.forward)",
        ),
        ("sample_alias", "expected package.module:Class.method or file.py:function, got 'sample_alias'"),
        ("torch:nn", "torch:nn is a module"),
        ("/no/such/file.py:f", "/no/such/file.py: no such file"),
    ],
)
def test_rewrite_bad_target_is_one_line(capsys, target, says):
    assert says in one_line_error(capsys, "rewrite", target)


def test_rewrite_syntax_error_names_file_and_line(capsys, tmp_path, monkeypatch):
    (tmp_path / "broken_syntax.py").write_text("def f(x):\n    if x.sum() > 0\n        return x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for target in ("broken_syntax:f", f"{tmp_path / 'broken_syntax.py'}:f"):
        err = one_line_error(capsys, "rewrite", target)
        assert f"{tmp_path / 'broken_syntax.py'}:2: syntax error: expected ':'" in err


def test_rewrite_module_failing_to_import_is_one_line(capsys, tmp_path, monkeypatch):
    (tmp_path / "raises_on_import.py").write_text("import no_such_dependency_here\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    err = one_line_error(capsys, "rewrite", "raises_on_import:f")
    assert "cannot import raises_on_import: it needs 'no_such_dependency_here', which is not installed" in err


@pytest.mark.parametrize(
    "argv, says",
    [
        (["validate", "--shard", "3"], "argument --shard: expected I/N"),
        (["validate", "--shard", "5/4"], "expected I/N with 1 <= I <= N, got '5/4'"),
        (["validate", "--filter", "("], "argument --filter: not a regular expression"),
        (["validate", "--jobs", "0"], "argument --jobs: expected a positive number"),
        (["validate", "--all", "--report", "/no/such/dir/r.md"], "--report /no/such/dir/r.md: no such directory"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        ([], "the following arguments are required: command"),
    ],
)
def test_bad_options_are_one_line(capsys, argv, says):
    assert says in one_line_error(capsys, *argv)


def test_validate_rejects_unknown_models_with_a_suggestion(capsys):
    err = one_line_error(capsys, "validate", "BartModle", "NoSuchModel")
    assert "BartModle: not a transformers model or config class" in err and "did you mean BartModel" in err
    assert "NoSuchModel: not a transformers model" in err


@pytest.mark.parametrize(
    "content, says",
    [
        (None, "config.json: no such file"),
        ('{"model_type": "bart",', "config.json: not valid JSON (line 1, column 23"),
        ('{"vocab_size": 10}', "config.json: no model_type"),
        ('{"model_type": "frobnicator"}', "config.json: model_type 'frobnicator' is unknown to transformers"),
    ],
)
def test_validate_config_json_says_what_is_wrong(capsys, tmp_path, content, says):
    if content is not None:
        (tmp_path / "config.json").write_text(content)
    for target in (tmp_path, tmp_path / "config.json"):  # the directory or the file
        err = one_line_error(capsys, "validate", str(target))
        assert f"{tmp_path / 'config.json'}: " in err and says in err


def test_validate_factory_that_does_not_import_is_one_line(capsys):
    assert "sample_factories has no attribute 'nope'" in one_line_error(capsys, "validate", "sample_factories:nope")


def test_version(capsys):
    import unbranch

    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.startswith(f"unbranch {unbranch.__version__} (torch ") and out.count("\n") == 1


def test_help_is_plain_text():
    import contextlib
    import io

    helps = {}
    for command in ("", "rewrite", "validate", "emit"):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer), pytest.raises(SystemExit):
            main([command, "--help"] if command else ["--help"])
        helps[command] = buffer.getvalue()
        assert "``" not in helps[command]  # no reStructuredText markup
    assert "name prefix of the generated branch functions" in helps["rewrite"]
    assert "--version" in helps[""]


def test_validate_verbose_heads_each_export(capfd):
    assert main(["validate", "sample_factories:branchy", "--dtype", "float32", "-v"]) == 0
    out, err = capfd.readouterr()
    lines = err.splitlines()
    assert lines[0] == "=== sample_factories:branchy, float32, non-strict export ==="
    # the plain export's own error and the place in the user's code
    assert lines[1].startswith("plain export: ") and lines[1].endswith("sample_factories.py:20")
    assert lines[2] == "with unbranch: ok"
    heads = [ln for ln in lines if ln.startswith("--- ")]
    assert heads[:3] == [
        "--- what torch printed ---",
        "--- plain torch.export.export ---",
        "--- unbranch.export ---",
    ]
    assert "\n\n\n" not in err and "PASS" in out


@pytest.mark.slow
def test_validate_default_model_json(recorded_validation, capsys):
    assert main(["validate", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["model"] == "BartModel" and row["ok"] and row["plain"] != "ok" and row["rewritten"] == "ok"


@pytest.mark.slow
def test_validate_is_quiet_unless_verbose(recorded_validation, capfd):
    assert main(["validate"]) == 0
    out, err = capfd.readouterr()
    assert len((out + err).splitlines()) <= 5 and "def forward" not in out + err  # the table alone
    assert main(["validate", "-v"]) == 0
    out, err = capfd.readouterr()
    assert "def forward" in err and "PASS" in out  # the failing plain export's partial graph, on demand


@pytest.mark.slow
def test_validate_onnx_column(recorded_validation, capfd):
    assert main(["validate", "--onnx"]) == 0
    out, err = capfd.readouterr()
    assert "onnxruntime" in out.splitlines()[0] and "1 If, max diff" in out
    assert len((out + err).splitlines()) <= 5  # the conversion's output is captured too


def test_python_dash_m_runs_the_command_line():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "unbranch", "rewrite", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("usage: unbranch rewrite")
