"""Rewritten text -> what tracebacks show: a line table back to the original file.

User statements are moved into branch functions unchanged, so matching lines of text
recovers where each generated line came from; lines unbranch wrote (defs, calls) take the
origin of the nearest user line before them. Computed lazily: only errors need it.
"""

from __future__ import annotations

import difflib
from functools import cached_property

from .source import SourceInfo


class SourceMap:
    def __init__(self, info: SourceInfo, generated: str, anchors=None):
        self.info = info
        self.generated = generated
        self.anchors = anchors or {}  # a name unbranch wrote -> the original line it stands for

    @cached_property
    def table(self) -> dict[int, int]:
        old = [ln.strip() for ln in self.info.text.splitlines()]
        new = [ln.strip() for ln in self.generated.splitlines()]
        table: dict[int, int] = {}
        for a, b, size in difflib.SequenceMatcher(None, old, new, autojunk=False).get_matching_blocks():
            for k in range(size):
                table[b + k + 1] = a + k + 1
        first = self.info.line - 1
        last = 1
        for line in range(1, len(new) + 1):
            if line not in table:  # a line unbranch wrote: the construct its names stand for
                table[line] = next((o - first for name, o in self.anchors.items() if name in new[line - 1]), last)
            last = table[line]
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
