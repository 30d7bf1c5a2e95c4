"""torch.distributions' validation (distribution.py:67-76) of a distribution with a lazy_property
parameter: `Categorical(logits=x)` (stable-baselines3's discrete policies, pyro's Binomial...).
The loop's `continue`s test Python values, yet unbranch makes flags of them and puts the rest of
the body in a cond; that body reads `getattr(self, "probs")`, a lazy_property that sets an
attribute, and torch.cond refuses it ("Mutating a variable from outside the scope of this HOP").
Normal, whose parameters are plain attributes, exports (M2). The continue tests hold no data:
left as Python, the cond would hold only the check."""

import torch

import unbranch


class M(torch.nn.Module):
    def forward(self, logits, actions):
        return torch.distributions.Categorical(logits=logits).log_prob(actions)


class M2(torch.nn.Module):  # the same validation loop, no lazy_property among the parameters
    def forward(self, logits, actions):
        return torch.distributions.Normal(logits, 1.0).log_prob(actions[:, None].float())


x, a = torch.randn(4, 3), torch.tensor([0, 2, 1, 0])
for m in (M(), M2()):
    try:
        ep = unbranch.export(m, (x, a))
        print(type(m).__name__, "ok", torch.allclose(ep.module()(x, a), m(x, a)))
    except unbranch.UnbranchError as e:
        print(type(m).__name__, "FAILS:", str(e).splitlines()[0][:250])
