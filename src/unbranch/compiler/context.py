"""What the passes of one rewrite read (options, namer, classifier, origins), and what each returns.

A pass never writes the Context it is given: what it did (notes, functions it wrote for user code,
kinds of candidate it made, flags) goes into its own ``Run``, which ``Pass.apply`` returns and
from which the pipeline makes the Context of the passes after it (``Context.after``).
"""

from __future__ import annotations

import ast
import contextlib
import copy
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
class Run:
    """One pass's run over a function: the statement it is at, and what it did, for the pipeline."""

    where: int | None = None  # origin of the statement the pass is in (for nodes it builds, and its bugs)
    notes: list = field(default_factory=list)
    generated: set = field(default_factory=set)  # functions it wrote to hold user code (rest of a function)
    kinds: set = field(default_factory=set)  # kinds of candidate it wrote beyond its PRODUCES (passes.Kind)
    # flags it made for a break (or return) in a for loop whose whole body they guard: once one is
    # set, the loop's remaining steps do nothing, and an eager run may stop (the loops' ``stops``)
    stop_flags: set = field(default_factory=set)
    # every flag it made as a ``_ub.flag`` (a tensor wherever data set it): under strict export a flag
    # set from Python stays a bool, which a cond's outputs and a loop's carry take as a tensor (literals)
    jump_flags: set = field(default_factory=set)
    helpers: dict = field(default_factory=dict)  # functions it wrote -> argument positions they change
    flags_tested: bool = False  # a construct it left as Python tests a name unbranch made (a jump flag)

    def absorb(self, other: Run) -> None:
        """Add what ``other`` (the same pass, run on a function this one wrote) did."""
        self.notes += other.notes
        self.generated |= other.generated
        self.kinds |= other.kinds
        self.stop_flags |= other.stop_flags
        self.jump_flags |= other.jump_flags
        self.helpers.update(other.helpers)
        self.flags_tested = self.flags_tested or other.flags_tested


class Helpers:
    """The callers' ``mutating_helpers`` and the functions the passes wrote: which arguments they change."""

    def __init__(self, base, written):
        self.base, self.written = base, written

    def get(self, callee, default=()):
        if callee in self.written:
            return self.written[callee] or default
        return self.base.get(callee, default) if self.base is not None else default


def _with_written(helpers, written: dict):
    """``helpers`` (a ``mutating_helpers``) with the functions in ``written`` too."""
    if not written:
        return helpers
    if isinstance(helpers, Helpers):
        return Helpers(helpers.base, {**helpers.written, **written})
    return Helpers(helpers, dict(written))


@dataclass(frozen=True)
class Context:
    source: SourceInfo
    module: cst.Module
    classifier: Classifier
    namer: Namer
    function: cst.FunctionDef  # before any pass (its blocks in the passes' shape)
    runtime: str = "_ub"
    prefix: str = "branch_cond"
    filter_node: Callable | None = None
    strict: bool = False  # raise on a construct with a tensor condition that cannot be converted
    shape_conditions: bool = True  # dispatch ifs on sizes alone (else they stay plain Python)
    self_name: str | None = None
    mutating_helpers: object = field(default_factory=dict)  # callee text -> argument positions it changes (.get)
    tree: ast.FunctionDef | None = None  # the source's ``ast``, while the passes' tree is made from it alone
    origins: Origins = field(default_factory=Origins)
    generated: frozenset = frozenset()  # functions the passes so far wrote to hold user code
    # the kinds of candidate the screen found and the passes so far wrote; None: any (a hook wrote the tree)
    kinds: frozenset | None = None
    # lines (in the function's text) of dispatched ifs after which the rest moves into both branches
    # whatever their outputs (torch named each for a value a cond cannot give: Options.continue_at)
    continue_at: frozenset = frozenset()
    continue_calls: frozenset = frozenset()  # lines of calls whose rest runs inside the callee (Options)
    index_at: frozenset = frozenset()  # lines whose subscripts by data read through _ub.at (Options)
    one_side: dict = field(default_factory=dict)  # line -> (side kept, why the other is not): Options.one_side
    one_sided: bool = False  # also an if on values may keep one side (else only one on sizes)
    named: bool = False  # torch's export named this function (Options.lengths): what may be data is data
    stop_flags: frozenset = frozenset()  # the passes' Run.stop_flags so far
    jump_flags: frozenset = frozenset()  # ... and Run.jump_flags
    run: Run = field(default_factory=Run)  # the running pass's own (``for_pass``)

    def for_pass(self, generated=None) -> Context:
        """This Context with a fresh Run for one pass to fill (``generated``: the functions it runs on
        as on functions of their own, if more than the passes before wrote)."""
        return self._replace(run=Run(), generated=self.generated if generated is None else generated)

    def after(self, run: Run, kinds) -> Context:
        """The Context of the passes after the one that did ``run`` (``kinds``: now possible)."""
        return self._replace(
            generated=self.generated | run.generated,
            kinds=kinds,
            stop_flags=self.stop_flags | run.stop_flags,
            jump_flags=self.jump_flags | run.jump_flags,
            mutating_helpers=_with_written(self.mutating_helpers, run.helpers),
            run=Run(),
        )

    def _replace(self, **changes) -> Context:
        """A copy with ``changes``, sharing what was computed of the function (none of it changes)."""
        new = copy.copy(self)  # (no dataclasses.replace: __init__ over every field, at each pass)
        for name, value in changes.items():
            object.__setattr__(new, name, value)
        return new

    @contextlib.contextmanager
    def bugs_placed(self):
        """An exception a pass did not mean (a bug of unbranch's) reaches the user as an
        UnbranchError placed at the statement being compiled, the original chained."""
        try:
            yield
        except UnbranchError:
            raise
        except Exception as e:
            raise UnbranchError(
                f"unbranch failed while compiling this function ({type(e).__name__}: {e}); this is a bug of "
                "unbranch's, please report it with the function's source",
                self.source.path,
                self.source.line + (self.run.where or 1) - 1,
                "compiler",
            ) from e

    def helpers(self):
        """``mutating_helpers`` with the functions the running pass wrote so far."""
        return _with_written(self.mutating_helpers, self.run.helpers)

    def may_hold(self, kind) -> bool:
        """Could the tree hold a candidate of ``kind`` (``passes.Kind``)?"""
        return self.kinds is None or kind in self.kinds or kind in self.run.kinds

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
            line = self.run.where or 1
        return self.source.line + line - 1

    def error(self, message: str, node, construct: str) -> UnbranchError:
        return UnbranchError(message, self.source.path, self.line_of(node), construct)

    def note(self, node, kind: str, detail: str) -> None:
        has_condition = isinstance(node, cst.For) or getattr(node, "test", None) is not None
        condition = self.condition_kind(node) if has_condition else ""
        self.run.notes.append(Note(self.line_of(node), kind, detail, condition))

    def runtime_call(self, func: str, *args: cst.BaseExpression) -> cst.Call:
        return cst.Call(cst.Attribute(cst.Name(self.runtime), cst.Name(func)), [cst.Arg(a) for a in args])


def taken_names(text: str, extra=()) -> set[str]:
    return set(_IDENT.findall(text)) | set(extra)
