"""`for idx in params["order"].tolist(): output = steps[idx](output, factors[idx])`
(kornia/augmentation/_2d/intensity/color_jiggle.py:97, ColorJitter / ColorJiggle: the colour
steps run in a random order drawn as a tensor of 4 indices).

unbranch leaves the loop as Python: "it loops over a sequence whose length depends on tensor
data (order)". The length is 4, known from the shape; only the values are data. Needed: a loop
over `t.tolist()` with a static length unrolled over t's elements, and a Python list of
functions indexed by a data value (`steps[idx](...)`) as a switch (a chain of conds on idx).
"""

import torch

import unbranch

STEPS = (lambda x: x + 1, lambda x: x * 2, lambda x: x - 3)


def jitter(x, order):
    for idx in order.tolist():
        x = STEPS[idx](x)
    return x


class M(torch.nn.Module):
    def forward(self, x, order):
        return jitter(x, order)


print([n.detail for n in unbranch.transform_method(jitter).notes])
try:
    ep = unbranch.export(M(), (torch.ones(2), torch.tensor([2, 0, 1])))
    print(ep.module()(torch.ones(2), torch.tensor([1, 2, 0])), M()(torch.ones(2), torch.tensor([1, 2, 0])))
except unbranch.UnbranchError as e:
    print("unbranch.export FAILS:", str(e).splitlines()[-1][:250])
