"""Strict torch.export (dynamo) of an index_put at numpy-array indices gives a wrong program
(nflows LULinear._create_lower_upper, lu.py: `lower[self.lower_indices[0], self.lower_indices[1]] =
self.lower_entries` with `np.tril_indices`). torch alone, no unbranch: non-strict matches eager.
It surfaced as a wrong result of unbranch.export(strict=True) on nflows' RealNVP (LULinear after
a spline coupling whose branch unbranch converts): the rewritten program inherits the mis-export."""

import numpy as np
import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.idx = np.tril_indices(4, k=-1)
        self.entries = torch.nn.Parameter(torch.randn(6))

    def forward(self, x):
        lower = x.new_zeros(4, 4)
        lower[self.idx[0], self.idx[1]] = self.entries
        return x @ lower


torch.manual_seed(0)
m, x = M(), torch.randn(3, 4)
for strict in (False, True):
    ep = torch.export.export(m, (x,), strict=strict)
    diff = float((ep.module()(x) - m(x)).abs().max())
    print("strict" if strict else "non-strict", "max diff from eager:", diff)
