"""Which functions a model needs rewritten: the catalogue, and what the classifier finds in the code it reaches.

Reach: from each submodule class's ``forward``, the calls it makes are followed, a few calls
deep: methods called on ``self`` (and on objects the module holds that are no modules, such
as a scheduler), ``super()`` methods, module functions of any package (a name in the
function's globals, or an attribute of a module it imported), static and class methods.
Submodules are not followed as calls (their own class is scanned), and neither are torch,
the standard library and unbranch itself.

A function is wanted when the compiler's classifier finds a construct on tensor data in it:
a condition of kind TENSOR (an attribute the module holds as a parameter or buffer counts
as a tensor), or a loop over a tensor or over ``range`` of a size. Flags, None tests and
size tests alone do not make a function worth touching. What static reading cannot tell
(``if is_pad:`` on a tensor argument) is left to the export itself: inside the context, an
export that stops at control flow on data rewrites the function torch names (session.py).
"""

from __future__ import annotations

import ast
import functools
import types

import torch

from ..compiler.analysis.classify import Classifier, dotted_name
from ..compiler.source import get_source, innermost_function
from ..errors import UnbranchError
from ..load import cache
from ..load.rewriting import is_method
from .failures import in_torch, is_user_file

# lookups (a class -> rewrite specs, or None) that integrations register: unbranch.hf.catalog's
# transformers catalogue; the compiler itself knows no model library
CATALOGUES: list = []

_DEPTH = 3  # forward -> helper -> helper of helper -> one more

# code object -> its ``ast`` FunctionDef (None: no source), parsed once
_TREES: dict = cache.memo()
# (code object, tensor attributes) -> does the classifier find a construct on tensor data in it
_WANTED: dict = cache.memo()


def catalogue_entries(model: torch.nn.Module) -> list:
    """(function, hooks) of every catalogue entry for the classes of ``model``'s submodules."""
    found: dict = {}
    for cls in dict.fromkeys(type(sub) for sub in model.modules()):
        for lookup in CATALOGUES:
            for spec in lookup(cls) or ():
                spec = dict(spec)
                found.setdefault(spec.pop("function"), spec)
    return list(found.items())


def discover(model: torch.nn.Module) -> list:
    """(callable, hooks) pairs for every function of ``model`` that needs rewriting."""
    found: dict = dict(catalogue_entries(model))
    seen: set = set()
    frontier = []
    for sub in {type(m): m for m in model.modules()}.values():
        for klass in type(sub).__mro__:
            if klass is torch.nn.Module or klass.__module__.startswith("torch."):
                break
            if "forward" in klass.__dict__:
                frontier.append((klass.__dict__["forward"], sub))
    hooks = [hook for sub in model.modules() for hook in _hooks_of(sub)]
    for fn, owner, output in hooks:
        if output and (inner := _function(fn)) is not None and _wanted(inner, owner):
            found.setdefault(inner, {"hook_output": True})
    frontier += [(fn, owner) for fn, owner, _ in hooks]
    for _ in range(_DEPTH + 1):
        following = []
        for target, owner in frontier:
            fn = _function(target)
            if fn is None or fn in seen:
                continue
            seen.add(fn)
            if fn not in found and _wanted(fn, owner):
                found[fn] = {}
            following += _callees(fn, owner)
        frontier = following
    return list(found.items())


def _hooks_of(module: torch.nn.Module) -> list:
    """(function, its owner, is it a forward hook) of each forward hook and pre-hook on ``module``, and
    the process's own: ``Module.__call__`` runs them inside the export. A ``functools.partial`` runs
    its ``func``, a callable object its class's ``__call__``. (A partial's bound arguments shift the
    parameters: only a plain forward hook's result is read as Module.__call__ reads it.)"""
    found = []
    for registry, output in _registries(module):
        for hook in list(registry.values()):
            plain = not isinstance(hook, functools.partial)
            while isinstance(hook, functools.partial):
                hook = hook.func
            if isinstance(hook, (types.FunctionType, types.MethodType)):
                found.append((hook, getattr(hook, "__self__", None), output and plain))
            elif isinstance(_call_of(type(hook)), types.FunctionType):
                found.append((type(hook).__call__, hook, output and plain))
    return found


def _call_of(klass):
    """The ``__call__`` an instance of ``klass`` runs (its own or a base's)."""
    return next((vars(k)["__call__"] for k in klass.__mro__ if "__call__" in vars(k)), None)


def _registries(module: torch.nn.Module) -> list:
    """(hooks dict, are they forward hooks) of ``module`` and of the process."""
    from torch.nn.modules import module as registered

    pre = [module._forward_pre_hooks, registered._global_forward_pre_hooks]
    post = [module._forward_hooks, registered._global_forward_hooks]
    return [(r, False) for r in pre] + [(r, True) for r in post]


def _function(target) -> types.FunctionType | None:
    try:
        return innermost_function(target)
    except UnbranchError:
        return None


def _tree(fn: types.FunctionType) -> ast.FunctionDef | None:
    code = fn.__code__
    if code not in _TREES:
        try:
            node = ast.parse(get_source(fn).text).body[0]
        except (UnbranchError, SyntaxError, IndexError):
            node = None
        _TREES[code] = node if isinstance(node, ast.FunctionDef) else None
    return _TREES[code]


def _tensor_attributes(owner) -> frozenset:
    """``self.<name>`` of every parameter and buffer ``owner`` (a module) holds directly."""
    if not isinstance(owner, torch.nn.Module):
        return frozenset()
    return frozenset(n for n, _ in (*owner.named_parameters(recurse=False), *owner.named_buffers(recurse=False)))


def on_data(fn: types.FunctionType) -> bool:
    """Does ``fn`` hold a construct on tensor data, as far as its own code tells?"""
    return _wanted(fn, None)


def _wanted(fn: types.FunctionType, owner) -> bool:
    """Does the classifier find a construct on tensor data in ``fn``? (answered once per code and attributes)"""
    attributes = _tensor_attributes(owner) if is_method(fn) else frozenset()
    key = (fn.__code__, attributes)
    if key not in _WANTED:
        tree = _tree(fn)
        if tree is None:
            _WANTED[key] = False
        else:
            classifier = Classifier.for_function(
                tree, is_method=is_method(fn), path=fn.__code__.co_filename, tensor_attributes=attributes
            )
            _WANTED[key] = classifier.on_data(tree)
    return _WANTED[key]


def _callees(fn: types.FunctionType, owner) -> list:
    """(function, the object it is a method of) for each call in ``fn`` that discovery follows."""
    tree = _tree(fn)
    if tree is None:
        return []
    me = tree.args.args[0].arg if is_method(fn) and tree.args.args else None
    out = []
    for node in (n for statement in tree.body for n in ast.walk(statement)):  # (not its decorators)
        if not isinstance(node, ast.Call):
            continue
        parts = dotted_name(node.func, super_call=True)
        if not parts:
            continue
        if parts[0] == me and owner is not None:
            found = _on_object(owner, parts[1:])
        elif parts[0] == "super()" and owner is not None and len(parts) == 2:
            found = _on_class(type(owner), parts[1], owner, after=fn)
        else:
            found = _global(fn, parts)
        if found is not None and _followable(found[0]):
            out.append(found)
    return out


def _on_object(obj, parts: list[str]):
    """``self.a.b(...)``: through attributes the object holds (no submodules, no tensors) to a method."""
    for name in parts[:-1]:
        obj = vars(obj).get(name) if hasattr(obj, "__dict__") else None
        if obj is None or isinstance(obj, (torch.nn.Module, torch.Tensor)):
            return None
    if isinstance(obj, torch.nn.Module) and parts[-1] in obj._modules:
        return None
    return _on_class(type(obj), parts[-1], obj)


def _on_class(klass, name: str, obj, after=None):
    """(function, object) of method ``name`` on ``klass``; ``after``: past the class defining it (``super()``)."""
    mro = klass.__mro__
    if after is not None:
        mine = [k for k, c in enumerate(mro) if any(_function(v) is after for v in vars(c).values() if callable(v))]
        mro = mro[mine[0] + 1 :] if mine else ()
    for k in mro:
        if name in k.__dict__:
            attr = k.__dict__[name]
            if isinstance(attr, (staticmethod, classmethod)):
                return attr.__func__, None
            return (attr, obj) if isinstance(attr, types.FunctionType) else None
    return None


def _global(fn: types.FunctionType, parts: list[str]):
    """``helper(...)``, ``module.helper(...)``, ``Class.static(...)``: through ``fn``'s globals and closure."""
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    if parts[0] in cells:
        try:
            value = cells[parts[0]].cell_contents
        except ValueError:
            return None
    else:
        value = fn.__globals__.get(parts[0])
    for name in parts[1:-1] if len(parts) > 1 else ():
        value = getattr(value, name, None) if isinstance(value, (types.ModuleType, type)) else None
    if len(parts) > 1:
        if isinstance(value, type):
            return _on_class(value, parts[-1], None)
        value = getattr(value, parts[-1], None) if isinstance(value, types.ModuleType) else None
    return (value, None) if isinstance(value, types.FunctionType) else None


def _followable(target) -> bool:
    """User code: torch's own user-level packages are rewritten only where torch names them."""
    fn = _function(target)
    return fn is not None and is_user_file(fn.__code__.co_filename) and not in_torch(fn.__code__.co_filename)
