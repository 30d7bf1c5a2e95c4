"""What the rules check before they lower a construct: blockers, lost effects, Python values."""

from __future__ import annotations

import libcst as cst

from ..analysis.effects import CONTAINER_METHODS, block_effects
from ..analysis.names import OwnScope, block_reads, block_writes
from ..analysis.walk import read


class _Blockers(OwnScope, cst.CSTVisitor):
    """Constructs that cannot move into a branch function, with the reason."""

    def __init__(self, private=frozenset()) -> None:
        self.found: list[tuple[cst.CSTNode, str]] = []
        self.private = private  # containers only the function sees: deleting their entries is no effect
        self.loops = 0
        self.shelter = 0  # inside with/try: a return there cannot become a branch output
        self.final = set()  # ids of returns ending a with body: the with returns on every path

    def _loop(self, node):
        self.loops += 1

    def _unloop(self, node):
        self.loops -= 1

    visit_For = visit_While = _loop
    leave_For = leave_While = _unloop

    def visit_With(self, node):
        self.shelter += 1
        last = node.body.body[-1] if node.body.body else None
        if isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], cst.Return):
            self.final.add(id(last.body[-1]))

    def leave_With(self, node):
        self.shelter -= 1

    def visit_Try(self, node):
        self.found.append((node, "a try statement in a branch"))
        return False

    visit_TryStar = visit_Try

    def visit_Return(self, node):
        if self.loops or (self.shelter and id(node) not in self.final):
            self.found.append((node, "a return inside a loop or with block in a branch"))

    def _jump(self, node):
        if not self.loops:
            self.found.append((node, "break/continue leaving the branch"))

    visit_Break = visit_Continue = _jump

    def visit_Yield(self, node):
        self.found.append((node, "yield in a branch"))

    def visit_Await(self, node):
        self.found.append((node, "await in a branch"))

    def visit_Global(self, node):
        self.found.append((node, "global/nonlocal in a branch"))

    visit_Nonlocal = visit_Global

    def visit_Del(self, node):
        targets = node.target.elements if isinstance(node.target, cst.Tuple) else [cst.Element(node.target)]
        entries = [t.value for t in targets if isinstance(t.value, cst.Subscript)]
        if len(entries) < len(targets) or not all(
            isinstance(t.value, cst.Name) and t.value.value in self.private for t in entries
        ):
            self.found.append((node, "del in a branch"))

    def visit_Call(self, node):
        if isinstance(node.func, cst.Name) and node.func.value in ("locals", "vars", "exec", "eval") and not node.args:
            self.found.append((node, f"{node.func.value}() in a branch"))


def blockers(stmts, private=frozenset()) -> list[tuple[cst.CSTNode, str]]:
    v = _Blockers(private)
    for s in stmts:
        read(s, v)
    return v.found


class _Unstructured(cst.CSTTransformer):
    """A block without its statements that change only the structure of ``private`` containers
    (``del c[k]``, ``c[k] = v``, ``c.append(v)``): what is left changes their entries, if anything."""

    def __init__(self, private) -> None:
        self.private = private

    def _named(self, expr) -> bool:
        return isinstance(expr, cst.Name) and expr.value in self.private

    def leave_SimpleStatementLine(self, original, updated):
        kept = [small for small in updated.body if not self._structural(small)]
        return updated.with_changes(body=kept or [cst.Pass()])

    def _structural(self, small) -> bool:
        if isinstance(small, cst.Del):
            return isinstance(small.target, cst.Subscript) and self._named(small.target.value)
        if isinstance(small, cst.Assign):
            targets = [t.target for t in small.targets]
            return all(isinstance(t, cst.Subscript) and self._named(t.value) for t in targets)
        call = small.value if isinstance(small, cst.Expr) else None
        f = call.func if isinstance(call, cst.Call) else None
        return isinstance(f, cst.Attribute) and f.attr.value in CONTAINER_METHODS and self._named(f.value)


def entries_changed(stmts, private, mutating_helpers) -> frozenset:
    """The ``private`` containers whose entries (tensors) ``stmts`` change in place, not only their structure."""
    stripped = [s.visit(_Unstructured(private)) for s in stmts]
    return block_effects(stripped, mutating_helpers).mutated & private


def lost_effect(node, stmts, visible, ctx, where: str) -> str | None:
    """Why turning ``stmts`` (the body of ``node``) into a function would lose a side effect, or None.

    ``visible`` are the names bound before ``node``: a container among them changed in the
    body cannot be carried out; neither can attribute writes, nor a rebinding or a change in
    place that a nested function defined elsewhere and run in the body would have seen.
    """
    effects = block_effects(stmts, ctx.mutating_helpers)
    if effects.state:
        return f"{effects.state[0][1]} in {where} (Python state and parameters cannot leave a torch.cond/scan body)"
    changed = effects.containers & visible
    if changed:
        return f"the container '{sorted(changed)[0]}' is changed in {where} (torch.cond/scan cannot return that)"
    outside = ctx.closures_outside(node)
    writes, reads = (block_writes(stmts), block_reads(stmts)) if outside else ((), ())
    for c in outside:
        if c.name not in reads:  # only a closure run in the body sees its locals
            continue
        stale = c.reads & writes
        if stale:
            return f"'{sorted(stale)[0]}' is rebound in {where} and read by the nested function '{c.name}'"
        # the body changes a clone of it (the original is written back after the op): the function sees the original
        stale = c.reads & effects.mutated
        if stale:
            return f"'{sorted(stale)[0]}' is changed in place in {where} and read by the nested function '{c.name}'"
        if c.rebinds and c.name in effects.calls:
            return f"the nested function '{c.name}' called in {where} rebinds '{sorted(c.rebinds)[0]}'"
    return None


class _Unconverted(cst.CSTVisitor):
    def __init__(self, runtime: str):
        self.runtime, self.found = runtime, False

    def visit_Call(self, node) -> bool:
        f = node.func
        self.found |= (
            isinstance(f, cst.Attribute)
            and isinstance(f.value, cst.Name)
            and f.value.value == self.runtime
            and f.attr.value in ("unconverted", "unconverted_loop")
        )
        return not self.found


def holds_unconverted(node: cst.CSTNode, runtime: str) -> bool:
    """Does ``node`` hold a construct an earlier pass left as Python (``_ub.unconverted...``)?"""
    v = _Unconverted(runtime)
    read(node, v)
    return v.found


class _PythonValues(OwnScope, cst.CSTVisitor):
    """Does a block bind one of ``names`` to (or return) a value torch.cond cannot output?"""

    LITERALS = (cst.Float, cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)

    def __init__(self, names):
        self.names, self.found = set(names), False
        self.returns = self.nones = 0  # returns seen, of which of None (the function's result on both sides)

    def _python(self, value) -> bool:
        if isinstance(value, (cst.Tuple, cst.List)):
            return any(self._python(el.value) for el in value.elements)
        return isinstance(value, self.LITERALS) or (
            isinstance(value, cst.Name) and value.value in ("None", "True", "False")
        )

    def visit_Assign(self, node):
        for t in node.targets:
            pairs = (
                zip(t.target.elements, node.value.elements)
                if isinstance(t.target, cst.Tuple) and isinstance(node.value, cst.Tuple)
                else [(t, node)]
            )
            for target, value in pairs:
                if isinstance(target.target if hasattr(target, "target") else target.value, cst.Name):
                    name = (target.target if hasattr(target, "target") else target.value).value
                    self.found |= name in self.names and self._python(value.value)

    def visit_Return(self, node):
        self.returns += 1
        if node.value is None or (isinstance(node.value, cst.Name) and node.value.value == "None"):
            self.nones += 1
        else:
            self.found |= self._python(node.value)


def binds_python_values(stmts, names) -> bool:
    """True when a branch plainly produces None/bool/float/str for an output (cond cannot); a
    function returning None on every path of both branches returns nothing from a cond (it can)."""
    v = _PythonValues(names)
    for s in stmts:
        read(s, v)
    return v.found or 0 < v.nones < v.returns


class _EntriesBound(OwnScope, cst.CSTVisitor):
    """Names whose entries a block binds or deletes (``buf[0] = v``, ``del d[k]``): a list's or dict's
    entries rebound there, where ``buf[0] += v`` and ``buf[0].add_(v)`` change the entry in place."""

    def __init__(self) -> None:
        self.found: set[str] = set()

    def _target(self, target) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self._target(el.value)
        elif isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
            self.found.add(target.value.value)

    def visit_AssignTarget(self, node) -> None:
        self._target(node.target)

    def visit_AnnAssign(self, node) -> None:
        self._target(node.target)

    def visit_Del(self, node) -> None:
        self._target(node.target)


def entries_bound(stmts) -> set[str]:
    """Names whose entries ``stmts`` bind or delete (``_EntriesBound``)."""
    v = _EntriesBound()
    for s in stmts:
        read(s, v)
    return v.found
