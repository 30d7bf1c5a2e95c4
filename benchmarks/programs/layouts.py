"""The same program in the other layouts Python's grammar accepts (the layout fuzzer's renderings).

Black-formatted code has one statement per line and every block indented; research code,
notebooks made modules and older libraries write ``if c: x = 1``, ``a = 1; b = 2``,
conditions in parentheses over several lines or continued with a backslash, comments between
clauses, tabs and CRLF line ends. ``render(source, layouts)`` writes a generated program in the
layouts named (any combination of ``LAYOUTS``); the program computes exactly the same thing.
Shared by ``tests/test_layouts.py`` (bounded) and ``benchmarks/fuzz.py --layouts`` (long run).
"""

from __future__ import annotations

import re

import libcst as cst

LAYOUTS = ("suites", "semicolons", "parenthesised", "backslash", "comments", "tabs", "crlf")


def render(source: str, layouts) -> str:
    """``source`` (four-space indents, one statement a line) written in ``layouts``, in their order."""
    for layout in LAYOUTS:
        if layout in layouts:
            source = _RENDER[layout](source)
    return source


class _Suites(cst.CSTTransformer):
    """A block of simple statements alone, without comments, goes on its header's line."""

    def leave_IndentedBlock(self, original, updated):
        lines = updated.body
        if not lines or any(not isinstance(s, cst.SimpleStatementLine) or s.leading_lines for s in lines):
            return updated
        if updated.footer:
            return updated
        smalls = [small for line in lines for small in line.body]
        semi = cst.Semicolon(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(" "))
        body = [s.with_changes(semicolon=semi) for s in smalls[:-1]]
        body.append(smalls[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT))
        return cst.SimpleStatementSuite(body, trailing_whitespace=updated.header)


class _Semicolons(cst.CSTTransformer):
    """Two statements in a row, neither with a comment before it, share one line."""

    def leave_IndentedBlock(self, original, updated):
        out = []
        for s in updated.body:
            prev = out[-1] if out else None
            if (
                isinstance(s, cst.SimpleStatementLine)
                and isinstance(prev, cst.SimpleStatementLine)
                and not s.leading_lines
                and len(prev.body) == 1
            ):
                semi = cst.Semicolon(
                    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(" ")
                )
                joined = [prev.body[0].with_changes(semicolon=semi), *s.body]
                out[-1] = prev.with_changes(body=joined, trailing_whitespace=s.trailing_whitespace)
            else:
                out.append(s)
        return updated.with_changes(body=out)


def _with(transformer: cst.CSTTransformer):
    return lambda source: cst.parse_module(source).visit(transformer).code


_HEADER = re.compile(r"^(?P<indent>[ \t]*)(?P<key>if|elif|while) (?P<test>.*):(?P<rest>.*)$")


def _parenthesised(source: str) -> str:
    """``if t:`` -> ``if (`` / the test on a line of its own / ``):``."""
    out = []
    for line in source.split("\n"):
        found = _HEADER.match(line)
        if found is None or found["rest"].strip():
            out.append(line)
            continue
        indent = found["indent"]
        out += [f"{indent}{found['key']} (", f"{indent}        {found['test']}", f"{indent}):"]
    return "\n".join(out)


def _backslash(source: str) -> str:
    """``if a and b:`` -> ``if a \\`` / ``and b:`` (or after the keyword where no ``and``/``or``)."""
    out = []
    for line in source.split("\n"):
        found = _HEADER.match(line)
        if found is None or found["rest"].strip():
            out.append(line)
            continue
        indent, key, test = found["indent"], found["key"], found["test"]
        cut = re.search(r" (and|or) ", test)
        if cut is not None and test[: cut.start()].count("(") == test[: cut.start()].count(")"):
            out += [f"{indent}{key} {test[: cut.start()]} \\", f"{indent}        {test[cut.start() + 1 :]}:"]
        else:
            out += [f"{indent}{key} \\", f"{indent}        {test}:"]
    return "\n".join(out)


_CLAUSE = re.compile(r"^(?P<indent>[ \t]*)(?:else|elif|except|finally)\b")


def _comments(source: str) -> str:
    """A comment and a blank line before each ``else``/``elif``/``except``/``finally``, a comment
    ending each block header and each statement line that no backslash continues."""
    out = []
    for k, line in enumerate(source.split("\n")):
        clause = _CLAUSE.match(line)
        if clause is not None:
            out += ["", f"{clause['indent']}# the other side ({k})"]
        continues = line.rstrip().endswith(("\\", "(", ","))
        if line.strip() and not line.lstrip().startswith(("#", "import", "@")) and not continues:
            line = f"{line}  # note {k}"
        out.append(line)
    return "\n".join(out)


def _tabs(source: str) -> str:
    """Each level of four spaces an indentation is made of -> one tab."""

    def tabbed(line: str) -> str:
        spaces = len(line) - len(line.lstrip(" "))
        return "\t" * (spaces // 4) + " " * (spaces % 4) + line[spaces:]

    return "\n".join(tabbed(line) for line in source.split("\n"))


def _crlf(source: str) -> str:
    return source.replace("\r\n", "\n").replace("\n", "\r\n")


_RENDER = {
    "suites": _with(_Suites()),
    "semicolons": _with(_Semicolons()),
    "parenthesised": _parenthesised,
    "backslash": _backslash,
    "comments": _comments,
    "tabs": _tabs,
    "crlf": _crlf,
}
