"""`self.alphas_cumprod[prev_timestep] if prev_timestep >= 0 else self.final_alpha_cumprod`
(diffusers/schedulers/scheduling_ddim.py:449, DDIM step; DDPM's previous_timestep, scheduling_ddpm.py:665,
`self.timesteps[index + 1]`, and PNDM the same).

The plain export stops at the condition (a 0-d tensor timestep). unbranch rewrites it into a
cond, but torch.cond traces its branches with dynamo, which reads `alphas[t]` with `t` a 0-d
integer tensor as `alphas[t.item()]`: "Could not extract specialized integer from data-dependent
expression u0", and the cond is rejected. Outside cond the same subscript exports (an index
op). Needed: in a branch function, a subscript by a tensor that may be a 0-d integer tensor
goes through the runtime (`_ub.at(x)[t]`: index_select under export), as loop indices do.
"""

import torch

import unbranch


class Step(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.alphas = torch.linspace(0.9, 0.1, 100)
        self.final = torch.tensor(1.0)

    def forward(self, timestep, x):
        prev = timestep - 10
        a = self.alphas[prev] if prev >= 0 else self.final
        return x * a


try:
    ep = unbranch.export(Step(), (torch.tensor(50), torch.rand(3)))
    for t in (torch.tensor(50), torch.tensor(5)):
        print(torch.allclose(ep.module()(t, torch.ones(3)), Step()(t, torch.ones(3))))
except unbranch.UnbranchError as e:
    print("unbranch.export FAILS:", str(e)[:300])
