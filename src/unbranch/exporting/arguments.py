"""Check what the public functions are given: every misuse is an UnbranchError that says what is accepted."""

from __future__ import annotations

import torch

from ..errors import UnbranchError

TRANSFORM_KEYWORDS = (
    "func",
    "prefix",
    "verbose",
    "filter_node",
    "pre_rewriter",
    "post_rewriter",
    "strict",
    "shape_conditions",
)
CONTEXT_KEYWORDS = (
    "rewrite",
    "dump_rewriting",
    "verbose",
    "patch_details",
    "model",
    "strict",
    "lower_under_compile",
    "target",
    "max_loop_iterations",
    "batch_loops",
    "one_sided",
    "checks",
    "branches",
)
HOOKS = ("filter_node", "pre_rewriter", "post_rewriter")

_ACCEPTED_ITEMS = (
    "an nn.Module (catalogue + discovery), a function or method, a (class, 'method name') pair, "
    "or a dict {'function': f, 'filter_node'/'pre_rewriter'/'post_rewriter'/'prefix': ...}"
)


def check_arguments(name: str, extra: tuple, unknown: dict, accepted: tuple) -> None:
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


def check_type(name: str, argument: str, value, expected: type) -> None:
    if not isinstance(value, expected):
        raise UnbranchError(
            f"{name}() expects {argument} to be a {expected.__name__}, got {value!r}", construct="arguments"
        )


def check_patch_details(details) -> None:
    """onnx-diagnostic's PatchDetails, or anything with its ``append(family, function_to_patch, patch)``."""
    if details is not None and (
        isinstance(details, (list, dict, set)) or not callable(getattr(details, "append", None))
    ):
        raise UnbranchError(
            f"torch_export_rewrite() expects patch_details to be onnx-diagnostic's PatchDetails (an object with "
            f"append(family, function_to_patch, patch)), got {details!r}",
            construct="arguments",
        )


def check_hooks(name: str, hooks: dict) -> dict:
    """The hooks given (None dropped); each must be callable."""
    for key, hook in hooks.items():
        if hook is not None and not callable(hook):
            raise UnbranchError(
                f"{name}(): {key} must be a callable taking and returning libcst nodes, got {hook!r}",
                construct="arguments",
            )
    return {k: v for k, v in hooks.items() if v is not None}


def _is_pair(item) -> bool:
    return isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], type) and isinstance(item[1], str)


def targets(rewrite) -> tuple[list[tuple[object, dict]], list[torch.nn.Module]]:
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
            unknown = set(item) - {"function", "prefix", *HOOKS}
            if "function" not in item or unknown:
                raise UnbranchError(
                    f"rewrite item {item!r}: needs a 'function' key and no other than {', '.join(HOOKS)}, prefix",
                    construct="rewrite target",
                )
            hooks = check_hooks("torch_export_rewrite", {k: item.get(k) for k in HOOKS})
            if "prefix" in item:
                check_type("torch_export_rewrite", "a rewrite item's prefix", item["prefix"], str)
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


def check_modes(name: str, checks, branches) -> None:
    """``checks`` is one of the runtime's ways for a failed check to fail (runtime.checks.CHECK_MODES),
    ``branches`` one of its ways to lower an if with cheap sides (runtime.control_flow.BRANCH_MODES)."""
    from ..runtime.checks import CHECK_MODES
    from ..runtime.control_flow import BRANCH_MODES

    for keyword, value, modes in (("checks", checks, CHECK_MODES), ("branches", branches, BRANCH_MODES)):
        if value not in modes:
            raise UnbranchError(
                f"{name}() got {keyword}={value!r}; it accepts one of {', '.join(map(repr, modes))}",
                construct="arguments",
            )


def check_target(target, max_loop_iterations) -> None:
    """``target`` is None or a deployment target the runtime knows; the bound a positive int."""
    from ..runtime.loops import TARGETS

    if target is not None and target not in TARGETS:
        raise UnbranchError(
            f"torch_export_rewrite() got target={target!r}; it accepts None or one of {', '.join(map(repr, TARGETS))}",
            construct="arguments",
        )
    bad = not isinstance(max_loop_iterations, int) or isinstance(max_loop_iterations, bool) or max_loop_iterations < 1
    if max_loop_iterations is not None and bad:
        raise UnbranchError(
            f"torch_export_rewrite() expects max_loop_iterations to be a positive int, got {max_loop_iterations!r}",
            construct="arguments",
        )
    if max_loop_iterations is not None and target is None:
        raise UnbranchError(
            "torch_export_rewrite() got max_loop_iterations without a target: loops become while_loop, which needs "
            "no bound; give target='executorch' with it",
            construct="arguments",
        )
