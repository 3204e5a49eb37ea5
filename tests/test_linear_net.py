"""linear_net's edges: a grid of depth 1 alone, and the autoencoder's targets."""

from __future__ import annotations

import numpy as np

from dlsweep import api, spec
from dlsweep.analysis import theory


def test_depth_one_alone_is_the_linear_model(tmp_path):
    """A grid whose only depth is 1 (no layers to pad), aligned init: GD on the linear model,
    W_k = (I - lr Sigma_x)^k (W0 - W_opt) + W_opt (Gidel's eq. 21, theory.linear_model_gd). Expected:
    the recorded singular values equal those of the closed form to 1e-10 relative (float64), with
    Sigma_x = diag(2, 1), Sigma_xy = Sigma_x diag(1, 0.5), W0 = 0.01 I, lr 0.1."""
    sweep = spec.resolve({"name": "d1", "model": "linear_net", "steps": 50, "dtype": "float64",
                          "task": {"data": "spectrum", "eigenvalues": [2.0, 1.0], "w_true": [1.0, 0.5], "init": "aligned"},
                          "axes": {"depth": [1], "sigma0": [0.01], "lr": [0.1]}, "record": {"points": 10},
                          "stop": {"rel_loss": 0.0}})
    api.run(sweep, out=tmp_path / "d1", progress_bar=False)
    traj = api.load_trajectories(tmp_path / "d1")
    sigma_x, sigma_xy = np.diag([2.0, 1.0]), np.diag([2.0, 0.5])
    path = theory.linear_model_gd(traj.step.to_numpy(), 0.01 * np.eye(2), sigma_x, sigma_xy, 0.1)
    expected = np.linalg.svd(path, compute_uv=False)
    np.testing.assert_allclose(traj[["sigma_0", "sigma_1"]].to_numpy(), expected, rtol=1e-10)


def test_autoencoder_targets_are_the_latent_ones():
    """The autoencoder's optimum has r = len(eigenvalues) singular values 1 (W_opt = I, or the
    projector on B's span once the noise's variances fall below the support cut): targets for
    top <= r, none above (levels must then be [])."""
    def task(top):
        return spec.resolve({"name": "ae", "model": "linear_net", "steps": 10,
                             "task": {"data": "autoencoder", "d": 6, "eigenvalues": [4.0, 2.0], "top": top},
                             "axes": {"depth": [2], "sigma0": [0.01], "lr": [0.01]},
                             "record": {"levels": [0.5] if top <= 2 else []}}).task
    assert task(2)["sigma_star"] == (1.0, 1.0)
    assert "sigma_star" not in task(3)
