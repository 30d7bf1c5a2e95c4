"""FIXED on main (ea9a0c3): kept as a regression check.

A data-dependent branch inside a list comprehension
(torchvision/models/detection/_utils.py:140, BoxCoder.encode: `[len(b) for b in reference_boxes]`,
met in every two-stage detector's training losses).

On Python 3.11 a comprehension runs in a frame of its own (`<listcomp>`). torch names that
frame; unbranch.export looks for the function whose code it is and finds none: "the source is
not a function definition". transform_method on the enclosing function converts the same line
(shown first). Needed: a site in a comprehension, generator expression or lambda is the
enclosing function's.
"""

import torch

import unbranch


def scale_all(xs):
    return [x * 2 if x.sum() > 0 else -x for x in xs]


class M(torch.nn.Module):
    def forward(self, a, b):
        return scale_all([a, b])


print(unbranch.transform_method(scale_all).code)
try:
    ep = unbranch.export(M(), (torch.ones(2), -torch.ones(2)))
    print("exports:", ep.module()(torch.ones(2), -torch.ones(2)))
except unbranch.UnbranchError as e:
    print("unbranch.export FAILS:", e)
