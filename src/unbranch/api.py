"""Public entry points: transform_method and the torch_export_rewrite context manager."""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import os
import re
import types
from dataclasses import dataclass, field
from functools import cached_property

import torch

from . import cache, loader, runtime
from .callees import Callees
from .errors import UnbranchError
from .pipeline import Options, compile_source
from .runtime import _tracing
from .source import SourceInfo, get_source, innermost_function

# how torch_export_rewrite(model) rewrites what discovery and the catalogue name: never an
# error, and only data-dependent conditions dispatched (a shape test stays as the plain export
# had it, so a model that exported before gets the very same graph)
MODEL_OPTIONS = {"strict": False, "shape_conditions": False}

# functions whose __code__ is swapped right now -> their original code object
_ORIGINAL_CODE: dict[types.FunctionType, types.CodeType] = {}


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
        code = _compile(self.code, self.source, self.code_object, self.code_object.co_filename, self.runtime)
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


def _compile(text: str, info: SourceInfo, original: types.CodeType, filename: str, runtime_cell=None):
    """Code for ``text`` that can stand in for ``original`` (same free variables, names)."""
    code = loader.compile_function(text, info, original.co_freevars, filename, runtime_cell)
    return code.replace(co_qualname=original.co_qualname, co_name=original.co_name)


def _rewrite(fn: types.FunctionType, options: Options) -> RewrittenMethod:
    original = _ORIGINAL_CODE.get(fn, fn.__code__)
    key = options.key()
    hit = cache.get_result(original, key)
    if hit is not None:
        return RewrittenMethod(fn, *hit)
    info = get_source(fn, original)
    # the compiled result names absolute lines and the path (notes, source map, messages)
    skey = cache.source_key(f"{info.path}:{info.line}\n{info.text}", key)
    compiled = cache.get_compiled(skey)
    if compiled is not None and any(Callees(fn).get(c) != p for c, p in compiled.callees.items()):
        compiled = None  # a helper it calls changes its arguments differently now
    if compiled is None:
        helpers = Callees(fn)  # what the helpers it calls change in place is part of its meaning
        names = [k for k, v in fn.__globals__.items() if v is not runtime]
        compiled = compile_source(info, options, names, helpers)
        compiled.callees = dict(helpers.used)
        cache.put_compiled(skey, compiled)
    if compiled.changed:
        digest = hashlib.sha256(f"{skey}{info.path}{info.line}".encode()).hexdigest()
        filename = loader.filename_for(info, digest)
        code = _compile(compiled.text, info, original, filename)
        loader.register(filename, info, compiled.text, compiled.tree, compiled.origins)
    else:
        code = original
    parts = (info, compiled.text, compiled.changed, compiled.notes, code, compiled.runtime)
    cache.put_result(original, key, parts)
    return RewrittenMethod(fn, *parts)


def transform_method(
    func,
    prefix: str = "branch_cond",
    verbose: int = 0,
    filter_node=None,
    pre_rewriter=None,
    post_rewriter=None,
    *extra,
    strict: bool = False,
    shape_conditions: bool = True,
    **unknown,
) -> RewrittenMethod:
    """Rewrite one function or method; ``.code``, ``.func`` and ``.diff()`` show the result.

    The positional order is onnx-diagnostic's, so calls written for it work unchanged.
    Hooks take and return libcst nodes: ``filter_node(if_node) -> bool`` chooses which
    dispatched ``if`` statements to rewrite, ``pre_rewriter``/``post_rewriter`` map the
    ``FunctionDef`` before and after the rules. ``verbose=1`` prints what was rewritten,
    ``2`` the diff too. A construct that cannot be converted stays plain Python and is
    reported (``rm.notes``, and at run time if its condition is a tensor under export);
    ``strict=True`` raises UnbranchError instead when its condition is plainly a tensor.
    ``shape_conditions=False`` leaves ``if``s on sizes alone as plain Python.
    """
    _check_arguments("transform_method", extra, unknown, _TRANSFORM_KEYWORDS)
    hooks = _check_hooks(
        "transform_method", dict(filter_node=filter_node, pre_rewriter=pre_rewriter, post_rewriter=post_rewriter)
    )
    _check_type("transform_method", "prefix", prefix, str)
    _check_type("transform_method", "verbose", verbose, int)
    fn = innermost_function(func)
    opts = Options(prefix=prefix, strict=strict, is_method=_is_method(fn), shape_conditions=shape_conditions, **hooks)
    rm = _rewrite(fn, opts)
    _say(verbose, rm)
    return rm


_TRANSFORM_KEYWORDS = (
    "func",
    "prefix",
    "verbose",
    "filter_node",
    "pre_rewriter",
    "post_rewriter",
    "strict",
    "shape_conditions",
)
_CONTEXT_KEYWORDS = ("rewrite", "dump_rewriting", "verbose", "model", "strict", "lower_under_compile")
_HOOKS = ("filter_node", "pre_rewriter", "post_rewriter")


def _check_arguments(name: str, extra: tuple, unknown: dict, accepted: tuple) -> None:
    """UnbranchError (not a bare TypeError) for arguments ``name`` does not take, listing those it does."""
    if extra:
        raise UnbranchError(
            f"{name}() got {len(extra)} positional argument(s) too many: {extra!r}; it accepts {', '.join(accepted)}",
            construct="arguments",
        )
    if unknown:
        raise UnbranchError(
            f"{name}() got unexpected keyword(s) {', '.join(sorted(unknown))}; it accepts {', '.join(accepted)}",
            construct="arguments",
        )


def _check_type(name: str, argument: str, value, expected: type) -> None:
    if not isinstance(value, expected):
        raise UnbranchError(
            f"{name}() expects {argument} to be a {expected.__name__}, got {value!r}", construct="arguments"
        )


def _check_hooks(name: str, hooks: dict) -> dict:
    """The hooks given (None dropped); each must be callable."""
    for key, hook in hooks.items():
        if hook is not None and not callable(hook):
            raise UnbranchError(
                f"{name}(): {key} must be a callable taking and returning libcst nodes, got {hook!r}",
                construct="arguments",
            )
    return {k: v for k, v in hooks.items() if v is not None}


def _say(verbose: int, rm: RewrittenMethod) -> None:
    if verbose and rm.changed:
        print(f"[unbranch] rewrote {rm.qualname} ({rm.source.path}:{rm.source.line})")
        if verbose > 1:
            print(rm.diff())


def _is_method(fn) -> bool:
    qual = fn.__qualname__.split(".")
    return len(qual) > 1 and qual[-2] != "<locals>" and fn.__code__.co_argcount > 0


def cond_nodes(ep) -> list:
    """Every ``cond`` node of an exported program, nested subgraphs included."""
    return [
        node
        for gm in ep.graph_module.modules()
        if isinstance(gm, torch.fx.GraphModule)
        for node in gm.graph.nodes
        if node.target is torch.ops.higher_order.cond
    ]


@dataclass
class Report:
    """What a torch_export_rewrite context rewrote."""

    rewritten: list = field(default_factory=list)
    skipped: list = field(default_factory=list)  # (qualname, reason) a model needed but could not get

    def __iter__(self):
        return iter(self.rewritten)

    def __len__(self):
        return len(self.rewritten)

    def conds(self, ep) -> dict[str, int]:
        """How many ``cond`` nodes of exported program ``ep`` each rewritten function produced.

        Read from the nodes' stack traces, which name the rewritten code's file; a method
        whose count is 0 changed nothing in the graph.
        """
        counts = {rm.qualname: 0 for rm in self.rewritten}
        files = {rm.code_object.co_filename: rm.qualname for rm in self.rewritten}
        for node in cond_nodes(ep):
            trace = node.meta.get("stack_trace") or ""
            for filename, qualname in files.items():
                if f'"{filename}"' in trace:
                    counts[qualname] += 1
        return counts

    def __str__(self):
        lines = [f"{len(self.rewritten)} function(s) rewritten"]
        for rm in self.rewritten:
            conds = sum(n.kind == "cond" for n in rm.notes)
            lines.append(f"  {rm.qualname} ({rm.source.path}:{rm.source.line}): {conds} if(s) dispatched")
        lines += [f"  skipped {name}: {why}" for name, why in self.skipped]
        return "\n".join(lines)


_ACCEPTED_ITEMS = (
    "an nn.Module (catalogue + discovery), a function or method, a (class, 'method name') pair, "
    "or a dict {'function': f, 'filter_node'/'pre_rewriter'/'post_rewriter'/'prefix': ...}"
)


def _is_pair(item) -> bool:
    return isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], type) and isinstance(item[1], str)


def _targets(rewrite) -> tuple[list[tuple[object, dict]], list[torch.nn.Module]]:
    """Split ``rewrite`` (one item or a list of them) into (callable, hooks) pairs and models."""
    items = [] if rewrite is None else rewrite if isinstance(rewrite, list) else [rewrite]
    if isinstance(rewrite, tuple) and not _is_pair(rewrite):
        items = list(rewrite)
    out, models = [], []
    for item in items:
        if isinstance(item, torch.nn.Module):
            models.append(item)
        elif _is_pair(item):
            cls, name = item
            klass = next((k for k in cls.__mro__ if name in k.__dict__), None)
            if klass is None:
                raise UnbranchError(f"{cls.__qualname__} has no attribute {name!r}", construct="rewrite target")
            out.append((klass.__dict__[name], {}))
        elif isinstance(item, dict):
            unknown = set(item) - {"function", "prefix", *_HOOKS}
            if "function" not in item or unknown:
                raise UnbranchError(
                    f"rewrite item {item!r}: needs a 'function' key and no other than {', '.join(_HOOKS)}, prefix",
                    construct="rewrite target",
                )
            hooks = _check_hooks("torch_export_rewrite", {k: item.get(k) for k in _HOOKS})
            if "prefix" in item:
                _check_type("torch_export_rewrite", "a rewrite item's prefix", item["prefix"], str)
                hooks["prefix"] = item["prefix"]
            out.append((item["function"], hooks))
        elif callable(item) or isinstance(item, (staticmethod, classmethod)):
            out.append((item, {}))
        else:
            raise UnbranchError(
                f"rewrite item {item!r} ({type(item).__name__}) is none of: {_ACCEPTED_ITEMS}",
                construct="rewrite target",
            )
    return out, models


def _dump(directory: str, rm: RewrittenMethod) -> None:
    os.makedirs(directory, exist_ok=True)
    base = os.path.join(directory, rm.qualname.replace("<locals>", "locals"))
    for suffix, text in ((".original.py", rm.original_code), (".rewritten.py", rm.code), (".diff", rm.diff())):
        with open(base + suffix, "w") as f:
            f.write(text)


@contextlib.contextmanager
def observe_branches():
    """Record which side of each dispatched ``if`` eager runs take: ``{"file:line": {True, False}}``."""
    from .runtime import control_flow, source_map

    seen: dict[str, set] = {}

    def record(filename, line, taken):
        seen.setdefault(source_map.describe(filename, line), set()).add(taken)

    control_flow.observers.append(record)
    try:
        yield seen
    finally:
        control_flow.observers.remove(record)


def torch_export_rewrite(
    rewrite=None,
    dump_rewriting: str | None = None,
    verbose: int = 0,
    *extra,
    model=None,
    strict: bool = True,
    lower_under_compile: bool = False,
    **unknown,
):
    """Swap in rewritten code for what ``rewrite`` names while inside the ``with`` block.

    ``rewrite`` is one item or a list of: an nn.Module (the catalogue's entries for its
    classes plus what discovery finds in its code), a function or method, a ``(class,
    "name")`` pair, or a dict ``{"function": f, **hooks}``; onnx-diagnostic's positional
    order (rewrite, dump_rewriting, verbose) is kept. Everything is rewritten before
    anything is swapped, so a failure leaves all originals in place; on exit (also after an
    exception) every original code object is restored and the runtime global removed.
    ``lower_under_compile`` also lowers to cond/scan/while_loop under ``torch.compile``
    while open (by default compiled code runs the plain Python branches, as the original).
    """
    _check_arguments("torch_export_rewrite", extra, unknown, _CONTEXT_KEYWORDS)
    _check_type("torch_export_rewrite", "verbose", verbose, int)
    if dump_rewriting is not None:
        _check_type("torch_export_rewrite", "dump_rewriting", dump_rewriting, str)
    if model is not None and not isinstance(model, torch.nn.Module):
        raise UnbranchError(
            f"torch_export_rewrite() expects model to be an nn.Module, got {model!r}", construct="arguments"
        )
    named, models = _targets(rewrite)
    return _context(
        named, models + ([model] if model is not None else []), dump_rewriting, verbose, strict, lower_under_compile
    )


def _plan(named: list, models: list, strict: bool) -> Report:
    """Rewrite everything first: what the user names must rewrite or fail; what a model
    needs is best effort (a function unbranch cannot rewrite is listed in report.skipped)."""
    from .discovery import discover

    targets = [(t, {"strict": strict, **h}, True) for t, h in named]
    for model in models:
        targets += [(t, {**MODEL_OPTIONS, **h}, False) for t, h in discover(model)]
    report = Report()
    seen = set()
    for target, hooks, required in targets:
        try:
            fn = innermost_function(target)
            if fn in seen:
                continue
            seen.add(fn)
            rm = _rewrite(fn, Options(is_method=_is_method(fn), **hooks))
        except UnbranchError as e:
            if required:
                raise
            report.skipped.append((getattr(target, "__qualname__", repr(target)), str(e)))
            continue
        if rm.changed:
            report.rewritten.append(rm)
    return report


@contextlib.contextmanager
def _context(named, models, dump_rewriting, verbose, strict, lower_under_compile):
    report = _plan(named, models, strict)
    swapped = []
    compiling = _tracing.LOWER_UNDER_COMPILE
    try:
        _tracing.LOWER_UNDER_COMPILE = compiling or lower_under_compile
        for rm in report.rewritten:
            fn = rm.function
            loader.bind_runtime(fn, rm.runtime)
            _ORIGINAL_CODE.setdefault(fn, fn.__code__)
            swapped.append((fn, fn.__code__, rm.runtime))
            fn.__code__ = rm.code_object
            _say(verbose, rm)
            if dump_rewriting:
                _dump(dump_rewriting, rm)
        try:
            yield report
        except Exception as e:
            ours = _unbranch_failure(e)
            if ours is None:
                raise
            raise ours from e
    finally:
        _tracing.LOWER_UNDER_COMPILE = compiling
        for fn, code, name in reversed(swapped):
            fn.__code__ = code
            loader.unbind_runtime(fn, name)
            if code is _ORIGINAL_CODE.get(fn):
                del _ORIGINAL_CODE[fn]


def _unbranch_failure(e: BaseException) -> UnbranchError | None:
    """The runtime's own error inside what strict export raised ("Observed exception"), as UnbranchError.

    Under dynamo the runtime can only raise a builtin ``RuntimeError("unbranch: ...")``; torch
    wraps it, and the user would see dynamo's generic message instead of the reason.
    """
    if isinstance(e, UnbranchError):
        return None
    seen = e
    while seen is not None:
        found = _RUNTIME_FAILURE.search(str(seen))
        if found:
            return UnbranchError(found.group(1))
        seen = seen.__cause__ or seen.__context__
    return None


# what runtime._tracing.fail raises under dynamo, as dynamo quotes it: "unbranch: <message> [<construct>]"
_RUNTIME_FAILURE = re.compile(r"unbranch: (.*?\])[\"']\)")


def rewrite_source(
    text: str, prefix: str = "branch_cond", is_method: bool = True, strict: bool = False, path: str = "<string>"
) -> str:
    """Rewrite the source of one ``def`` given as text (no function object needed)."""
    import textwrap

    info = SourceInfo(path, 1, textwrap.dedent(text).lstrip("\n"), "<source>")
    return compile_source(info, Options(prefix=prefix, strict=strict, is_method=is_method)).text
