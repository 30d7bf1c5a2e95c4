"""Compile rewritten text into a code object that can replace the original's.

The ``def`` is compiled nested in an outer function that binds the original's free
variables, so the new code has the same ``co_freevars`` (closure cells, ``__class__`` for
``super()``) and can be swapped into the original function object: every reference to it,
decorator wrappers included, then runs the rewritten code (TORCH_FACTS §10). The text is
registered in ``linecache`` under ``<unbranch:...>`` so tracebacks and ``inspect`` show it.
"""

from __future__ import annotations

import ast
import linecache
import types

from .. import runtime
from ..compiler.emit import SourceMap
from ..compiler.source import SourceInfo
from ..errors import UnbranchError
from ..runtime import source_map

_DEF_NAME = "__unbranch_def__"


def filename_for(info: SourceInfo, digest: str) -> str:
    # no angle brackets: linecache only loads lazy entries for names that look like files
    return f"unbranch:{info.qualname}:{digest[:8]}"


def compile_function(
    text: str, info: SourceInfo, freevars: tuple, filename: str, runtime_cell: str | None = None
) -> types.CodeType:
    """The code object of the ``def`` in ``text``, whose free variables are exactly ``freevars``.

    ``runtime_cell`` names one more free variable through which the code reaches the runtime
    (for a function object of its own, RewrittenMethod.func); without it the code reads the
    runtime as a global, as it must to be swapped into the original function.
    """
    if runtime_cell is not None:
        freevars = tuple(sorted((*freevars, runtime_cell)))  # the order the compiler gives them
    try:
        if not freevars:  # no cell to bind: the text compiles as it is, without a round trip through ``ast``
            return _inner(compile(text, filename, "exec"), None, freevars, info)
        tree = ast.parse(text, filename)
    except SyntaxError as e:  # a hook produced bad code
        raise UnbranchError(f"rewritten code does not compile: {e}", info.path, info.line, "rewrite") from None
    fn = tree.body[0]
    # compiled under a name of its own: the def's name bound in the outer function would shadow the
    # module global a recursive function (or one passing itself along) refers to (the loader renames it back)
    fn.name = _DEF_NAME
    outer_body = [ast.Assign([ast.Name(v, ast.Store())], ast.Constant(None)) for v in freevars]
    # reference every free variable so none drops out of co_freevars (their count is checked on swap)
    if freevars:
        keep = ast.If(
            ast.Constant(False), [ast.Expr(ast.Tuple([ast.Name(v, ast.Load()) for v in freevars], ast.Load()))], []
        )
        fn.body.append(ast.fix_missing_locations(ast.copy_location(keep, fn.body[-1])))  # (after any nonlocal)
    give_back = ast.Return(ast.Name(fn.name, ast.Load()))
    for node in (*outer_body, give_back):  # locations for the nodes made here only, not a walk of the user's
        ast.fix_missing_locations(ast.copy_location(node, fn))
    outer = ast.FunctionDef(
        "__unbranch_outer__",
        ast.arguments([], [], None, [], [], None, []),
        [*outer_body, fn, give_back],
        [],
        None,
        type_params=[],
    )
    code = compile(ast.Module([ast.copy_location(outer, fn)], []), filename, "exec")
    return _inner(next(c for c in code.co_consts if isinstance(c, types.CodeType)), fn.name, freevars, info)


def _inner(code: types.CodeType, name: str | None, freevars: tuple, info: SourceInfo) -> types.CodeType:
    """The code object of the ``def`` named ``name`` among ``code``'s constants (None: the one ``def``,
    beside the lambdas and comprehensions of its decorators and defaults)."""
    named = (lambda c: not c.co_name.startswith("<")) if name is None else (lambda c: c.co_name == name)
    inner = next(c for c in code.co_consts if isinstance(c, types.CodeType) and named(c))
    if inner.co_freevars != freevars:
        raise UnbranchError(
            f"rewritten code has free variables {inner.co_freevars}, the original {tuple(freevars)}",
            info.path,
            info.line,
            "closure",
        )
    return inner


def register(filename: str, info: SourceInfo, text: str, tree=None, origins=None) -> None:
    """Make the rewritten text visible to tracebacks, ``inspect`` and error messages.

    Lines read from linecache end with ``# original/file.py:LINE``; they are computed only
    when something (a traceback, ``inspect``) first asks for them.
    """
    smap = SourceMap(info, text, tree, origins)
    linecache.cache[filename] = (smap.annotated,)
    source_map.register(filename, smap)


# (id of a module's globals, name) -> [the globals, swapped functions using the name, added by unbranch]
_BOUND: dict[tuple[int, str], list] = {}


def bind_runtime(fn: types.FunctionType, name: str) -> None:
    """Swapped-in code reaches unbranch.runtime through one global of the function's module.

    Counted per module and name, so the global lives exactly as long as some swapped
    function needs it (nested contexts, several functions of one module).
    """
    current = fn.__globals__.get(name)
    if current is not None and current is not runtime:
        raise UnbranchError(
            f"module {fn.__module__} already defines {name!r}",
            fn.__code__.co_filename,
            fn.__code__.co_firstlineno,
            "global",
        )
    entry = _BOUND.setdefault((id(fn.__globals__), name), [fn.__globals__, 0, name not in fn.__globals__])
    entry[1] += 1
    fn.__globals__[name] = runtime


def unbind_runtime(fn: types.FunctionType, name: str) -> None:
    """Undo one bind_runtime; the last one removes the global if unbranch added it."""
    key = (id(fn.__globals__), name)
    entry = _BOUND[key]
    entry[1] -= 1
    if entry[1] == 0:
        del _BOUND[key]
        if entry[2] and fn.__globals__.get(name) is runtime:
            del fn.__globals__[name]


def make_function(fn: types.FunctionType, code: types.CodeType, cells: dict | None = None) -> types.FunctionType:
    """A new function object running ``code`` with ``fn``'s globals, closure (plus ``cells``) and defaults."""
    by_name = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()), **(cells or {}))
    closure = tuple(by_name[name] for name in code.co_freevars) or None
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, closure)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    new.__module__ = fn.__module__
    new.__doc__ = fn.__doc__
    new.__dict__.update(fn.__dict__)
    new.__dict__.pop("__wrapped__", None)
    return new
