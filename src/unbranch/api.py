"""Public entry points: transform_method and the torch_export_rewrite context manager."""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import os
import types
from dataclasses import dataclass, field
from functools import cached_property

import torch

from . import cache, loader, runtime
from .callees import mutating_callees
from .errors import UnbranchError
from .pipeline import Options, compile_source
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

    @property
    def original_code(self) -> str:
        return self.source.text

    @property
    def qualname(self) -> str:
        return self.source.qualname

    @cached_property
    def func(self) -> types.FunctionType:
        """The rewritten function (a method takes ``self`` first), callable on its own."""
        if not self.changed:
            return (
                self.function
                if self.function.__code__ is self.code_object
                else loader.make_function(self.function, self.code_object)
            )
        return loader.make_function(self.function, self.code_object)

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


def _rewrite(fn: types.FunctionType, options: Options) -> RewrittenMethod:
    original = _ORIGINAL_CODE.get(fn, fn.__code__)
    key = options.key()
    hit = cache.get_result(original, key)
    if hit is not None:
        return RewrittenMethod(fn, *hit)
    info = get_source(fn, original)
    helpers = mutating_callees(fn)  # what the helpers it calls change in place is part of its meaning
    # the compiled result names absolute lines and the path (notes, source map, messages)
    skey = cache.source_key(f"{info.path}:{info.line}\n{info.text}", (key, sorted(helpers.items())))
    compiled = cache.get_compiled(skey)
    if compiled is None:
        names = [k for k, v in fn.__globals__.items() if v is not runtime]
        compiled = compile_source(info, options, names, helpers)
        cache.put_compiled(skey, compiled)
    if compiled.changed:
        digest = hashlib.sha256(f"{skey}{info.path}{info.line}".encode()).hexdigest()
        filename = loader.filename_for(info, digest)
        code = loader.compile_function(compiled.text, info, original.co_freevars, filename)
        code = code.replace(co_qualname=original.co_qualname, co_name=original.co_name)
        loader.register(filename, info, compiled.text, compiled.anchors)
        loader.bind_runtime(fn, compiled.runtime)
    else:
        code = original
    parts = (info, compiled.text, compiled.changed, compiled.notes, code)
    cache.put_result(original, key, parts)
    return RewrittenMethod(fn, *parts)


def transform_method(
    func,
    prefix: str = "branch_cond",
    filter_node=None,
    pre_rewriter=None,
    post_rewriter=None,
    strict: bool = True,
    shape_conditions: bool = True,
) -> RewrittenMethod:
    """Rewrite one function or method; ``.code``, ``.func`` and ``.diff()`` show the result.

    Hooks take and return libcst nodes: ``filter_node(if_node) -> bool`` chooses which
    dispatched ``if`` statements to rewrite, ``pre_rewriter``/``post_rewriter`` map the
    ``FunctionDef`` before and after the rules. ``strict`` raises UnbranchError for an ``if``
    on a plainly tensor condition that cannot be converted (otherwise it stays plain Python).
    ``shape_conditions=False`` leaves ``if``s on sizes alone as plain Python.
    """
    fn = innermost_function(func)
    opts = Options(
        prefix=prefix,
        filter_node=filter_node,
        pre_rewriter=pre_rewriter,
        post_rewriter=post_rewriter,
        strict=strict,
        is_method=_is_method(fn),
        shape_conditions=shape_conditions,
    )
    return _rewrite(fn, opts)


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


def _targets(rewrite) -> list[tuple[object, dict]]:
    """Normalise the ``rewrite=`` list into (callable, hooks) pairs."""
    out = []
    for item in rewrite or ():
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], type) and isinstance(item[1], str):
            cls, name = item
            for klass in cls.__mro__:
                if name in klass.__dict__:
                    out.append((klass.__dict__[name], {}))
                    break
            else:
                raise UnbranchError(f"{cls.__qualname__} has no attribute {name!r}", construct="rewrite target")
        elif isinstance(item, dict):
            if "function" not in item:
                raise UnbranchError("a rewrite dict needs a 'function' key", construct="rewrite target")
            hooks = {k: item[k] for k in ("filter_node", "pre_rewriter", "post_rewriter", "prefix") if k in item}
            out.append((item["function"], hooks))
        else:
            out.append((item, {}))
    return out


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


@contextlib.contextmanager
def torch_export_rewrite(
    model=None, rewrite=None, dump_rewriting: str | None = None, verbose: int = 0, strict: bool = True
):
    """Swap in rewritten code for the functions in ``rewrite`` (and those ``model`` needs) while inside.

    Everything is rewritten before anything is swapped, so a failure leaves all originals
    in place; on exit (also after an exception) every original code object is restored.
    """
    from .discovery import discover

    # what the user names must rewrite or fail; what a model needs is best effort: a function
    # unbranch cannot rewrite is left as it is (and listed in report.skipped), never an error
    targets = [(t, {"strict": strict, **h}, True) for t, h in _targets(rewrite)]
    if model is not None:
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
    swapped = []
    try:
        for rm in report.rewritten:
            fn = rm.function
            _ORIGINAL_CODE.setdefault(fn, fn.__code__)
            swapped.append((fn, fn.__code__))
            fn.__code__ = rm.code_object
            if verbose:
                print(f"[unbranch] rewrote {rm.qualname} ({rm.source.path}:{rm.source.line})")
            if dump_rewriting:
                _dump(dump_rewriting, rm)
        yield report
    finally:
        for fn, code in reversed(swapped):
            fn.__code__ = code
            if code is _ORIGINAL_CODE.get(fn):
                del _ORIGINAL_CODE[fn]


def rewrite_source(
    text: str, prefix: str = "branch_cond", is_method: bool = True, strict: bool = True, path: str = "<string>"
) -> str:
    """Rewrite the source of one ``def`` given as text (no function object needed)."""
    import textwrap

    info = SourceInfo(path, 1, textwrap.dedent(text).lstrip("\n"), "<source>")
    return compile_source(info, Options(prefix=prefix, strict=strict, is_method=is_method)).text
