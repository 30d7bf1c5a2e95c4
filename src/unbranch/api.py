"""The public functions, each checking what it is given and handing the work to the module that does it."""

from __future__ import annotations

import contextlib
import textwrap

import torch

from .compiler.pipeline import Options, compile_source
from .compiler.source import SourceInfo, innermost_function
from .errors import UnbranchError
from .exporting.arguments import (
    CONTEXT_KEYWORDS,
    TRANSFORM_KEYWORDS,
    check_arguments,
    check_hooks,
    check_modes,
    check_patch_details,
    check_target,
    check_type,
    targets,
)
from .exporting.checked import checked
from .exporting.failures import asked_equal
from .exporting.guided import Guide
from .exporting.report import Report, remember, say
from .exporting.session import one_export, session
from .load import rewriting
from .load.rewriting import RewrittenMethod


def export(
    mod,
    args=(),
    kwargs=None,
    *,
    dynamic_shapes=None,
    strict: bool = False,
    one_sided: bool = False,
    checks: str = "auto",
    branches: str = "auto",
    check: bool | str = True,
    **options,
):
    """``torch.export.export``, made to get past Python control flow on data; same arguments, same result.

    The plain export runs first; when it works its program is returned as torch made it, and
    nothing is rewritten. Where it stops at a branch on data, the function torch names (in any
    module or library) is rewritten, swapped in, and the export tried again, until it works or
    nothing new can be rewritten: then one UnbranchError lists every place and why, torch's
    error chained. ``unbranch.report_of(ep)`` (or the error's ``.report``) tells each attempt
    and what was rewritten. The originals are back in place when it returns.

    Where one side of a converted ``if`` cannot be traced (a loop over ``torch.unique``, a value
    Python needs) and the other can, the program holds the other side alone, behind a check
    that the condition takes it (it raises on an input that would take the side left out), with
    a warning: by default for a condition on sizes (as torch itself specialises on a size), and
    for one on values with ``one_sided=True``.

    ``checks``: how a failed check on data (``if c: raise``, an index out of range) fails in the
    program. "async" (``torch._assert_async``) keeps the message and never waits for the device,
    but on CUDA is a device-side assert that leaves the process's CUDA context unusable; "sync"
    reads the condition to the host (a RuntimeError the caller catches, the next call works;
    torch's message); "auto" (default): sync for conditions on an accelerator, async on the CPU.

    ``branches``: how an if on data whose sides are a few elementwise operations (``y = x * 2``
    against ``y = x - 1``; no call of a module, no division by a tensor, no log or exp) lowers in a
    non-strict export. "auto" (default): both sides run and ``torch.where`` picks, where that is
    cheaper than a ``torch.cond`` (at most 8 operations, at most 65,536 elements in the example);
    "where": whenever the sides are such operations; "cond": always a cond.

    ``check``: a program made from rewritten code is run before it is returned, with eager
    beside it, on the example inputs and on inputs of other sizes in each dynamic dimension (the
    model's state put back after); where it fails or differs and eager works, True (default)
    raises UnbranchError, "warn" warns and returns it, False returns it unchecked. Sizes eager
    takes that only the program's guards on input sizes refuse are named in a warning.
    """
    check_type("export", "one_sided", one_sided, bool)
    check_modes("export", checks, branches)
    if check not in (True, False, "warn"):
        raise TypeError(f"export(): check must be True, False or 'warn', not {check!r}")
    guide = Guide(model=mod, one_sided=one_sided, asked=asked_equal(mod, args, kwargs, dynamic_shapes))
    try:
        # (one at a time in the process, torch's defaults kept: see exporting.session)
        with one_export(checks, branches):
            ep = guide.run(
                lambda: torch.export.export(mod, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict, **options)
            )
            if check and not guide.attempts[0].returned:  # (a plain export's program is torch's own)
                checked(ep, mod, args, kwargs, dynamic_shapes, guide.used(), warn_only=check == "warn")
    except UnbranchError as e:
        e.report = Report(guide.used(), attempts=guide.attempts)
        raise
    remember(ep, Report(guide.used(), attempts=guide.attempts))
    return ep


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
    check_arguments("transform_method", extra, unknown, TRANSFORM_KEYWORDS)
    hooks = check_hooks(
        "transform_method", dict(filter_node=filter_node, pre_rewriter=pre_rewriter, post_rewriter=post_rewriter)
    )
    check_type("transform_method", "prefix", prefix, str)
    check_type("transform_method", "verbose", verbose, int)
    fn = innermost_function(func)
    options = rewriting.options_for(fn, prefix=prefix, strict=strict, shape_conditions=shape_conditions, **hooks)
    rm = rewriting.rewrite(fn, options)
    say(verbose, rm)
    return rm


def torch_export_rewrite(
    rewrite=None,
    dump_rewriting: str | None = None,
    verbose: int = 0,
    patch_details=None,
    *extra,
    model=None,
    strict: bool = False,
    lower_under_compile: bool = False,
    target: str | None = None,
    max_loop_iterations: int | None = None,
    batch_loops: bool = True,
    one_sided: bool = False,
    checks: str = "auto",
    branches: str = "auto",
    **unknown,
):
    """Swap in rewritten code for what ``rewrite`` names while inside the ``with`` block.

    ``rewrite`` is one item or a list of: an nn.Module (the catalogue's entries for its
    classes plus what discovery finds in its code), a function or method, a ``(class,
    "name")`` pair, or a dict ``{"function": f, **hooks}``; onnx-diagnostic's positional
    order (rewrite, dump_rewriting, verbose, patch_details) is kept: its ``PatchDetails``, given as
    ``patch_details``, receives on exit one ``append("unbranch", original, rewritten)`` per
    rewritten function (names and diffs; which graph nodes each produced: ``report.conds(ep)``).
    Everything is rewritten before anything is swapped, so a failure leaves all originals in
    place; on exit (also after an exception) every original code object is restored and the
    runtime global removed.
    ``lower_under_compile`` also lowers to cond/scan/while_loop under ``torch.compile``
    while open (by default compiled code runs the plain Python branches, as the original).
    ``target="executorch"`` lowers loops to what ExecuTorch runs (it has no ``while_loop``: a
    loop no scan can count runs as a scan of at most ``max_loop_iterations`` steps) and
    raises UnbranchError at export for a loop it cannot run (no bound given, a carried value of
    dynamic shape).
    ``batch_loops=False`` keeps a loop whose steps carry nothing as a scan under non-strict
    export, instead of one batched computation (``torch.vmap``), whose peak memory is that of
    all its steps at once.
    ``checks``: how a failed check on data fails in the program ("auto", "async", "sync"), and
    ``branches``: how an if with cheap sides lowers ("auto", "where", "cond"): see ``unbranch.export``.
    """
    check_arguments("torch_export_rewrite", extra, unknown, CONTEXT_KEYWORDS)
    check_type("torch_export_rewrite", "verbose", verbose, int)
    if dump_rewriting is not None:
        check_type("torch_export_rewrite", "dump_rewriting", dump_rewriting, str)
    if model is not None and not isinstance(model, torch.nn.Module):
        raise UnbranchError(
            f"torch_export_rewrite() expects model to be an nn.Module, got {model!r}", construct="arguments"
        )
    check_target(target, max_loop_iterations)
    check_type("torch_export_rewrite", "batch_loops", batch_loops, bool)
    check_type("torch_export_rewrite", "one_sided", one_sided, bool)
    check_modes("torch_export_rewrite", checks, branches)
    check_patch_details(patch_details)
    named, models = targets(rewrite)
    loops = {"target": target, "max_loop_iterations": max_loop_iterations, "batch": batch_loops}
    context = session(
        named,
        models + ([model] if model is not None else []),
        dump_rewriting,
        verbose,
        strict,
        lower_under_compile,
        loops,
        one_sided,
        checks,
        branches,
    )
    return context if patch_details is None else _filling(context, patch_details)


@contextlib.contextmanager
def _filling(context, patch_details):
    """``context``, and on exit what it rewrote appended to onnx-diagnostic's PatchDetails."""
    with context as report:
        try:
            yield report
        finally:
            for rm in report.rewritten:
                patch_details.append("unbranch", rm.function, rm.func)


def rewrite_source(
    text: str,
    prefix: str = "branch_cond",
    is_method: bool = True,
    strict: bool = False,
    path: str = "<string>",
    **options,
) -> str:
    """Rewrite the source of one ``def`` given as text (no function object needed); ``options``: the
    compiler's other :class:`Options` (``shape_conditions``, ``lengths``)."""
    info = SourceInfo(path, 1, textwrap.dedent(text).lstrip("\n"), "<source>")
    return compile_source(info, Options(prefix=prefix, strict=strict, is_method=is_method, **options)).text
