"""Rewrite results kept in memory, so rewriting the same code twice (entering a context again) costs nothing.

Two layers. By code object (the warm path): a function whose code was rewritten before gets
the very same loaded result. By source: sha256 of the version, the source text and the
options, so a function with the same text as one compiled before (another copy of a file,
the same helper pasted into two modules) reuses the compiled text; the code object is still
made per file and line, since its filename and source map name where the source lives.
"""

from __future__ import annotations

import hashlib

from ..version import VERSION

_BY_SOURCE: dict[str, tuple] = {}
_BY_CODE: dict[tuple, object] = {}
_MEMOS: list[dict] = []  # other modules' memos, emptied by clear() as well


def source_key(text: str, options_key: tuple) -> str:
    return hashlib.sha256(repr((VERSION, text, options_key)).encode()).hexdigest()


def get_compiled(key: str):
    """``(Compiled, SourceInfo it was compiled from)`` for a source key, or None."""
    return _BY_SOURCE.get(key)


def put_compiled(key: str, compiled, origin) -> None:
    _BY_SOURCE[key] = (compiled, origin)


def get_result(code, options_key):
    return _BY_CODE.get((code, code.co_filename, code.co_firstlineno, options_key))


def put_result(code, options_key, result) -> None:
    _BY_CODE[(code, code.co_filename, code.co_firstlineno, options_key)] = result


def memo() -> dict:
    """A dict of one's own that ``clear()`` empties with the rest (discovery's answers per code object)."""
    table: dict = {}
    _MEMOS.append(table)
    return table


def clear() -> None:
    _BY_SOURCE.clear()
    _BY_CODE.clear()
    for table in _MEMOS:
        table.clear()
