"""`x1_eq_x2 = torch.equal(x1, x2)` then `if x1_eq_x2:` (gpytorch/kernels/kernel.py:340, exact_gp.py:278/297)."""

import torch

import unbranch


def dist(x1, x2):
    x1_eq_x2 = torch.equal(x1, x2)
    if x1_eq_x2:
        return torch.zeros(x1.shape[0], x2.shape[0])
    return torch.cdist(x1, x2)


class M(torch.nn.Module):
    def forward(self, x1, x2):
        return dist(x1, x2)


x1, x2 = torch.rand(5, 2), torch.rand(5, 2)
try:
    ep = unbranch.export(M(), (x1, x2))
    print("ok", torch.allclose(ep.module()(x1, x1.clone()), M()(x1, x1.clone())))
except unbranch.UnbranchError as e:
    print("unbranch.export FAILS:", str(e).splitlines()[0][:300])


# What it could become: the same shapes (static here) and every element equal, a tensor condition.
def dist2(x1, x2):
    if x1.shape == x2.shape and bool((x1 == x2).all()):
        return torch.zeros(x1.shape[0], x2.shape[0])
    return torch.cdist(x1, x2)


dist.__code__ = dist2.__code__
ep = unbranch.export(M(), (x1, x2))
for a, b in ((x1, x2), (x1, x1.clone())):
    assert torch.allclose(ep.module()(a, b), M()(a, b))
print("with (x1 == x2).all(): exports and matches on both sides")
