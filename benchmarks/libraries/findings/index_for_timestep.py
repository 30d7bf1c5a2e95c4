"""diffusers' `index_for_timestep` (scheduling_euler_discrete.py:666 and the same code in 7 schedulers):

    indices = (schedule_timesteps == timestep).nonzero()
    pos = 1 if len(indices) > 1 else 0
    return indices[pos].item()

Plain export stops at `len(indices)` (see len_unbacked.py). With `len(indices)` replaced by
`indices.shape[0]` (done below by hand), unbranch rewrites `1 if n > 1 else 0` into an if_exp,
but its branches give Python ints, which torch.cond cannot return; the runtime falls back to
the plain Python choice (the condition is a SymBool) and fails on the data-dependent guard
again, with "needs a Python value computed from data". Needed: branches whose outputs are
Python numbers computed under a data-dependent condition become 0-d tensors (a cond over
torch.tensor(1), torch.tensor(0)), which `indices[pos]` then takes as a tensor index.
"""

import torch

import unbranch


def index_for_timestep(timesteps, timestep):
    indices = (timesteps == timestep).nonzero()
    pos = 1 if indices.shape[0] > 1 else 0  # diffusers: len(indices) > 1
    return indices[pos].item()


class Step(torch.nn.Module):
    def forward(self, timesteps, timestep, sample):
        return sample * index_for_timestep(timesteps, timestep)


args = (torch.tensor([9, 7, 5, 3, 1]), torch.tensor(5), torch.ones(2))
for named in ([], [index_for_timestep]):  # named: past the size-condition issue of numel_unbacked.py
    try:
        with unbranch.torch_export_rewrite(rewrite=named):
            print("ok", unbranch.export(Step(), args).module()(*args))
    except unbranch.UnbranchError as e:
        print("FAILS", "(named)" if named else "", e)
