"""One torch_export_rewrite context: rewrite everything first, swap it in for the ``with`` block, restore on exit."""

from __future__ import annotations

import contextlib

from .discovery import discover
from .errors import UnbranchError, runtime_failure
from .report import Report, dump, say
from .rewriting import MODEL_OPTIONS, options_for, rewrite
from .runtime import _tracing
from .source import innermost_function
from .swap import swapped_in


def plan(named: list, models: list, strict: bool) -> Report:
    """Rewrite everything first: what the user names must rewrite or fail; what a model
    needs is best effort (a function unbranch cannot rewrite is listed in report.skipped)."""
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
            rm = rewrite(fn, options_for(fn, **hooks))
        except UnbranchError as e:
            if required:
                raise
            report.skipped.append((getattr(target, "__qualname__", repr(target)), str(e)))
            continue
        if rm.changed:
            report.rewritten.append(rm)
    return report


@contextlib.contextmanager
def session(named, models, dump_rewriting, verbose, strict, lower_under_compile):
    """The context manager torch_export_rewrite returns; yields the Report."""
    report = plan(named, models, strict)
    for rm in report.rewritten:
        say(verbose, rm)
        if dump_rewriting:
            dump(dump_rewriting, rm)
    compiling = _tracing.LOWER_UNDER_COMPILE
    try:
        _tracing.LOWER_UNDER_COMPILE = compiling or lower_under_compile
        with swapped_in(report.rewritten):
            try:
                yield report
            except Exception as e:
                ours = runtime_failure(e)
                if ours is None:
                    raise
                raise ours from e
    finally:
        _tracing.LOWER_UNDER_COMPILE = compiling
