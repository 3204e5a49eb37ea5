"""Thresholds of incremental learning from a run folder (`thresholds`): read off the run's sigma0
axis, or refined by bisection through the engine, with Gissin et al.'s theory beside them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd

from dlsweep import engine, grid, store
from dlsweep.analysis import incremental
from dlsweep.model import PAIR_HPS
from dlsweep.slices import only
from dlsweep.spec import Sweep
from dlsweep.store import load
from dlsweep.sweeping import compile_inputs, default_chunk_size, folder_sweep, restores_x64, switched_axes


THRESHOLDS_FILE = "thresholds.parquet"


@restores_x64
def thresholds(folder: str | Path, s: float = 0.05, f: float = 0.95, pairs: str | list[tuple[int, int]] = "adjacent",
               method: str = "grid", rtol: float = 1e-4, write: bool = True,
               out: str | Path | None = None) -> pd.DataFrame:
    """(s, f)-incremental thresholds in sigma0 for every pair and every cell of the other axes,
    with the theory of Gissin et al. beside them; written to `out` (default
    `DIR/thresholds.parquet`; a read-only run folder needs `out`), the path in `attrs["written_to"]`.

    `grid` reads them off the run's sigma0 axis (interpolated in ln sigma0); `bisect` refines each
    grid bracket by sub-grids in ln sigma0, every cell at once, one engine call a round (each point
    stopped once its pair is decided), to relative width `rtol` (`_bisect` says where it searches
    and what it can miss).
    `reason` says why a row has no threshold; a table of a partial run folder says so in the
    column `partial` ("partial: x of y chunks", "" when complete) and in `attrs["partial"]`."""
    folder = Path(folder)
    if method not in ("grid", "bisect"):
        raise incremental.ThresholdError(f"method={method!r}: expected grid or bisect")
    if not 0 < rtol < 1:
        raise incremental.ThresholdError(f"rtol={rtol!r}: expected a number in (0, 1)")
    sweep = folder_sweep(folder)
    sigma_star = sweep.family.targets(sweep.task)
    if "sigma0" not in sweep.axes or sigma_star is None:
        raise incremental.ThresholdError(f"{folder}: thresholds need a sigma0 axis and targets sigma_star")
    incremental.check_levels(s, f, sweep.record.levels)
    pair_list = incremental.pairs_for(sigma_star, pairs)
    if not pair_list:
        raise incremental.ThresholdError(f"{folder}: no pair of distinct targets in sigma_star = {list(sigma_star)}")
    cells = [axis for axis in sweep.axes if axis != "sigma0"]
    decided = incremental.decisions(load(folder), pair_list, s, f)
    table = incremental.grid_thresholds(decided, cells)
    table["method"] = "grid"
    if method == "bisect":
        table = _bisect(sweep, table, decided, cells, s, f, rtol)
    targets = np.asarray(sigma_star)
    table = table.assign(r=targets[table.i] / targets[table.j], sigma_star_i=targets[table.i],
                         sigma_star_j=targets[table.j], s=s, f=f)
    first = ["i", "j", "r", "sigma_star_i", "sigma_star_j", "s", "f", *cells]
    table = table[first + [c for c in table.columns if c not in first]]
    table = _with_theory(table, sweep, cells, sigma_star, s, f)
    partial = store.partial_note(folder) or ""
    table = table.assign(partial=partial)
    table.attrs["partial"] = partial
    table.attrs["cells"] = cells
    if write:
        path = Path(out) if out is not None else folder / THRESHOLDS_FILE
        store.write_table(path, table, hint="pass out=FILE.parquet to write the table elsewhere")
        table.attrs["written_to"] = str(path)
    return table


def _with_theory(table: pd.DataFrame, sweep: Sweep, cells: list[str], sigma_star, s: float, f: float) -> pd.DataFrame:
    """Gissin et al.'s theory beside the rows whose runs follow the toy model's dynamics, with
    `toy_lr`, the toy's equivalent step (`Family.toy_lr`; NaN where they do not; left out where it
    is the run's own lr everywhere, as for the toy); unchanged where no row does, and for any
    optimizer but plain gradient descent (the theory is of GD and gradient flow)."""
    if sweep.optimizer.name != "sgd":
        return table
    family = sweep.family
    toy_lr = np.array([family.toy_lr(sweep.task, cell) for cell in table[cells].to_dict("records")], dtype=float)
    if "depth" not in table or np.isnan(toy_lr).all():
        return table
    if not np.array_equal(toy_lr, table.lr.to_numpy(float)):
        table = table.assign(toy_lr=toy_lr)
    return incremental.theory_columns(table, sigma_star, s, f, max(sigma_star))


def _bisect(sweep: Sweep, table: pd.DataFrame, decided: pd.DataFrame, cells: list[str], s: float,
            f: float, rtol: float) -> pd.DataFrame:
    """Refine every grid bracket at once to the largest incremental sigma0, to relative width
    `rtol`: each round runs `incremental.SUBGRID_POINTS` sigma0 per row, evenly spaced in
    ln sigma0 over the row's span and rounded to the sweep's dtype, through the engine
    (`_engine_points`: the run's steps, dtype and stop rules, each point stopped once its pair is
    decided); `incremental.refine_update` keeps the largest incremental point and the next
    non-incremental one above it as the next span.

    Where the largest incremental sigma0 is searched: under GD the incremental set can have
    islands above a non-incremental stretch (THEORY.md 2.2), and one can lie above the grid's
    bracket_hi. So the first span runs from bracket_lo (the largest incremental grid point) over
    the grid's bracket and the one above it, to the second decided grid point above bracket_lo
    (bracket_hi where there is none). An island in a span [lo, hi] wider than that round's
    sub-grid spacing, ln(hi/lo) / (SUBGRID_POINTS + 1), contains a sub-grid point and is found;
    an island narrower than the spacing can fall between two points, and one above the first span
    is seen only where it holds a grid point. `monotone`, `interleaved_decades` and `reason` are
    recomputed from every sigma0 evaluated, grid and sub-grid. A row whose span holds no other
    sigma0 of the sweep's dtype stops there (as narrow as the dtype allows); a round that finds
    nothing decided in a row's span ends that row as "undecided inside the bracket"
    (incremental.STALLED), with no threshold."""
    table = table.reset_index(drop=True)
    keys = [*cells, "i", "j"]
    active = (table.status == "ok").to_numpy(copy=True)
    table["rounds"] = 0
    if not active.any():
        return table
    run_points = _engine_points(sweep, len(table) * incremental.SUBGRID_POINTS, s, f)

    def statuses(rows: np.ndarray, sigma0: np.ndarray) -> np.ndarray:
        """Definition 1 at sigma0 (n, P) on the cells and pairs of table rows `rows` (n,)."""
        flat = np.repeat(rows, sigma0.shape[1])
        hps = {axis: table[axis].to_numpy()[flat] for axis in cells} | {"sigma0": sigma0.ravel()}
        pair = {name: table[column].to_numpy()[flat] for name, column in zip(PAIR_HPS, "ij")}
        summary = run_points(flat, {axis: hps[axis] for axis in sweep.axes} | pair)
        at = np.arange(len(flat))
        status = incremental.decide(summary["hit"][at, table.i.to_numpy()[flat], F_LEVEL],
                                    summary["hit"][at, table.j.to_numpy()[flat], S_LEVEL],
                                    summary["diverged"])
        return status.reshape(sigma0.shape)

    lo, hi = table.bracket_lo.to_numpy(float).copy(), table.bracket_hi.to_numpy(float).copy()
    span_hi = _second_decided_above(table, decided, keys)
    evaluated = []
    while True:
        rows = np.nonzero(active & (span_hi / np.where(active, lo, 1.0) - 1 > rtol))[0]
        if not len(rows):
            break
        points = incremental.subgrid(lo[rows], span_hi[rows], incremental.SUBGRID_POINTS)
        points = points.astype(sweep.dtype).astype(float)                 # the sigma0 the engine runs
        inside = (points > lo[rows, None]) & (points < span_hi[rows, None])
        narrow = ~inside.any(axis=1)                                      # as narrow as the dtype allows
        active[rows[narrow]] = False
        rows, points, inside = rows[~narrow], points[~narrow], inside[~narrow]
        if not len(rows):
            continue
        status = np.where(inside, statuses(rows, points), incremental.UNDECIDED)
        evaluated.append(table.loc[np.repeat(rows, points.shape[1]), keys]
                         .assign(sigma0=points.ravel(), status=status.ravel())[inside.ravel()])
        known = np.stack([hi[rows], span_hi[rows]], axis=1)              # non-incremental upper ends
        new_lo, new_hi = incremental.refine_update(
            lo[rows], np.concatenate([points, known], axis=1),
            np.concatenate([status, np.full(known.shape, incremental.NOT_INCREMENTAL)], axis=1))
        stalled = rows[(new_lo == lo[rows]) & (new_hi == span_hi[rows])]
        lo[rows], hi[rows], span_hi[rows] = new_lo, new_hi, new_hi
        table.loc[stalled, "status"] = incremental.STALLED
        active[stalled] = False
        table.loc[rows, "rounds"] += 1
    done = (table.status == "ok").to_numpy()
    table.loc[done, "sigma0_th"] = lo[done]
    table.loc[(table.rounds > 0) & ~done, "sigma0_th"] = np.nan        # stalled: no threshold claimed
    table["bracket_lo"], table["bracket_hi"] = lo, hi
    table["method"] = "bisect"
    points = pd.concat([decided[[*keys, "sigma0", "status"]], *evaluated], ignore_index=True)
    return incremental.judge(table, points, cells)


F_LEVEL, S_LEVEL = 1, 0
"""Where f and s sit among a refinement's levels (s, f): s < 1/4 < 3/4 < f (`incremental.check_levels`)."""


def _refinement_sweep(sweep: Sweep, s: float, f: float) -> Sweep:
    """The sweep a refinement's points run: the run's steps, dtype, stop rules and data, two
    recorded steps, and only the run's two levels that decide Definition 1, s for sigma_j and f
    for sigma_i (fewer levels, fewer replays of a block's groups): those of `sweep.record.levels`
    that `s` and `f` name (`store.level_name`). Its points are checked every `check_every` steps
    from step 0, where the run's own trajectories are also checked at their recorded steps: a loss
    that passes the blowup bound only between two checks of one and not of the other is seen by
    one alone (with the run's schedule, depth-separation's refinement took 1.6 s instead of 1.2 s)."""
    recorded = {store.level_name(level): level for level in sweep.record.levels}
    levels = (recorded[store.level_name(s)], recorded[store.level_name(f)])
    return dataclasses.replace(sweep, record=dataclasses.replace(sweep.record, points=2, levels=levels))


def _engine_points(sweep: Sweep, n_points: int, s: float, f: float):
    """A function that runs trajectories at given axis values and pairs (run ids (n,), values per
    axis and per `model.PAIR_HPS` (n,)) through the engine and returns their `hit` (at the levels
    of `_refinement_sweep`) and `diverged`. Each point stops once Definition 1 is decided for its
    pair (`engine.decided`: the first of sigma_i reaching f sigma*_i and sigma_j reaching s
    sigma*_j), or earlier by the run's stop rules: the later steps of a run cannot change its
    status but by diverging, which the sweep's own runs, run to their stops, would show and a point
    does not. The program is compiled at the size of a round (`n_points`), its axes given per point,
    in the run's layout (`compile_inputs`): a round's points stop at their decisions, which lie
    as far apart as the rows' thresholds (gissin-depth-separation's 49 rows: from a few thousand
    steps to tens of thousands). A point's init key is its given run id (`statuses`: its
    thresholds row's, so a row's points share one init draw), and the points sit from the
    program's first slot."""
    refining = _refinement_sweep(sweep, s, f)
    program, _, task = compile_inputs(refining)
    program = dataclasses.replace(program, decided_by=(F_LEVEL, S_LEVEL))
    names = [*sweep.axes, *PAIR_HPS]
    size = default_chunk_size(program, n_points, names, task)
    compiled = engine.compile_chunk(program, size, names, task, sweep.seed,
                                    constant=grid.constant_axes(sweep.axes, follows_leading=False),
                                    switched=switched_axes(sweep))

    def run_points(run_ids: np.ndarray, hps: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        constant = np.stack([hps[axis] for axis in compiled.constant] or [np.zeros(len(run_ids))], axis=1)
        parts = []
        for values in np.unique(constant, axis=0):
            rows = np.nonzero(np.all(constant == values, axis=1))[0]
            for c in grid.chunks(len(rows), size):
                part = rows[c.start:c.stop]          # from the first slot: not consecutive run ids
                parts.append((part, compiled(run_ids[part], {k: v[part] for k, v in hps.items()}, task, offset=0)[0]))
        order = np.argsort(np.concatenate([part for part, _ in parts]), kind="stable")
        return {name: np.concatenate([summary[name] for _, summary in parts])[order] for name in ("hit", "diverged")}

    return run_points


def _second_decided_above(table: pd.DataFrame, decided: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """Per thresholds row, the second decided grid sigma0 above bracket_lo (the top of the grid
    bracket above its own), or bracket_hi where there is none."""
    known = decided[decided.status.isin([incremental.INCREMENTAL, incremental.NOT_INCREMENTAL])]
    merged = table[keys + ["bracket_hi"]].reset_index().merge(known[[*keys, "sigma0"]], on=keys, how="left")
    above = merged[merged.sigma0 > merged.bracket_hi].groupby("index").sigma0.min()
    return np.array(above.reindex(table.index).fillna(table.bracket_hi), dtype=float)


def thresholds_for(folder: Path, s: float, f: float, pairs, at: dict[str, float] | None = None) -> pd.DataFrame:
    """The folder's thresholds.parquet when it matches (s, f), holds the pairs and was computed
    from the chunks finished now (its `partial` note is the folder's), else grid thresholds computed
    now (not written); the rows at the axis values `at`."""
    path = folder / THRESHOLDS_FILE
    if path.exists():
        table = pd.read_parquet(path)
        if (len(table) and {"s", "f", "sigma_star_j", "partial"} <= set(table) and table.s.iloc[0] == s
                and table.f.iloc[0] == f and table.partial.iloc[0] == (store.partial_note(folder) or "")):
            if pairs in (None, "all") or set(map(tuple, pairs)) <= set(zip(table.i, table.j)):
                return only(table, at)
    return only(thresholds(folder, s=s, f=f, pairs=pairs or "adjacent", method="grid", write=False), at)
