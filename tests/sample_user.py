"""A user's module: a model that loops over a tensor's length and branches on tensor values.

Kept apart so tests can check that nothing of unbranch stays in a user module's globals.
"""

import torch


def squash(h):
    if h.abs().max() > 1.5:
        h = h / h.abs().max()
    return h


class Recurrent(torch.nn.Module):
    """A recurrent cell over ``xs`` (T, 4), then a sign test and a helper with its own test."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, xs):
        h = torch.zeros(xs.shape[1])
        for t in range(xs.shape[0]):
            h = torch.tanh(self.lin(xs[t]) + h)
        if xs.mean() > 0:
            out = h * 2
        else:
            out = h - 1
        return squash(out * xs.abs().mean())


class Accumulate(torch.nn.Module):
    """Only a loop over the rows: torch.compile takes it whole (fullgraph)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, xs):
        acc = torch.zeros(xs.shape[1])
        for row in xs:
            acc = acc + torch.relu(self.lin(row))
        return acc


class Fill(torch.nn.Module):
    """Fills a result row by row; lowered to scan under inductor it failed (data-dependent output)."""

    def forward(self, xs):
        z = torch.zeros_like(xs)
        for i in range(xs.shape[0]):
            z[i] = xs[i] * 2
        return z


def inputs(length: int) -> list:
    """One input per side of both tests: sign of the mean x size of the activations."""
    g = torch.Generator().manual_seed(length)
    base = torch.rand(length, 4, generator=g) + 0.5
    return [base * 10, base * 0.01, -base * 10, -base * 0.01]
