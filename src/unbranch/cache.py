"""Rewrite results kept in memory: by code object (warm path) and by source text.

The key is the source (with the file and line it comes from: the compiled result names them)
and the options, never object identity alone.
"""

from __future__ import annotations

import hashlib

from .pipeline import Compiled

VERSION = "0.1.0"

_BY_SOURCE: dict[str, Compiled] = {}
_BY_CODE: dict[tuple, object] = {}
SCANNED: dict = {}  # code object -> does discovery want it rewritten (entering again re-reads nothing)


def source_key(text: str, options_key: tuple) -> str:
    return hashlib.sha256(repr((VERSION, text, options_key)).encode()).hexdigest()


def get_compiled(key: str):
    return _BY_SOURCE.get(key)


def put_compiled(key: str, compiled: Compiled) -> None:
    _BY_SOURCE[key] = compiled


def get_result(code, options_key):
    return _BY_CODE.get((code, code.co_filename, code.co_firstlineno, options_key))


def put_result(code, options_key, result) -> None:
    _BY_CODE[(code, code.co_filename, code.co_firstlineno, options_key)] = result


def clear() -> None:
    _BY_SOURCE.clear()
    _BY_CODE.clear()
    SCANNED.clear()
