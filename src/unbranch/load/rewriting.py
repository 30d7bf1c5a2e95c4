"""Rewrite one function: compile its source (through the cache), load the result as a code object, describe it."""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import types
from dataclasses import dataclass
from functools import cached_property

from .. import runtime
from ..compiler.analysis.classify import hints_for
from ..compiler.callees import Callees
from ..compiler.pipeline import Compiled, Options, compile_source
from ..compiler.source import SourceInfo, get_source
from . import cache, loader
from .swap import original_code

# how torch_export_rewrite(model) rewrites what discovery and the catalogue name: never an
# error, and only data-dependent conditions dispatched (a shape test stays as the plain export
# had it, so a model that exported before gets the very same graph)
MODEL_OPTIONS = {"strict": False, "shape_conditions": False}


@dataclass
class RewrittenMethod:
    """One rewritten function: its source before and after, and the compiled result."""

    function: types.FunctionType  # the innermost (undecorated) function that was rewritten
    source: SourceInfo
    code: str  # rewritten source; equals ``original_code`` when nothing needed rewriting
    changed: bool
    notes: list
    code_object: types.CodeType  # the original's own code object when nothing changed
    runtime: str  # the name the rewritten code calls unbranch.runtime by
    parent: types.FunctionType | None = None  # for a nested function: the function whose code defines it

    @property
    def original_code(self) -> str:
        return self.source.text

    @property
    def qualname(self) -> str:
        return self.source.qualname

    @cached_property
    def func(self) -> types.FunctionType:
        """The rewritten function (a method takes ``self`` first), callable on its own, anytime.

        It reaches the runtime through a closure cell of its own, not a global: it keeps
        working after every context has closed, and the user's module is never touched.
        """
        if not self.changed:
            return (
                self.function
                if self.function.__code__ is self.code_object
                else loader.make_function(self.function, self.code_object)
            )
        code = _load(self.code, self.source, self.code_object, self.code_object.co_filename, self.runtime)
        return loader.make_function(self.function, code, {self.runtime: types.CellType(runtime)})

    def diff(self) -> str:
        name = f"{self.source.path}:{self.source.line}"
        return "".join(
            difflib.unified_diff(
                self.original_code.splitlines(True),
                self.code.splitlines(True),
                f"{name} (original)",
                f"{name} (unbranch)",
            )
        )


def is_method(fn: types.FunctionType) -> bool:
    """Is ``fn`` defined in a class body (its first parameter is then ``self``)?"""
    qual = fn.__qualname__.split(".")
    return len(qual) > 1 and qual[-2] != "<locals>" and fn.__code__.co_argcount > 0


def options_for(fn: types.FunctionType, **options) -> Options:
    """Compiler options for ``fn``: ``options`` plus whether it is a method."""
    return Options(is_method=is_method(fn), **options)


def rewrite(fn: types.FunctionType, options: Options) -> RewrittenMethod:
    """``fn`` (innermost, undecorated) rewritten with ``options``; its code stays untouched."""
    original = original_code(fn)
    key = options.key()
    hit = cache.get_result(original, key)
    if hit is not None:
        return RewrittenMethod(fn, *hit)
    info = get_source(fn, original)
    skey = cache.source_key(info.text, key)
    compiled = _reusable(cache.get_compiled(skey), fn, info)
    if compiled is None:
        helpers = Callees(fn)  # what the helpers it calls change in place is part of its meaning
        names = [k for k, v in fn.__globals__.items() if v is not runtime]
        compiled = compile_source(info, options, names, helpers)
        compiled.callees = dict(helpers.used)
        cache.put_compiled(skey, compiled, info)
    if compiled.changed:
        # one code object per place: its filename and source map name the file and line it stands for
        digest = hashlib.sha256(f"{skey}{info.path}{info.line}".encode()).hexdigest()
        filename = loader.filename_for(info, digest)
        code = _load(compiled.text, info, original, filename)
        loader.register(filename, info, compiled.text, compiled.tree, compiled.origins)
    else:
        code = original
    parts = (info, compiled.text, compiled.changed, compiled.notes, code, compiled.runtime)
    cache.put_result(original, key, parts)
    return RewrittenMethod(fn, *parts)


def _reusable(entry, fn: types.FunctionType, info: SourceInfo) -> Compiled | None:
    """The cached compilation of ``info.text`` made fit for ``fn`` at ``info``'s place, or None to compile.

    Same text, same meaning, except where the result depends on more than the text: the
    helpers ``fn`` calls (resolved in its own module), the global name the runtime takes, the
    naming hints registered for its file, and the place (notes name absolute lines, moved here).
    """
    if entry is None:
        return None
    compiled, origin = entry
    if any(Callees(fn).get(c) != p for c, p in compiled.callees.items()):
        return None  # a helper it calls changes its arguments differently here
    if compiled.changed and fn.__globals__.get(compiled.runtime, runtime) is not runtime:
        return None  # this module has a global of that name: the compiler must pick another
    if (origin.path, origin.line) == (info.path, info.line):
        return compiled
    if hints_for(origin.path) != hints_for(info.path):
        return None  # the classifier reads another code base's conventions there
    shift = info.line - origin.line  # the text and its origins are relative to the def: only notes move
    return dataclasses.replace(compiled, notes=[dataclasses.replace(n, line=n.line + shift) for n in compiled.notes])


def _load(text: str, info: SourceInfo, original: types.CodeType, filename: str, runtime_cell=None):
    """Code for ``text`` that can stand in for ``original`` (same free variables, names)."""
    code = loader.compile_function(text, info, original.co_freevars, filename, runtime_cell)
    return code.replace(co_qualname=original.co_qualname, co_name=original.co_name)
