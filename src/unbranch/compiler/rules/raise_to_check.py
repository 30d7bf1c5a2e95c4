"""``if cond: raise E(msg)`` -> ``_ub.raise_if(cond, lambda: E(msg))``; ``assert`` and ``else: raise`` likewise.

    if (x < 0).any():                         _ub.raise_if((x < 0).any(), lambda: ValueError("negative"))
        raise ValueError("negative")   ->

Eager runs raise exactly ``E(msg)``; under export the check becomes a runtime assertion in
the graph instead of a data-dependent branch. An ``else`` part follows the check unchanged;
``if c: body else: raise E(msg)`` becomes the check ``_ub.raise_if(_ub.not_(c), ...)`` then
``body``. The exception is built only when the check fails; a message formatting values
(``f"{x.min().item()}"``, ``f"{x.shape}"``) also gets the message the exported program shows: what can be formatted
while torch traces (names, types, static sizes) formatted there, what is data by its source.
``assert cond, msg`` on a condition that may be a tensor becomes
``_ub.raise_if(_ub.not_(cond), lambda: AssertionError(msg))``. A failing block may compute
its message first (``i = ...; raise E(f"{i}")``, ``torch._assert(False, msg)``): those
statements go into a function building the exception, run only when the check fails.
"""

from __future__ import annotations

import ast
import functools

import libcst as cst

from ..analysis.classify import STATIC
from ..analysis.liveness import analyse_function, orelse_body
from ..analysis.names import block_reads, block_writes, expr_reads
from ..context import Note
from ..lower.build import in_order
from ..lower.predicates import runtime_predicate
from ..lower.truth import TruthForms
from ..passes import ASSERT, IF, Pass, Rewrite, Unchanged


class RaiseToCheck(Pass):
    HANDLES = frozenset({IF, ASSERT})
    EXAMPLES = [
        Rewrite(
            """
            def forward(self, x):
                if (x < 0).any():
                    raise ValueError("negative input")
                return x.sqrt()
            """,
            """
            def forward(self, x):
                _ub.raise_if((x < 0).any(), lambda: ValueError("negative input"))
                return x.sqrt()
            """,
        ),
        Rewrite(
            """
            def forward(self, x):
                if x.shape[0] < 2 or not torch.isfinite(x).all():
                    raise ValueError(f"bad input {x.shape}")
                else:
                    y = x + 1
                return y
            """,
            """
            def forward(self, x):
                _ub.raise_if(_ub.or_(x.shape[0] < 2, lambda: _ub.not_(torch.isfinite(x).all())), lambda: ValueError(f"bad input {x.shape}"), lambda: 'ValueError: bad input ' + _ub.shown(x.shape, 'x.shape'))
                y = x + 1
                return y
            """,
        ),
        Rewrite(  # the raise on the else side: the check that the condition holds, then the if-branch
            """
            def forward(self, x):
                if (x >= 0).all():
                    y = x.sqrt()
                else:
                    raise ValueError(f"negative input, min {x.min().item():.3f}")
                return y
            """,
            """
            def forward(self, x):
                _ub.raise_if(_ub.not_((x >= 0).all()), lambda: ValueError(f"negative input, min {x.min().item():.3f}"), 'ValueError: negative input, min <x.min().item()>')
                y = x.sqrt()
                return y
            """,  # noqa: E501
        ),
        Rewrite(
            """
            def forward(self, x):
                assert (x >= 0).all(), "x must be non-negative"
                return x.sqrt()
            """,
            """
            def forward(self, x):
                _ub.raise_if(_ub.not_((x >= 0).all()), lambda: AssertionError("x must be non-negative"))
                return x.sqrt()
            """,
        ),
        Rewrite(
            """
            def forward(self, a, b):
                if a is None:
                    y = b
                elif a.shape[0] != b.shape[0]:
                    raise ValueError("mismatch")
                else:
                    y = a + b
                return y
            """,
            """
            def forward(self, a, b):
                if a is None:
                    y = b
                else:
                    _ub.raise_if(a.shape[0] != b.shape[0], lambda: ValueError("mismatch"))
                    y = a + b
                return y
            """,
        ),
        Rewrite(  # a failing block computing its message first (torchvision's box checks)
            """
            def forward(self, boxes):
                bad = boxes[:, 2:] <= boxes[:, :2]
                if bad.any():
                    index = torch.where(bad.any(dim=1))[0][0]
                    torch._assert(False, f"invalid box {boxes[index].tolist()}")
                return boxes
            """,
            """
            def forward(self, boxes):
                bad = boxes[:, 2:] <= boxes[:, :2]
                def branch_cond_fail_1():
                    index = torch.where(bad.any(dim=1))[0][0]
                    return AssertionError(f"invalid box {boxes[index].tolist()}")
                _ub.raise_if(bad.any(), branch_cond_fail_1, 'AssertionError: invalid box <boxes[index].tolist()>')
                return boxes
            """,
        ),
        Unchanged(
            """
            def forward(self, x, mask=None):
                if mask is None:
                    raise ValueError("mask is required")
                assert x.dim() == 2
                return x * mask
            """
        ),
    ]

    def __init__(self, fn, ctx):
        super().__init__(fn, ctx)
        self.elifs: set = set()  # an `elif` can only be replaced by an `else:` block, not statements

    @functools.cached_property
    def forms(self) -> TruthForms:
        return TruthForms(self.fn, self.ctx)  # bool(t), 0 < m < 1... in the checked condition

    def predicate(self, test: cst.BaseExpression) -> cst.BaseExpression:
        return runtime_predicate(self.forms.truth(test), self.ctx)

    def visit_If(self, node):
        if isinstance(node.orelse, cst.If):
            self.elifs.add(node.orelse)

    def enters(self, node_type: type) -> bool:
        if node_type is cst.SimpleStatementLine and not self.ctx.may_hold(ASSERT):
            return False  # (no assert to look at: no line is shown)
        return super().enters(node_type)

    def visit_SimpleStatementLine(self, node):
        return any(isinstance(s, cst.Assert) for s in node.body)  # only asserts need a look inside

    def visit_Assert(self, node):
        return False

    def leave_If(self, original, updated):
        raised = _raising(updated.body.body)
        if raised is not None:  # if c: raise E  (an else part follows the check)
            if not self.ctx.is_candidate(original):
                return updated
            failed, rest = self.predicate(updated.test), orelse_body(updated)
            trailing = updated.body.body[-1].trailing_whitespace
        else:  # if c: ... else: raise E  ->  the check that c holds, then the if-branch
            orelse = updated.orelse
            raised = _raising(orelse.body.body) if isinstance(orelse, cst.Else) else None
            if raised is None or not self.ctx.is_candidate(original):
                return updated
            failed = _unparenthesised(self.predicate(cst.UnaryOperation(cst.Not(), _parenthesised(updated.test))))
            rest, trailing = list(updated.body.body), orelse.body.body[-1].trailing_whitespace
            if trailing.comment is None and updated.body.header.comment is not None:
                trailing = updated.body.header  # the comment on the `if` line stays with the check
        before, exc = raised
        failure = self._failure(original, before, exc) if before else None
        check = cst.SimpleStatementLine(
            [cst.Expr(self._raise_if(failed, exc, failure))],
            leading_lines=[] if failure else updated.leading_lines,
            trailing_whitespace=trailing,
        )
        self.ctx.note(original, "check", "if ...: raise -> _ub.raise_if")
        if rest and isinstance(updated.orelse, cst.If):
            rest = [rest[0].with_changes(leading_lines=[])]
        checks = [failure[0].with_changes(leading_lines=updated.leading_lines), check] if failure else [check]
        if original in self.elifs:
            checks[0] = checks[0].with_changes(leading_lines=[])
            return cst.Else(cst.IndentedBlock([*checks, *rest]), leading_lines=updated.leading_lines)
        return cst.FlattenSentinel([*checks, *rest])

    @functools.cached_property
    def liveness(self):
        return analyse_function(self.fn)  # (asked only for a failing block that computes its message)

    def _failure(self, original, before, exc) -> tuple[cst.FunctionDef, cst.Call]:
        """``def fail(...): <what the failing block computes>; return E(msg)``, and the call making E.

        The statements before the raise only build its message (whatever they bind dies with the
        raise): run when the check fails, eagerly, exactly where the original ran them. A name they
        rebind that was bound before the if comes in as an argument, with the value it had there.
        """
        writes = block_writes(before)
        reads = set().union(*(block_reads([s]) for s in before)) | expr_reads(exc)
        params = in_order(writes & reads & self.liveness.before(original), before)
        (name,) = self.ctx.namer.numbered(self.ctx.prefix, ("fail",))
        body = [*before, cst.SimpleStatementLine([cst.Return(exc)])]
        define = cst.FunctionDef(
            cst.Name(name), cst.Parameters([cst.Param(cst.Name(p)) for p in params]), cst.IndentedBlock(body)
        )
        return define, cst.Call(cst.Name(name), [cst.Arg(cst.Name(p)) for p in params])

    def _raise_if(self, failed, exc, failure=None) -> cst.Call:
        """``_ub.raise_if(failed, lambda: exc)``, with the message's text when it reads values.

        The lambda builds the exception only when the check fails, eagerly (through the failing
        block's function, when it computes something first); under export the message of a
        runtime assertion must be fixed at trace time, when the values it formats
        (``x.min().item()``, ``x.shape``) are symbolic: the runtime then shows its source text.
        """
        if failure is None:
            make = cst.Lambda(cst.Parameters(), exc)
        else:  # the failing block's function, called with the names it rebinds
            make = failure[1].func if not failure[1].args else cst.Lambda(cst.Parameters(), failure[1])
        args = [failed, make]
        bound = block_writes(failure[0].body.body) if failure is not None else frozenset()
        text = message_text(exc, cst.Attribute(cst.Name(self.ctx.runtime), cst.Name("shown")), bound)
        if text is not None:
            args.append(text)
        return self.ctx.runtime_call("raise_if", *args)

    def leave_Assert(self, original, updated):
        if self.ctx.classifier.kind(original.test) == STATIC:
            return updated
        failed = self.predicate(cst.UnaryOperation(cst.Not(), updated.test))
        message = [cst.Arg(updated.msg)] if updated.msg is not None else []
        exc = cst.Call(cst.Name("AssertionError"), message)
        kind = self.ctx.classifier.kind(original.test)
        self.ctx.run.notes.append(Note(self.ctx.line_of(original), "check", "assert -> _ub.raise_if", kind))
        return cst.Expr(self._raise_if(failed, exc))


def _raising(stmts) -> tuple[list, cst.BaseExpression] | None:
    """(statements before, the exception) of a block that always fails: it ends in ``raise E`` (no bare
    ``raise``, no ``from``), ``assert False, msg`` or ``torch._assert(False, msg)``, after simple
    statements only (no jump, no declaration); else None."""
    if not stmts or not all(isinstance(s, cst.SimpleStatementLine) for s in stmts):
        return None
    *before, last = stmts
    if len(last.body) != 1 or any(isinstance(s, _NOT_BEFORE) for line in before for s in line.body):
        return None
    small = last.body[0]
    if isinstance(small, cst.Raise) and small.exc is not None and small.cause is None:
        return before, small.exc
    if isinstance(small, cst.Assert) and _false(small.test):
        return before, cst.Call(cst.Name("AssertionError"), [cst.Arg(small.msg)] if small.msg else [])
    call = small.value if isinstance(small, cst.Expr) else None
    if (
        isinstance(call, cst.Call)
        and cst.Module([]).code_for_node(call.func) == "torch._assert"
        and len(call.args) == 2
        and _false(call.args[0].value)
    ):
        return before, cst.Call(cst.Name("AssertionError"), [cst.Arg(call.args[1].value)])
    return None


# what a failing block may not do before it raises: leave the block, or bind outside the function
_NOT_BEFORE = (cst.Return, cst.Break, cst.Continue, cst.Global, cst.Nonlocal, cst.Raise, cst.Assert)


def _false(test) -> bool:
    return isinstance(test, cst.Name) and test.value == "False"


def _parenthesised(test: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(test, (cst.BooleanOperation, cst.IfExp, cst.NamedExpr, cst.Lambda)) and not test.lpar:
        return test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return test


def _unparenthesised(pred: cst.BaseExpression) -> cst.BaseExpression:
    """``_ub.not_((_ub.and_(...)))`` -> ``_ub.not_(_ub.and_(...))``."""
    if isinstance(pred, cst.Call) and len(pred.args) == 1 and isinstance(pred.args[0].value, cst.Call):
        inner = pred.args[0].value
        return pred.with_changes(args=[pred.args[0].with_changes(value=inner.with_changes(lpar=[], rpar=[]))])
    return pred


_CONSTANT = (cst.SimpleString, cst.Integer, cst.Float, cst.Name)


def message_text(exc: cst.BaseExpression, shown: cst.BaseExpression, bound=frozenset()) -> cst.BaseExpression | None:
    """What a runtime assertion says for an exception whose arguments compute something (None: they are
    constants): ``"E: text"``, which the exported program fixes when it is traced.

    A field the program can format there (a name, an attribute, ``type(v).__name__``, a size) is
    formatted by ``_ub.shown`` (``shown``), which gives Python's text for a plain value and the field's
    source, ``<value>``, for one torch traces as data (a tensor, a symbolic size); a field computing
    from data (``x.min().item()``), or reading what a failing block computes (``bound``), is its source.
    The message is then a lambda joining the pieces (run only while tracing), else one string.

    ``ValueError(f"min {x.min().item():.3f}")`` -> ``'ValueError: min <x.min().item()>'``.
    """
    if not isinstance(exc, cst.Call):
        return None
    if all(_constant(a.value) and a.keyword is None and not a.star for a in exc.args):
        return None
    code = cst.Module([]).code_for_node
    parts: list = [f"{code(exc.func)}: "]
    for n, arg in enumerate(a for a in exc.args if a.keyword is None and not a.star):
        parts += [", "] * (n > 0) + _parts(arg.value, code, lambda e: _formattable(e, bound))
    pieces: list = []  # (adjacent texts joined)
    for p in parts:
        if isinstance(p, str) and pieces and isinstance(pieces[-1], str):
            pieces[-1] += p
        else:
            pieces.append(p)
    if len(pieces) == 1 and isinstance(pieces[0], str):
        return cst.SimpleString(repr(pieces[0]))
    pieces = [cst.SimpleString(repr(p)) if isinstance(p, str) else _shown_call(shown, p, code) for p in pieces]
    joined = functools.reduce(lambda a, b: cst.BinaryOperation(a, cst.Add(), b), pieces)
    return cst.Lambda(cst.Parameters(), joined)


def _shown_call(shown, field, code) -> cst.Call:
    """``_ub.shown(value, 'value'[, conversion, spec])`` of one field."""
    value, conversion, spec = field
    args = [value, cst.SimpleString(repr(code(value)))]
    if conversion or spec:
        args += [cst.SimpleString(repr(conversion or "")), cst.SimpleString(repr(spec))]
    return cst.Call(shown, [cst.Arg(a) for a in args])


def _parts(e, code, formattable) -> list:
    """A message argument as text (str) and fields to format where the program runs
    (``(expression, conversion, spec)``)."""
    if isinstance(e, cst.ConcatenatedString):
        return _parts(e.left, code, formattable) + _parts(e.right, code, formattable)
    if isinstance(e, cst.SimpleString) and isinstance(e.evaluated_value, str):
        return [e.evaluated_value]
    if not isinstance(e, cst.FormattedString):
        return [(e, None, "")] if formattable(e) else [f"<{code(e)}>"]
    quote = e.start.lstrip("fFrRbBuU")
    prefix = "".join(c for c in e.start[: -len(quote)] if c in "rR")
    out: list = []
    for part in e.parts:
        if isinstance(part, cst.FormattedStringText):  # (its source text: escapes and doubled braces)
            text = ast.literal_eval(prefix + quote + part.value + quote)
            out.append(text.replace("{{", "{").replace("}}", "}"))
            continue
        spec = part.format_spec or []
        if formattable(part.expression) and all(isinstance(s, cst.FormattedStringText) for s in spec):
            out.append((part.expression, part.conversion, "".join(s.value for s in spec)))
        else:
            out.append(f"<{code(part.expression)}>")
    return out


# what a field may call and still be formatted where the export traces it: nothing that reads data
# (``.item()``, ``.tolist()``, ``.min()``): sizes, types and names of plain Python values
_FORMATTING_CALLS = frozenset({"type", "len", "tuple", "list", "str", "repr", "getattr", "sorted", "isinstance"})
_FORMATTING_METHODS = frozenset({"size", "dim", "numel", "join", "keys", "values", "items"})


def _formattable(e: cst.BaseExpression, bound) -> bool:
    """Can ``e`` be evaluated where the program is traced, without reading data or running effects?"""
    if isinstance(e, cst.Name):
        return e.value not in bound
    if isinstance(e, (cst.SimpleString, cst.Integer, cst.Float)):
        return True
    if isinstance(e, cst.Attribute):
        return _formattable(e.value, bound)
    if isinstance(e, cst.Subscript):
        return _formattable(e.value, bound) and all(
            isinstance(s.slice, cst.Index) and _formattable(s.slice.value, bound) for s in e.slice
        )
    if isinstance(e, (cst.Tuple, cst.List)):
        return all(_formattable(el.value, bound) for el in e.elements)
    if isinstance(e, cst.Call):
        func = e.func
        allowed = (isinstance(func, cst.Name) and func.value in _FORMATTING_CALLS) or (
            isinstance(func, cst.Attribute)
            and func.attr.value in _FORMATTING_METHODS
            and _formattable(func.value, bound)
        )
        return allowed and all(a.keyword is None and not a.star and _formattable(a.value, bound) for a in e.args)
    return False


def _constant(e) -> bool:
    if isinstance(e, cst.ConcatenatedString):
        return _constant(e.left) and _constant(e.right)
    if isinstance(e, cst.FormattedString):
        return all(isinstance(p, cst.FormattedStringText) for p in e.parts)
    return isinstance(e, _CONSTANT)
