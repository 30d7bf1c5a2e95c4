"""State shared by the passes of one rewrite: options, namer, classifier, origins, notes."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst

from ..errors import UnbranchError
from .analysis.changes import Changes
from .analysis.classify import SHAPE, STATIC, Classifier
from .analysis.effects import closures
from .origins import Origins
from .source import SourceInfo

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Namer:
    """Fresh names that collide with nothing in the source or the function's globals."""

    def __init__(self, taken):
        self.taken = set(taken)

    def new(self, base: str) -> str:
        name, n = base, 0
        while name in self.taken:
            n += 1
            name = f"{base}_{n}"
        self.taken.add(name)
        return name

    def numbered(self, base: str, suffixes) -> list[str]:
        """Names ``{base}_{suffix}_{n}`` for every suffix, with the smallest ``n`` free for all."""
        n = 1
        while any(f"{base}_{s}_{n}" in self.taken for s in suffixes):
            n += 1
        names = [f"{base}_{s}_{n}" for s in suffixes]
        self.taken.update(names)
        return names


@dataclass
class Note:
    """One thing the rewrite did (or declined to do), for reports and verbose output."""

    line: int
    kind: str  # "cond", "check" or "left" (an if kept as plain Python)
    detail: str
    condition: str = ""  # what the classifier made of the condition: static/shape/tensor/unknown


@dataclass
class Context:
    source: SourceInfo
    module: cst.Module
    classifier: Classifier
    namer: Namer
    runtime: str = "_ub"
    prefix: str = "branch_cond"
    filter_node: Callable | None = None
    strict: bool = False  # raise on a construct with a tensor condition that cannot be converted
    shape_conditions: bool = True  # dispatch ifs on sizes alone (else they stay plain Python)
    self_name: str | None = None
    mutating_helpers: object = field(default_factory=dict)  # callee text -> argument positions it changes (.get)
    function: cst.FunctionDef | None = None  # before any pass (its blocks in the passes' shape)
    tree: ast.FunctionDef | None = None  # the source's ``ast``, while the passes' tree is made from it alone
    notes: list = field(default_factory=list)
    origins: Origins = field(default_factory=Origins)
    where: int | None = None  # origin of the statement the running pass is in (for nodes it builds)
    generated: set = field(default_factory=set)  # functions a pass wrote to hold user code (rest of a function)
    flags_left_python: bool = False  # a construct left as Python tests a name unbranch made (a jump flag)
    # the kinds of candidate the screen found and the passes so far wrote; None: any (a hook wrote the tree)
    kinds: set | None = None
    # lines (in the function's text) of dispatched ifs after which the rest moves into both branches
    # whatever their outputs (torch named each for a value a cond cannot give: Options.continue_at)
    continue_at: frozenset = frozenset()
    continue_calls: frozenset = frozenset()  # lines of calls whose rest runs inside the callee (Options)
    one_side: dict = field(default_factory=dict)  # line -> (side kept, why the other is not): Options.one_side
    one_sided: bool = False  # also an if on values may keep one side (else only one on sizes)
    named: bool = False  # torch's export named this function (Options.lengths): what may be data is data
    # flags JumpFlags made for a break (or return) in a for loop whose whole body they guard: once one
    # is set, the loop's remaining steps do nothing, and an eager run may stop (the loops' ``stops``)
    stop_flags: set = field(default_factory=set)

    def may_hold(self, kind) -> bool:
        """Could the tree hold a candidate of ``kind`` (``passes.Kind``)?"""
        return self.kinds is None or kind in self.kinds

    @functools.cached_property
    def closures(self) -> list:
        """The user's nested functions (analysis.effects.closures)."""
        return closures(self.function) if self.function is not None else []

    def closures_outside(self, node) -> list:
        """The user's nested functions not defined in ``node``: called there, they see the cells
        of the enclosing function, which a branch or a loop body as a function does not write."""
        if not self.closures:
            return []  # (most functions: no walk of ``node``)
        inside = {c.name for c in closures(node)}
        return [c for c in self.closures if c.name not in inside]

    def condition_kind(self, node) -> str:
        """What the classifier makes of the condition deciding ``node``'s way (test, or a for's iterable).

        Classified on the parser's own statement when the node has one (the original condition,
        also after passes rewrote its text), else on the libcst expression.
        """
        twin = self.origins.twin(node)
        if isinstance(node, cst.For):
            return self.classifier.kind(twin.iter if isinstance(twin, ast.For) else node.iter)
        return self.classifier.kind(twin.test if hasattr(twin, "test") else node.test)

    @functools.cached_property
    def source_names(self) -> set[str]:
        """Every identifier of the original source: a name outside it is one unbranch made."""
        return taken_names(self.source.text)

    @functools.cached_property
    def _changes(self) -> Changes | None:
        return Changes(self.tree) if self.tree is not None else None

    def may_change(self, names) -> bool:
        """Could the object of one of ``names`` change in place anywhere in the function?

        ``False`` is certain (``analysis.changes``, on the source's ``ast``: the passes move and
        wrap the user's statements, never add a change in place); ``True`` for a name unbranch
        made, which that ``ast`` does not hold, and after a ``pre_rewriter`` rebuilt the tree.
        """
        if self._changes is None or not self.source_names.issuperset(names):
            return True
        return self._changes.may_change(names, self.mutating_helpers)

    def is_candidate(self, node: cst.If) -> bool:
        """Should this ``if`` be dispatched at run time (not plainly a Python condition)?"""
        kind = self.condition_kind(node)
        if kind == STATIC or (kind == SHAPE and not self.shape_conditions):
            return False
        return self.filter_node is None or bool(self.filter_node(node))

    def is_candidate_loop(self, node) -> bool:
        """A ``while`` on a non-Python test, or a ``for`` over a tensor or a symbolic ``range``."""
        if isinstance(node, cst.While):
            return self.condition_kind(node) != STATIC
        twin = self.origins.twin(node)
        return self.classifier.loop_candidate(twin.iter if isinstance(twin, ast.For) else node.iter)

    def line_of(self, node) -> int:
        """Line in the original file of ``node``: its origin, else the statement being rewritten."""
        line = self.origins.line(node)
        if line is None:
            line = self.where or 1
        return self.source.line + line - 1

    def error(self, message: str, node, construct: str) -> UnbranchError:
        return UnbranchError(message, self.source.path, self.line_of(node), construct)

    def note(self, node, kind: str, detail: str) -> None:
        has_condition = isinstance(node, cst.For) or getattr(node, "test", None) is not None
        self.notes.append(Note(self.line_of(node), kind, detail, self.condition_kind(node) if has_condition else ""))

    def runtime_call(self, func: str, *args: cst.BaseExpression) -> cst.Call:
        return cst.Call(cst.Attribute(cst.Name(self.runtime), cst.Name(func)), [cst.Arg(a) for a in args])


def taken_names(text: str, extra=()) -> set[str]:
    return set(_IDENT.findall(text)) | set(extra)
