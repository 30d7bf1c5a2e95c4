"""One torch_export_rewrite context: rewrite everything first, swap it in for the ``with`` block, restore on exit."""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import threading
import traceback
import warnings

import torch

from ..compiler.source import innermost_function, wrappers
from ..errors import UnbranchError
from ..load.rewriting import MODEL_OPTIONS, options_for, rewrite
from ..load.swap import swapped_in, swapped_out
from ..runtime import settings
from ..runtime.control_flow import rejection, torch_limit
from .arguments import HOOKS
from .discovery import discover, on_data
from .failures import GENERATED, Swallowed, asked_equal, in_a_branch, kind_of, place, runtime_failure, sites
from .guided import Guide, caught, first_line, why_left
from .quiet import quiet
from .report import Report, dump, say

# torch.export fails calls made at once from several threads, and a context swaps code, patches
# torch's export entry and sets the runtime's settings for the whole process: one at a time,
# held by unbranch.export for its call and by a context while it is open (re-entrant: a
# context's own exports, and unbranch.export inside a context, take it again)
EXPORTS = threading.RLock()


@contextlib.contextmanager
def one_export(checks: str = "auto", branches: str = "auto"):
    """Hold ``EXPORTS`` with the runtime's ``checks`` and ``branches`` modes (runtime.settings), and leave torch's
    process-wide defaults as they were: the first cond traced starts dynamo, whose one-time patching
    turns off argument validation of every distribution (``Distribution.set_default_validate_args(False)``),
    which a plain export never does."""
    with EXPORTS:
        validating = torch.distributions.Distribution._validate_args
        try:
            with settings.applied(checks=checks, branches=branches):
                yield
        finally:
            torch.distributions.Distribution.set_default_validate_args(validating)


def plan(named: list, models: list, strict: bool) -> Report:
    """Rewrite everything first: what the user names must rewrite or fail; what a model
    needs is best effort (a function unbranch cannot rewrite is listed in report.skipped),
    unless ``strict``, where a tensor condition it cannot convert fails the context too."""
    targets = []
    for t, h in named:  # a named function's decorators' wrappers run too: those branching on data are rewritten
        targets += [(innermost_function, t, {"strict": strict, **h}, True)]
        targets += [(_as_is, w, {"strict": strict}, False) for w in wrappers(t) if on_data(w)]
    for model in models:
        targets += [
            (innermost_function, t, {**MODEL_OPTIONS, "strict": strict, **h}, strict) for t, h in discover(model)
        ]
    report = Report()
    seen = set()
    for resolve, target, hooks, required in targets:
        try:
            fn = resolve(target)
            if fn in seen:
                continue
            seen.add(fn)
            rm = rewrite(fn, options_for(fn, **hooks))
        except UnbranchError as e:
            if required:
                raise
            report.skipped.append((getattr(target, "__qualname__", repr(target)), str(e)))
            continue
        if rm.changed:
            report.rewritten.append(rm)
            report.hooks[fn] = {k: hooks[k] for k in HOOKS if k in hooks}
        elif required:
            report.unchanged.append(rm)
    return report


def _as_is(fn):
    return fn


@contextlib.contextmanager
def watched_exports(report: Report, guided: bool, one_sided: bool = False):
    """While open, every ``torch.export.export`` call is watched: in model mode (``guided``) an
    export that stops at control flow on data rewrites what torch names and retries; and an
    export of rewritten code that fails where the plain export works returns the plain program
    (an export that works without unbranch works the same with it), with a warning and the
    reason in ``report.fallback``.

    Every ``torch.export.export`` call goes through ``torch.export._trace._export``, looked up
    when called: replacing it for the ``with`` block watches the user's own export call, however
    they imported it. What is rewritten this way is swapped in only during that export.
    """
    try:
        from torch.export import _trace

        original = _trace._export
    except (ImportError, AttributeError):  # another torch: the context's own rewrites still apply
        yield
        return

    @functools.wraps(original)
    def export(*args, **kwargs):
        try:
            if guided:
                return _guided(report, lambda: original(*args, **kwargs), one_sided, _asked(original, args, kwargs))
            return _not_swallowed(report, lambda: original(*args, **kwargs))
        except Exception as e:
            if not report.rewritten:
                raise
            failure = e
        with swapped_out(), quiet(warnings_too=False) as log:
            try:
                ep = _not_swallowed(report, lambda: original(*args, **kwargs))
            except Exception:
                ep = None
        if ep is None:
            raise failure  # (outside the handler: its causes stay those of the rewritten code's export)
        log.replay()  # what torch printed while exporting the program returned
        report.fallback = str(_explained(failure, report)).splitlines()[0].removeprefix(_FAILED)
        warnings.warn(
            f"unbranch: the plain export works and its program is returned; {_FAILED}{report.fallback}",
            stacklevel=3,  # the user's torch.export.export call
        )
        return ep

    _trace._export = export
    try:
        yield
    finally:
        _trace._export = original


def _not_swallowed(report: Report, call):
    """``call()`` (one export), which fails where the user's own ``except`` caught torch's stop at
    a branch on data: that program would take the ``except`` side for every input."""
    with Swallowed() as swallowed:
        ep = call()
    hidden = swallowed.sites()
    if hidden:
        raise _at_site(hidden[0], "data", report)
    return ep


def _asked(export, args, kwargs) -> frozenset[str]:
    """The equalities of sizes an export call's ``dynamic_shapes`` states (failures.asked_equal)."""
    try:
        call = inspect.signature(export).bind(*args, **kwargs).arguments
    except TypeError:
        return frozenset()
    return asked_equal(call.get("mod"), call.get("args", ()), call.get("kwargs"), call.get("dynamic_shapes"))


def _guided(report: Report, call, one_sided: bool = False, asked: frozenset = frozenset()):
    """``call()`` (one export) guided by torch's failures, starting from the context's own rewrites."""
    # the context's own rewrites are where the guide starts: torch stopping in one of them
    # rewrites it again (size tests, annotations), with its hooks
    own = {rm.function: rm for rm in report.rewritten if rm.parent is None}
    guide = Guide(
        attempts=report.attempts,
        rewritten=dict(own),
        level=dict.fromkeys(own, 0),
        hooks=report.hooks,
        one_sided=one_sided,
        asked=asked,
    )
    try:
        return guide.run(call)
    finally:
        for rm in guide.used():
            if rm in report.rewritten:
                continue
            same = [k for k, r in enumerate(report.rewritten) if (r.function, r.parent) == (rm.function, rm.parent)]
            if same:
                report.rewritten[same[0]] = rm
            else:
                report.rewritten.append(rm)


@contextlib.contextmanager
def session(
    named,
    models,
    dump_rewriting,
    verbose,
    strict,
    lower_under_compile,
    loops=None,
    one_sided=False,
    checks="auto",
    branches="auto",
):
    """The context manager torch_export_rewrite returns; yields the Report. ``loops``: the
    deployment target and loop bound the runtime lowers loops for, and whether it may batch
    a loop whose steps carry nothing (``runtime.settings``); ``one_sided``: in model mode, an
    if on values whose one side torch cannot trace may keep the other (Guide); ``checks``: how a
    failed check on data fails; ``branches``: how an if with cheap sides lowers."""
    with one_export(checks, branches):
        yield from _session(named, models, dump_rewriting, verbose, strict, lower_under_compile, loops, one_sided)


def _session(named, models, dump_rewriting, verbose, strict, lower_under_compile, loops, one_sided):
    report = plan(named, models, strict)
    for rm in report.rewritten:
        say(verbose, rm)
        if dump_rewriting:
            dump(dump_rewriting, rm)
    changes = {"lower_under_compile": settings.current().lower_under_compile or lower_under_compile}
    if loops and loops.get("target") is not None:
        changes.update(target=loops["target"], max_iterations=loops.get("max_loop_iterations"))
    if loops and not loops.get("batch", True):
        changes["batch"] = False
    with settings.applied(**changes), swapped_in(report.rewritten):
        with watched_exports(report, guided=bool(models), one_sided=one_sided):
            try:
                yield report
            except Exception as e:
                better = _explained(e, report)
                if better is e:
                    raise
                raise better from e


_FAILED = "the export of rewritten code failed: "


def _in_export(e: BaseException) -> bool:
    """Did ``e`` come out of torch.export (not an eager run in the context, whose errors stay as they are)?"""
    return any(f.f_code.co_filename.startswith(_EXPORT_CODE) for f, _ in traceback.walk_tb(e.__traceback__))


_EXPORT_CODE = os.path.join(os.path.dirname(torch.__file__), "export") + os.sep


def _explained(e: Exception, report: Report) -> Exception:
    """The error to give the user: the runtime's own, or one naming the branch this context left alone."""
    if isinstance(e, UnbranchError):
        return e
    ours = runtime_failure(e)
    if ours is not None:
        return ours
    kind = kind_of(e)
    found = sites(e) if kind else []
    if not found and kind == "shape" and report.left and _in_export(e):
        # torch names no frame for a dimension fixed by Python code: point at what stayed Python
        path, line, _ = report.left[0]
        left = "; ".join(f"{p}:{n}: {why}" for p, n, why in report.left[:3])
        return UnbranchError(
            f"the export fixed a dimension declared dynamic ({first_line(e)}); what this context left as "
            f"Python may be why: {left}",
            path,
            line,
            "dynamic dimension",
        )
    if not found:
        if in_a_branch(e):  # strict export failed inside a branch: placed there (torch's frames name no if)
            return UnbranchError(f"torch.cond rejected a branch of a converted if: {rejection(e)}", *place(e), "if")
        limit = torch_limit(e) if report.rewritten and _in_export(e) else None
        return UnbranchError(f"{_FAILED}{limit}", *place(e), "export") if limit else e
    return _at_site(found[0], kind, report)


def _at_site(site, kind: str, report: Report) -> UnbranchError:
    """The error for torch stopping at ``site``: what this context left there as Python, or that it did
    not rewrite the function."""
    stops, construct = _STOPS[kind]
    stops += caught(site)
    if site.path.startswith(GENERATED):  # rewritten code, where a construct was left as Python
        why = why_left(report.rewritten, site)
        return UnbranchError(f"{stops}: {why}", site.path, site.line, construct)
    named = [rm for rm in report.rewritten if rm.source.holds(site.path, site.line)]
    if named:  # named and rewritten, yet the original ran
        return UnbranchError(
            f"{stops} in {site.name}() ({site.text}): this context rewrote {named[0].qualname}, but torch ran "
            "its original code, held by another function object (a decorator's wrapper, a copy, a factory "
            "made it): name the function that runs, or export with unbranch.export(...), which rewrites "
            "the code torch names",
            site.path,
            site.line,
            construct,
        )
    unchanged = [rm for rm in report.unchanged if rm.source.holds(site.path, site.line)]
    if unchanged:  # named, and nothing in it is control flow this context converts
        return UnbranchError(
            f"{stops} in {site.name}() ({site.text}): {_unconverted(unchanged[0])}", site.path, site.line, construct
        )
    return UnbranchError(
        f"{stops} in {site.name}() ({site.text}), which this context "
        "did not rewrite: export with unbranch.export(...), which rewrites what torch names, or add the "
        "function to rewrite=[...]",
        site.path,
        site.line,
        construct,
    )


def _unconverted(rm) -> str:
    """Why a function named in ``rewrite=[...]`` still stops: what the guided path would add, if anything."""
    further = rewrite(rm.func, options_for(rm.func, lengths=True)).changed
    if further:
        return (
            f"{rm.qualname} was named, and has no control flow this context converts; the Python numbers it "
            "takes from data (int(), float(), len()) are converted where torch stops at them: export with "
            "unbranch.export(...)"
        )
    return f"{rm.qualname} was named, but this line needs a Python value computed from data, which no conversion gives"


# what a failure kind (failures.kind_of) tells the user, and the construct it names
_STOPS = {
    "data": ("the export stops at Python control flow on data", "data-dependent control flow"),
    "shape": ("the export fixed a dimension declared dynamic", "dynamic dimension"),
}
