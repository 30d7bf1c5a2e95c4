"""The one exception class users see when something cannot be rewritten, also when torch wrapped it."""

from __future__ import annotations

import re


class UnbranchError(Exception):
    """A function or construct that unbranch cannot rewrite or run.

    ``path``/``line`` point at the user's original source, ``construct`` names the
    offending piece of code, so the message is actionable without reading unbranch.
    """

    def __init__(self, message: str, path: str | None = None, line: int | None = None, construct: str | None = None):
        self.reason = message
        self.path = path
        self.line = line
        self.construct = construct
        where = f"{path}:{line}: " if path and line else (f"{path}: " if path else "")
        what = f" [{construct}]" if construct else ""
        super().__init__(f"{where}{message}{what}")

    @classmethod
    def placed(cls, text: str, construct: str | None = None) -> UnbranchError:
        """The error for ``"path:line: message"`` (what the runtime writes), its place in ``path``/``line``."""
        found = _PLACE.match(text)
        if found is None:
            return cls(text, construct=construct)
        return cls(found["message"], found["path"], int(found["line"]), construct)


_PLACE = re.compile(r"(?P<path>[^\s:][^:]*):(?P<line>\d+): (?P<message>.*)", re.DOTALL)
