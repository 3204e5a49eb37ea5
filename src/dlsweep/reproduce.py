"""The bundled reproductions: each paper figure as a sweep spec in `sweeps/`, the thresholds to
take from it and the figures to draw. `run(name)` does all three and reports where they are."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from dlsweep import api
from dlsweep.store import StoreError

SWEEPS = Path(__file__).resolve().parents[2] / "sweeps"


@dataclasses.dataclass(frozen=True)
class Reproduction:
    name: str
    paper: str
    what: str
    quick: tuple[str, ...]                      # --set overrides of the small version
    thresholds: dict | None                     # api.thresholds arguments, or None
    figures: tuple[dict, ...]                   # api.plot_run arguments, one figure each


REPRODUCTIONS = {r.name: r for r in (
    Reproduction(
        "gissin-fig2", "Gissin et al. 2020, Figure 2",
        "toy-model dynamics sigma_i(t), N = 1..4 x sigma0 = 0.1, 0.001",
        ("steps=40000", "record.points=200"), None,
        ({"kind": "trajectories", "s": 0.05, "f": 0.95},)),
    Reproduction(
        "gissin-depth-separation", "Gissin et al. 2020, Theorem 2 (threshold vs r, N = 2..8)",
        "threshold against the target ratio r for each depth, with the exact GF curve and the Theorem 2 band",
        ("axes.depth=[2, 3, 5]", "task.sigma_star=[1.0, 0.5, 0.25, 0.1]", "steps=100000",
         "axes.sigma0={logspace = [-9, -1.5], num = 31}"),
        {"pairs": "first-vs-rest", "method": "bisect", "s": 0.05, "f": 0.95},
        ({"kind": "heatmap", "pair": (0, 3)}, {"kind": "heatmap", "x": "r", "y": "depth", "pair": (0, 1)},
         {"kind": "thresholds"})),
    Reproduction(
        "gissin-gd", "Gissin et al. 2020, Theorem 3 (gradient descent, N = 2)",
        "threshold against the learning rate at N = 2, with Theorem 3's bounds and the GF limit",
        ("axes.lr={logspace = [-3.0791812460476247, -1.1760912590556813], num = 4}",
         "axes.sigma0={logspace = [-6, -0.7], num = 27}"),
        {"pairs": [(0, 1), (0, 2)], "method": "bisect", "s": 0.1, "f": 0.9},
        ({"kind": "lr", "s": 0.1, "f": 0.9}, {"kind": "heatmap", "x": "sigma0", "y": "lr", "s": 0.1, "f": 0.9})),
)}


@dataclasses.dataclass(frozen=True)
class Reproduced:
    name: str
    folder: Path
    thresholds: Path | None
    figures: list[Path]


def spec_path(name: str) -> Path:
    path = SWEEPS / f"{name}.toml"
    if not path.exists():
        raise StoreError(f"{path}: the bundled sweep of {name!r} is missing (run from a dlsweep checkout)")
    return path


def run(name: str, quick: bool = False, out_root: str | Path = "runs", progress_bar: bool | None = None) -> Reproduced:
    """Run a bundled reproduction (its sweep, thresholds and figures) into `out_root/<name>[-quick]`."""
    if name not in REPRODUCTIONS:
        raise StoreError(f"unknown reproduction {name!r}; `dlsweep reproduce --list` shows: {', '.join(REPRODUCTIONS)}")
    repro = REPRODUCTIONS[name]
    folder = Path(out_root) / (f"{name}-quick" if quick else name)
    overrides = [*(repro.quick if quick else ()), f"name={folder.name}"]
    api.run(spec_path(name), out=folder, overrides=overrides, progress_bar=progress_bar)
    table_path = None
    s, f = 0.05, 0.95
    if repro.thresholds:
        args = dict(repro.thresholds)
        if args["pairs"] == "first-vs-rest":
            k = len(api.spec_module.load(folder / "sweep.toml").task["sigma_star"])
            args["pairs"] = [(0, j) for j in range(1, k)]
        api.thresholds(folder, **args)
        table_path = folder / api.THRESHOLDS_FILE
        s, f = args["s"], args["f"]
    figures = []
    for figure in repro.figures:
        figures += api.plot_run(folder, **({"s": s, "f": f} | figure))[:1]
    return Reproduced(name, folder, table_path, figures)
