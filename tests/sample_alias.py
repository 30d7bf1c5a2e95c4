"""Real-world shapes of code for test_loading: torch under another name, or imported late."""

import functools

import torch as tt

DECORATIONS = []


def counted(fn):
    """A decorator with a side effect at decoration time (must not run again on rewrite)."""
    DECORATIONS.append(fn.__qualname__)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


def helper(x, limit=0.0, *, scale=2.0):
    """A module-level function called from forward."""
    if x.mean() > limit:
        x = x * scale
    return x


class Aliased(tt.nn.Module):
    @counted
    def forward(self, x):
        if tt.any(x > 1):
            x = tt.clamp(x, max=1.0)
        return helper(x)


def late_import(x):
    import torch

    if torch.all(x < 0):
        return -x
    return x
