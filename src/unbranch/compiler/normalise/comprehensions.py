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
list elsewhere); the variable must be a name the function uses nowhere else
(a comprehension's own variable does not leak, a loop's does). A generator is taken only as
the argument of those consumers, which evaluate all of it (``any`` then sees every item;
the items are the same, and so is the answer).
"""

from __future__ import annotations

import ast
import functools

import libcst as cst

from ..analysis.classify import TENSOR, as_ast, unbound
from ..analysis.names import block_writes, param_names, reads_of, target_names
from ..passes import LOOP, Kind, Pass, Rewrite, Unchanged

# the consumers of a generator of rows: each evaluates all of it, in order
_CONSUMERS = {"sum", "any", "all"}
_TORCH_CONSUMERS = {"stack", "cat"}


def _over_rows(node, classifier) -> bool:  # (generous: the pass decides, see Comprehensions._rows)
    if len(node.generators) != 1:
        return False
    clause = node.generators[0]
    return not clause.ifs and not clause.is_async and classifier.loop_candidate(clause.iter)


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

    def leave_ListComp(self, original, updated):
        return self._hoist(updated)

    def leave_GeneratorExp(self, original, updated):
        return self._hoist(updated) if id(original) in self._consumed else updated

    def _hoist(self, updated):
        ctx = self.ctx
        clause = updated.for_in
        statement = self._statements[-1] if self._statements else None
        if not isinstance(statement, _ONCE):
            return updated  # (a while's test runs again at each step; nothing before it runs again)
        if clause.inner_for_in is not None or clause.ifs or clause.asynchronous is not None:
            return updated
        if not self._rows(clause.iter) or target_names(clause.target) & self._used:
            return updated  # (the loop's variable would leak into a name the function uses)
        items = ctx.namer.new("items")
        append = cst.Call(cst.Attribute(cst.Name(items), cst.Name("append")), [cst.Arg(updated.elt)])
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


def _counted(iterable: ast.expr) -> bool:
    """``range(...)`` (a loop candidate only for a symbolic size)."""
    return isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and iterable.func.id == "range"


_STATEMENTS = (cst.SimpleStatementLine, cst.BaseCompoundStatement)
# statements whose own expressions run once where they stand (an if's test, a for's iterable)
_ONCE = (cst.SimpleStatementLine, cst.If, cst.For, cst.With)
