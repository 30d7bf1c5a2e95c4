"""A scheduler in the style of diffusers: not an nn.Module, its step branches on a tensor timestep."""

import torch


class Scheduler:
    def __init__(self, steps: int = 10):
        self.steps = steps
        self.alphas = torch.linspace(0.9, 0.1, steps)
        self.timesteps = torch.arange(steps - 1, -1, -1).clamp(min=1)  # ..., 2, 1, 1: the last one twice

    def step(self, sample, timestep):
        alpha = self.alphas.index_select(0, timestep.clamp(0, self.steps - 1).reshape(1))
        if timestep > 0:
            prev = sample * alpha
        else:
            prev = sample
        return prev

    def step_indexed(self, sample, timestep):
        """``step`` reading its table as diffusers does: ``alphas[t]`` is a view at an offset that is data."""
        alpha = self.alphas[timestep.clamp(0, self.steps - 1)]
        if timestep > 0:
            return sample * alpha
        return sample

    def blend_scaled(self, sample, prev_timestep: int):
        """``blend`` after a tensor if of its own: the annotated parameter is trusted at the first rewrite."""
        if sample.mean() > 0:
            sample = sample * 0.5
        return self.blend(sample, prev_timestep) if prev_timestep >= 0 else sample - 1

    def blend(self, sample, prev_timestep: int):
        """diffusers annotates timesteps ``int`` and passes tensors: the annotation proves nothing."""
        return sample * 2 if prev_timestep >= 0 else sample

    def index_for(self, timestep):
        """diffusers' index_for_timestep: a Python int chosen by a test of a size that is data."""
        indices = (self.timesteps == timestep).nonzero()
        pos = 1 if len(indices) > 1 else 0
        return indices[pos].item()

    def step_at(self, sample, timestep):
        return sample * self.alphas[self.index_for(timestep)]
