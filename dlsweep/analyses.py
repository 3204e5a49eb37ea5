"""The analyses of one family's runs beyond thresholds: the deep linear network's distance to the
optimum along each principal direction of the data (`pc_spread`), the spread over networks of its
coordinates along them (`pc_weight_spread`), its per-direction rates against Hacohen &
Weinshall's eq. 10 (`pc_rates`), the order in which it learns the examples (`accessibility`,
`learning_order`) and what early stopping gains on held-out examples (`early_stopping`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dlsweep import engine, store
from dlsweep.analysis import incremental
from dlsweep.models import linear_net
from dlsweep.slices import check_at, first_slice, only
from dlsweep.store import load, load_trajectories
from dlsweep.sweeping import draw_inputs, folder_sweep, restores_x64


RATE_WINDOW = 0.1      # pc_rates fits ln distance while it is above this fraction of its largest value


@restores_x64
def pc_rates(folder: str | Path, at: dict[str, float] | None = None) -> pd.DataFrame:
    """Measured convergence rates along the data's principal directions, beside Hacohen &
    Weinshall's prediction (eq. 10): for every run, the slope of ln pc_distance_j against the step
    (`theory.fit_pc_rates`), with lambda_j the
    eigenvalues of its seed's Sigma_x (as the program drew it; 1 or 0 once whitened). One row per
    (depth, lr, j) with the mean `rate` and `rate_std` over seeds, `eigenvalue` and `predicted` =
    -ln|1 - lr N lambda_j|, for the runs that did not diverge at the first value of every other
    axis; directions outside the support of Sigma_x (no gradient reaches them) are left out. The
    fit covers the decay to RATE_WINDOW of the largest distance: the prediction assumes the
    layers' gradient scale matrices at the identity, as at the init, and deeper networks leave it.
    `at` (e.g. {"depth": 2}) keeps the runs at those axis values."""
    from dlsweep.analysis import theory

    folder = Path(folder)
    sweep = folder_sweep(folder)
    check_at(sweep, at)
    runs, traj = only(load(folder), at), load_trajectories(folder)
    columns = store.vector_columns(traj, "pc_distance")
    if not columns or "depth" not in runs:
        raise incremental.ThresholdError(f"{folder}: per-PC rates need a depth axis and pc_distance columns (linear_net)")
    program, task = draw_inputs(sweep)
    eigenvalues = {}
    rows = []
    for _, run in first_slice(runs[~runs.diverged], [a for a in sweep.axes if a not in ("depth", "lr", "seed")]).iterrows():
        seed = int(run.get("seed", 0))
        if seed not in eigenvalues:
            eigenvalues[seed] = np.linalg.eigvalsh(engine.draw_task(program, task, seed, sweep.seed)["sigma_x"])[::-1]
        path = traj[traj.run_id == run.run_id]
        rates = theory.fit_pc_rates(path["step"].to_numpy(), path[columns].to_numpy(), floor=RATE_WINDOW)
        predicted, _ = theory.predicted_pc_rates(eigenvalues[seed], run.lr, run.depth)
        rows.append(pd.DataFrame({"depth": run.depth, "lr": run.lr, "seed": seed, "j": np.arange(len(columns)),
                                  "eigenvalue": eigenvalues[seed], "rate": rates, "predicted": predicted}))
    if not rows:
        raise incremental.ThresholdError(f"{folder}: every run diverged; no rates to measure")
    table = pd.concat(rows, ignore_index=True)
    table = table[table.eigenvalue > linear_net.SUPPORT_RTOL * table.groupby("seed").eigenvalue.transform("max")]
    return (table.groupby(["depth", "lr", "j"], as_index=False)
            .agg(eigenvalue=("eigenvalue", "mean"), rate=("rate", "mean"), rate_std=("rate", "std"),
                 predicted=("predicted", "mean")))


def _over_seeds(folder: Path, sweep, name: str) -> tuple[pd.DataFrame, list[str], list[str]]:
    """The recorded vector `name` (its columns name_0, name_1, ...) of the runs that did not
    diverge, beside each run's cell (its values of the axes other than `seed`): (table of run_id,
    step, the columns and the cell's axes; the columns; the cell's axes)."""
    runs, traj = load(folder), load_trajectories(folder)
    columns = store.vector_columns(traj, name)
    cells = [a for a in sweep.axes if a != "seed"]
    data = traj[["run_id", "step", *columns]].merge(runs.loc[~runs.diverged, ["run_id", *cells]], on="run_id")
    return data, columns, cells


@restores_x64
def pc_spread(folder: str | Path) -> pd.DataFrame:
    """The spread over networks of the distance to the optimum along each principal direction
    (Hacohen & Weinshall, Figure 4's std over networks): per cell of the axes other than `seed`,
    recorded step and direction j, the `mean`, standard deviation `std` (ddof 1; NaN for one seed)
    and count `seeds` of pc_distance_j over the seeds' runs that did not diverge (a run that
    converged early stops counting after its last recorded step)."""
    folder = Path(folder)
    sweep = folder_sweep(folder)
    data, columns, cells = _over_seeds(folder, sweep, "pc_distance")
    if not columns:
        raise incremental.ThresholdError(f"{folder}: the per-PC spread needs pc_distance columns (model linear_net)")
    distances = data.melt(id_vars=[*cells, "step"], value_vars=columns, var_name="j", value_name="distance")
    distances["j"] = distances.j.str.rsplit("_", n=1).str[1].astype(int)
    return (distances.groupby([*cells, "step", "j"], as_index=False)
            .agg(mean=("distance", "mean"), std=("distance", "std"), seeds=("distance", "size")))


@restores_x64
def pc_weight_spread(folder: str | Path) -> pd.DataFrame:
    """Hacohen & Weinshall's Figure 2: the spread over networks of W's coordinates w_j = u_j^T W (p
    values) along the principal directions that the task records (`[task] pc_weights`): per cell
    of the axes other than `seed`, recorded step and direction `j` (0-based), `std` =
    sqrt(sum_k var(w_jk)), the sample variances (ddof 1) over the seeds' runs that did not diverge
    summed over w_j's entries (the root mean squared distance of w_j to its mean over the networks,
    Bessel-corrected; NaN for one seed), and `seeds`. Defined where every seed has the same inputs
    (labelled data, drawn once per sweep, or population statistics), so that the directions u_j are
    the same for all."""
    folder = Path(folder)
    sweep = folder_sweep(folder)
    directions = linear_net.recorded_directions(sweep.task)
    if not directions:
        raise incremental.ThresholdError(f"{folder}: the spread of w_j needs [task] pc_weights (model linear_net)")
    if sweep.task["data"] not in linear_net.LABELLED and sweep.task["examples"] > 0 and "seed" in sweep.axes:
        raise incremental.ThresholdError(f"{folder}: each seed samples its own examples, so its principal directions "
                                         f"u_j differ and the spread of w_j = u_j^T W over the seeds is undefined")
    data, columns, cells = _over_seeds(folder, sweep, "pc_weights")
    grouped = data.groupby([*cells, "step"])
    variance = grouped[columns].var(ddof=1)
    summed = variance.to_numpy().reshape(len(variance), len(directions), -1).sum(axis=2)
    spread = pd.DataFrame(np.sqrt(summed), index=variance.index, columns=[j - 1 for j in directions])
    table = spread.rename_axis(columns="j").stack(future_stack=True).rename("std").reset_index()
    return table.merge(grouped.size().rename("seeds").reset_index(), on=[*cells, "step"])


FASTEST = 0.2      # learning_order's subset: the examples of the top fifth of accessibility (Hacohen's Figure 7)


@restores_x64
def accessibility(folder: str | Path, ensembles: int = 2) -> pd.DataFrame:
    """Hacohen & Weinshall's accessibility of each training example (section 4, after Hacohen et
    al. 2020): the share of (network, recorded step >= 1) pairs at which the network classifies it
    correctly, argmax x Z W = its label (Z the seed's whitening map, or I; in float64), per
    ensemble: the seeds split into `ensembles` consecutive groups of equal size, the other axes at
    their first value (runs that diverged left out). W is rebuilt from its coordinates along every principal
    direction, W = U (U^T W) (`[task] pc_weights = "all"`); with a linear record schedule the
    recorded steps are the paper's epochs. Columns: example, ensemble, accessibility."""
    folder = Path(folder)
    sweep = folder_sweep(folder)
    if sweep.task.get("data") not in linear_net.LABELLED or sweep.task.get("pc_weights") != linear_net.ALL_DIRECTIONS:
        raise incremental.ThresholdError(f'{folder}: accessibility needs labelled data (data = "digits" or "classes") '
                                         f'and [task] pc_weights = '
                                         f'"{linear_net.ALL_DIRECTIONS}" (model linear_net)')
    runs = first_slice(load(folder), [a for a in sweep.axes if a != "seed"])
    runs = runs[~runs.diverged]
    seeds = np.sort(runs["seed"].unique()) if "seed" in runs else np.zeros(1)
    if len(seeds) < ensembles or len(seeds) % ensembles:
        raise incremental.ThresholdError(f"{folder}: {len(seeds)} seeds do not split into {ensembles} ensembles "
                                         f"of equal size")
    traj = load_trajectories(folder)
    recorded = traj[traj.step > 0]
    coordinates = recorded[store.vector_columns(traj, "pc_weights")].to_numpy(np.float64)     # (rows, d p)
    rows_of = recorded.groupby("run_id").indices
    program, task = draw_inputs(sweep)
    d, p = sweep.task["d"], sweep.task["p"]
    tables = []
    for ensemble, members in enumerate(np.split(seeds, ensembles)):
        correct, count = 0, 0
        for run_id, seed in runs.loc[runs.seed.isin(members), ["run_id", "seed"]].itertuples(index=False):
            drawn = engine.draw_task(program, task, int(seed), sweep.seed)
            path = coordinates[rows_of[run_id]].reshape(-1, d, p)                # U^T W per recorded step
            x, whitening, pcs = (np.asarray(drawn[name], np.float64) for name in ("x", "whitening", "pcs"))
            predicted = _argmax_over_classes(x @ whitening @ pcs, path)
            correct = correct + (predicted == drawn["labels"][:, None]).sum(axis=1)
            count += len(path)
        tables.append(pd.DataFrame({"example": np.arange(len(correct)), "ensemble": ensemble,
                                    "accessibility": correct / count}))
    return pd.concat(tables, ignore_index=True)


def _argmax_over_classes(inputs: np.ndarray, path: np.ndarray) -> np.ndarray:
    """argmax_c (inputs @ path[t])[n, c] for every example n and step t, (n, steps), the first
    class of the largest output on a tie (`np.argmax`'s rule): one (n, d) @ (d, steps) product and
    one elementwise pass per class, every step at once (`inputs` (n, d), `path` (steps, d, p))."""
    best, chosen = inputs @ path[:, :, 0].T, np.zeros((len(inputs), len(path)), np.intp)
    for c in range(1, path.shape[2]):
        output = inputs @ path[:, :, c].T
        larger = output > best
        np.copyto(best, output, where=larger)
        chosen[larger] = c
    return chosen


def learning_order(folder: str | Path) -> pd.DataFrame:
    """Hacohen & Weinshall's learning-order consistency (Figure 7): the Pearson correlation of two
    ensembles' `accessibility` over all the examples and over the `FASTEST` share learned fastest
    by the first ensemble (chosen by one ensemble alone: chosen by both, the cut itself would
    anti-correlate them; ties by example index). Columns: subset, correlation (NaN where an
    ensemble's accessibility is the same for every example of the subset), examples."""
    table = accessibility(folder).pivot(index="example", columns="ensemble", values="accessibility")
    first, second = table[0].to_numpy(), table[1].to_numpy()
    fastest = np.zeros(len(first), bool)
    fastest[np.argsort(-first, kind="stable")[: int(np.ceil(FASTEST * len(first)))]] = True
    rows = [(f"fastest {FASTEST:.0%}", fastest), ("all examples", np.ones(len(first), bool))]
    return pd.DataFrame([{"subset": name, "correlation": _correlation(first[kept], second[kept]),
                          "examples": int(kept.sum())} for name, kept in rows])


def _correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson's correlation of a and b; NaN where either is constant."""
    return float(np.corrcoef(a, b)[0, 1]) if np.std(a) > 0 and np.std(b) > 0 else float("nan")


def early_stopping(folder: str | Path) -> pd.DataFrame:
    """What stopping at the best recorded step gains on held-out examples (Hacohen & Weinshall,
    section 6.1 and Figure 9): per run that did not diverge, with its axis values, the `peak`
    held-out accuracy over the recorded steps, the first step it is reached at (`peak_step`), the
    accuracy at the last recorded step (`last`) and `gain` = peak - last."""
    folder = Path(folder)
    runs, traj = load(folder), load_trajectories(folder)
    if "test_accuracy" not in traj:
        raise incremental.ThresholdError(f"{folder}: early stopping needs a held-out accuracy: [task] test_examples "
                                         f"> 0 (model linear_net, labelled data)")
    kept = runs.loc[~runs.diverged]
    curves = traj[traj.run_id.isin(kept.run_id)].sort_values(["run_id", "step"])
    grouped = curves.groupby("run_id")
    best = curves.loc[grouped.test_accuracy.idxmax(), ["run_id", "step", "test_accuracy"]]
    table = best.rename(columns={"step": "peak_step", "test_accuracy": "peak"}).merge(
        grouped.test_accuracy.last().rename("last").reset_index(), on="run_id")
    table["gain"] = table["peak"] - table["last"]
    axes = [axis for axis in folder_sweep(folder).axes if axis in kept]
    return kept[["run_id", *axes]].merge(table, on="run_id")
