"""A call whose result is a Python value decided by data, with the rest of its caller after it
(compiler.normalise.call_rest): under export the callee's variant runs that rest on each side."""

from __future__ import annotations

import contextlib
import types

from torch.utils import _pytree as pytree

from ._tracing import fresh_outputs, tracing
from .settings import applied, current

# the operators rewritten code calls as ``_ub.<name>``
__all__ = ["continued"]


def continued(rest, rest_args: tuple, fn, *args, **kwargs):
    """``rest(fn(*args, **kwargs), *rest_args)``: eagerly exactly that. While torch exports, and
    ``fn`` has a variant, the variant runs ``rest`` itself where it returns, so each branch of
    its ``cond`` ends in the caller's result instead of a value no cond can give."""
    if tracing():
        owner, func = (fn.__self__, fn.__func__) if isinstance(fn, types.MethodType) else (None, fn)
        variant = current().variants.get(func)
        if variant is not None:
            handed = pytree.tree_leaves((rest_args, args, kwargs))

            def rest_of_caller(value):
                # (run in a cond's branch, which may not give back what it was handed: a copy)
                return fresh_outputs(rest(value, *rest_args), handed)

            head = () if owner is None else (owner,)
            return variant(*head, *args, _ub_rest=rest_of_caller, **kwargs)
    return rest(fn(*args, **kwargs), *rest_args)


@contextlib.contextmanager
def variants(found: dict):
    """While open, ``continued`` finds each function's variant in ``found`` (function -> variant)."""
    with applied(variants={**current().variants, **found}):
        yield
