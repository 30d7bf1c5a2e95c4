"""rewrites/ holds the emitted catalogue: regenerating it must change nothing."""

import pathlib

from unbranch.cli import emit

ROOT = pathlib.Path(__file__).resolve().parent.parent / "rewrites"


def test_rewrites_directory_is_up_to_date(tmp_path):
    written = {pathlib.Path(p).relative_to(tmp_path) for p in emit(str(tmp_path))}
    committed = {p.relative_to(ROOT) for p in ROOT.rglob("*") if p.is_file()}
    assert written == committed, "run `unbranch emit -o rewrites` and commit the result"
    stale = [str(p) for p in written if (tmp_path / p).read_text() != (ROOT / p).read_text()]
    assert not stale, f"stale emitted files (run `unbranch emit -o rewrites`): {stale}"
    assert any("_ub.if_stmt(" in (ROOT / p).read_text() for p in written)
