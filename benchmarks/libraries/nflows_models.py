"""nflows (normalizing flows): autoregressive, coupling and spline flows, and their transforms alone.

    pip install nflows==0.14

nflows' splines test their inputs' values: ``if torch.any(inside_interval_mask)`` computes the spline
only where some input lies within the tail bound (splines/rational_quadratic.py:42), the
constrained splines raise ``InputOutsideDomain`` on an input outside ``[left, right]`` (:78), and
so do ``Tanh``/``Logit`` (nonlinearities.py:26, :140). The flips put every input beyond the tails
(the ``torch.any`` takes its other side), or, for the checks, inside another part of the domain.
"""

from __future__ import annotations

import torch

from .harness import BATCH, Built, Entry, grouped

B, D = 6, 4
ROWS = {0: BATCH}


def _x(seed: int = 0, scale: float = 1.0):
    torch.manual_seed(seed)
    return torch.randn(B, D) * scale


def _beyond(seed: int = 1, bound: float = 3.0):
    """Every value outside [-bound, bound]: the splines' ``torch.any(inside_interval_mask)`` is False."""
    torch.manual_seed(seed)
    return torch.sign(torch.randn(B, D)) * (bound + 1 + torch.rand(B, D))


class LogProb(torch.nn.Module):
    def __init__(self, transform):
        super().__init__()
        from nflows.distributions.normal import StandardNormal
        from nflows.flows.base import Flow

        self.flow = Flow(transform, StandardNormal([D]))

    def forward(self, x):
        return self.flow.log_prob(x)


class Forward(torch.nn.Module):
    """A transform alone: ``(outputs, logabsdet)``, or its inverse."""

    def __init__(self, transform, inverse: bool = False):
        super().__init__()
        self.transform, self.inverse_ = transform, inverse

    def forward(self, x):
        return self.transform.inverse(x) if self.inverse_ else self.transform(x)


def _mask():
    return torch.tensor([1, 0] * (D // 2))


def _net(i, o):
    from nflows.nn.nets import ResidualNet

    return ResidualNet(i, o, hidden_features=8, num_blocks=1)


def flow(make, x=None, flips=None, wrap=LogProb):
    def build():
        torch.manual_seed(0)
        transform = make()
        inputs = _x() if x is None else x()
        default = {
            "beyond the tails": _beyond(),
            "half beyond": torch.where(torch.arange(D) % 2 == 0, _x(2), _beyond(2)),
        }
        return Built(
            wrap(transform), {"x": inputs}, {"x": ROWS}, flips={k: {"x": v} for k, v in (flips or default).items()}
        )

    return build


def flows() -> dict:
    from nflows.transforms import autoregressive as A
    from nflows.transforms import coupling as C
    from nflows.transforms.base import CompositeTransform
    from nflows.transforms.linear import NaiveLinear
    from nflows.transforms.lu import LULinear
    from nflows.transforms.normalization import ActNorm, BatchNorm
    from nflows.transforms.permutations import ReversePermutation

    tails = {"tails": "linear", "tail_bound": 3.0, "num_bins": 4}
    return {
        "MaskedAffineAutoregressive": flow(lambda: A.MaskedAffineAutoregressiveTransform(D, 8)),
        "MaskedRQSAutoregressive": flow(
            lambda: A.MaskedPiecewiseRationalQuadraticAutoregressiveTransform(D, 8, **tails)
        ),
        "MaskedRQSAutoregressive.bounded": flow(
            lambda: A.MaskedPiecewiseRationalQuadraticAutoregressiveTransform(D, 8, num_bins=4),
            x=lambda: torch.rand(B, D),
            flips={"other values": torch.rand(B, D) * 0.5},
        ),
        "MaskedPiecewiseQuadraticAutoregressive": flow(
            lambda: A.MaskedPiecewiseQuadraticAutoregressiveTransform(D, 8, **tails)
        ),
        "MaskedPiecewiseCubicAutoregressive": flow(
            lambda: A.MaskedPiecewiseCubicAutoregressiveTransform(num_bins=4, features=D, hidden_features=8),
            x=lambda: torch.rand(B, D),
            flips={"other values": torch.rand(B, D) * 0.5},
        ),
        "RQSCoupling": flow(lambda: C.PiecewiseRationalQuadraticCouplingTransform(_mask(), _net, **tails)),
        "QuadraticCoupling": flow(lambda: C.PiecewiseQuadraticCouplingTransform(_mask(), _net, **tails)),
        "CubicCoupling": flow(lambda: C.PiecewiseCubicCouplingTransform(_mask(), _net, **tails)),
        "LinearCoupling": flow(lambda: C.PiecewiseLinearCouplingTransform(_mask(), _net, **tails)),
        "AffineCoupling": flow(lambda: C.AffineCouplingTransform(_mask(), _net)),
        "RealNVP": flow(
            lambda: CompositeTransform(
                [
                    C.AffineCouplingTransform(_mask(), _net),
                    ReversePermutation(D),
                    C.PiecewiseRationalQuadraticCouplingTransform(_mask(), _net, **tails),
                    LULinear(D),
                ]
            )
        ),
        "ActNorm": flow(lambda: _initialized(ActNorm(D))),
        "BatchNorm": flow(lambda: BatchNorm(D)),
        "NaiveLinear": flow(lambda: NaiveLinear(D)),
    }


def _initialized(actnorm):
    actnorm.train()
    actnorm(torch.randn(16, D))  # data-dependent initialisation, once, in training
    return actnorm


def transforms() -> dict:
    from nflows.transforms.nonlinearities import Logit, PiecewiseRationalQuadraticCDF, Sigmoid, Tanh
    from nflows.transforms.splines.rational_quadratic import unconstrained_rational_quadratic_spline

    class Spline(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.w, self.h, self.d = (torch.nn.Parameter(torch.randn(D, n)) for n in (4, 4, 3))

        def forward(self, x):
            w, h, d = (p.expand(x.shape[0], D, -1) for p in (self.w, self.h, self.d))
            return unconstrained_rational_quadratic_spline(x, w, h, d, tails="linear", tail_bound=3.0)

    unit = {"other values": torch.rand(B, D) * 0.5}
    return {
        "Tanh.inverse": flow(
            lambda: Tanh(), x=lambda: torch.rand(B, D) * 1.8 - 0.9, flips=unit, wrap=lambda t: Forward(t, True)
        ),
        "Logit": flow(lambda: Logit(), x=lambda: torch.rand(B, D) * 0.9 + 0.05, flips=unit, wrap=Forward),
        "Sigmoid.inverse": flow(
            lambda: Sigmoid(), x=lambda: torch.rand(B, D) * 0.9 + 0.05, flips=unit, wrap=lambda t: Forward(t, True)
        ),
        "PiecewiseRationalQuadraticCDF": flow(
            lambda: PiecewiseRationalQuadraticCDF([D], num_bins=4), x=lambda: torch.rand(B, D), flips=unit, wrap=Forward
        ),
        "unconstrained_rational_quadratic_spline": flow(Spline, wrap=lambda m: m),
    }


GROUPS = {"flow": flows, "transform": transforms}


def entries() -> list[Entry]:
    return grouped("nflows", GROUPS)
