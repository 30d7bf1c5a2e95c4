"""gpytorch (Gaussian processes): kernels, exact and variational GP posteriors, the marginal likelihood.

    pip install gpytorch==1.15.2           # with linear_operator 0.6.1

gpytorch tests its inputs' values: ``torch.equal(x1, x2)`` (a kernel's distance of a set to itself,
kernel.py:340), a GP called on its training inputs (exact_gp.py:278), Cholesky's retry with jitter
when ``info`` says it failed (linear_operator/utils/cholesky.py:22), conjugate gradients that stop
when the residual is small (the ``max_cholesky_size(0)`` entries), out-of-grid checks. The flips
call the kernel on equal inputs, the posterior at the training inputs.
"""

from __future__ import annotations

import torch

from .harness import Built, call, grouped, space

POINTS = {0: space(4)}
N_TRAIN, N_TEST, D = 12, 6, 2


def data(seed: int = 0):
    torch.manual_seed(seed)
    x = torch.rand(N_TRAIN, D)
    y = torch.sin(3 * x[:, 0]) + 0.1 * torch.randn(N_TRAIN)
    return x, y, torch.rand(N_TEST, D)


def kernel_entry(make):
    """``kernel(x1, x2).to_dense()``; flip: x2 the same points as x1 (``torch.equal`` takes its other side)."""

    def build():
        torch.manual_seed(0)
        kernel = make()
        x1, x2 = torch.rand(8, D), torch.rand(8, D)  # the same size: the flip x2 = x1 fits the program
        f = call(lambda x1, x2: kernel(x1, x2).to_dense(), ["x1", "x2"])
        f.kernel = kernel  # its hyperparameters are the module's
        return Built(
            f, {"x1": x1, "x2": x2}, {"x1": POINTS, "x2": POINTS}, flips={"x2 = x1": {"x1": x1, "x2": x1.clone()}}
        )

    return build


def kernels() -> dict:
    import gpytorch.kernels as K

    return {
        "RBFKernel": kernel_entry(K.RBFKernel),
        "MaternKernel": kernel_entry(lambda: K.MaternKernel(nu=2.5)),
        "PeriodicKernel": kernel_entry(K.PeriodicKernel),
        "RQKernel": kernel_entry(K.RQKernel),
        "ScaleKernel.RBF": kernel_entry(lambda: K.ScaleKernel(K.RBFKernel(ard_num_dims=D))),
        "SpectralMixtureKernel": kernel_entry(lambda: K.SpectralMixtureKernel(num_mixtures=3, ard_num_dims=D)),
        "LinearKernel": kernel_entry(K.LinearKernel),
        "PolynomialKernel": kernel_entry(lambda: K.PolynomialKernel(power=2)),
        "CosineKernel": kernel_entry(K.CosineKernel),
        "RFFKernel": kernel_entry(lambda: K.RFFKernel(num_samples=16)),
        "AdditiveKernel": kernel_entry(lambda: K.RBFKernel(active_dims=[0]) + K.MaternKernel(nu=1.5, active_dims=[1])),
    }


def exact_gp(kernel=None):
    import gpytorch

    class GP(gpytorch.models.ExactGP):
        def __init__(self, x, y, likelihood):
            super().__init__(x, y, likelihood)
            self.mean_module = gpytorch.means.ConstantMean()
            self.covar_module = kernel() if kernel else gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    x, y, _ = data()
    likelihood = gpytorch.likelihoods.GaussianLikelihood()
    return GP(x, y, likelihood), likelihood


class Posterior(torch.nn.Module):
    """The predictive mean and variance of ``likelihood(gp(x))`` (GP in eval mode, caches made on the first call)."""

    def __init__(self, gp, likelihood, cg: bool = False):
        super().__init__()
        self.gp, self.likelihood, self.cg = gp, likelihood, cg

    def forward(self, x):
        import gpytorch

        with gpytorch.settings.max_cholesky_size(0 if self.cg else 800):
            out = self.likelihood(self.gp(x))
            return out.mean, out.variance


def posterior(kernel=None, cg: bool = False):
    def build():
        gp, likelihood = exact_gp(kernel)
        _, _, test = data()
        train = gp.train_inputs[0]
        return Built(
            Posterior(gp, likelihood, cg),
            {"x": test},
            {"x": POINTS},
            flips={"at the training inputs": {"x": train.clone()}},
            tolerance=1e-3 if cg else None,
        )

    return build


class MLL(torch.nn.Module):
    """The exact marginal log likelihood of the training data (train mode)."""

    def __init__(self, gp, likelihood, cg: bool = False):
        super().__init__()
        import gpytorch

        self.gp, self.cg = gp, cg
        self.mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, gp)

    def forward(self, x, y):
        import gpytorch

        with gpytorch.settings.max_cholesky_size(0 if self.cg else 800):
            return self.mll(self.gp(x), y)


def mll(cg: bool = False):
    def build():
        gp, likelihood = exact_gp()
        x, y, _ = data()
        gp.set_train_data(x, y, strict=False)
        return Built(MLL(gp, likelihood, cg), {"x": x, "y": y}, {"x": POINTS, "y": POINTS}, seed=0, tolerance=1e-3)

    return build


def svgp() -> Built:
    import gpytorch

    class SVGP(gpytorch.models.ApproximateGP):
        def __init__(self, inducing):
            dist = gpytorch.variational.CholeskyVariationalDistribution(inducing.size(0))
            strategy = gpytorch.variational.VariationalStrategy(self, inducing, dist, learn_inducing_locations=True)
            super().__init__(strategy)
            self.mean_module = gpytorch.means.ConstantMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.MaternKernel(nu=1.5))

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    torch.manual_seed(0)
    model, likelihood = SVGP(torch.rand(5, D)), gpytorch.likelihoods.GaussianLikelihood()
    _, _, test = data()
    return Built(Posterior(model, likelihood), {"x": test}, {"x": POINTS})


def kiss_gp() -> Built:
    import gpytorch.kernels as K

    def kernel():
        return K.ScaleKernel(
            K.GridInterpolationKernel(K.RBFKernel(), grid_size=16, num_dims=D, grid_bounds=[(0, 1)] * D)
        )

    b = posterior(kernel)()
    b.flips["outside the grid"] = {"x": b.inputs["x"] + 2.0}
    return b


def models() -> dict:
    import gpytorch.kernels as K

    return {
        "ExactGP.posterior": posterior(),
        "ExactGP.posterior.matern": posterior(lambda: K.ScaleKernel(K.MaternKernel(nu=0.5))),
        "ExactGP.posterior.cg": posterior(cg=True),
        "ExactGP.mll": mll(),
        "ExactGP.mll.cg": mll(cg=True),
        "SVGP.posterior": svgp,
        "KISSGP.posterior": kiss_gp,
    }


GROUPS = {"kernel": kernels, "gp": models}


def entries() -> list:
    out = grouped("gpytorch", GROUPS)
    for e in out:
        if ".mll" in e.name:
            e.mode = "train"
    return out
