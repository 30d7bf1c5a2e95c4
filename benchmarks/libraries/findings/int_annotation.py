"""A parameter annotated `int` that is given a tensor (diffusers/schedulers/scheduling_pndm.py:431,
`_get_prev_sample(self, sample, timestep: int, prev_timestep: int, ...)`, called with tensor
timesteps by PNDMScheduler.step; diffusers annotates timesteps `int` throughout).

`... if prev_timestep >= 0 else ...` is not converted: transform_method returns the function
unchanged with no note, as if the annotation proved the condition Python. unbranch.export then
stops with "this line needs a Python value computed from data, which no control-flow conversion
gives". The same function without the annotation is converted and exports. Needed: an
annotation is no proof (or, at least, a line torch names is rewritten again ignoring it).
"""

import torch

import unbranch


def scale(x, prev_timestep: int):
    return x * 2 if prev_timestep >= 0 else x


def scale_plain(x, prev_timestep):
    return x * 2 if prev_timestep >= 0 else x


class M(torch.nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, x, t):
        return self.f(x, t - 10)


for f in (scale, scale_plain):
    print(f.__name__, "changed:", unbranch.transform_method(f).changed)
    try:
        ep = unbranch.export(M(f), (torch.ones(3), torch.tensor(50)))
        print("  exports; t=5:", ep.module()(torch.ones(3), torch.tensor(5)))
    except unbranch.UnbranchError as e:
        print("  unbranch.export FAILS:", str(e).splitlines()[-1][:200])
