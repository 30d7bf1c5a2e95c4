"""Users' model factories for ``unbranch validate package.module:factory``: (model, inputs, dynamic shapes)."""

import time

import torch

DYN = torch.export.Dim.DYNAMIC


class Branchy(torch.nn.Module):
    """Branches on a tensor's value: plain export fails, unbranch turns the if into a cond."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            h = h * 2
        else:
            h = -h
        return h


class Straight(torch.nn.Module):
    def forward(self, x, y):
        return torch.relu(x) + y


def branchy():
    return Branchy(), {"x": torch.randn(3, 4)}, {"x": {0: DYN}}


def positional():
    """Positional inputs and shapes, as torch.export takes them."""
    return Straight(), (torch.randn(2, 5), torch.randn(2, 5)), ({0: DYN, 1: DYN}, {0: DYN, 1: DYN})


def hangs():
    time.sleep(60)


def broken():
    raise RuntimeError("no weights here")
