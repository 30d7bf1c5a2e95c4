"""Which names a piece of libcst code reads and binds, respecting nested scopes.

Lighter than libcst's ScopeProvider (which costs ~5x parse+codegen on transformers):
only local-variable facts are needed to build branch functions.
"""

from __future__ import annotations

import functools

import libcst as cst

from .walk import STRUCTURE, is_a, read


class OwnScope:
    """A libcst visitor or transformer that stays in the scope it is given: a nested ``def``,
    ``class`` or ``lambda`` is a scope of its own, which the compiler leaves as the user wrote it."""

    def visit_FunctionDef(self, node) -> bool:
        return False

    def visit_ClassDef(self, node) -> bool:
        return False

    def visit_Lambda(self, node) -> bool:
        return False


class _Collector(cst.CSTVisitor):
    """Collects names read (upward-exposed within an expression) and names bound."""

    def __init__(self) -> None:
        self.reads: set[str] = set()
        self.writes: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        if node.value not in self.writes:  # bound by a walrus evaluated earlier: not read from outside
            self.reads.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        read(node.value, self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        read(node.value, self)
        return False

    def visit_NamedExpr(self, node: cst.NamedExpr) -> bool:
        read(node.value, self)
        self.writes |= target_names(node.target)
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        params = _param_names(node.params)
        for p in _all_params(node.params):
            if p.default is not None:
                read(p.default, self)
        self.reads |= expr_reads(node.body) - params - self.writes
        return False

    def _comprehension(self, node, elements) -> bool:
        bound: set[str] = set()
        inner = _Collector()
        first = True
        for_in = node.for_in
        while for_in is not None:
            if first:
                read(for_in.iter, self)  # the first iterable is evaluated in the enclosing scope
                first = False
            else:
                read(for_in.iter, inner)
            bound |= target_names(for_in.target)
            for cond in for_in.ifs:
                read(cond, inner)
            for_in = for_in.inner_for_in
        for e in elements:
            read(e, inner)
        self.reads |= inner.reads - bound
        self.writes |= inner.writes - bound  # walrus in a comprehension binds in the enclosing scope
        return False

    def visit_ListComp(self, node):
        return self._comprehension(node, [node.elt])

    visit_SetComp = visit_GeneratorExp = visit_ListComp

    def visit_DictComp(self, node):
        return self._comprehension(node, [node.key, node.value])


def _all_params(params: cst.Parameters):
    yield from params.posonly_params
    yield from params.params
    if isinstance(params.star_arg, cst.Param):
        yield params.star_arg
    yield from params.kwonly_params
    if params.star_kwarg is not None:
        yield params.star_kwarg


def _param_names(params: cst.Parameters) -> set[str]:
    return {p.name.value for p in _all_params(params)}


def param_names(fn: cst.FunctionDef) -> list[str]:
    """Parameter names of ``fn`` in order."""
    return [p.name.value for p in _all_params(fn.params)]


def expr_reads(node: cst.CSTNode | None) -> set[str]:
    """Names an expression reads (free names of lambdas and comprehensions included)."""
    if node is None:
        return set()
    c = _Collector()
    read(node, c)
    return c.reads


def expr_effects(node: cst.CSTNode | None) -> tuple[set[str], set[str]]:
    """(reads, walrus bindings) of an expression."""
    if node is None:
        return set(), set()
    reads, writes = _expr_effects(node)
    return set(reads), set(writes)


@functools.lru_cache(maxsize=65536)
def _expr_effects(node: cst.CSTNode) -> tuple[frozenset, frozenset]:
    # libcst nodes are immutable and hash by identity: facts about one never go stale
    c = _Collector()
    read(node, c)
    return frozenset(c.reads), frozenset(c.writes)


def target_list(target: cst.BaseExpression) -> list[str] | None:
    """A loop's variables in order (``row``; ``i, row``); None for other targets (``x[0]``, nested)."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)) and all(isinstance(e.value, cst.Name) for e in target.elements):
        return [e.value.value for e in target.elements]
    return None


def target_names(target: cst.BaseExpression) -> set[str]:
    """Names bound by an assignment target (``a``, ``a, *b``, ``[a, (b, c)]``)."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        out: set[str] = set()
        for el in target.elements:
            out |= target_names(el.value)
        return out
    if isinstance(target, cst.StarredElement):
        return target_names(target.value)
    return set()  # attribute and subscript targets bind no local name


def target_reads(target: cst.BaseExpression) -> set[str]:
    """Names an assignment target reads (``x`` in ``x[i] = ...`` and ``x.a = ...``)."""
    if isinstance(target, cst.Name):
        return set()
    if isinstance(target, (cst.Tuple, cst.List)):
        out: set[str] = set()
        for el in target.elements:
            out |= target_reads(el.value)
        return out
    if isinstance(target, cst.StarredElement):
        return target_reads(target.value)
    return expr_reads(target)


def small_effects(stmt: cst.BaseSmallStatement) -> tuple[set[str], set[str]]:
    """(reads, writes) of one simple statement; ``del`` counts as a write (it unbinds)."""
    if isinstance(stmt, cst.Assign):
        reads, writes = expr_effects(stmt.value)
        for t in stmt.targets:
            reads |= target_reads(t.target)
            writes |= target_names(t.target)
        return reads, writes
    if isinstance(stmt, cst.AnnAssign):
        reads, writes = expr_effects(stmt.value)
        if stmt.value is not None:
            writes |= target_names(stmt.target)
        return reads | target_reads(stmt.target), writes
    if isinstance(stmt, cst.AugAssign):
        reads, writes = expr_effects(stmt.value)
        return reads | expr_reads(stmt.target), writes | target_names(stmt.target)
    if isinstance(stmt, cst.Del):
        return target_reads(stmt.target), target_names(stmt.target)
    if isinstance(stmt, cst.Import):
        return set(), {_import_binding(a) for a in stmt.names}
    if isinstance(stmt, cst.ImportFrom):
        if isinstance(stmt.names, cst.ImportStar):
            return set(), set()
        return set(), {_import_binding(a) for a in stmt.names}
    if isinstance(stmt, (cst.Global, cst.Nonlocal, cst.Pass, cst.Break, cst.Continue)):
        return set(), set()
    # Expr, Return, Raise, Assert: expressions only
    return expr_effects(stmt)


def _import_binding(alias: cst.ImportAlias) -> str:
    if alias.asname is not None:
        return alias.asname.name.value
    name = alias.name
    while isinstance(name, cst.Attribute):
        name = name.value
    return name.value


def def_free_reads(node: cst.FunctionDef | cst.ClassDef) -> set[str]:
    """Names a nested def/class reads from the enclosing scope when it is defined or called."""
    reads: set[str] = set()
    for d in node.decorators:
        reads |= expr_reads(d.decorator)
    if isinstance(node, cst.ClassDef):
        for a in (*node.bases, *node.keywords):
            reads |= expr_reads(a.value)
        return reads | (block_reads(node.body.body) - block_writes(node.body.body))
    for p in _all_params(node.params):
        reads |= expr_reads(p.default) | expr_reads(p.annotation.annotation if p.annotation else None)
    return reads | (block_reads(node.body.body) - block_writes(node.body.body) - _param_names(node.params))


_NESTED = (cst.SimpleStatementLine, cst.BaseCompoundStatement)  # statements whose names are memoised
# what a block walk enters; the expressions in them are read by the hooks of the statement holding them
_ENTERED = (*STRUCTURE, cst.WithItem)


class _BlockNames(cst.CSTVisitor):
    """All reads and writes in a block, stopping at nested function and class scopes."""

    def __init__(self, root) -> None:
        self.root = root
        self.reads: set[str] = set()
        self.writes: set[str] = set()
        self.declared: set[str] = set()  # global/nonlocal names

    def on_visit(self, node) -> bool:
        if node is not self.root and is_a(type(node), _NESTED):
            # a nested statement's names are memoised on the node: passes rebuild the compound
            # statements around it, not the statement itself
            reads, writes, declared = _statement_names(node)
            self.reads |= reads
            self.writes |= writes
            self.declared |= declared
            return False
        return is_a(type(node), _ENTERED) and super().on_visit(node)

    def visit_Global(self, node) -> bool:
        self.declared.update(n.name.value for n in node.names)
        return False

    visit_Nonlocal = visit_Global

    def _small(self, node) -> bool:
        r, w = small_effects(node)
        self.reads |= r
        self.writes |= w
        return False

    visit_Assign = visit_AnnAssign = visit_AugAssign = visit_Del = _small
    visit_Import = visit_ImportFrom = visit_Expr = visit_Return = visit_Raise = visit_Assert = _small

    def visit_FunctionDef(self, node) -> bool:
        self.reads |= def_free_reads(node)
        self.writes.add(node.name.value)
        return False

    visit_ClassDef = visit_FunctionDef

    def _test(self, node) -> bool:
        r, w = expr_effects(node.test)
        self.reads |= r
        self.writes |= w
        return True

    visit_If = visit_While = _test

    def visit_For(self, node: cst.For) -> bool:
        self.reads |= expr_reads(node.iter) | target_reads(node.target)
        self.writes |= target_names(node.target)
        return True

    def visit_WithItem(self, node: cst.WithItem) -> bool:
        self.reads |= expr_reads(node.item)
        if node.asname is not None:
            self.writes |= target_names(node.asname.name)
            self.reads |= target_reads(node.asname.name)
        return False

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> bool:
        self.reads |= expr_reads(node.type)
        if node.name is not None:
            self.writes |= target_names(node.name.name)
        return True

    def visit_Match(self, node) -> bool:
        reads, writes = expr_effects(node.subject)
        for case in node.cases:
            binds, pattern_reads = pattern_effects(case.pattern)
            guard_reads, guard_writes = expr_effects(case.guard)
            reads |= pattern_reads | guard_reads
            writes |= binds | guard_writes
        self.reads |= reads
        self.writes |= writes
        return True


class _Pattern(cst.CSTVisitor):
    """Names a ``case`` pattern binds (captures, ``*rest``, ``**rest``, ``as``) and reads (values, classes)."""

    def __init__(self) -> None:
        self.binds: set[str] = set()
        self.reads: set[str] = set()

    def visit_MatchAs(self, node) -> bool:
        if node.name is not None:
            self.binds.add(node.name.value)
        return True

    def visit_MatchStar(self, node) -> bool:
        if node.name is not None:
            self.binds.add(node.name.value)
        return False

    def visit_MatchMapping(self, node) -> bool:
        if node.rest is not None:
            self.binds.add(node.rest.value)
        return True

    def visit_MatchMappingElement(self, node) -> bool:
        self.reads |= expr_reads(node.key)
        read(node.pattern, self)
        return False

    def visit_MatchValue(self, node) -> bool:
        self.reads |= expr_reads(node.value)  # Color.RED reads Color
        return False

    def visit_MatchClass(self, node) -> bool:
        self.reads |= expr_reads(node.cls)
        for p in node.patterns:
            read(p, self)
        for k in node.kwds:
            read(k.pattern, self)  # the keyword itself names an attribute, not a variable
        return False


def pattern_effects(pattern: cst.MatchPattern) -> tuple[set[str], set[str]]:
    """(names bound, names read) by a ``case`` pattern."""
    v = _Pattern()
    read(pattern, v)
    return v.binds, v.reads


def irrefutable(case: cst.MatchCase) -> bool:
    """Does this case match any subject (``case _:``, ``case name:``, no guard)?"""
    p = case.pattern
    return case.guard is None and isinstance(p, cst.MatchAs) and p.pattern is None


@functools.lru_cache(maxsize=65536)
def _statement_names(stmt: cst.CSTNode) -> tuple[frozenset, frozenset, frozenset]:
    v = _BlockNames(stmt)
    read(stmt, v)
    return frozenset(v.reads), frozenset(v.writes), frozenset(v.declared)


def block_reads(stmts) -> set[str]:
    """Every name a block reads anywhere (not only upward-exposed), nested scopes' free names included."""
    return set().union(*(_statement_names(s)[0] for s in stmts))


def block_writes(stmts) -> set[str]:
    """Every name a block binds, not looking into nested function or class bodies."""
    return set().union(*(_statement_names(s)[1] for s in stmts))


def block_declared(stmts) -> set[str]:
    """Names a block declares ``global`` or ``nonlocal``."""
    return set().union(*(_statement_names(s)[2] for s in stmts))


def reads_of(nodes) -> set[str]:
    """Every name some statements or expressions read (free names of nested scopes included)."""
    found: set[str] = set()
    for node in nodes:
        statement = isinstance(node, (cst.BaseStatement, cst.BaseSmallStatement))
        found |= _statement_names(node)[0] if statement else expr_reads(node)
    return found


@functools.lru_cache(maxsize=65536)
def names_in_order(stmt: cst.CSTNode) -> tuple[str, ...]:
    """Every name in a statement, in the order it first appears."""
    found = _InOrder()
    read(stmt, found)
    return tuple(found.order)


class _InOrder(cst.CSTVisitor):
    def __init__(self) -> None:
        self.order: dict[str, None] = {}

    def visit_Name(self, node) -> None:
        self.order.setdefault(node.value)


class _Bindings(OwnScope, cst.CSTVisitor):
    """The values a block binds each name to with ``=`` (``a, b = 1, 2`` pairwise), anywhere in it."""

    def __init__(self) -> None:
        self.values: dict[str, list[cst.BaseExpression]] = {}

    def _bind(self, target, value) -> None:
        if isinstance(target, cst.Name):
            self.values.setdefault(target.value, []).append(value)
        elif isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)):
            if len(target.elements) == len(value.elements):
                for t, v in zip(target.elements, value.elements):
                    self._bind(t.value, v.value)

    def visit_Assign(self, node) -> None:
        for t in node.targets:
            self._bind(t.target, node.value)

    def visit_AnnAssign(self, node) -> None:
        if node.value is not None:
            self._bind(node.target, node.value)


def bound_values(stmts) -> dict[str, list[cst.BaseExpression]]:
    """Name -> the expressions ``stmts`` assign it (in order; unpacking of a display pairwise)."""
    v = _Bindings()
    for s in stmts:
        read(s, v)
    return v.values
