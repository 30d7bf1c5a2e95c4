"""What a block of statements does besides binding names: the side effects a rule must keep.

A branch or loop body that becomes a function loses every effect that does not travel
through its parameters and return values. ``block_effects`` lists them:

- ``mutated``: local names whose object may change in place (``x[i] = v``, ``x.add_(1)``,
  ``out=x``, ``inplace=True``, ``x += v``, a helper known to mutate its argument), followed
  back through aliases bound in the block (``v = x[0]; v.add_(1)`` mutates ``x``);
- ``containers``: names changed through list/dict/set methods (``aux.append(v)``);
- ``state``: writes to attributes (``self.cache = v``, ``self.buf.add_(1)``): Python state or
  parameters/buffers, which no branch output can carry;
- ``calls``: names of functions the block calls (a closure called there sees its cells).

Facts only: the rules decide what to do with them (write back, or leave the code as Python).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import libcst as cst

from .names import bound_values, def_free_reads, expr_reads, param_names, target_names
from .walk import read

# methods that return a view of (or the very) tensor they are called on
VIEW_METHODS = frozenset(
    "view view_as reshape reshape_as transpose t permute squeeze unsqueeze expand expand_as narrow select "
    "unfold chunk split tensor_split split_with_sizes unbind flatten unflatten diagonal movedim moveaxis "
    "swapaxes swapdims as_strided detach contiguous to type type_as float half double bfloat16 int long "
    "bool short char byte real imag values indices".split()
)
# torch.* functions that return a view of their first argument
VIEW_FUNCTIONS = frozenset(
    "narrow select transpose t permute squeeze unsqueeze chunk split tensor_split unbind flatten unflatten "
    "diagonal movedim moveaxis swapaxes swapdims as_strided detach reshape view_as_real view_as_complex".split()
)
VIEW_ATTRIBUTES = frozenset("T mT H mH real imag data".split())
# receivers of ``ns.fn_(t)`` that are namespaces of functions, not the tensor changed
FUNCTION_NAMESPACES = frozenset({"torch", "F", "nn", "functional", "init"})
CONTAINER_METHODS = frozenset("append extend insert remove clear update setdefault popitem reverse discard pop".split())
# list methods a tensor has too, without changing it (``v, i = x.sort()``): a mutation only as a statement
STATEMENT_ONLY_METHODS = frozenset({"sort"})


def in_place(method: str) -> bool:
    """Is ``method`` torch's in-place form (``add_``, ``masked_fill_``; not a dunder)?"""
    return method.endswith("_") and not method.endswith("__")


# values written out whose type makes ``x += v`` bind a new object (never a change in place)
_IMMUTABLE_DISPLAYS = (cst.Tuple, cst.SimpleString, cst.FormattedString, cst.ConcatenatedString, cst.Integer, cst.Float)


@dataclass(frozen=True)
class Effects:
    mutated: frozenset  # names whose object may change in place (aliases followed back)
    containers: frozenset  # names changed through container methods
    state: tuple  # (node, description) for each write to an attribute
    calls: frozenset  # plain names the block calls
    rebound: frozenset  # names bound other than by ``x op= v`` (after which ``x`` may be a new object)
    aliased: frozenset  # names bound to (a view of) another name's object, and those names


def _root(expr):
    """``x`` for ``x``, ``x[i]``, ``x.a.b``, ``x[i].T``; ``None`` for anything else."""
    while isinstance(expr, (cst.Subscript, cst.Attribute)):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _runtime(expr) -> bool:
    """``_ub`` (or the name the compiler chose for the runtime): its helpers' names (``int_``, ``select``)
    are no tensor methods; none changes what it is given in place."""
    return isinstance(expr, cst.Name) and expr.value.startswith("_ub")


def _through_attribute(expr) -> bool:
    """Does the chain reach its root through an attribute that is not a tensor view (``self.buf``)?"""
    while isinstance(expr, (cst.Subscript, cst.Attribute)):
        if isinstance(expr, cst.Attribute) and expr.attr.value not in VIEW_ATTRIBUTES:
            return True
        expr = expr.value
    return False


_CONSTANTS = frozenset({"None", "True", "False"})  # names to libcst, constants to Python: no object to share


def alias_roots(expr) -> set[str]:
    """Names whose object ``expr`` may be (or be a view of): what mutating its value may change."""
    if isinstance(expr, cst.Name):
        return set() if expr.value in _CONSTANTS else {expr.value}
    if isinstance(expr, (cst.Subscript, cst.Attribute)):
        return alias_roots(expr.value)
    if isinstance(expr, cst.Call):
        f = expr.func
        if isinstance(f, cst.Attribute):
            method = f.attr.value
            if _runtime(f.value):  # (``_ub.select(items, i)``: an item itself; ``_ub.data(w)``: w's tensor)
                return alias_roots(expr.args[0].value) if method in ("select", "data") and expr.args else set()
            if _root(f) == "torch":
                return alias_roots(expr.args[0].value) if method in VIEW_FUNCTIONS and expr.args else set()
            if method in VIEW_METHODS or in_place(method):
                return alias_roots(f.value)
        return set()
    if isinstance(expr, cst.IfExp):
        return alias_roots(expr.body) | alias_roots(expr.orelse)
    if isinstance(expr, (cst.Tuple, cst.List)):
        return set().union(*(alias_roots(el.value) for el in expr.elements))
    if isinstance(expr, cst.NamedExpr):
        return alias_roots(expr.value)
    return set()


class _Sites(cst.CSTVisitor):
    """Mutation sites, container updates, attribute writes, aliases and calls of a block."""

    def __init__(self, mutating_helpers):
        self.helpers = mutating_helpers if mutating_helpers is not None else {}
        self.mutated: set[str] = set()
        self.containers: set[str] = set()
        self.state: list = []
        self.aliases: dict[str, set[str]] = {}
        self.calls: set[str] = set()
        self.rebound: set[str] = set()
        self.immutable: dict[str, bool] = {}  # name -> is every binding seen an immutable display (a tuple...)

    def _store(self, target, node, what: str) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self._store(el.value, node, what)
            return
        if isinstance(target, cst.StarredElement):
            self._store(target.value, node, what)
            return
        if not isinstance(target, (cst.Subscript, cst.Attribute)):
            return
        if _through_attribute(target):
            self.state.append((node, what))
        root = _root(target)
        if root is not None:
            self.mutated.add(root)

    def _alias(self, target, value, unpacked: bool = False) -> None:
        roots = alias_roots(value)
        if isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self._alias(el.value, value, unpacked=True)
            return
        # ``outputs = (h,)`` binds a tuple written out (whose ``+=`` makes a new one); ``a, b = x, y`` does not
        display = not unpacked and isinstance(value, _IMMUTABLE_DISPLAYS)
        for name in target_names(target):
            self.aliases.setdefault(name, set()).update(roots)
            self.rebound.add(name)
            self.immutable[name] = self.immutable.get(name, True) and display

    def visit_Assign(self, node):
        kept = _kept_by_runtime(node)
        for t in node.targets:
            self._store(t.target, node, "an assignment to an attribute")
            if kept:
                elements = [el.value for el in t.target.elements] if isinstance(t.target, cst.Tuple) else [t.target]
                for i, el in enumerate(elements):
                    if i not in kept:
                        self._alias(el, node.value)
            else:
                self._alias(t.target, node.value)

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self._store(node.target, node, "an assignment to an attribute")
            self._alias(node.target, node.value)

    def visit_AugAssign(self, node):
        self._store(node.target, node, "an augmented assignment to an attribute")
        if isinstance(node.target, cst.Name):
            name = node.target.value
            if self.immutable.get(name):  # ``outputs = (h,)`` then ``outputs += (w,)``: a new tuple
                self.aliases.setdefault(name, set()).update(alias_roots(node.value))
                self.rebound.add(name)
            else:
                self.mutated.add(name)  # in place for tensors and lists, a rebinding otherwise

    def visit_Del(self, node):
        self._store(node.target, node, "a del of an attribute")
        self.rebound |= target_names(node.target)

    def _binds(self, node):
        self.rebound.add(node.name.value)

    visit_FunctionDef = visit_ClassDef = _binds

    def visit_ImportAlias(self, node):
        if node.asname is not None:
            self.rebound |= target_names(node.asname.name)
        else:
            self.rebound.add(_root(node.name) or "")

    def visit_WithItem(self, node):
        if node.asname is not None:
            self.rebound |= target_names(node.asname.name)

    def visit_ExceptHandler(self, node):
        if node.name is not None:
            self.rebound |= target_names(node.name.name)

    def visit_For(self, node):
        self._alias(node.target, node.iter)  # rows of a tensor are views of it

    def visit_NamedExpr(self, node):
        self._alias(node.target, node.value)

    def visit_Expr(self, node):
        f = node.value.func if isinstance(node.value, cst.Call) else None
        if isinstance(f, cst.Attribute) and f.attr.value in STATEMENT_ONLY_METHODS:
            self._mutate(f.value, node, f".{f.attr.value}() on an attribute")
            self.containers |= alias_roots(f.value)

    def visit_Call(self, node):
        f = node.func
        if isinstance(f, cst.Name):
            self.calls.add(f.value)
        receiver = f.value if isinstance(f, cst.Attribute) else None
        method = f.attr.value if isinstance(f, cst.Attribute) else None
        if method is not None and in_place(method) and not _runtime(receiver):
            if _root(receiver) in FUNCTION_NAMESPACES:
                self._mutate_arg(node, 0, "an in-place torch function on an attribute")
            else:
                self._mutate(receiver, node, f"an in-place .{method}() on an attribute")
        elif method in CONTAINER_METHODS and receiver is not None:
            self._mutate(receiver, node, f".{method}() on an attribute")
            self.containers |= alias_roots(receiver)
        for arg in node.args:
            kw = arg.keyword.value if arg.keyword is not None else None
            if kw == "out":
                self._mutate(arg.value, node, "out= into an attribute")
            if kw == "inplace" and not (isinstance(arg.value, cst.Name) and arg.value.value == "False"):
                self._mutate_arg(node, 0, "an inplace=True call on an attribute")
        callee = _callee_text(f)
        for position in self.helpers.get(callee, ()) if callee is not None else ():
            self._mutate_arg(node, position, f"{callee}() changing an attribute")

    def _mutate_arg(self, call, position: int, what: str) -> None:
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if position < len(positional):
            self._mutate(positional[position].value, call, what)

    def _mutate(self, expr, node, what: str) -> None:
        if _through_attribute(expr):
            self.state.append((node, what))
        self.mutated |= alias_roots(expr)


_KEEPING = frozenset({"if_stmt", "for_range", "for_each", "while_stmt"})  # runtime ops taking ``kept=``


def _kept_by_runtime(node: cst.Assign) -> set[int]:
    """Output positions an earlier pass's ``_ub.if_stmt/for_range/... (kept=...)`` gives back as the same objects.

    Such an assignment does not rebind those names: the runtime returns the very tensors that
    were only changed in place (``if_stmt``'s ``kept`` holds (output, operand) pairs, the loops' the
    carried positions).
    """
    call = node.value
    if not (
        isinstance(call, cst.Call)
        and isinstance(call.func, cst.Attribute)
        and _runtime(call.func.value)
        and call.func.attr.value in _KEEPING
    ):
        return set()
    kept = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "kept"), None)
    if not isinstance(kept, cst.Tuple):
        return set()
    positions = set()
    for el in kept.elements:
        entry = el.value.elements[0].value if isinstance(el.value, cst.Tuple) else el.value
        if isinstance(entry, cst.Integer):
            positions.add(int(entry.value))
    return positions


def _callee_text(func) -> str | None:
    """``helper`` or ``self.helper`` (the forms a helper summary is keyed by)."""
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
        return f"{func.value.value}.{func.attr.value}"
    return None


def block_effects(stmts, mutating_helpers=None) -> Effects:
    """The side effects of running ``stmts`` (nested functions' bodies included: they may run there).

    ``mutating_helpers`` maps a callee (``fill_`` or ``self.fill_``) to the positions of the
    arguments it changes in place (see :func:`mutated_parameters`): a dict, or any object with
    ``get`` that hashes by identity (``unbranch.callees.Callees`` resolves callees lazily).
    """
    if isinstance(mutating_helpers, dict) or mutating_helpers is None:
        mutating_helpers = _Frozen(sorted((k, tuple(v)) for k, v in (mutating_helpers or {}).items()))
    return _effects(tuple(stmts), mutating_helpers)


class _Frozen(tuple):
    """A dict's items as a hashable mapping (cache key and lookup at once)."""

    def get(self, key, default=()):
        return next((v for k, v in self if k == key), default)


@functools.lru_cache(maxsize=16384)
def _effects(stmts: tuple, helpers) -> Effects:
    v = _Sites(helpers)
    for s in stmts:
        read(s, v)
    mutated = set(v.mutated)
    changed = True
    while changed:  # a mutated alias mutates what it aliases
        grown = mutated.union(*(v.aliases.get(n, set()) for n in mutated))
        changed, mutated = grown != mutated, grown
    aliased = {n for n, roots in v.aliases.items() if roots} | set().union(*v.aliases.values())
    return Effects(
        frozenset(mutated),
        frozenset(v.containers),
        tuple(v.state),
        frozenset(v.calls),
        frozenset(v.rebound),
        frozenset(aliased),
    )


def mutated_parameters(fn: cst.FunctionDef, mutating_helpers=None) -> tuple[int, ...]:
    """Positions of the positional parameters ``fn`` changes in place."""
    params = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)]
    effects = block_effects(fn.body.body, mutating_helpers)
    return tuple(i for i, p in enumerate(params) if p in effects.mutated)


@dataclass(frozen=True)
class Closure:
    name: str
    reads: frozenset  # names of the enclosing function it reads when called
    rebinds: frozenset  # names it declares nonlocal


class _Closures(cst.CSTVisitor):
    """Statements only: a ``def`` is a statement, and a lambda worth tracking is bound by one."""

    def __init__(self, skip, depth):
        self.skip = skip
        self.found: list[Closure] = []
        self.depth = depth

    def visit_FunctionDef(self, node):
        if self.depth and node.name.value not in self.skip:
            nonlocal_names = set()
            for s in node.body.body:
                if isinstance(s, cst.SimpleStatementLine):
                    for small in s.body:
                        if isinstance(small, cst.Nonlocal):
                            nonlocal_names |= {n.name.value for n in small.names}
            self.found.append(Closure(node.name.value, frozenset(def_free_reads(node)), frozenset(nonlocal_names)))
        self.depth += 1

    def leave_FunctionDef(self, node):
        self.depth -= 1

    def visit_SimpleStatementLine(self, node):
        for small in node.body if self.depth == 1 else ():
            if isinstance(small, cst.Assign) and isinstance(small.value, cst.Lambda):
                reads = frozenset(expr_reads(small.value))
                for name in set().union(*(target_names(t.target) for t in small.targets)):
                    self.found.append(Closure(name, reads, frozenset()))
        return False


def closures(node: cst.CSTNode, skip=()) -> list[Closure]:
    """Functions (and lambdas bound to names) defined inside ``node``: what each reads and rebinds.

    For a ``def`` node these are its nested functions, not the function itself.
    """
    v = _Closures(set(skip), 0 if isinstance(node, cst.FunctionDef) else 1)
    read(node, v)
    return v.found


# calls that read a container without keeping it: handing one to them keeps it private
_READING_CALLS = frozenset("len list tuple sorted sum any all min max zip enumerate iter reversed isinstance".split())
_BUILT = (cst.List, cst.Dict, cst.ListComp, cst.DictComp)


class _Handed(cst.CSTVisitor):
    """Uses of names in one scope; those in a place that keeps the object private (``outs.append``,
    ``out["k"]``, ``torch.cat(outs)``, ``for o in outs``, ``return out``) marked as such."""

    def __init__(self) -> None:
        self.uses: dict[str, list[int]] = {}
        self.private: set[int] = set()
        self.escaped: set[str] = set()  # read by a nested function or lambda: it may run anywhere

    def _nested(self, node) -> bool:
        self.escaped |= def_free_reads(node) if not isinstance(node, cst.Lambda) else expr_reads(node)
        return False

    visit_FunctionDef = visit_ClassDef = visit_Lambda = _nested

    def visit_Name(self, node) -> None:
        self.uses.setdefault(node.value, []).append(id(node))

    def _keep(self, *nodes) -> None:
        self.private.update(id(n) for n in nodes if isinstance(n, cst.Name))

    def visit_Attribute(self, node) -> None:
        self._keep(node.value)

    def visit_Subscript(self, node) -> None:
        self._keep(node.value)

    def visit_Call(self, node) -> None:
        f = node.func
        if (isinstance(f, cst.Name) and f.value in _READING_CALLS) or _root(f) in FUNCTION_NAMESPACES:
            self._keep(*(a.value for a in node.args))

    def visit_For(self, node) -> None:
        self._keep(node.iter)

    def visit_CompFor(self, node) -> None:
        self._keep(node.iter)

    def visit_Return(self, node) -> None:
        self._keep(node.value)

    def visit_ComparisonTarget(self, node) -> None:
        if isinstance(node.operator, (cst.In, cst.NotIn)):
            self._keep(node.comparator)

    def visit_AssignTarget(self, node) -> None:
        self._keep(node.target)

    def visit_AugAssign(self, node) -> None:
        self._keep(node.target)

    def visit_AnnAssign(self, node) -> None:
        self._keep(node.target)


def built_containers(fn: cst.FunctionDef) -> frozenset:
    """Names ``fn`` binds only to lists and dicts it builds (``[...]``, ``{...}``, ``list(...)``)."""
    return _built(bound_values(fn.body.body))


def _built(values: dict) -> frozenset:
    return frozenset(
        name
        for name, bound in values.items()
        if all(
            isinstance(v, _BUILT) or (isinstance(v, cst.Call) and getattr(v.func, "value", None) in ("list", "dict"))
            for v in bound
        )
    )


def private_containers(fn: cst.FunctionDef) -> dict:
    """Built containers (``built_containers``) ``fn`` never hands on whole (to another name, an
    attribute, a call of its own, a closure): a change of their structure is seen by ``fn`` alone,
    and by its caller only through what it returns. Each with the keys it surely has (those of
    the dict displays that are its every binding)."""
    values = bound_values(fn.body.body)
    built = _built(values)
    v = _Handed()
    for s in fn.body.body:
        read(s, v)
    return {
        name: frozenset.intersection(*(_display_keys(value) for value in values[name]))
        for name in built - set(param_names(fn)) - v.escaped
        if all(use in v.private for use in v.uses.get(name, ()))
    }


def _display_keys(value) -> frozenset:
    if not isinstance(value, cst.Dict):
        return frozenset()
    return frozenset(
        e.key.evaluated_value
        for e in value.elements
        if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)
    )


class _Reshaping(cst.CSTVisitor):
    def __init__(self, private) -> None:
        self.private, self.found = private, set()

    def _entry(self, target, adds: bool) -> None:
        if not (isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name)):
            return
        name = target.value.value
        if name not in self.private:
            return
        key = (
            target.slice[0].slice.value
            if len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index)
            else None
        )
        known = isinstance(key, cst.SimpleString) and key.evaluated_value in self.private[name]
        if not adds or not known:
            self.found.add(name)

    def visit_Del(self, node) -> None:
        for t in node.target.elements if isinstance(node.target, cst.Tuple) else [cst.Element(node.target)]:
            self._entry(t.value, False)

    def visit_AssignTarget(self, node) -> None:
        self._entry(node.target, True)


def structure_changed(stmts, private: dict, mutating_helpers=None) -> set:
    """The ``private`` containers whose length or keys ``stmts`` may change: a container method
    (``append``), a ``del`` of an entry, a store under a key the dict may not have."""
    v = _Reshaping(private)
    for s in stmts:
        read(s, v)
    return v.found | (block_effects(stmts, mutating_helpers).containers & set(private))
