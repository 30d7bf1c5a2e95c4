"""pyro (probabilistic programming): distributions' log densities, normalizing-flow transforms, an ELBO.

    pip install pyro-ppl==1.9.2

Distributions validate their parameters and values (``if not valid.all(): raise ValueError``,
torch/distributions/distribution.py, on by default under pyro); hidden Markov models reduce over
time in a loop whose length is the number of steps; splines bin their inputs with searchsorted.
The examples lie inside the supports; the flips move values (or the spline's inputs) elsewhere.
"""

from __future__ import annotations

import torch

from .harness import BATCH, Built, Entry, call, grouped, space

B, T, S, D = 4, 6, 3, 3


def _r(*shape, seed=0):
    torch.manual_seed(seed)
    return torch.rand(*shape)


def log_prob(make, params: dict, value: torch.Tensor, flips: dict | None = None):
    """``make(**params).log_prob(value)``, the batch dynamic."""

    def f(value, **p):
        return make(**p).log_prob(value)

    def build():
        names = [*params, "value"]
        inputs = {**params, "value": value}
        shapes = {k: {0: BATCH} for k in inputs}
        return Built(call(f, names), inputs, shapes, flips=flips or {})

    return build


def distributions() -> dict:
    import pyro.distributions as dist

    x = torch.randn(B, D)
    cov = torch.eye(D).repeat(B, 1, 1) + 0.1
    probs = _r(B, D) * 0.8 + 0.1
    hmm_init, hmm_trans = torch.randn(B, S).log_softmax(-1), torch.randn(B, T, S, S).log_softmax(-1)
    return {
        "Normal": log_prob(dist.Normal, {"loc": x, "scale": _r(B, D) + 0.5}, x + 0.3),
        "Beta": log_prob(dist.Beta, {"concentration1": _r(B) + 1, "concentration0": _r(B, seed=1) + 1}, _r(B, seed=2)),
        "Dirichlet": log_prob(dist.Dirichlet, {"concentration": _r(B, D) + 0.5}, _r(B, D).softmax(-1)),
        "MultivariateNormal": log_prob(dist.MultivariateNormal, {"loc": x, "covariance_matrix": cov}, x * 0.5),
        "LKJCholesky": log_prob(
            lambda concentration: dist.LKJCholesky(D, concentration),
            {"concentration": _r(B) + 1},
            torch.linalg.cholesky(
                cov
                / cov.diagonal(dim1=-2, dim2=-1).sqrt().unsqueeze(-1)
                / cov.diagonal(dim1=-2, dim2=-1).sqrt().unsqueeze(-2)
            ),
        ),
        "VonMises": log_prob(dist.VonMises, {"loc": x, "concentration": _r(B, D) * 3}, x.clamp(-3, 3)),
        "ZeroInflatedPoisson": log_prob(
            dist.ZeroInflatedPoisson, {"rate": _r(B, D) * 4, "gate": probs}, torch.randint(0, 4, (B, D)).float()
        ),
        "NegativeBinomial": log_prob(
            dist.NegativeBinomial,
            {"total_count": _r(B, D) * 5 + 1, "probs": probs},
            torch.randint(0, 6, (B, D)).float(),
        ),
        "Binomial": log_prob(
            lambda probs: dist.Binomial(10, probs), {"probs": probs}, torch.randint(0, 11, (B, D)).float()
        ),
        "AsymmetricLaplace": log_prob(
            dist.AsymmetricLaplace, {"loc": x, "scale": _r(B, D) + 0.5, "asymmetry": _r(B, D, seed=1) + 0.5}, x * 2
        ),
        "ProjectedNormal": log_prob(
            dist.ProjectedNormal, {"concentration": x}, torch.nn.functional.normalize(x * 0.3 + 1, dim=-1)
        ),
        "DiscreteHMM": hmm(hmm_init, hmm_trans),
    }


def hmm(init, trans):
    import pyro.distributions as dist

    def build():
        torch.manual_seed(0)
        obs = dist.Normal(torch.randn(S), 1.0)
        values = torch.randn(B, T)
        f = call(
            lambda init, trans, value: dist.DiscreteHMM(init, trans, obs).log_prob(value), ["init", "trans", "value"]
        )
        return Built(
            f,
            {"init": init, "trans": trans, "value": values},
            {"init": {0: BATCH}, "trans": {0: BATCH, 1: space(3)}, "value": {0: BATCH, 1: space(3)}},
        )

    return build


class Flow(torch.nn.Module):
    """``TransformedDistribution(Normal, transforms).log_prob(x)``."""

    def __init__(self, transforms):
        super().__init__()
        self.transforms = torch.nn.ModuleList(transforms)

    def forward(self, x):
        import pyro.distributions as dist

        base = dist.Normal(torch.zeros(D), torch.ones(D)).to_event(1)
        return dist.TransformedDistribution(base, list(self.transforms)).log_prob(x)


class Forward(torch.nn.Module):
    """``y = t(x)`` and ``t.log_abs_det_jacobian(x, y)``: the transforms with no inverse (not a log_prob)."""

    def __init__(self, transforms):
        super().__init__()
        self.t = transforms[0]

    def forward(self, x):
        y = self.t(x)
        return y, self.t.log_abs_det_jacobian(x, y)


def flow(make, wrap=Flow):
    def build():
        torch.manual_seed(0)
        x = torch.randn(B, D) * 0.5
        return Built(wrap(make()), {"x": x}, {"x": {0: BATCH}}, flips={"beyond the bounds": {"x": x * 10}})

    return build


def flows() -> dict:
    import pyro.distributions.transforms as T

    return {
        "AffineAutoregressive": flow(lambda: [T.affine_autoregressive(D, hidden_dims=[8])]),
        "Spline": flow(lambda: [T.Spline(D, count_bins=4, bound=3.0)]),
        "Spline.quadratic": flow(lambda: [T.Spline(D, count_bins=4, bound=3.0, order="quadratic")]),
        "SplineCoupling": flow(lambda: [T.spline_coupling(D, count_bins=4)]),
        "NeuralAutoregressive": flow(lambda: [T.neural_autoregressive(D, hidden_dims=[8])], Forward),
        "Planar": flow(lambda: [T.Planar(D)], Forward),
        "Radial": flow(lambda: [T.Radial(D)], Forward),
        "Householder": flow(lambda: [T.Householder(D, count_transforms=2)]),
        "Sylvester": flow(lambda: [T.Sylvester(D, count_transforms=2)], Forward),
        "BlockAutoregressive": flow(lambda: [T.block_autoregressive(D)], Forward),
    }


class ELBO(torch.nn.Module):
    """Trace_ELBO's differentiable loss of a small regression model with an AutoNormal guide (seeded)."""

    def __init__(self):
        super().__init__()
        import pyro
        import pyro.distributions as dist
        from pyro.infer.autoguide import AutoNormal

        pyro.clear_param_store()
        self.net = torch.nn.Linear(D, 1)

        def model(x, y):
            w = pyro.sample("w", dist.Normal(torch.zeros(D), 1.0).to_event(1))
            sigma = pyro.sample("sigma", dist.LogNormal(0.0, 1.0))
            with pyro.plate("data", x.shape[0]):
                pyro.sample("y", dist.Normal(x @ w + self.net(x).squeeze(-1), sigma), obs=y)

        self.model, self.guide = model, AutoNormal(model)
        torch.manual_seed(0)
        self.guide(torch.randn(B, D), torch.randn(B))  # its parameters, made on a first call

    def forward(self, x, y):
        import pyro

        return pyro.infer.Trace_ELBO().differentiable_loss(self.model, self.guide, x, y)


def infer() -> dict:
    def elbo():
        torch.manual_seed(1)
        return Built(ELBO(), {"x": torch.randn(B, D), "y": torch.randn(B)}, {"x": {0: BATCH}, "y": {0: BATCH}}, seed=0)

    return {"Trace_ELBO.AutoNormal": elbo}


GROUPS = {"dist": distributions, "flow": flows, "infer": infer}


def entries() -> list[Entry]:
    return grouped("pyro", GROUPS)
