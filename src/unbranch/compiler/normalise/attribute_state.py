"""Attributes set inside a converted ``if`` or loop -> a local for the construct, written back after it.

    if x.sum() > 0:                 self_count = self.count
        self.count += 1      ->     if x.sum() > 0:
                                        self_count += 1
                                    _ub.store_attribute(self, "count", self_count)

No branch function or loop body can set an attribute (its state would not leave torch.cond or
scan), so IfToCond, ForToScan and WhileToLoop refuse one. A local they carry in and out like
any other. Eagerly nothing changes: the local is the attribute's own object, so ``+=`` and
``.add_()`` on a tensor change the attribute in place, and ``store_attribute`` binds a new
value only where the construct bound one (``self.n = self.n + 1``, an int ``+= 1``). While
torch exports, the write-back is the buffer's update in place (runtime/state.py).

The handle is any name the construct does not bind: ``self``, a hook's ``module``
(``module.peak.copy_(m)``), an output object (``out.loss = l``). Only where every use of its
attributes in the construct is through the local: not read in a nested function or lambda,
the handle never rebound there, no ``del``; and a handle other than ``self`` not used there
in another way (``f(out)`` would see the attribute as it was). A change through a view
(``self.w.T``, ``self.loc.data.copy_(m)``) is one of the attribute's tensor; ``self.w.data`` becomes
``_ub.data(self_w)``, which is ``.data`` eagerly and ``detach()`` under export (a ``.data`` tensor
escapes the trace). The change is written back into a parameter without grad, as eager made it.
"""

from __future__ import annotations

import ast

import libcst as cst

from ..analysis.classify import STATIC
from ..analysis.effects import VIEW_ATTRIBUTES, in_place
from ..analysis.names import reads_of
from ..analysis.walk import read, transform
from ..passes import IF, LOOP, Kind, Pass, Rewrite, Unchanged


def _handle_attribute(expr) -> bool:
    """``handle.name`` (then any subscripts or views: ``.data``), ``name`` no view of a tensor."""
    while isinstance(expr, ast.Subscript) or (isinstance(expr, ast.Attribute) and expr.attr in VIEW_ATTRIBUTES):
        expr = expr.value
    return isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.attr not in VIEW_ATTRIBUTES


def _sets_attribute(node, classifier) -> bool:
    """A converted ``if``/loop in which ``handle.name`` (or a row of it) is assigned or changed in place."""
    if not (IF.finds(node, classifier) if isinstance(node, ast.If) else LOOP.finds(node, classifier)):
        return False
    for sub in ast.walk(node):
        if isinstance(sub, (ast.AugAssign, ast.AnnAssign)) and _handle_attribute(sub.target):
            return True
        if isinstance(sub, ast.Assign) and any(_handle_attribute(t) for t in sub.targets):
            return True
        f = sub.func if isinstance(sub, ast.Call) else None
        if isinstance(f, ast.Attribute) and f.attr.endswith("_") and _handle_attribute(f.value):
            return True
    return False


def _handle_and_attribute(expr) -> tuple[str, str] | None:
    """(handle, name) for ``handle.name`` (then any subscripts or views: ``self.w.data``), ``name`` no view
    of a tensor: a change through the view is one of the attribute's tensor."""
    while isinstance(expr, cst.Subscript) or (isinstance(expr, cst.Attribute) and expr.attr.value in VIEW_ATTRIBUTES):
        expr = expr.value
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.attr.value not in VIEW_ATTRIBUTES:
        return expr.value.value, expr.attr.value
    return None


# an attribute (or a row of one) assigned, or a method changing something in place, somewhere in the text
_WORD = r"\.\w+(?:\[[^\]\n]*\])?\s*(?:[-+*/%@&|^]|//|\*\*|<<|>>)?=(?!=)|\.\w+_\("
ATTRIBUTE = Kind("attribute", _WORD, (ast.If, ast.For, ast.While), _sets_attribute)


class _Attributes(cst.CSTVisitor):
    """The attributes of ``owner`` a statement sets or changes in place, and whether any is rebound."""

    def __init__(self, owner: str):
        self.owner = owner
        self.changed: dict[str, bool] = {}  # attribute -> bound anew (``=``/``+=``), not only changed in place
        self.blocked = False  # a use the local cannot stand for
        self.uses: dict[str, int] = {}  # attribute -> how often ``self.name`` is written in the statement
        self.bound: dict[str, int] = {}  # ... of which as the whole target of ``=`` (no read of it)
        self.names = 0  # how often the handle's name is written in the statement

    def _own(self, expr) -> str | None:
        """``name`` for ``self.name`` (then any subscripts), else None."""
        found = _handle_and_attribute(expr)
        return found[1] if found is not None and found[0] == self.owner else None

    def used_otherwise(self) -> bool:
        """Is the handle itself used in the statement, not only its attributes?"""
        return self.names > sum(self.uses.values())

    def visit_Name(self, node):
        self.names += node.value == self.owner

    def _set(self, target, rebinds: bool) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._set(element.value, rebinds)
            return
        if isinstance(target, cst.Name) and target.value == self.owner:
            self.blocked = True
        name = self._own(target)
        if name is not None:
            self.changed[name] = self.changed.get(name, False) or (rebinds and isinstance(target, cst.Attribute))

    def _bind(self, target) -> None:
        """A target of ``=``: ``self.name`` there is no read of the attribute."""
        for element in target.elements if isinstance(target, (cst.Tuple, cst.List)) else [target]:
            name = self._own(element.value if isinstance(element, cst.BaseElement) else element)
            if isinstance(element, cst.Attribute) and name is not None:
                self.bound[name] = self.bound.get(name, 0) + 1
        self._set(target, True)

    def visit_Attribute(self, node):
        if isinstance(node.value, cst.Name) and node.value.value == self.owner:
            self.uses[node.attr.value] = self.uses.get(node.attr.value, 0) + 1

    def unread(self) -> set[str]:
        """The attributes the statement only binds: they may not exist before it, so no local reads them."""
        return {name for name in self.changed if self.uses.get(name, 0) == self.bound.get(name, 0)}

    def visit_Assign(self, node):
        for t in node.targets:
            self._bind(t.target)

    def visit_AugAssign(self, node):
        self._set(node.target, True)

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self._bind(node.target)

    def visit_Call(self, node):
        f = node.func
        if isinstance(f, cst.Attribute) and in_place(f.attr.value):
            self._set(f.value, False)

    def visit_Del(self, node):
        self.blocked = True

    def _nested(self, node) -> bool:
        self.blocked |= self.owner in reads_of([node])
        return False

    visit_FunctionDef = visit_ClassDef = visit_Lambda = _nested

    def visit_For(self, node):
        self._set(node.target, True)

    def visit_NamedExpr(self, node):
        self._set(node.target, True)


class _Local(cst.CSTTransformer):
    """``self.name`` -> the local, for the attributes given; ``self.name.data`` -> ``_ub.data(local)``."""

    def __init__(self, owner: str, names: dict[str, str], runtime: str):
        self.owner, self.names, self.runtime = owner, names, runtime

    def leave_Attribute(self, original, updated):
        if isinstance(updated.value, cst.Name) and updated.value.value == self.owner:
            local = self.names.get(updated.attr.value)
            if local is not None:
                return cst.Name(local)
        local = updated.value.value if isinstance(updated.value, cst.Name) else None
        if updated.attr.value == "data" and isinstance(original.value, cst.Attribute) and local in self.names.values():
            call = cst.Attribute(cst.Name(self.runtime), cst.Name("data"))
            return cst.Call(call, [cst.Arg(updated.value)])
        return updated


class AttributeState(Pass):
    HANDLES = frozenset({ATTRIBUTE})
    EXAMPLES = [
        Rewrite(
            """
            def forward(self, x):
                if x.abs().max() > 10:
                    self.clipped += 1  # a buffer counting the clipped batches
                    x = x.clamp(-10, 10)
                return x
            """,
            """
            def forward(self, x):
                self_clipped = self.clipped
                if x.abs().max() > 10:
                    self_clipped += 1  # a buffer counting the clipped batches
                    x = x.clamp(-10, 10)
                _ub.store_attribute(self, "clipped", self_clipped)
                return x
            """,
        ),
        Rewrite(  # changed in place only: nothing to write back
            """
            def forward(self, x):
                for i in range(x.shape[0]):
                    self.seen[i % 4].add_(x[i].sum())
                return x
            """,
            """
            def forward(self, x):
                self_seen = self.seen
                for i in range(x.shape[0]):
                    self_seen[i % 4].add_(x[i].sum())
                return x
            """,
        ),
        Rewrite(  # a forward hook's module: its buffer changed in place, as a local would be
            """
            def hook(module, args, output):
                if output.sum() > 0:
                    module.seen.add_(output.sum())
            """,
            """
            def hook(module, args, output):
                module_seen = module.seen
                if output.sum() > 0:
                    module_seen.add_(output.sum())
            """,
        ),
        Rewrite(  # an output object's field, bound first here: read only where it exists
            """
            def forward(self, x):
                out = Output(hidden=x * 2)
                if x.sum() > 0:
                    out.loss = x.pow(2).mean()
                return out
            """,
            """
            def forward(self, x):
                out = Output(hidden=x * 2)
                out_loss = _ub.attribute(out, "loss")
                if x.sum() > 0:
                    out_loss = x.pow(2).mean()
                _ub.store_attribute(out, "loss", out_loss)
                return out
            """,
        ),
        Rewrite(  # through ``.data`` (no autograd): eagerly the same, a ``detach()`` the trace records under export
            """
            def forward(self, x):
                if x.abs().max() > 8:
                    self.w.data.clamp_(-1.0, 1.0)
                return x @ self.w
            """,
            """
            def forward(self, x):
                self_w = self.w
                if x.abs().max() > 8:
                    _ub.data(self_w).clamp_(-1.0, 1.0)
                return x @ self.w
            """,
        ),
        Unchanged(  # the object itself is used in the construct: it would see the field as it was
            """
            def forward(self, x):
                out = Output(hidden=x * 2)
                if x.sum() > 0:
                    out.loss = x.pow(2).mean()
                    log(out)
                return out
            """
        ),
        Unchanged(  # a Python condition: the if stays as written
            """
            def forward(self, x):
                if self.training:
                    self.steps += 1
                return x
            """
        ),
        Unchanged(  # read in a nested function, which would still see the attribute
            """
            def forward(self, x):
                if x.sum() > 0:
                    self.total += 1

                    def shift(v):
                        return v + self.total

                    x = shift(x)
                return x
            """
        ),
    ]

    def __init__(self, fn, ctx) -> None:
        super().__init__(fn, ctx)
        self._inside = None  # the outermost converted construct being visited

    def visit_If(self, node) -> bool:
        return self._outermost(node)

    visit_For = visit_While = visit_If

    def leave_If(self, original, updated):
        return self._hoisted(original, updated)

    leave_For = leave_While = leave_If

    def _outermost(self, node) -> bool:
        """Only the outermost converted construct gets the locals (the ones inside use the same);
        converted as the screen's IF and LOOP say: a ``for`` over ``self.layers`` is no such loop."""
        if isinstance(node, cst.For):
            converted = self.ctx.classifier.loop_candidate(node.iter)
        else:
            converted = self.ctx.condition_kind(node) != STATIC
        if self._inside is None and converted:
            self._inside = node
        return True

    def _hoisted(self, original, updated):
        if self._inside is not original:
            return updated
        self._inside = None
        handles = _Handles()
        read(updated, handles)
        before, after = [], []
        for owner in handles.found:
            found = _Attributes(owner)
            read(updated, found)
            own = owner == self.ctx.self_name
            if found.blocked or not found.changed or (own and found.unread()) or (not own and found.used_otherwise()):
                continue
            names = {attr: self.ctx.namer.new(f"{owner}_{attr}") for attr in found.changed}
            updated = transform(updated, _Local(owner, names, self.ctx.runtime))
            first = found.unread()  # (another object's field bound first here: it may not exist before)
            before += [
                cst.SimpleStatementLine(
                    [cst.Assign([cst.AssignTarget(cst.Name(local))], self._read(owner, attr, first))]
                )
                for attr, local in names.items()
            ]
            after += [
                cst.SimpleStatementLine(
                    [
                        cst.Expr(
                            self.ctx.runtime_call(
                                "store_attribute", cst.Name(owner), cst.SimpleString(f'"{attr}"'), cst.Name(local)
                            )
                        )
                    ]
                )
                for attr, local in names.items()
                if found.changed[attr]
            ]
        if not before:
            return updated
        before[0] = before[0].with_changes(leading_lines=updated.leading_lines)
        body = updated.with_changes(leading_lines=[])
        for statement in (*before, *after):
            self.ctx.origins.inherit(statement, original)
        return cst.FlattenSentinel([*before, body, *after])

    def _read(self, owner: str, attr: str, first: set):
        if attr in first:
            return self.ctx.runtime_call("attribute", cst.Name(owner), cst.SimpleString(f'"{attr}"'))
        return cst.Attribute(cst.Name(owner), cst.Name(attr))


class _Handles(cst.CSTVisitor):
    """The names whose attributes a statement sets or changes in place, in the order first met."""

    def __init__(self):
        self.found: list[str] = []

    def _target(self, expr) -> None:
        if isinstance(expr, (cst.Tuple, cst.List)):
            for element in expr.elements:
                self._target(element.value)
            return
        found = _handle_and_attribute(expr)
        if found is not None and found[0] not in self.found:
            self.found.append(found[0])

    def visit_Assign(self, node):
        for t in node.targets:
            self._target(t.target)

    def visit_AugAssign(self, node):
        self._target(node.target)

    def visit_AnnAssign(self, node):
        self._target(node.target)

    def visit_Call(self, node):
        if isinstance(node.func, cst.Attribute) and in_place(node.func.attr.value):
            self._target(node.func.value)
