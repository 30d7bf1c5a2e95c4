"""What the differential fuzzers share: the module a drawn function runs in, one call, one comparison."""

from __future__ import annotations

import torch


class Model(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn
        self.w = torch.nn.Parameter(torch.linspace(-1, 1, 16).reshape(4, 4))

    def forward(self, x):
        return self.fn(self, x)


def run(x, fn):
    try:
        with torch.no_grad():
            out = fn(x)
        return out if isinstance(out, tuple) else (out,)
    except Exception as e:  # (a check's raise, Python's ambiguous bool)
        return e


def same(a, b) -> str | None:
    """None when the program's result ``a`` is eager's ``b`` in shape, dtype and value; else how not."""
    if isinstance(b, BaseException):
        return None if isinstance(a, BaseException) else f"eager raised {type(b).__name__}, the program did not"
    if isinstance(a, BaseException):
        return f"the program raised {type(a).__name__}: {str(a).splitlines()[0][:200]}"
    if len(a) != len(b):
        return f"{len(a)} outputs against {len(b)}"
    for u, v in zip(a, b):
        v = torch.as_tensor(v)
        if not isinstance(u, torch.Tensor):
            u = torch.as_tensor(u)
        if u.shape != v.shape or u.dtype != v.dtype:
            return f"{tuple(u.shape)} {u.dtype} against eager's {tuple(v.shape)} {v.dtype}"
        if not torch.allclose(u.double(), v.double(), equal_nan=True, atol=1e-5):
            return f"values differ: {u} against {v}"
    return None


def eager_difference(fn, rewritten, model, x) -> tuple[str | None, object]:
    """(how the rewritten function differs from the original eagerly on ``x``, None where it does not:
    another exception, or another result in shape, dtype or value; the original's result or exception)."""
    expected, got = run(x.clone(), lambda t: fn(model, t)), run(x.clone(), lambda t: rewritten(model, t))
    if isinstance(expected, BaseException) or isinstance(got, BaseException):
        return (None if type(got) is type(expected) else f"{got!r} against {expected!r}"), expected
    return same(got, expected), expected
