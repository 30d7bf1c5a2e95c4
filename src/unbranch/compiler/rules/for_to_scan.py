"""``for`` over a symbolic length -> a body function run by ``_ub.for_range`` / ``_ub.for_each``.

    for i in range(1, x.shape[0]):          def loop_body_1(i, x_row, out, acc):
        out[i] = out[i - 1] + x[i]    ->        _ub.at(out)[i] = _ub.at(out)[i - 1] + _ub.row(x_row, x, i)
        acc = acc + x[i] * (i % 2)              acc = acc + _ub.row(x_row, x, i) * (i % 2)
                                                return out, acc
                                            out, acc = _ub.for_range((1, x.shape[0]), loop_body_1,
                                                carry=(out, acc), mutated=(0,), kept=(0,), reads=(x,))

Under export with a dynamic length this is a ``scan`` (``range(n)``, ``for row in x``,
``enumerate``, ``zip``) or a ``while_loop`` (``range(a, b, step)``); otherwise the same
Python loop. The index is an ordinary integer eagerly and a 0-d integer tensor under
export, so it may be used in arithmetic; a subscript holding it (``x[i - 1]``,
``out[i, :]``, ``x[:, i]``) is written ``_ub.at(x)[i - 1]``, which indexes with
``index_select``/``index_put_`` there (``_ub.at(t)`` is ``t`` itself eagerly). Tensors changed in place (``out[i] = v``,
``acc += v``) are carried: ``mutated`` lists them, ``kept`` those never rebound. A list the
body appends to (``outs.append(v)``) and that is only stacked after the loop
(``torch.stack(outs)``, ``torch.cat(outs, dim)``) becomes the scan's per-step outputs
(``appends``; ``_ub.stack``/``_ub.cat`` take either form). A buffer the body only writes,
one row per step at the index (``out[i] = v``, ``out[i, :] = v``, and nothing else in the body
reads it) is written ``out = _ub.write_row(out, i, v)`` and listed in ``rows``: under a scan
each step's row is a per-step output, written into the buffer once after the loop, instead of a carried buffer copied at every step (measured: 8-9x
the eager loop in ``ep.module()``, and AOTInductor cannot compile it). A ``for ... else`` (no
``break``: the else always runs) keeps its else after the call. A whole row of a tensor the body
never changes, read at the index (``x[i]``), is ``_ub.row(x_row, x, i)`` and ``x`` is listed in
``reads``: a scan slices ``x`` for its steps (no indexing op per step, and none whose gradient
strict export cannot trace); elsewhere ``x_row`` is ``None`` and the body reads ``x[i]`` itself.
A loop variable read after the loop is bound there to the last item (``_ub.last_item``).

Stays Python, with the reason: ``break``/``return`` in the body, an index bounding a slice
(``x[:i]``, a different shape at each step), a loop variable bound before the loop and read
after it, a row changed in place (normalise/row_effects stores the plain forms at the index),
Python containers or attributes changed in the body.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

import libcst as cst

from ..analysis.classify import unbound_rows
from ..analysis.effects import block_effects, in_place
from ..analysis.liveness import surroundings
from ..analysis.names import OwnScope, block_writes, expr_reads, target_list
from ..analysis.walk import read, transform
from ..lower.build import keyword, tuple_node
from ..origins import Inheriting
from ..passes import Rewrite, Unchanged
from ._loops import AtSubscripts, Function, LoopPlan, LoopRule, Refusal, as_written


@dataclass(frozen=True)
class Iteration:
    """How a ``for`` iterates: the runtime helper, what it iterates, the targets, which are indices."""

    helper: str  # "for_range" or "for_each"
    over: cst.BaseExpression
    targets: list[str]
    indices: list[str]  # targets that are integers (range, enumerate): usable in arithmetic
    keywords: dict = field(default_factory=dict)


@dataclass(frozen=True)
class _Last:
    """The loop variables read after the loop, and the statement binding them there."""

    names: list[str]
    statement: cst.SimpleStatementLine


def _call_of(it, name: str) -> cst.Call | None:
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == name:
        if all(a.star == "" for a in it.args):
            return it
    return None


def _less_one(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``expr - 1`` (parenthesised where it binds less tightly), ``-1`` for ``0``."""
    if isinstance(expr, cst.Integer):
        return (
            cst.Integer(str(int(expr.value, 0) - 1))
            if int(expr.value, 0)
            else cst.UnaryOperation(cst.Minus(), cst.Integer("1"))
        )
    if not isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
        expr = expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.BinaryOperation(expr, cst.Subtract(), cst.Integer("1"))


def _reversed_range(it) -> cst.Tuple | None:
    """``(b - 1, a - 1, -1)``, the bounds of ``range`` that ``reversed(range(a, b))`` (or of ``b``) counts."""
    rev = _call_of(it, "reversed")
    rng = _call_of(rev.args[0].value, "range") if rev is not None and len(rev.args) == 1 else None
    if rng is None or any(a.keyword for a in (*rev.args, *rng.args)) or not 1 <= len(rng.args) <= 2:
        return None
    start = rng.args[0].value if len(rng.args) == 2 else cst.Integer("0")
    down = cst.UnaryOperation(cst.Minus(), cst.Integer("1"))
    return cst.Tuple([cst.Element(e) for e in (_less_one(rng.args[-1].value), _less_one(start), down)])


def _enumerated_zip(node: cst.For) -> Iteration | None:
    """``for i, (a, b) in enumerate(zip(x, y))``."""
    enum = _call_of(node.iter, "enumerate")
    zipped = _call_of(enum.args[0].value, "zip") if enum is not None and len(enum.args) == 1 else None
    target = node.target
    if zipped is None or any(a.keyword for a in (*enum.args, *zipped.args)) or not isinstance(target, cst.Tuple):
        return None
    index, *rest = target.elements
    items = target_list(rest[0].value) if len(rest) == 1 else None
    if not isinstance(index.value, cst.Name) or items is None or len(items) != len(zipped.args):
        return None
    over = cst.Tuple([cst.Element(a.value) for a in zipped.args])
    keywords = {"enumerated": cst.Integer("0"), "zipped": cst.Name("True")}
    return Iteration("for_each", over, [index.value.value, *items], [index.value.value], keywords)


def iteration(node: cst.For) -> Iteration | Refusal:
    targets = target_list(node.target)
    if targets is None:
        return _enumerated_zip(node) or Refusal("a for loop whose target is not a name or a tuple of names")
    it = node.iter
    rng, enum, zipped = _call_of(it, "range"), _call_of(it, "enumerate"), _call_of(it, "zip")
    backwards = _reversed_range(it)
    if (rng is not None and not any(a.keyword for a in rng.args) and 1 <= len(rng.args) <= 3) or backwards:
        if len(targets) != 1 or not isinstance(node.target, cst.Name):
            return Refusal("a for loop over range() unpacking its index")
        if backwards is not None:
            return Iteration("for_range", backwards, targets, targets)
        bounds = rng.args[0].value if len(rng.args) == 1 else cst.Tuple([cst.Element(a.value) for a in rng.args])
        return Iteration("for_range", bounds, targets, targets)
    if _call_of(it, "reversed") is not None:
        return Refusal("a for loop over reversed() of something other than range(n) or range(a, b)")
    rows = unbound_rows(it)
    if rows is not None and isinstance(node.target, cst.Name):
        return Iteration("for_each", rows, targets, [], {"unbind": cst.Name("True")})
    if enum is not None and 1 <= len(enum.args) <= 2:
        if len(targets) != 2 or not isinstance(node.target, cst.Tuple):
            return Refusal("a for loop over enumerate() whose target is not 'i, item'")
        start = enum.args[1].value if len(enum.args) == 2 else cst.Integer("0")
        keywords = [a.keyword.value for a in enum.args if a.keyword is not None]
        if enum.args[0].keyword is not None or keywords not in ([], ["start"]):
            return Refusal("enumerate() with unexpected keywords")
        rows = unbound_rows(enum.args[0].value)  # enumerate(x.unbind(0)): over x, unbound by Python eagerly
        over, unbind = (rows, {"unbind": cst.Name("True")}) if rows is not None else (enum.args[0].value, {})
        return Iteration("for_each", over, targets, targets[:1], {"enumerated": start, **unbind})
    if zipped is not None and zipped.args and not any(a.keyword for a in zipped.args):
        if len(targets) != len(zipped.args) or not isinstance(node.target, cst.Tuple):
            return Refusal("a for loop over zip() whose target does not name each item")
        over = cst.Tuple([cst.Element(a.value) for a in zipped.args])
        return Iteration("for_each", over, targets, [], {"zipped": cst.Name("True")})
    if not isinstance(node.target, cst.Name):
        return Refusal("a for loop unpacking the rows of a tensor")
    return Iteration("for_each", it, targets, [])


class _IndexUses(cst.CSTVisitor):
    """Uses of the loop indices a traced step cannot have: slice bounds, inner loop lengths."""

    def __init__(self, indices):
        self.indices = set(indices)
        self.problem: str | None = None

    def visit_Slice(self, node):
        for part in (node.lower, node.upper, node.step):
            used = expr_reads(part) & self.indices if part is not None else set()
            if used and self.problem is None:
                name = sorted(used)[0]
                self.problem = f"the loop index '{name}' bounds a slice (each step would have another shape)"


class _RowsChanged(cst.CSTVisitor):
    """A row taken with the loop index and then changed in place (``out[i][0] = v``,
    ``out[i].add_(1)``, ``r = out[i]; r.mul_(2)``): under export such a row is a copy."""

    def __init__(self, indices):
        self.indices = set(indices)
        self.rows: set[str] = set()  # names bound to a row taken with the index
        self.found = False

    def visit_FunctionDef(self, node):
        return True  # generated branch functions of ifs in the body run in the step too

    def _indexed(self, expr) -> bool:
        """Does ``expr`` (a receiver or store target's value) hold ``t[... i ...]``?"""
        while isinstance(expr, (cst.Subscript, cst.Attribute)):
            if isinstance(expr, cst.Subscript) and any(expr_reads(el.slice) & self.indices for el in expr.slice):
                return True
            expr = expr.value
        return False

    def _store(self, target):
        if isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self._store(el.value)
        elif isinstance(target, (cst.Subscript, cst.Attribute)):
            self.found |= self._indexed(target.value) or _root_name(target) in self.rows

    def visit_Assign(self, node):
        for t in node.targets:
            self._store(t.target)
            if isinstance(t.target, cst.Name) and self._indexed(node.value):
                self.rows.add(t.target.value)

    def visit_AugAssign(self, node):
        self._store(node.target)
        if isinstance(node.target, cst.Name) and node.target.value in self.rows:
            self.found = True

    def visit_Call(self, node):
        f = node.func
        if isinstance(f, cst.Attribute) and in_place(f.attr.value):
            self.found |= self._indexed(f.value) or _root_name(f.value) in self.rows


_STACKS = {"stack", "cat"}
_REDUCTIONS = {"sum": "sum_", "any": "any_", "all": "all_"}  # builtins over a list's items -> runtime forms
# calls whose result has a length known only from tensor data (``torch.where`` with one argument)
_DATA_DEPENDENT = {"nonzero", "unique", "unique_consecutive", "tolist", "masked_select", "argwhere", "where"}


class _DataDependent(cst.CSTVisitor):
    """Does an expression call ``nonzero()``, ``unique()``, ``tolist()``... (or read a name bound to one)?"""

    def __init__(self, names=frozenset()):
        self.names, self.found = names, None

    def visit_Lambda(self, node):
        return False

    def visit_Call(self, node):
        f = node.func
        name = f.attr.value if isinstance(f, cst.Attribute) else f.value if isinstance(f, cst.Name) else None
        if name in _DATA_DEPENDENT and not (name == "where" and len(node.args) != 1):
            self.found = self.found or name

    def visit_Name(self, node):
        if node.value in self.names:
            self.found = self.found or node.value


def data_dependent(expr, names=frozenset()) -> str | None:
    v = _DataDependent(names)
    read(expr, v)
    return v.found


class _DataDependentNames(cst.CSTVisitor):
    """Names bound (anywhere in the function) to a data-dependent sequence: ``hit = mask.nonzero()``."""

    def __init__(self):
        self.names: set[str] = set()

    def visit_Assign(self, node):
        if data_dependent(node.value, frozenset(self.names)):
            for t in node.targets:
                if isinstance(t.target, cst.Name):
                    self.names.add(t.target.value)


def _append_target(stmt) -> tuple[str, cst.BaseExpression] | None:
    """``(outs, v)`` for a statement ``outs.append(v)``."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)):
        return None
    call = stmt.body[0].value
    f = call.func if isinstance(call, cst.Call) else None
    if not (isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.attr.value == "append"):
        return None
    if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
        return None
    return f.value.value, call.args[0].value


def _stack_of(call: cst.Call, runtime: str | None = None) -> tuple[str, str] | None:
    """(``outs``, the runtime's form) for a call that takes every item of the list ``outs`` at once:
    ``torch.stack(outs, ...)``/``torch.cat(outs, ...)`` (``stack``, ``cat``), ``sum(outs)`` (``sum_``),
    ``any(outs)``/``all(outs)`` or their runtime forms (``any_``, ``all_``), ``_ub.first(outs, ...)`` (next's)."""
    f, args = call.func, call.args
    if not args or args[0].keyword is not None or args[0].star or not isinstance(args[0].value, cst.Name):
        return None
    owner = f.value.value if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) else None
    if owner == "torch" and f.attr.value in _STACKS:
        form = f.attr.value
    elif owner is not None and owner in (runtime, "_ub") and f.attr.value in ("any_", "all_", "first"):
        form = f.attr.value
    elif isinstance(f, cst.Name) and f.value in _REDUCTIONS and len(args) == 1:
        form = _REDUCTIONS[f.value]
    else:
        return None
    return args[0].value.value, form


class _Uses(cst.CSTVisitor):
    """How often each name is read, and how often as the list of ``torch.stack``/``torch.cat``."""

    def __init__(self):
        self.all: dict[str, int] = {}
        self.stacked: dict[str, int] = {}

    def visit_Name(self, node):
        self.all[node.value] = self.all.get(node.value, 0) + 1

    def visit_Call(self, node):
        found = _stack_of(node)
        if found is not None:
            self.stacked[found[0]] = self.stacked.get(found[0], 0) + 1


def _uses(stmts) -> _Uses:
    v = _Uses()
    for s in stmts:
        read(s, v)
    return v


def _root_name(expr) -> str | None:
    while isinstance(expr, (cst.Subscript, cst.Attribute)):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _is_row_read(node, index: str) -> bool:
    """``x[i]``: a whole row of a name at the loop index."""
    return (
        isinstance(node, cst.Subscript)
        and isinstance(node.value, cst.Name)
        and len(node.slice) == 1
        and isinstance(node.slice[0].slice, cst.Index)
        and node.slice[0].slice.star is None
        and isinstance(node.slice[0].slice.value, cst.Name)
        and node.slice[0].slice.value.value == index
    )


class _RowReads(OwnScope, cst.CSTVisitor):
    """Names read as ``x[i]`` (a whole row at the loop index) in a loop body."""

    def __init__(self, index: str):
        self.index, self.names = index, []

    def visit_Subscript(self, node) -> None:
        if _is_row_read(node, self.index) and node.value.value not in self.names:
            self.names.append(node.value.value)


class _FromRows(OwnScope, Inheriting):
    """``x[i]`` -> ``_ub.row(x_row, x, i)``: the row a scan over ``x`` gives the step, else ``x[i]``."""

    def __init__(self, index: str, rows: dict, ctx):
        super().__init__(ctx.origins)
        self.index, self.rows, self.ctx = index, rows, ctx

    def leave_Subscript(self, original, updated):
        if not (_is_row_read(updated, self.index) and updated.value.value in self.rows):
            return updated
        name = updated.value.value
        call = self.ctx.runtime_call("row", cst.Name(self.rows[name]), cst.Name(name), cst.Name(self.index))
        return call.with_changes(lpar=updated.lpar, rpar=updated.rpar)


def _row_reads(body, index: str, excluded, mutating_helpers) -> list[str]:
    """The names whose rows the body reads at the loop index (``x[i]``) and never rebinds or
    changes: a scan can slice them for its steps instead of indexing them at each one."""
    writes = block_writes(body)
    if index in writes:
        return []
    found = _RowReads(index)
    for s in body:
        read(s, found)
    changed = writes | block_effects(body, mutating_helpers).mutated | set(excluded)  # (through a view too)
    return [name for name in found.names if name not in changed]


def _row_writes(body, names, index: str) -> dict[str, int]:
    """Names of ``names`` the body only writes, one row per step (with the statement's position):
    a top-level ``out[i] = v`` or ``out[i, :, ...] = v`` (``i`` the loop index), the only place
    the body mentions ``out``."""
    if index in block_writes(body):
        return {}  # the index rebound: the row written is not the step's
    uses = _uses(body).all
    found = {}
    for k, stmt in enumerate(body):
        if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1):
            continue
        small = stmt.body[0]
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
            continue
        target = small.targets[0].target
        if not (isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name)):
            continue
        name = target.value.value
        first, rest = target.slice[0].slice, target.slice[1:]
        if (
            name in names
            and uses.get(name) == 1
            and isinstance(first, cst.Index)
            and isinstance(first.value, cst.Name)
            and first.value.value == index
            and all(
                isinstance(el.slice, cst.Slice) and el.slice.lower is el.slice.upper is el.slice.step is None
                for el in rest
            )
        ):
            found[name] = k
    return found


class ForToScan(LoopRule):
    CONSTRUCT = "for"
    EXAMPLES = [
        Rewrite(  # the loop variable read after the loop: the last row, which the loop op leaves unbound
            """
            def forward(self, x: torch.Tensor):
                acc = torch.zeros(x.shape[1])
                for row in x:
                    acc = acc + row
                return acc + row
            """,
            """
            def forward(self, x: torch.Tensor):
                acc = torch.zeros(x.shape[1])
                def loop_body_1(row, acc):
                    acc = acc + row
                    return acc
                acc = _ub.for_each(x, loop_body_1, carry=(acc,))
                row = _ub.last_item(x, 'row')
                return acc + row
            """,
        ),
        Rewrite(  # counting down: a scan taking its steps from the last row (appends in the steps' order)
            """
            def forward(self, x):
                outs = []
                h = torch.zeros(x.shape[1])
                for i in reversed(range(x.shape[0])):
                    h = torch.tanh(h + x[i])
                    outs.append(h)
                return torch.stack(outs)
            """,
            """
            def forward(self, x):
                outs = []
                h = torch.zeros(x.shape[1])
                def loop_body_1(i, x_row, h):
                    h = torch.tanh(h + _ub.row(x_row, x, i))
                    outs_item = h
                    return h, outs_item
                h, outs = _ub.for_range((x.shape[0] - 1, -1, -1), loop_body_1, carry=(h,), reads=(x,), appends=(outs,))
                return _ub.stack(outs)
            """,
        ),
        Rewrite(  # the rows of x.unbind(0); len(x) as a bound stays symbolic (Python's len fixes it)
            """
            def forward(self, x):
                acc = torch.zeros(x.shape[1])
                for row in x.unbind(0):
                    acc = acc + row
                for i in range(len(x)):
                    acc = acc * x[i]
                return acc
            """,
            """
            def forward(self, x):
                acc = torch.zeros(x.shape[1])
                def loop_body_1(row, acc):
                    acc = acc + row
                    return acc
                acc = _ub.for_each(x, loop_body_1, carry=(acc,), unbind=True)
                def loop_body_2(i, x_row, acc):
                    acc = acc * _ub.row(x_row, x, i)
                    return acc
                acc = _ub.for_range(_ub.length(x), loop_body_2, carry=(acc,), reads=(x,))
                return acc
            """,
        ),
        Rewrite(
            """
            def forward(self, x):
                acc = torch.zeros(x.shape[1])
                for i, (a, b) in enumerate(zip(x, x.flip(0))):
                    acc = acc + a * b * i
                return acc
            """,
            """
            def forward(self, x):
                acc = torch.zeros(x.shape[1])
                def loop_body_1(i, a, b, acc):
                    acc = acc + a * b * i
                    return acc
                acc = _ub.for_each((x, x.flip(0)), loop_body_1, carry=(acc,), enumerated=0, zipped=True)
                return acc
            """,
        ),
        Rewrite(
            """
            def forward(self, x, y):
                z = torch.zeros(x.shape[0], y.shape[0])
                acc = torch.zeros(x.shape[1])
                for i in range(x.shape[0]):
                    z[i] = ((x[i] - y) ** 2).sum(-1)
                    acc += x[i]
                return z, acc
            """,
            """
            def forward(self, x, y):
                z = torch.zeros(x.shape[0], y.shape[0])
                acc = torch.zeros(x.shape[1])
                def loop_body_1(i, x_row, z, acc):
                    z = _ub.write_row(z, i, ((_ub.row(x_row, x, i) - y) ** 2).sum(-1))
                    acc += _ub.row(x_row, x, i)
                    return z, acc
                z, acc = _ub.for_range(x.shape[0], loop_body_1, carry=(z, acc), mutated=(0, 1), kept=(0, 1), rows=(0,), reads=(x,))
                return z, acc
            """,
        ),
        Rewrite(  # the index in select/narrow: the index is a 0-d tensor under a scan
            """
            def forward(self, x):
                acc = torch.zeros(x.shape[1])
                for i in range(x.shape[0]):
                    acc = acc + x.select(0, i) * (i + 1) + x.narrow(0, i, 1).sum(0)
                return acc
            """,
            """
            def forward(self, x):
                acc = torch.zeros(x.shape[1])
                def loop_body_1(i, acc):
                    acc = acc + _ub.at(x).select(0, i) * (i + 1) + _ub.at(x).narrow(0, i, 1).sum(0)
                    return acc
                acc = _ub.for_range(x.shape[0], loop_body_1, carry=(acc,))
                return acc
            """,
        ),
        Rewrite(  # out is read in the body (out[i - 1]): carried, not rows
            """
            def forward(self, x):
                out = torch.zeros_like(x)
                for i in range(x.shape[0]):
                    out[i, :] = x[i] * 2 + out[i - 1]
                return out
            """,
            """
            def forward(self, x):
                out = torch.zeros_like(x)
                def loop_body_1(i, x_row, out):
                    _ub.at(out)[i, :] = _ub.row(x_row, x, i) * 2 + _ub.at(out)[i - 1]
                    return out
                out = _ub.for_range(x.shape[0], loop_body_1, carry=(out,), mutated=(0,), kept=(0,), reads=(x,))
                return out
            """,
        ),
        Rewrite(
            """
            def forward(self, x):
                out = x.clone()
                for i in range(1, x.shape[0]):
                    out[i, :] = out[i - 1] * 0.5 + x[i] * (i % 2)
                return out
            """,
            """
            def forward(self, x):
                out = x.clone()
                def loop_body_1(i, x_row, out):
                    _ub.at(out)[i, :] = _ub.at(out)[i - 1] * 0.5 + _ub.row(x_row, x, i) * (i % 2)
                    return out
                out = _ub.for_range((1, x.shape[0]), loop_body_1, carry=(out,), mutated=(0,), kept=(0,), reads=(x,))
                return out
            """,
        ),
        Rewrite(
            """
            def forward(self, x):
                total = x[0] * 0
                for t, row in enumerate(x):
                    total = total + row.relu() * t
                else:
                    total = total * 2
                return total
            """,
            """
            def forward(self, x):
                total = x[0] * 0
                def loop_body_1(t, row, total):
                    total = total + row.relu() * t
                    return total
                total = _ub.for_each(x, loop_body_1, carry=(total,), enumerated=0)
                total = total * 2
                return total
            """,
        ),
        Rewrite(
            """
            def forward(self, x):
                outs = []
                for row in x:
                    outs.append(row.relu())
                return torch.stack(outs)
            """,
            """
            def forward(self, x):
                outs = []
                def loop_body_1(row):
                    outs_item = row.relu()
                    return outs_item
                outs = _ub.for_each(x, loop_body_1, appends=(outs,))
                return _ub.stack(outs)
            """,
        ),
        Unchanged(
            """
            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                for i in range(self.num_heads):
                    x = x + i
                return x
            """
        ),
        Unchanged(  # refused: the loop index 'i' bounds a slice (each step would have another shape)
            """
            def forward(self, x):
                acc = x[0] * 0
                for i in range(x.shape[0]):
                    acc = acc + x[:i].sum(0)
                return acc
            """
        ),
    ]

    def __init__(self, fn, ctx):
        super().__init__(fn, ctx)
        self._indices: list[set[str]] = []  # the integer indices of the enclosing candidate loops
        self._stacked: set[str] = set()  # lists a converted loop appends to (stacked under a scan)

    def expressions(self) -> bool:
        # torch.stack(outs) after a loop that appends to outs -> _ub.stack(outs): only after such a loop
        return bool(self._stacked)

    @functools.cached_property
    def _data_dependent(self) -> frozenset:
        found = _DataDependentNames()
        read(self.fn, found)
        return frozenset(found.names)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        found = _stack_of(updated, self.ctx.runtime)
        if found is None or found[0] not in self._stacked:
            return updated
        return updated.with_changes(func=cst.Attribute(cst.Name(self.ctx.runtime), cst.Name(found[1])))

    def _appends(self, original: cst.For, body) -> list[tuple[int, str]]:
        """(position in the body, list) of each ``outs.append(v)`` whose list is only stacked after the loop."""
        found = []
        before = self.facts.defined.get(original, set())
        inside = _uses(as_written(body, self.ctx.runtime))
        _, after = surroundings(self._scope(), original)
        later = _uses(after)
        for k, stmt in enumerate(body):
            target = _append_target(stmt)
            if target is None or target[0] not in before or inside.all.get(target[0]) != 1:
                continue
            name = target[0]
            if later.all.get(name, 0) == later.stacked.get(name, 0):
                found.append((k, name))
        return found

    def visit_For(self, node: cst.For) -> bool:
        form = iteration(node) if self.is_candidate(node) else None
        self._indices.append(set(form.indices) if isinstance(form, Iteration) else set())
        return True

    def is_candidate(self, original: cst.For) -> bool:
        """A ``for`` over a tensor or symbolic size, or over a ``range`` bounded by an enclosing index or
        stopped by a break on data: eagerly the same loop, under export one while_loop for the steps
        after the one that set the flag from data (``_ub.for_range``'s ``stops``), not a cond a step."""
        if self.ctx.is_candidate_loop(original) or data_dependent(original.iter, self._data_dependent):
            return True
        rng = _call_of(original.iter, "range")
        enclosing = set().union(*self._indices[:-1]) if self._indices else set()
        return rng is not None and (bool(expr_reads(rng) & enclosing) or self._stopped(original))

    def _stopped(self, loop: cst.For) -> bool:
        """Does the body set a break's flag (normalise.jump_flags), which guards the rest of each step?"""
        return bool(block_writes(loop.body.body) & self.ctx.stop_flags)

    def leave_For(self, original: cst.For, updated: cst.For):
        try:
            return self.rewrite(original, updated)
        finally:
            self._indices.pop()

    def plan(self, original: cst.For, updated: cst.For) -> LoopPlan | Refusal:
        source = data_dependent(original.iter, self._data_dependent)
        if source:
            return Refusal(
                f"it loops over a sequence whose length depends on tensor data ({source}): torch.export has no "
                "loop over such a length; loop over a bound known from shapes (e.g. every expert) and mask "
                "the steps that do not apply"
            )
        form = iteration(original)
        if isinstance(form, Refusal):
            return form
        if form.helper == "for_range":
            form = dataclasses.replace(form, over=self.symbolic_lengths(form.over))
        body = list(updated.body.body)
        after = list(updated.orelse.body.body) if updated.orelse is not None else []
        live = self.facts.live_out.get(original, set())
        last = self._last_item(original, form, body, live)
        if isinstance(last, Refusal):
            return last
        uses = _IndexUses(form.indices)
        for s in body:
            read(s, uses)
        if uses.problem:
            return Refusal(uses.problem)
        appends = self._appends(original, body)
        lists = [name for _, name in appends]
        items = {k: self.ctx.namer.new(f"{name}_item") for k, name in appends}
        body = [
            cst.SimpleStatementLine(
                [cst.Assign([cst.AssignTarget(cst.Name(items[k]))], _append_target(stmt)[1])],
                leading_lines=stmt.leading_lines,
            )
            if k in items
            else stmt
            for k, stmt in enumerate(body)
        ]
        state = self.carried(original, body, None, exclude=[*form.targets, *items.values()], after=after)
        if isinstance(state, Refusal):
            return state
        rows = set(form.targets) - set(form.indices)
        changed = rows & block_effects(as_written(body, self.ctx.runtime), self.ctx.mutating_helpers).mutated
        if changed:
            return Refusal(
                f"the loop variable '{sorted(changed)[0]}' (a row of what the loop iterates) is changed in place"
            )
        kept = {state.names[k] for k in state.kept}
        written = _row_writes(body, kept, form.indices[0]) if form.helper == "for_range" else {}
        reads = {}
        if form.helper == "for_range":  # x[i] -> _ub.row(x_row, x, i): the scan slices x for its steps
            names = _row_reads(body, form.indices[0], [*state.names, *form.targets], self.ctx.mutating_helpers)
            reads = {name: self.ctx.namer.new(f"{name}_row") for name in names}
            if reads:
                from_rows = _FromRows(form.indices[0], reads, self.ctx)
                body = [transform(s, from_rows) for s in body]
        if form.indices:
            rows_changed = _RowsChanged(form.indices)
            for s in as_written(body, self.ctx.runtime):
                read(s, rows_changed)
            if rows_changed.found:
                return Refusal(
                    "a row taken with the loop index is changed in place (under export it is a copy): "
                    "write it back with an assignment, e.g. out[i] = out[i] * 2"
                )
            at = AtSubscripts(form.indices, self.ctx.runtime, self.ctx.origins)
            body = [transform(s, at) for s in body]
        for name, k in written.items():  # out[i] = v -> out = _ub.write_row(out, i, v)
            value = body[k].body[0].value
            call = self.ctx.runtime_call("write_row", cst.Name(name), cst.Name(form.indices[0]), value)
            line = body[k].with_changes(body=[cst.Assign([cst.AssignTarget(cst.Name(name))], call)])
            self.ctx.origins.inherit(line, body[k])
            body[k] = line
        keywords = {"carry": cst.Tuple([cst.Element(cst.Name(n)) for n in state.names]), **state.keywords()}
        if written:
            keywords["rows"] = tuple_node([cst.Integer(str(k)) for k, n in enumerate(state.names) if n in written])
        if reads:
            keywords["reads"] = tuple_node([cst.Name(name) for name in reads])
        keywords.update(form.keywords)
        stops = [k for k, n in enumerate(state.names) if n in self.ctx.stop_flags]
        if stops:  # (eagerly the loop ends once one is set: its remaining steps would do nothing)
            keywords["stops"] = tuple_node([cst.Integer(str(k)) for k in stops])
        if lists:
            keywords["appends"] = cst.Tuple([cst.Element(cst.Name(n)) for n in lists])
            self._stacked.update(lists)
        if last is not None and stops:
            return Refusal(f"the loop variable '{last.names[0]}' is used after a loop a break may stop")
        returns = [*state.names, *items.values()]
        function = Function("body", [*form.targets, *reads.values(), *state.names], body, returns)
        after = [*([last.statement] if last is not None else []), *after]
        return LoopPlan(form.helper, [function], [form.over, "body"], keywords, [*state.names, *lists], after)

    def _last_item(self, original, form: Iteration, body, live) -> _Last | Refusal | None:
        """``row = _ub.last_item(x, 'row')`` after the loop, for loop variables read after it: the
        loop op leaves them unbound. Refused where the loop may leave an earlier value of theirs (an
        empty loop keeps it) or the body rebinds what the loop iterates."""
        names = [n for n in form.targets if n in live]
        if not names:
            return None
        if set(form.targets) & self.facts.before(original):
            return Refusal(f"the loop variable '{names[0]}' is used after the loop and bound before it")
        if expr_reads(form.over) & block_writes(as_written(body, self.ctx.runtime)):
            return Refusal(f"the loop variable '{names[0]}' is used after a loop that rebinds what it iterates")
        helper = "last_index" if form.helper == "for_range" else "last_item"
        args = [cst.Arg(form.over), *(cst.Arg(cst.SimpleString(repr(n))) for n in form.targets)]
        args += [keyword(k, v) for k, v in form.keywords.items()]
        call = cst.Call(cst.Attribute(cst.Name(self.ctx.runtime), cst.Name(helper)), args)
        targets = [cst.Name(n) for n in form.targets]
        target = targets[0] if len(targets) == 1 else cst.Tuple([cst.Element(t) for t in targets], lpar=[], rpar=[])
        return _Last(names, cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(target)], call)]))
