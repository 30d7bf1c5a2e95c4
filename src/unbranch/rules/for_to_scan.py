"""``for`` over a symbolic length -> a body function run by ``_ub.for_range`` / ``_ub.for_each``.

    for i in range(x.shape[0]):                  def loop_body_1(i, x, z, acc):
        z[i] = ((x[i] - y) ** 2).sum(-1)    ->       z[i] = ((x[i] - y) ** 2).sum(-1)
        acc += x[i]                                  acc += x[i]
                                                     return acc
                                                 acc = _ub.for_range(x.shape[0], loop_body_1,
                                                                     reads=(x,), rows=(z,), carry=(acc,),
                                                                     mutated=(0,), kept=(0,))

Under export with a dynamic length this is a ``scan``; otherwise the same Python loop. The
index may only be used as ``t[i]`` on tensors the body reads (``reads``) or fills row by
row (``rows``); ``mutated`` lists the carried values changed in place (``acc += ...``),
which a traced step changes on a clone and which are copied back after the loop; ``kept``
those never rebound, which come back as the original objects. The body
carries exactly the variables the next step or the code after the
loop reads. Anything else (``break``, ``x[i - 1]``, ...) stays a plain loop.
"""

from __future__ import annotations

import libcst as cst

from ..analysis.effects import block_effects
from ..analysis.names import block_writes
from ..passes import Pass, Rewrite, Unchanged
from ._loops import carried, changed_in_place, loop_blocker, runtime_call
from ._util import branch_def, call_statement, explicit_super, in_order


class _IndexUses(cst.CSTVisitor):
    """How a body uses the loop index ``i``: ``t[i]`` reads, ``z[i] = v`` rows, anything else."""

    def __init__(self, index: str, ctx):
        self.index, self.ctx = index, ctx
        self.subscripted: set[str] = set()  # t in t[i]
        self.bare: dict[str, int] = {}  # other uses of each name
        self.passed: set[str] = set()  # names only passed on to branch functions unbranch wrote

    def _is_index(self, node: cst.Subscript) -> bool:
        s = node.slice
        return (
            isinstance(node.value, cst.Name)
            and len(s) == 1
            and isinstance(s[0].slice, cst.Index)
            and isinstance(s[0].slice.value, cst.Name)
            and s[0].slice.value.value == self.index
        )

    def visit_Subscript(self, node):
        if self._is_index(node):
            self.subscripted.add(node.value.value)
            return False
        return True

    def visit_Param(self, node):
        return False

    def visit_Call(self, node):
        func = node.func
        if (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.value.value == self.ctx.runtime
        ):
            for arg in node.args:  # operands handed to a branch function keep their meaning there
                if isinstance(arg.value, cst.Tuple):
                    for el in arg.value.elements:
                        if isinstance(el.value, cst.Name):
                            self.passed.add(el.value.value)
                else:
                    arg.visit(self)
            return False
        return True

    def visit_Attribute(self, node):
        node.value.visit(self)
        return False

    def visit_Arg(self, node):
        node.value.visit(self)
        return False

    def visit_Name(self, node):
        self.bare[node.value] = self.bare.get(node.value, 0) + 1


def _row_targets(body, index: str) -> list[str]:
    """``z`` for each top-level ``z[i] = value`` statement."""
    rows = []
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
            targets = stmt.body[0].targets
            t = targets[0].target
            if len(targets) == 1 and isinstance(t, cst.Subscript) and isinstance(t.value, cst.Name):
                s = t.slice
                if (
                    len(s) == 1
                    and isinstance(s[0].slice, cst.Index)
                    and isinstance(s[0].slice.value, cst.Name)
                    and s[0].slice.value.value == index
                ):
                    rows.append(t.value.value)
    return rows


class ForToScan(Pass):
    HANDLES = frozenset({"loop"})
    NEEDS = ("liveness",)
    EXAMPLES = [
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
                def loop_body_1(i, x, z, acc):
                    z[i] = ((x[i] - y) ** 2).sum(-1)
                    acc += x[i]
                    return acc
                acc = _ub.for_range(x.shape[0], loop_body_1, reads=(x,), rows=(z,), carry=(acc,), mutated=(0,), kept=(0,))
                return z, acc
            """,
        ),
        Rewrite(
            """
            def forward(self, x):
                total = x[0] * 0
                for row in x:
                    total = total + row.relu()
                return total
            """,
            """
            def forward(self, x):
                total = x[0] * 0
                def loop_body_1(row, total):
                    total = total + row.relu()
                    return total
                total = _ub.for_each(x, loop_body_1, carry=(total,))
                return total
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
    ]

    def leave_For(self, original: cst.For, updated: cst.For):
        ctx = self.ctx
        if not ctx.is_candidate_loop(original):
            return updated
        plan = self._plan(original, list(updated.body.body))
        if isinstance(plan, str):
            return self.leave_as_python(original, updated, plan, "for")
        params, helper, length, keywords, outputs = plan
        (name,) = ctx.namer.numbered("loop", ("body",))
        body = explicit_super(updated.body.body, ctx)
        fn = branch_def(name, params, body, outputs).with_changes(leading_lines=updated.leading_lines)
        stmt = call_statement(outputs, runtime_call(ctx, helper, [length, cst.Name(name)], **keywords))
        ctx.note(original, "scan", f"carry: {', '.join(outputs) or '-'}")
        return cst.FlattenSentinel([fn, stmt])

    def _plan(self, node: cst.For, body):
        if node.orelse is not None:
            return "a for loop with an else clause"
        if not isinstance(node.target, cst.Name):
            return "a for loop whose target is not a single name"
        why = loop_blocker(body)
        if why:
            return why
        index = node.target.value
        if index in self.facts.live_out.get(node, set()):
            return f"the loop variable '{index}' is used after the loop"
        state = carried(node, body, None, self.facts, self.ctx, exclude=(index,))
        if isinstance(state, str):
            return state
        it = node.iter
        mutated = changed_in_place(body, state, self.ctx)
        if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "range"):
            return [index, *state], "for_each", it, {"carry": state, **mutated}, state
        uses = _IndexUses(index, self.ctx)
        for s in body:
            s.visit(uses)
        if uses.bare.get(index):
            return f"the loop index '{index}' is used other than as x[{index}]"
        writes = block_writes(body)
        rows = _row_targets(body, index)
        defined = self.facts.defined.get(node, set())
        reads = in_order(uses.subscripted - set(rows) - writes, body)
        for name in (*reads, *rows):
            if uses.bare.get(name) or name not in defined:
                return f"'{name}' is used in the loop other than as {name}[{index}]"
        changed = set(reads) & block_effects(body, self.ctx.mutating_helpers).mutated
        if changed:
            return f"'{sorted(changed)[0]}' is read as {sorted(changed)[0]}[{index}] and changed in place in the loop"
        keywords = {"reads": reads, "rows": rows, "carry": state, **mutated}
        return [index, *reads, *rows, *state], "for_range", it.args[0].value, keywords, state
