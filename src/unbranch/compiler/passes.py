"""What every compiler pass is: a libcst transformer over one function, with its examples.

A pass is a subclass of ``Pass`` in its own module, listed once in ``pipeline.PASSES``:

    class IfToCond(Pass):
        HANDLES = {IF}            # the screen must have found such a candidate for it to run
        NEEDS = ("liveness",)     # analyses computed on the tree the pass gets (self.facts)
        EXAMPLES = [Rewrite(...), Unchanged(...), Refused(...)]
        def leave_If(self, original, updated): ...

The base class does, once for every pass: scoping to the function being rewritten (nested
``def``/``class``/``lambda`` are the user's own and stay as written), skipping into simple
statements unless the pass looks at expressions, origins (whatever ``leave_*`` returns
stands for the node it replaces), and the refusal policy (``leave_as_python``).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import libcst as cst

from .analysis.classify import STATIC, TENSOR, UNKNOWN
from .analysis.liveness import analyse_function
from .analysis.names import OwnScope, expr_reads
from .analysis.walk import LAYOUT, STRUCTURE, hooks_layout, is_a, transform
from .context import Run
from .origins import Inheriting


@dataclass(frozen=True)
class Rewrite:
    """``before`` (a function) becomes ``after`` exactly."""

    before: str
    after: str


@dataclass(frozen=True)
class Unchanged:
    """``code`` comes back as it was."""

    code: str


@dataclass(frozen=True)
class Refused:
    """``code`` stays Python with ``message`` as the reason (under ``strict``: UnbranchError)."""

    code: str
    message: str


@dataclass(frozen=True)
class Kind:
    """A construct passes rewrite, as the screen finds it before libcst parses anything.

    ``word``: a pattern the source must contain for one to be there (no parse at all without);
    ``nodes``: the ``ast`` node types it can be; ``finds(node, classifier)``: is this node one
    (cheap, and generous: the passes decide). A pass lists the kinds it handles in ``HANDLES``;
    the pipeline screens for the kinds of the passes it runs, so a new construct declares its
    kind here or in its own module and is screened for from its ``PASSES`` line.
    """

    name: str
    word: str
    nodes: tuple[type, ...]
    finds: Callable[[ast.AST, object], bool]


def conditional(node, classifier) -> bool:
    """An ``if``/``while``/``assert``/conditional expression whose test is not plainly Python."""
    return classifier.kind(node.test) != STATIC


def _loop(node, classifier) -> bool:
    return classifier.loop_candidate(node.iter) if isinstance(node, ast.For) else conditional(node, classifier)


def _ifexp(node, classifier) -> bool:
    if isinstance(node, ast.Lambda):  # (IfExpToCond enters lambdas; the screen's walk does not)
        return any(isinstance(n, ast.IfExp) and conditional(n, classifier) for n in ast.walk(node.body))
    return conditional(node, classifier)


IF = Kind("if", r"\bif\b", (ast.If,), conditional)
LOOP = Kind("loop", r"\b(?:for|while)\b", (ast.For, ast.While), _loop)
IFEXP = Kind("ifexp", r"\bif\b", (ast.IfExp, ast.Lambda), _ifexp)
ASSERT = Kind("assert", r"\bassert\b", (ast.Assert,), conditional)  # (also what TorchAssert writes)


class Cannot(Exception):
    """Raised while planning a conversion: the construct stays Python, ``str(e)`` says why."""


class Pass(OwnScope, Inheriting):
    HANDLES: ClassVar[frozenset[Kind]] = frozenset()  # the kinds of candidate it runs for
    PRODUCES: ClassVar[frozenset[Kind]] = frozenset()  # the kinds it writes, for the passes after it
    NEEDS: ClassVar[tuple[str, ...]] = ()  # "liveness": self.facts for the tree this pass gets
    EXAMPLES: ClassVar[list] = []
    EXPRESSIONS: ClassVar[bool] = False  # True: the pass looks inside simple statements too
    OPTIONS: ClassVar[dict] = {}  # compiler options it runs under (a pass only some callers ask for)

    @classmethod
    def runs_under(cls, options) -> bool:
        """Does the pass run under these compiler options (``OPTIONS``: each as given)?"""
        return all(getattr(options, key) == value for key, value in cls.OPTIONS.items())

    def __init__(self, fn: cst.FunctionDef, ctx) -> None:
        super().__init__(ctx.origins)
        self.fn, self.ctx = fn, ctx
        self._where: list[int] = []  # origins of the statements being visited (innermost last)

    @functools.cached_property
    def facts(self):
        """The analyses in ``NEEDS`` of the tree this pass got, computed when first read: most
        functions a pass walks have nothing for it to convert, and never need them."""
        return analyse_function(self.fn) if "liveness" in self.NEEDS else None

    @classmethod
    def apply(cls, fn: cst.FunctionDef, ctx) -> tuple[cst.FunctionDef, Run]:
        """``fn`` rewritten, and what the pass did; ``ctx`` is left as it was."""
        ctx = ctx.for_pass()
        with ctx.bugs_placed():
            done = transform(fn, cls(fn, ctx))
            ctx.origins.inherit(done, fn)
            generated = ctx.generated | ctx.run.generated
            if generated:  # functions holding the user's code (EarlyReturn's rest): rewritten like fn itself
                done = transform(done, _Generated(cls, ctx.for_pass(generated), done, ctx.run))
        return done, ctx.run

    def visit_FunctionDef(self, node) -> bool:
        return node is self.fn

    def expressions(self) -> bool:
        """Does the pass look inside simple statements and headers from here on (``EXPRESSIONS``)?"""
        return self.EXPRESSIONS

    def visit_SimpleStatementLine(self, node) -> bool:
        return self.expressions()

    def enters(self, node_type: type) -> bool:
        """A statement pass is never shown a condition, a header or whitespace (``transform``),
        nor a line of simple statements it has no hook for: most of a function's statements,
        each of which cost every pass a visit and a leave that did nothing. A pass looking at
        expressions is not shown layout (``walk.LAYOUT``) unless it has a hook for some."""
        if node_type is cst.SimpleStatementLine and not _hooks_lines(type(self)):
            return self.expressions()
        if is_a(node_type, STRUCTURE):
            return True
        return self.expressions() and (not is_a(node_type, LAYOUT) or hooks_layout(type(self)))

    def on_visit(self, node) -> bool:
        if not self.enters(type(node)):
            return False  # (a caller walking with libcst's own visit)
        line = self.ctx.origins.line(node) if is_a(type(node), _STATEMENTS) else None
        if line is not None:
            self._where.append(line)
            self.ctx.run.where = line
        return super().on_visit(node)

    def on_leave(self, original, updated):
        result = super().on_leave(original, updated)
        if self._where and is_a(type(original), _STATEMENTS) and self.ctx.origins.line(original) is not None:
            self._where.pop()
            self.ctx.run.where = self._where[-1] if self._where else None
        return result

    def leave_as_python(self, original, updated, reason: str, construct: str):
        """The one refusal policy: the construct stays Python, reported with its line and reason.

        A condition (``if``/``while``/conditional expression) is wrapped in
        ``_ub.unconverted``, which says why at run time should it be a tensor under export.
        With ``strict``, a construct on a plainly tensor condition raises UnbranchError now.
        """
        ctx = self.ctx
        kind = ctx.condition_kind(original) if condition_of(original) is not None else UNKNOWN
        if ctx.strict and kind == TENSOR:
            raise ctx.error(reason, original, construct)
        ctx.note(original, "left", reason)
        if not isinstance(updated, (cst.If, cst.While, cst.IfExp)):
            return updated
        if expr_reads(updated.test) - ctx.source_names - {ctx.runtime}:
            ctx.run.flags_tested = True  # a flag JumpFlags made, now tested by plain Python
        why = [cst.SimpleString(repr(reason)), cst.SimpleString(repr(construct))]
        return updated.with_changes(test=ctx.runtime_call("unconverted", updated.test, *why))


_STATEMENTS = (cst.BaseStatement, cst.BaseSmallStatement)


def condition_of(node) -> cst.BaseExpression | None:
    """The condition deciding which way ``node`` goes: an ``if``/``while`` test, a ``for``'s iterable."""
    if isinstance(node, cst.For):
        return node.iter
    return getattr(node, "test", None)


@functools.cache
def _hooks_lines(kind: type) -> bool:
    """Does the pass ``kind`` look at a line of simple statements itself (a hook of its own)?"""
    return kind.visit_SimpleStatementLine is not Pass.visit_SimpleStatementLine or (
        kind.leave_SimpleStatementLine is not cst.CSTTransformer.leave_SimpleStatementLine
    )


class _Generated(Inheriting):
    """Runs a pass on each function in ``ctx.generated`` found in a tree, as on a function of its own
    (the statements it rebuilds around one keep their lines); what it did goes into ``run``."""

    def __init__(self, step, ctx, root, run):
        super().__init__(ctx.origins)
        self.step, self.ctx, self.root, self.run = step, ctx, root, run

    def on_visit(self, node) -> bool:
        return self.enters(type(node)) and super().on_visit(node)  # functions are statements

    def enters(self, node_type: type) -> bool:
        return is_a(node_type, STRUCTURE)

    def visit_FunctionDef(self, node) -> bool:
        # one below another: the pass applied to the outer one reaches the inner one itself
        return node is self.root or node.name.value not in self.ctx.generated

    def leave_FunctionDef(self, original, updated):
        if original is self.root or original.name.value not in self.ctx.generated:
            return updated
        done, run = self.step.apply(updated, self.ctx)
        self.run.absorb(run)
        self.ctx.origins.inherit(done, original)
        return done
