"""torch.distributions' validation (distribution.py:67-76: two `continue` tests, then `if not
torch._is_all_true(valid): raise`), then a lazy_property (run under `torch.enable_grad()`): pyro AsymmetricLaplace.
unbranch makes the `continue` tests conds on constant flags, nested; torch.export's set_grad pass fails:
"AttributeError: '<lambda>' object has no attribute 'true_graph_0'" (a torch bug: M2 shows it
without unbranch). Leaving the flags Python (they hold no data) would avoid it."""

import torch

import unbranch


class M(torch.nn.Module):
    def forward(self, x, y):
        for value, dependent in ((x, False), (y, True)):
            if dependent:
                continue
            if value is None and isinstance(value, float):
                continue
            if not torch._is_all_true(value > -100):
                raise ValueError("invalid values")
        with torch.enable_grad():  # torch.distributions.utils.lazy_property
            return x * y


class M2(torch.nn.Module):  # torch alone: a nested cond, then an enable_grad block
    def forward(self, x, y):
        inner = lambda a: torch.cond(a.sum() > 1, lambda b: b + 2, lambda b: b - 2, (a,))  # noqa: E731
        x = torch.cond(x.sum() > 0, inner, lambda a: a - 1, (x,))
        with torch.enable_grad():
            return x * y


x, y = torch.randn(4, 3), torch.randn(4, 3)
for fn, m in ((unbranch.export, M()), (torch.export.export, M2())):
    try:
        ep = fn(m, (x, y))
        print(fn.__module__, "ok", torch.allclose(ep.module()(x, y), m(x, y)))
    except Exception as e:
        print(fn.__module__, "FAILS:", type(e).__name__, str(e).splitlines()[0][:200])
