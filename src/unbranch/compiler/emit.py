"""Rewritten text -> what tracebacks show: a line table back to the original file.

The table comes from positions on the output tree and the origin each node inherited from
the code it replaces (``origins.line_table``). Computed lazily: only errors need it.
"""

from __future__ import annotations

from functools import cached_property

from .origins import line_table
from .source import SourceInfo


class SourceMap:
    def __init__(self, info: SourceInfo, generated: str, tree, origins):
        self.info = info
        self.generated = generated
        self.tree, self.origins = tree, origins

    @cached_property
    def table(self) -> dict[int, int]:
        table = line_table(self.tree, self.origins) if self.tree is not None else {}
        last = 1
        for line in range(1, self.generated.count("\n") + 2):  # a line with no origin: the one before it
            last = table.setdefault(line, last)
        return table

    def __call__(self, line: int):
        local = self.table.get(line)
        return (self.info.path, self.info.line + local - 1) if local else None

    def annotated(self) -> str:
        """The generated text, each line ending with ``# file:line`` of its origin."""
        out = []
        for i, ln in enumerate(self.generated.splitlines(), 1):
            path, line = self(i)
            out.append(f"{ln}  # {path}:{line}\n" if ln.strip() else "\n")
        return "".join(out)
