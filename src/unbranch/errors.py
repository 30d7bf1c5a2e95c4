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


# what runtime._tracing.fail raises under dynamo, as dynamo quotes it: "unbranch: <message> [<construct>]"
_RUNTIME_FAILURE = re.compile(r"unbranch: (.*?\])[\"']\)")


def runtime_failure(e: BaseException) -> UnbranchError | None:
    """The runtime's own error inside what strict export raised ("Observed exception"), as UnbranchError.

    Under dynamo the runtime can only raise a builtin ``RuntimeError("unbranch: ...")``; torch
    wraps it, and the user would see dynamo's generic message instead of the reason.
    """
    if isinstance(e, UnbranchError):
        return None
    seen = e
    while seen is not None:
        found = _RUNTIME_FAILURE.search(str(seen))
        if found:
            message, _, construct = _placed(found.group(1), seen).rpartition(" [")
            return UnbranchError.placed(message, construct.rstrip("]"))
        seen = seen.__cause__ or seen.__context__
    return None


def _placed(message: str, exc: BaseException) -> str:
    """Under dynamo the runtime cannot see its caller ("this line"); dynamo's user stack can."""
    from .runtime import source_map

    if _UNPLACED not in message:
        return message
    frames = [f for f in getattr(exc, "real_stack", None) or () if f.filename.startswith("unbranch:")]
    if not frames:
        return message
    return message.replace(_UNPLACED, source_map.describe(frames[-1].filename, frames[-1].lineno))


_UNPLACED = "this line"  # runtime._tracing.origin_of_caller under dynamo
