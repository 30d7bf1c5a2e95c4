"""A comprehension over the rows of a tensor -> the loop appending to a list that it stands for.

    y = torch.stack([torch.tanh(r) for r in x])    ->    items = []
                                                         for r in x:
                                                             items.append(torch.tanh(r))
                                                         y = torch.stack(items)

A comprehension iterates in Python: over a dimension that is dynamic under export, it
fixes the length to the example's ("Constraints violated"). As the loop it stands for, the
loop rule takes it (a scan, or one batched computation, whose per-step outputs the list's
consumer stacks): ``torch.stack``/``torch.cat`` of it, ``sum``/``any``/``all`` of it (the
runtime's forms take the stacked rows), or a list kept as a list. One ``for`` clause, no
filter (how many items it keeps would be data), over what a loop rule takes (a tensor, its
rows, ``range`` of a size; an argument only in a function torch named, being as often a
list elsewhere). ``next(e for r in x if c)`` keeps its one filter: the loop appends each
``c``, and ``_ub.first`` takes the first row whose test holds (an argmax under export, the
StopIteration a check). A variable the function also uses is renamed (a comprehension's own
variable does not leak, a loop's does). A generator is taken only as
the argument of those consumers, which evaluate all of it (``any`` then sees every item;
the items are the same, and so is the answer).
"""

from __future__ import annotations

import ast
import functools

import libcst as cst

from ..analysis.classify import TENSOR, as_ast, unbound, unbound_rows
from ..analysis.names import block_writes, param_names, reads_of, target_names
from ..passes import LOOP, Kind, Pass, Rewrite, Unchanged

# the consumers of a generator of rows: each evaluates all of it, in order
_CONSUMERS = {"sum", "any", "all"}
_TORCH_CONSUMERS = {"stack", "cat"}


def _over_rows(node, classifier) -> bool:  # (generous: the pass decides, see Comprehensions._rows)
    if len(node.generators) != 1:
        return False
    clause = node.generators[0]
    return len(clause.ifs) <= 1 and not clause.is_async and classifier.loop_candidate(clause.iter)


COMPREHENSION = Kind("comprehension", r"\bfor\b", (ast.ListComp, ast.GeneratorExp), _over_rows)


class Comprehensions(Pass):
    HANDLES = frozenset({COMPREHENSION})
    PRODUCES = frozenset({LOOP})
    EXPRESSIONS = True
    EXAMPLES = [
        Rewrite(
            """
            def forward(self, x: torch.Tensor):
                y = torch.stack([torch.tanh(r) * 2 for r in x])
                return y + 1
            """,
            """
            def forward(self, x: torch.Tensor):
                items = []
                for r in x:
                    items.append(torch.tanh(r) * 2)
                y = torch.stack(items)
                return y + 1
            """,
        ),
        Rewrite(
            """
            def forward(self, x: torch.Tensor):
                if any(row.sum() > 1.5 for row in x.unbind(0)):
                    return x * 0.5
                return x
            """,
            """
            def forward(self, x: torch.Tensor):
                items = []
                for row in x.unbind(0):
                    items.append(row.sum() > 1.5)
                if any(items):
                    return x * 0.5
                return x
            """,
        ),
        Rewrite(  # next() of a filtered generator: the tests in a loop, the first true one's row after it
            """
            def forward(self, x: torch.Tensor):
                row = next(row * 2 for row in x.unbind(0) if row.sum() > 0)
                return row + 1
            """,
            """
            def forward(self, x: torch.Tensor):
                items = []
                for row_1 in x.unbind(0):
                    items.append(row_1.sum() > 0)
                row = _ub.first(items, x, lambda row_1: row_1 * 2)
                return row + 1
            """,
        ),
        Unchanged(
            """
            def forward(self, x, sizes):
                kept = [r for r in x if r.sum() > 0]
                return torch.cat(kept), [n * 2 for n in sizes]
            """
        ),
    ]

    def __init__(self, fn, ctx):
        super().__init__(fn, ctx)
        self._statements: list = []  # the statements being visited (innermost last)
        self._hoisted: dict[int, list] = {}  # id of a statement -> the loops to run before it
        self._consumed: set[int] = set()  # ids of generators that are a consumer's argument
        self._first: dict[int, cst.Call] = {}  # id of a filtered generator -> the next() call it is given to
        self._filtered: dict[str, cst.GeneratorExp] = {}  # the list of tests -> the generator it stands for

    @functools.cached_property
    def _used(self) -> set[str]:
        """Names the function reads or binds (a comprehension's own variables are none of them)."""
        body = self.fn.body.body
        return reads_of(body) | set(param_names(self.fn)) | block_writes(body)

    def visit_Lambda(self, node) -> bool:
        return False  # (its body runs where it is called: no loop can run before it)

    def on_visit(self, node) -> bool:
        entered = super().on_visit(node)
        if entered and isinstance(node, _STATEMENTS):
            self._statements.append(node)
        return entered

    def on_leave(self, original, updated):
        if isinstance(original, _STATEMENTS) and self._statements and self._statements[-1] is original:
            self._statements.pop()
            loops = self._hoisted.pop(id(original), None)
            if loops:
                for made in loops:
                    self.ctx.origins.inherit(made, original)
                result = super().on_leave(original, updated)
                loops[0] = loops[0].with_changes(leading_lines=result.leading_lines)
                return cst.FlattenSentinel([*loops, result.with_changes(leading_lines=[])])
        return super().on_leave(original, updated)

    def visit_Call(self, node) -> None:
        f = node.func
        consumer = (isinstance(f, cst.Name) and f.value in _CONSUMERS) or (
            isinstance(f, cst.Attribute)
            and isinstance(f.value, cst.Name)
            and f.value.value == "torch"
            and f.attr.value in _TORCH_CONSUMERS
        )
        if consumer and node.args and isinstance(node.args[0].value, cst.GeneratorExp):
            self._consumed.add(id(node.args[0].value))
        if isinstance(f, cst.Name) and f.value == "next" and 1 <= len(node.args) <= 2:
            if isinstance(node.args[0].value, cst.GeneratorExp) and not any(a.keyword or a.star for a in node.args):
                self._first[id(node.args[0].value)] = node

    def leave_Call(self, original, updated):
        """``next(e for r in x if c)`` -> ``_ub.first(items, x, lambda r: e)`` after the loop appending each ``c``."""
        arg = original.args[0].value if original.args else None
        if arg is None or self._first.get(id(arg)) is not original:
            return updated
        first = updated.args[0].value
        if not isinstance(first, cst.Name):  # (the generator stayed: not over rows a loop rule takes)
            return updated
        generator = self._filtered.pop(first.value)
        clause = generator.for_in
        rows = unbound_rows(clause.iter) or clause.iter
        if isinstance(rows, cst.Call) and isinstance(rows.func, cst.Name) and rows.func.value == "range":
            # (Python's range() of a symbolic size would fix it to the example's: _ub.indices keeps it)
            rows = rows.with_changes(func=cst.Attribute(cst.Name(self.ctx.runtime), cst.Name("indices")))
        value = cst.Lambda(cst.Parameters([cst.Param(clause.target)]), generator.elt)
        args = [cst.Arg(first), cst.Arg(rows), cst.Arg(value), *(cst.Arg(a.value) for a in updated.args[1:])]
        return self.ctx.runtime_call("first", *(a.value for a in args))

    def leave_ListComp(self, original, updated):
        return self._hoist(self._own_names(updated))

    def _own_names(self, comp):
        """``comp`` with its variables renamed where the function uses the same names (the loop it
        becomes binds them in the function); unchanged where an inner scope could rebind them."""
        clash = target_names(comp.for_in.target) & self._used
        if not clash:
            return comp
        inner = _Scopes()
        comp.elt.visit(inner)
        for test in comp.for_in.ifs:
            test.visit(inner)
        if inner.found:
            return comp
        renamed = {name: self.ctx.namer.new(name) for name in sorted(clash)}
        rename = _Renamed(renamed)
        clause = comp.for_in
        clause = clause.with_changes(target=clause.target.visit(rename), ifs=[t.visit(rename) for t in clause.ifs])
        return comp.with_changes(elt=comp.elt.visit(rename), for_in=clause)

    def leave_GeneratorExp(self, original, updated):
        if id(original) in self._first or id(original) in self._consumed:
            updated = self._own_names(updated)
        if id(original) in self._first:
            clause = updated.for_in
            if len(clause.ifs) != 1 or not isinstance(clause.target, cst.Name):
                return updated
            made = self._hoist(updated, clause.ifs[0].test)
            if isinstance(made, cst.Name):
                self._filtered[made.value] = updated
            return made
        return self._hoist(updated) if id(original) in self._consumed else updated

    def _hoist(self, updated, test=None):
        """The list a loop before the statement builds: of the items, or of the ``test`` of each (next's)."""
        ctx = self.ctx
        clause = updated.for_in
        statement = self._statements[-1] if self._statements else None
        if not isinstance(statement, _ONCE):
            return updated  # (a while's test runs again at each step; nothing before it runs again)
        if clause.inner_for_in is not None or (clause.ifs and test is None) or clause.asynchronous is not None:
            return updated
        if not self._rows(clause.iter) or target_names(clause.target) & self._used:
            return updated  # (the loop's variable would leak into a name the function uses)
        items = ctx.namer.new("items")
        item = updated.elt if test is None else test
        append = cst.Call(cst.Attribute(cst.Name(items), cst.Name("append")), [cst.Arg(item)])
        loop = cst.For(clause.target, clause.iter, cst.IndentedBlock([cst.SimpleStatementLine([cst.Expr(append)])]))
        start = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(items))], cst.List([]))])
        self._hoisted.setdefault(id(statement), []).extend([start, loop])
        return cst.Name(items)

    def _rows(self, iterable) -> bool:
        """Rows a loop rule takes: plainly a tensor's (or ``range`` of a size); in a function torch named, also an
        argument's, which is a list as often as a tensor elsewhere (a list's loop would change code for nothing)."""
        classifier = self.ctx.classifier
        if not classifier.loop_candidate(iterable):
            return False
        if self.ctx.named:
            return True
        tree = as_ast(iterable)
        rows = unbound(tree)
        return classifier.kind(rows if rows is not None else tree) == TENSOR or _counted(tree)


class _Scopes(cst.CSTVisitor):
    """Is there a lambda or comprehension inside (which could bind a name of its own)?"""

    def __init__(self):
        self.found = False

    def visit_Lambda(self, node):
        self.found = True

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_Lambda


class _Renamed(cst.CSTTransformer):
    """The variables ``names`` renamed (not attributes' or keywords' names that happen to match)."""

    def __init__(self, names: dict):
        self.names = names

    def leave_Name(self, original, updated):
        return updated.with_changes(value=self.names[updated.value]) if updated.value in self.names else updated

    def leave_Attribute(self, original, updated):
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original, updated):
        return updated.with_changes(keyword=original.keyword)


def _counted(iterable: ast.expr) -> bool:
    """``range(...)`` (a loop candidate only for a symbolic size)."""
    return isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and iterable.func.id == "range"


_STATEMENTS = (cst.SimpleStatementLine, cst.BaseCompoundStatement)
# statements whose own expressions run once where they stand (an if's test, a for's iterable)
_ONCE = (cst.SimpleStatementLine, cst.If, cst.For, cst.With)
