"""Rewrite results kept in memory: by code object (warm path) and by source text.

The key is the source (with the file and line it comes from: the compiled result names them)
and the options, never object identity alone.
"""

from __future__ import annotations

import hashlib

from .version import VERSION

_BY_SOURCE: dict[str, object] = {}
_BY_CODE: dict[tuple, object] = {}
_MEMOS: list[dict] = []  # other modules' memos, emptied by clear() as well


def source_key(text: str, options_key: tuple) -> str:
    return hashlib.sha256(repr((VERSION, text, options_key)).encode()).hexdigest()


def get_compiled(key: str):
    return _BY_SOURCE.get(key)


def put_compiled(key: str, compiled) -> None:
    _BY_SOURCE[key] = compiled


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
