"""rewrites/ holds the emitted catalogue: regenerating it must change nothing."""

import pathlib

import pytest
import transformers

from unbranch.cli import emit

ROOT = pathlib.Path(__file__).resolve().parent.parent / "rewrites"


def test_rewrites_directory_is_up_to_date(tmp_path):
    shown = (ROOT / "VERSION").read_text().split()[-1]
    if transformers.__version__ != shown:  # its line numbers and code are that release's
        pytest.skip(
            f"rewrites/ shows transformers {shown}, {transformers.__version__} is installed "
            "(that the catalogue applies to it: test_catalogue_hooks.py)"
        )
    written = {pathlib.Path(p).relative_to(tmp_path) for p in emit(str(tmp_path))}
    committed = {p.relative_to(ROOT) for p in ROOT.rglob("*") if p.is_file()}
    assert written == committed, "run `unbranch emit -o rewrites` and commit the result"
    stale = [str(p) for p in written if (tmp_path / p).read_text() != (ROOT / p).read_text()]
    assert not stale, f"stale emitted files (run `unbranch emit -o rewrites`): {stale}"
    assert any("_ub.if_stmt(" in (ROOT / p).read_text() for p in written)
