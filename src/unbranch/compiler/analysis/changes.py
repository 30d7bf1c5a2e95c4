"""Could some names' objects be changed in place anywhere in a function? A screen on its ``ast``.

The effects analysis answers exactly, on libcst trees, statement by statement; most functions
change nothing in place that the question is about. This walk of the function's ``ast``
answers a superset: a name may hold another's object if any binding of it may (``_names``,
``effects.alias_roots``'s view rules, for every binding, where the analysis skips some), and a
call changing its receiver may also change its first argument, which the analysis decides by
the receiver. ``False`` is therefore certain; ``True`` means: ask the analysis.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from .classify import SCOPES, own_nodes
from .effects import CONTAINER_METHODS, STATEMENT_ONLY_METHODS, VIEW_FUNCTIONS, VIEW_METHODS, in_place

_CHANGING = CONTAINER_METHODS | STATEMENT_ONLY_METHODS  # besides in-place methods: they change their receiver
_LOOPS = (ast.For, ast.AsyncFor, ast.comprehension)
_READ = frozenset({ast.Call, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr, ast.Delete, *_LOOPS})


class Changes:
    """The bindings and the changes in place of one function's ``ast``, read once."""

    def __init__(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.bound_from: dict[str, set[str]] = {}  # name -> the names bound to a value that may be its object
        self.changed: set[str] = set()  # names whose object a statement or call changes in place
        self.passed: dict[str, list[tuple[str, list[set[str]]]]] = {}  # name -> (helper, names of each
        # positional argument) of the calls by name it is passed to
        nodes = list(own_nodes(fn))  # (the classifier's walk of it, memoised) and nested scopes whole:
        nodes += [inner for node in nodes if isinstance(node, SCOPES) for inner in ast.walk(node)]  # they may run
        for node in nodes:
            if type(node) not in _READ:
                continue  # (most nodes: one lookup)
            if isinstance(node, ast.Call):
                self._call(node)
                continue
            if isinstance(node, _LOOPS):
                self._bind([node.target], node.iter)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
                self._bind([node.target], node.value)
            elif isinstance(node, ast.Assign):
                self._bind(node.targets, node.value)
            if isinstance(node, (ast.Assign, ast.Delete)):
                self.changed |= set().union(*(_stored_roots(t) for t in node.targets))
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                self.changed |= _stored_roots(node.target)
                if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                    self.changed.add(node.target.id)

    def _bind(self, targets, value) -> None:
        reads = _names(value) if value is not None else ()
        for target in targets:
            for n in ast.walk(target):
                if isinstance(n, ast.Name):
                    for read in reads:
                        self.bound_from.setdefault(read, set()).add(n.id)

    def _call(self, call: ast.Call) -> None:
        f = call.func
        positional = [a for a in call.args if not isinstance(a, ast.Starred)]
        if isinstance(f, ast.Attribute) and (in_place(f.attr) or f.attr in _CHANGING):
            self.changed |= _names(f.value) | (_names(positional[0]) if positional else set())
        for kw in call.keywords:
            if kw.arg == "out":
                self.changed |= _names(kw.value)
            elif kw.arg == "inplace" and positional:
                self.changed |= _names(positional[0])
        callee = f.id if isinstance(f, ast.Name) else None
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            callee = f"{f.value.id}.{f.attr}"
        if callee is not None:
            passed = [_names(a) for a in positional]
            for name in set().union(*passed):
                self.passed.setdefault(name, []).append((callee, passed))

    def may_change(self, names: Iterable[str], helpers) -> bool:
        """Could the object of one of ``names`` change in place here (``helpers``: as ``block_effects``'s)?

        A helper is looked up only if it gets a name that may hold one of those objects.
        """
        holding = set(names)  # names that may hold one of those objects
        todo = list(holding)
        while todo:
            for name in self.bound_from.get(todo.pop(), ()):
                if name not in holding:
                    holding.add(name)
                    todo.append(name)
        if self.changed & holding:
            return True
        for name in holding:
            for callee, passed in self.passed.get(name, ()):
                if any(passed[p] & holding for p in helpers.get(callee, ()) if p < len(passed)):
                    return True
        return False


def _stored_roots(target) -> set[str]:
    """The names whose objects an assignment or ``del`` target changes (``x`` of ``x[i].a = v``)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_stored_roots(t) for t in target.elts))
    if isinstance(target, ast.Starred):
        return _stored_roots(target.value)
    if not isinstance(target, (ast.Subscript, ast.Attribute)):
        return set()
    while isinstance(target, (ast.Subscript, ast.Attribute)):
        target = target.value
    return {target.id} if isinstance(target, ast.Name) else set()


def _names(expr) -> set[str]:
    """``effects.alias_roots`` on the ``ast``: the names whose object ``expr`` may be (or be a view of)."""
    if isinstance(expr, ast.Name):
        return {expr.id}
    if isinstance(expr, (ast.Subscript, ast.Attribute, ast.Starred, ast.NamedExpr)):
        return _names(expr.value)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        f, root = expr.func, expr.func.value
        while isinstance(root, (ast.Subscript, ast.Attribute)):
            root = root.value
        if isinstance(root, ast.Name) and root.id == "torch":
            return _names(expr.args[0]) if f.attr in VIEW_FUNCTIONS and expr.args else set()
        if f.attr in VIEW_METHODS or in_place(f.attr):
            return _names(f.value)
        return set()
    if isinstance(expr, ast.IfExp):
        return _names(expr.body) | _names(expr.orelse)
    if isinstance(expr, (ast.Tuple, ast.List)):
        return set().union(*(_names(e) for e in expr.elts))
    return set()
