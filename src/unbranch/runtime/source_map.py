"""Generated-file -> original-file line tables, registered by the loader, read on errors."""

from __future__ import annotations

_MAPS: dict[str, object] = {}


def register(filename: str, mapping) -> None:
    """``mapping(line) -> (path, line) | None``, computed lazily by the loader."""
    _MAPS[filename] = mapping


def lookup(filename: str, line: int):
    mapping = _MAPS.get(filename)
    return mapping(line) if mapping is not None else None


def describe(filename: str, line: int) -> str:
    found = lookup(filename, line)
    return f"{found[0]}:{found[1]}" if found else f"{filename}:{line}"
