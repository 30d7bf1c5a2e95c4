"""``match`` on a value that may be data -> the ``if``/``elif`` chain its cases test.

    match int(kind):                    subject = _ub.int_(kind)
        case 0:                         if subject == 0:
            y = a(x)            ->          y = a(x)
        case 1 | 2:                     elif subject == 1 or subject == 2:
            y = b(x)                        y = b(x)
        case _:                         else:
            y = -x                          y = -x

A ``match`` asks Python for the subject's value, which a tensor under export has not; the
chain's tests are comparisons a cond can take (``int(t)`` stays a tensor there: ``_ub.int_``).
Only cases Python decides by equality or identity: literal and dotted values, ``|`` of them,
``None``/``True``/``False``, a guard, and a last case that takes everything (``_`` or a name
it binds). Any other pattern (sequences, mappings, classes) keeps the ``match`` as written.
"""

from __future__ import annotations

import ast

import libcst as cst

from ..analysis.classify import STATIC
from ..passes import IF, Kind, Pass, Rewrite, Unchanged

# the subject's conversions of a tensor to a Python number, kept a tensor under export
_CONVERSIONS = {"int": "int_", "float": "float_", "bool": "bool_"}


def _on_data(node, classifier) -> bool:
    return classifier.kind(node.subject) != STATIC


MATCH = Kind("match", r"\bmatch\b", (ast.Match,), _on_data)


class MatchChain(Pass):
    HANDLES = frozenset({MATCH})
    PRODUCES = frozenset({IF})
    EXAMPLES = [
        Rewrite(
            """
            def forward(self, x, kind):
                match int(kind):
                    case 0:
                        y = x * 2
                    case 1 | 2:
                        y = x - 1
                    case _:
                        y = -x
                return y
            """,
            """
            def forward(self, x, kind):
                subject = _ub.int_(kind)
                if subject == 0:
                    y = x * 2
                elif subject == 1 or subject == 2:
                    y = x - 1
                else:
                    y = -x
                return y
            """,
        ),
        Unchanged(
            """
            def forward(self, x, mode: str):
                match mode:
                    case "double":
                        return x * 2
                    case _:
                        return x
            """
        ),
        Unchanged(
            """
            def forward(self, x, shape):
                match shape:
                    case (a, b):
                        return x.view(a, b)
                    case _:
                        return x
            """
        ),
    ]

    def leave_Match(self, original: cst.Match, updated: cst.Match):
        ctx = self.ctx
        if ctx.classifier.kind(original.subject) == STATIC:
            return updated
        subject = self._subject(updated.subject)
        tests = [_test(case.pattern, subject) for case in updated.cases]
        if any(t is None for t in tests) or any(t is True for t in tests[:-1]):
            return updated  # a pattern no comparison decides (or one taking all before the last)
        before = []
        if not isinstance(subject, cst.Name):  # evaluated once, as the match does
            name = ctx.namer.new("subject")
            before.append(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], subject)]))
            subject = cst.Name(name)
            tests = [_test(case.pattern, subject) for case in updated.cases]
        chain = None
        for case, test in reversed(list(zip(updated.cases, tests))):
            body = list(case.body.body)
            capture = _capture(case.pattern)
            if capture is not None:  # `case y:` / `case 0 as y:` binds the subject first
                bind = cst.Assign([cst.AssignTarget(cst.Name(capture))], subject)
                body = [cst.SimpleStatementLine([bind]), *body]
            if case.guard is not None:
                guard = case.guard
                test = guard if test is True else cst.BooleanOperation(_grouped(test), cst.And(), _grouped(guard))
            block = cst.IndentedBlock(body)
            if test is True:
                chain = cst.Else(block)
                continue
            made = cst.If(test, block, orelse=chain)
            first = ctx.origins.line(case.body.body[0]) if case.body.body else None
            if first is not None:
                ctx.origins.placed_at(made, first - 1)  # (the case's own line, before its block)
            chain = made
        if chain is None or isinstance(chain, cst.Else):
            return updated  # (only a case taking all: nothing to dispatch)
        made = [*before, chain]
        made[0] = made[0].with_changes(leading_lines=updated.leading_lines)
        for statement in made:
            ctx.origins.inherit(statement, original)
        return cst.FlattenSentinel(made)

    def _subject(self, subject: cst.BaseExpression) -> cst.BaseExpression:
        """The subject, a conversion of a tensor (``int(t)``) as the runtime form that keeps it one."""
        f = subject.func if isinstance(subject, cst.Call) else None
        if isinstance(f, cst.Name) and f.value in _CONVERSIONS and len(subject.args) == 1:
            return self.ctx.runtime_call(_CONVERSIONS[f.value], subject.args[0].value)
        return subject


def _test(pattern, subject):
    """The comparison deciding ``pattern`` for ``subject``; True for a pattern taking all; None where
    no comparison decides it."""
    if isinstance(pattern, cst.MatchAs):
        return True if pattern.pattern is None else _test(pattern.pattern, subject)
    if isinstance(pattern, cst.MatchValue):
        return _compare(subject, cst.Equal(), pattern.value)
    if isinstance(pattern, cst.MatchSingleton):
        return _compare(subject, cst.Is(), pattern.value)
    if isinstance(pattern, cst.MatchOr):
        tests = [_test(p.pattern, subject) for p in pattern.patterns]
        if any(t is None or t is True for t in tests):
            return None
        chain = tests[0]
        for t in tests[1:]:
            chain = cst.BooleanOperation(chain, cst.Or(), t)
        return chain
    return None


def _compare(left, op, right) -> cst.Comparison:
    return cst.Comparison(left.deep_clone(), [cst.ComparisonTarget(op, right)])


def _capture(pattern) -> str | None:
    """The name ``case y:`` or ``case 0 as y:`` binds (not ``_``)."""
    if isinstance(pattern, cst.MatchAs) and pattern.name is not None and pattern.name.value != "_":
        return pattern.name.value
    return None


def _grouped(e: cst.BaseExpression) -> cst.BaseExpression:
    """``e`` in parentheses where ``and`` would bind inside it (an ``or`` of alternatives)."""
    if isinstance(e, cst.BooleanOperation) and not e.lpar:
        return e.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return e
